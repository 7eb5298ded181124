// The accuracy study of a 16-bit state (docs/STATE.md): the engine's CPU decoder in fp32 and in
// each 16-bit state format side by side, teacher-forced through the same images, one position at
// a time. Writes JSON: per position t the largest and mean |o_t - o_t(fp32)| of the mixture
// parameters; each image's bits/dim in every format; the largest |S| and |z| per layer (fp32),
// and the share of S's entries that fp16 could not hold (beyond 65504, or below its least normal
// 2^-14, where it keeps fewer bits).
//
//   state_study --model models/mnist --images data/mnist/test-images-idx3-ubyte --limit 10000
//   state_study --shape cifar10 --count 4 --batch 2  (random weights, images sampled in fp32)
// (--batch: images a decoder steps at once; --threads: decoders at once; --out FILE.json)
//
// Built beside the library (target state_study) for docs/STATE.md; not a test and not installed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../kernels/state_format.h"
#include "study.h"

using namespace tarnn;

namespace {

struct Args : study::Options {
  Args() : Options(500, 100) {}
  std::string shape;
  int64_t count = 4;
};

Args parse(int argc, char **argv) {
  Args a;
  study::parse_options(argc, argv, a, [&](const std::string &k, const std::string &v) {
    if (k == "--shape")
      a.shape = v;
    else if (k == "--count")
      a.count = study::whole_number(k, v);
    else
      return false;
    return true;
  });
  if (a.model.empty() == a.shape.empty())
    throw Error("give --model (with --images) or --shape cifar10|mnist");
  return a;
}

struct PerLayer {
  std::vector<double> max_s, max_z;
  double entries = 0, above_fp16 = 0, below_fp16_normal = 0;
};

// |S| and |z| of every layer of a decoder's fp32 state, laid out as the decoder's is: with
// TARNN_STATE_CHUNK each block ends with the chunk's buffer (state_format.h), and S and z are those
// stored at the last chunk's end.
void scan(const Config &c, const StepBuffers &b, int rows, PerLayer &p) {
  const int d = c.d_head;
  for (int r = 0; r < rows; ++r)
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h) {
        const char *block = static_cast<const char *>(b.state) +
                            state_block_offset(r, l, h, c.n_layers, c.n_heads, d, d,
                                               StateFormat::Fp32, b.state_chunk);
        const float *S = reinterpret_cast<const float *>(block);
        const float *z =
            reinterpret_cast<const float *>(block + state_s_bytes(d, d, StateFormat::Fp32));
        for (int i = 0; i < d * d; ++i) {
          const double s = std::fabs(S[i]);
          p.max_s[size_t(l)] = std::max(p.max_s[size_t(l)], s);
          p.entries += 1;
          p.above_fp16 += s > 65504.0;
          p.below_fp16_normal += s > 0 && s < 0x1p-14;
        }
        for (int i = 0; i < d; ++i)
          p.max_z[size_t(l)] = std::max(p.max_z[size_t(l)], double(std::fabs(z[i])));
      }
}

// The images to study: the first --limit of --images, or --count sampled in fp32 from the model.
ImageSet study_images(const Args &a, const Model &m) {
  if (a.images.empty()) {
    Engine engine(m, RunOptions{});
    return sample_images(engine, a.count, 7);
  }
  ImageSet images = read_images(a.images, m.config);
  if (a.limit > 0 && a.limit < images.count) {
    images.count = a.limit;
    images.bytes.resize(size_t(a.limit) * images.bytes_per_image());
  }
  return images;
}

// The threads' |S| and |z| per layer, merged.
PerLayer merge_layers(const std::vector<PerLayer> &found) {
  PerLayer layers = found[0];
  for (size_t i = 1; i < found.size(); ++i) {
    const PerLayer &f = found[i];
    for (size_t l = 0; l < layers.max_s.size(); ++l) {
      layers.max_s[l] = std::max(layers.max_s[l], f.max_s[l]);
      layers.max_z[l] = std::max(layers.max_z[l], f.max_z[l]);
    }
    layers.entries += f.entries;
    layers.above_fp16 += f.above_fp16;
    layers.below_fp16_normal += f.below_fp16_normal;
  }
  return layers;
}

} // namespace

int main(int argc, char **argv) try {
  const Args a = parse(argc, argv);
  const Model m = a.model.empty()
                      ? random_model(a.shape == "cifar10" ? Config::cifar10() : Config::mnist(), 1)
                      : load_model(a.model);
  const Config &c = m.config;
  const ImageSet images = study_images(a, m);
  const int L = c.positions(), K3 = c.d_out();
  const std::vector<StateFormat> formats = all_state_formats(); // fp32 first: the reference
  const CpuWeights w(m, Precision::Fp32);
  const size_t threads = size_t(std::max(1, a.threads));
  std::vector<study::Found> found(threads, study::Found(formats.size(), L));
  std::vector<PerLayer> layers(threads);
  for (PerLayer &p : layers) {
    p.max_s.assign(size_t(c.n_layers), 0.0);
    p.max_z.assign(size_t(c.n_layers), 0.0);
  }
  study::share_out(images.count, a.batch, int(threads), [&](int i, int64_t at, int n) {
    study::teacher_force(
        c, images, formats.size(),
        [&](size_t f, int rows) {
          return std::make_unique<Decoder<CpuOps>>(c, w.view(), rows, formats[f], CpuKernels{});
        },
        at, n, found[size_t(i)],
        [&](const Decoder<CpuOps> &fp32, int rows) {
          scan(c, fp32.buffers(), rows, layers[size_t(i)]);
        });
  });
  for (study::Found &f : found) // each thread's part of the mean, as the study has always added it
    for (std::vector<double> &sum : f.sum)
      for (double &e : sum)
        e /= double(images.count) * K3;
  const PerLayer all = merge_layers(layers);
  nlohmann::json j = {{"model", a.model.empty() ? "random:" + a.shape : a.model},
                      {"images", images.count},
                      {"positions", L},
                      {"max_abs_S_per_layer", all.max_s},
                      {"max_abs_z_per_layer", all.max_z},
                      {"S_entries_above_65504", all.above_fp16 / all.entries},
                      {"S_entries_below_2^-14", all.below_fp16_normal / all.entries}};
  for (size_t f = 0; f < formats.size(); ++f)
    j["formats"][name(formats[f])] =
        study::findings(found, f, 0, images.count, L, "mean_param_error_at_t");
  study::write_json(a.out, j);
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "state_study: %s\n", e.what());
  return 1;
}
