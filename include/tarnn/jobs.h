// The three things users do with a model, over an Engine: sample images, score them (bits/dim),
// and complete occluded ones (the paper's Figure 3). Each is one Rollout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io.h"
#include "run.h"

namespace tarnn {

constexpr int64_t kMaxSampleImages = 10'000'000;

// The defaults of every front end, the command, the Python module and the server (its API and its
// page): the seed of sampling and completion, and the completions per image.
constexpr uint64_t kDefaultSeed = 0;
constexpr int kDefaultSamples = 4;

// Images first .. first + n - 1 of a run with `seed` (docs/SPEC.md section 3): image i is the same
// whatever the batch, the threads or the device's batch split.
// batch: images in memory at once for this job (0: the Engine's); temperature: the sampler's
// (docs/SPEC.md section 2; 1: the model's distribution, the bytes of a run without one).
ImageSet sample_images(Engine &engine, int64_t n, uint64_t seed, int64_t first = 0,
                       const Progress &progress = nullptr, int64_t batch = 0,
                       float temperature = 1.0f);

// Teacher-forced bits/dim of each image: -sum_t log p(p_{t+1}) / (L ln 2) (docs/SPEC.md section 2).
std::vector<double> score_images(Engine &engine, const ImageSet &images,
                                 const Progress &progress = nullptr);

// The bits/dim of an image whose known bytes have log-likelihood `log_prob` (a Rollout's):
// -log_prob / (L ln 2), L the model's positions; what score_images and tarnn serve's score say.
double bits_per_dim(double log_prob, const Config &c);

// ---- completion --------------------------------------------------------------------------------

// Bounds that keep the grid and the buffers sane; split a larger job with --index.
constexpr int kMaxSamples = 64;
constexpr int64_t kMaxCompletions = 100'000; // images x samples

// Exactly one way of saying what is kept; with none set, the top half of the rows (Figure 3).
struct MaskSpec {
  std::optional<int64_t> keep_rows; // keep the first R pixel rows
  std::optional<int64_t> keep;      // keep the first N bytes in raster order
  std::string png; // a height x width PNG: nonzero (white) = known, zero (black) = generate
};

// A mask is [T] bytes in the model's raster order (channels interleaved), nonzero = known.
// Throws Error when the spec is ambiguous, out of range, the PNG is not the image's size, or
// nothing is left to generate (every byte from p_1 on known).
std::vector<uint8_t> make_mask(const MaskSpec &spec, const Config &c);

// Error "the mask keeps every pixel: nothing to complete" when the mask of one image ([T] bytes,
// nonzero = known) keeps every byte from p_1 on: the one rule of the command, Python and serve.
void check_leaves_work(const uint8_t *known, size_t T);

// "392 of 784 bytes known".
std::string describe_mask(const std::vector<uint8_t> &known);

// "0-15", "3", "0,5,9-12": file indices in the order given. Throws Error on bad syntax, an empty
// list, an index twice, or an index outside [0, count).
std::vector<int64_t> parse_index_list(const std::string &spec, int64_t count);
// The images such a list names, counted without a file (ranges are not expanded): its syntax
// checked as parse_index_list does, so a command refuses a bad --index before any work.
int64_t index_list_size(const std::string &spec);

// The RNG image index of completion k of the image at `file_index`: a pure function of the file,
// so a completion does not depend on which other images were chosen, on the batch or the threads.
inline int64_t completion_rng_index(int64_t file_index, int samples, int k) {
  return file_index * samples + k;
}

// The completions, [index.size() * samples] images: completion k of index[i] is image
// i * samples + k. Known bytes are fed when their turn comes (teacher forcing, also after unknown
// ones, so any mask works); unknown ones are sampled. `known` is one mask for every image ([T]) or
// one per image of `images` ([images.count * T]).
// The unknown bytes are drawn at `temperature` (as sample_images'); the known ones are fed.
ImageSet complete_images(Engine &engine, const ImageSet &images, const std::vector<int64_t> &index,
                         const std::vector<uint8_t> &known, int samples, uint64_t seed,
                         const Progress &progress = nullptr, float temperature = 1.0f);

// Figure 3 as one image: a row per chosen image holding the occluded image, its `samples`
// completions and, after a light band (3 x pad wide), the original, `pad` pixels of `pad_value`
// apart (a GridLayout's padding and pad_value, outputs.h). Grayscale models give an RGB grid with
// unknown pixels of the occluded image in dim red; other models keep their channels and draw
// unknown bytes as a grey checkerboard.
// The size completion_grid draws for n images of height x width x channels (before scaling),
// for a check before any work.
struct PictureSize {
  int64_t height, width;
  int channels;
};
PictureSize completion_grid_size(int64_t n, int samples, int height, int width, int channels,
                                 int pad = 2);
ImageSet completion_grid(const ImageSet &images, const std::vector<int64_t> &index,
                         const std::vector<uint8_t> &known, const ImageSet &completions,
                         int samples, int pad = 2, uint8_t pad_value = 64);

} // namespace tarnn
