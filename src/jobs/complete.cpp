// Image completion, the paper's Figure 3 (include/tarnn/jobs.h): each chosen image copied once
// per sample into one rollout whose mask says which bytes are given.
#include <algorithm>
#include <cstring>
#include <set>

#include "tarnn/error.h"
#include "tarnn/jobs.h"

namespace tarnn {

namespace {

int64_t parse_index(const std::string &s, const std::string &token) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
    throw Error({param("index"),
                 ": '" + token + "' is not an index or a range (examples: 3, 0-15, 0,5,9-12)"});
  return std::stoll(s);
}

// Each range "A-B" (or single index "A") of a comma-separated --index, in order: f(first, last,
// the token), a range checked to run forwards.
template <class F> void for_each_range(const std::string &spec, F f) {
  if (spec.empty())
    throw Error({param("index"), " is empty (examples: 3, 0-15, 0,5,9-12)"});
  for (size_t at = 0;;) {
    const size_t comma = spec.find(',', at);
    const std::string token = spec.substr(at, comma == std::string::npos ? comma : comma - at);
    const size_t dash = token.find('-');
    const int64_t first = parse_index(token.substr(0, dash), token);
    const int64_t last =
        dash == std::string::npos ? first : parse_index(token.substr(dash + 1), token);
    if (last < first)
      throw Error({param("index"), ": range '" + token + "' runs backwards"});
    f(first, last);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
}

} // namespace

int64_t index_list_size(const std::string &spec) {
  int64_t n = 0;
  for_each_range(spec, [&](int64_t first, int64_t last) {
    n = std::min<int64_t>(n + (last - first + 1), INT64_MAX / 2); // indices < 10^18: no overflow
  });
  return n;
}

std::vector<int64_t> parse_index_list(const std::string &spec, int64_t count) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for_each_range(spec, [&](int64_t first, int64_t last) {
    if (last >= count) // checked before expanding, so a huge range costs nothing
      throw Error({param("index"), ": image " + std::to_string(last) +
                                       " is out of range: the file holds " + std::to_string(count) +
                                       (count == 1 ? " image (index 0)" : " images (0-") +
                                       (count == 1 ? "" : std::to_string(count - 1) + ")")});
    for (int64_t i = first; i <= last; ++i) {
      if (!seen.insert(i).second)
        throw Error({param("index"), ": image " + std::to_string(i) + " is chosen twice"});
      out.push_back(i);
    }
  });
  return out;
}

ImageSet complete_images(Engine &engine, const ImageSet &images, const std::vector<int64_t> &index,
                         const std::vector<uint8_t> &known, int samples, uint64_t seed,
                         const Progress &progress, float temperature) {
  const Config &c = engine.config();
  if (images.height != c.height || images.width != c.width || images.channels != c.channels)
    throw Error("the images are not the model's size");
  const size_t T = images.bytes_per_image();
  const int64_t n = int64_t(index.size()), K = samples;
  const bool per_image = known.size() == size_t(images.count) * T && images.count > 1;
  if (known.size() != T && !per_image)
    throw Error("the mask has " + std::to_string(known.size()) + " bytes; one image has " +
                std::to_string(T) + " and all " + std::to_string(images.count) + " have " +
                std::to_string(size_t(images.count) * T));
  if (samples < 1 || samples > kMaxSamples)
    throw Error({param("samples"), " must be in [1, " + std::to_string(kMaxSamples) + "] (got " +
                                       std::to_string(samples) + ")"});
  if (n * samples > kMaxCompletions)
    throw Error({std::to_string(n) + " images x " + std::to_string(samples) + " samples is over " +
                     std::to_string(kMaxCompletions) + " completions: split the job with ",
                 param("index")});
  for (int64_t i : index) {
    if (i < 0 || i >= images.count)
      throw Error("image index " + std::to_string(i) + " is outside the file");
    try { // each image's mask leaves something to complete (Python's used to come back whole)
      check_leaves_work(known.data() + (per_image ? size_t(i) * T : 0), T);
    } catch (const Error &e) {
      Message m(per_image ? "image " + std::to_string(i) + ": " : "");
      m.append(e.message());
      throw Error(m);
    }
  }
  check_memory(3.0 * double(n * K) * double(T) + engine.host_state_bytes(n * K),
               std::to_string(n * K) + " completions (inputs, masks, outputs and the state)");
  // Row i * K + k of the job is completion k of index[i]: the input copied K times.
  std::vector<uint8_t> given(size_t(n * K) * T), mask(size_t(n * K) * T);
  for (int64_t r = 0; r < n * K; ++r) {
    std::memcpy(&given[r * T], &images.bytes[size_t(index[r / K]) * T], T);
    std::memcpy(&mask[r * T], known.data() + (per_image ? size_t(index[r / K]) * T : 0), T);
  }
  ImageSet out{n * K, images.height, images.width, images.channels, {}};
  out.bytes.resize(given.size());
  // One rollout over every completion, each row with its own RNG key (index i, sample k ->
  // image i * K + k of the run with `seed`): any selection, scattered or not, is one batched job.
  std::vector<uint64_t> seeds(size_t(n * K), seed), rng_index(size_t(n * K));
  for (int64_t r = 0; r < n * K; ++r)
    rng_index[size_t(r)] = uint64_t(completion_rng_index(index[r / K], samples, int(r % K)));
  Rollout job;
  job.count = n * K;
  job.given = given.data();
  job.known = mask.data();
  job.out = out.bytes.data();
  job.seeds = seeds.data();
  job.images = rng_index.data();
  job.temperature = temperature;
  engine.run(job, progress);
  return out;
}

PictureSize completion_grid_size(int64_t n, int samples, int height, int width, int channels,
                                 int pad) {
  const int64_t cols = samples + 2, band = 3 * pad; // (band: see completion_grid)
  return {n * height + (n + 1) * pad, cols * width + (cols + 1) * pad + band,
          channels == 1 ? 3 : channels};
}

ImageSet completion_grid(const ImageSet &images, const std::vector<int64_t> &index,
                         const std::vector<uint8_t> &known, const ImageSet &completions,
                         int samples, int pad, uint8_t pad_value) {
  const int H = images.height, W = images.width, C = images.channels;
  const int n = int(index.size()), cols = samples + 2;
  const size_t T = size_t(H) * W * C;
  // The original stands apart from the completions: a wider light band before its column.
  // Grayscale goes to RGB so the occlusion can be tinted.
  const int band = 3 * pad;
  const PictureSize size = completion_grid_size(n, samples, H, W, C, pad);
  const int G = size.channels;
  ImageSet g{1, int(size.height), int(size.width), G, {}};
  g.bytes.assign(size_t(g.height) * g.width * G, pad_value);
  for (int y = 0; y < g.height; ++y)
    for (int x = 0; x < band; ++x)
      for (int j = 0; j < G; ++j)
        g.bytes[(size_t(y) * g.width + pad + (cols - 1) * (W + pad) + x) * G + j] = 176;
  auto left = [&](int col) { return pad + col * (W + pad) + (col == cols - 1 ? band : 0); };
  // Draws image `src` into cell (row, col); with `mask`, unknown bytes are shown as occluded.
  auto draw = [&](int row, int col, const uint8_t *src, const uint8_t *mask) {
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        uint8_t *px = &g.bytes[(size_t(pad + row * (H + pad) + y) * g.width + left(col) + x) * G];
        const size_t at = (size_t(y) * W + x) * C;
        if (C == 1) {
          const bool hidden = mask && !mask[at];
          px[0] = hidden ? 120 : src[at]; // dim red: cannot be mistaken for a grey pixel
          px[1] = px[2] = hidden ? 0 : src[at];
        } else {
          for (int j = 0; j < C; ++j)
            px[j] = mask && !mask[at + j] ? ((x + y) % 2 ? 96 : 160) : src[at + j];
        }
      }
  };
  for (int i = 0; i < n; ++i) {
    const uint8_t *original = &images.bytes[size_t(index[i]) * T];
    draw(i, 0, original, known.data() + (known.size() == T ? 0 : size_t(index[i]) * T));
    for (int k = 0; k < samples; ++k)
      draw(i, 1 + k, &completions.bytes[(size_t(i) * samples + k) * T], nullptr);
    draw(i, cols - 1, original, nullptr);
  }
  return g;
}

} // namespace tarnn
