// tarnn complete: image completion, the paper's Figure 3. Each chosen image is occluded by a
// mask; its known bytes are fed through the recurrence when their turn comes (teacher forcing,
// even after unknown ones, so any mask works in raster order) and the unknown ones are sampled.
// The rollout of engine.h does this at the same per-byte cost as sampling.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine.h"
#include "image_io.h"
#include "mask.h"

namespace tarnn {

// Bounds that keep the grid and the buffers sane; split a larger job with --index.
constexpr int kMaxSamples = 64;
constexpr int64_t kMaxCompletions = 100'000; // images x samples

// "0-15", "3", "0,5,9-12": file indices in the order given. Throws Error on bad syntax, an empty
// list, an index twice, or an index outside [0, count).
std::vector<int64_t> parse_index_list(const std::string &spec, int64_t count);

// The RNG image index (SPEC section 3) of completion k of the image at `file_index` in the
// images file: a pure function of the file, so a completion does not depend on which other
// images were chosen, on --batch or on --threads.
inline int64_t completion_rng_index(int64_t file_index, int samples, int k) {
  return file_index * samples + k;
}

// Runs one rollout; `progress` is for RunOptions::progress (may be empty). The backend lives
// behind this, so completion works on any backend that runs a Rollout.
using RolloutRunner =
    std::function<void(const Rollout &job, const std::function<void(int64_t, int64_t)> &progress)>;

// The completions, [index.size() * samples] images: completion k of index[i] is image
// i * samples + k. `known` is make_mask's [T] mask.
ImageSet complete_images(const ImageSet &images, const std::vector<int64_t> &index,
                         const std::vector<uint8_t> &known, int samples, uint64_t seed,
                         const RolloutRunner &run,
                         const std::function<void(int64_t, int64_t)> &progress = nullptr);

// Figure 3 as one PNG: a row per chosen image holding the occluded image, its `samples`
// completions and the original, 2 pixels apart. Grayscale models give an RGB grid with unknown
// pixels of the occluded image in dim red; other models keep their channels and draw unknown
// bytes as a grey checkerboard.
ImageSet completion_grid(const ImageSet &images, const std::vector<int64_t> &index,
                         const std::vector<uint8_t> &known, const ImageSet &completions,
                         int samples);

// The subcommand.
struct CompleteArgs {
  std::string model = "models/mnist";
  std::string images;
  std::optional<std::string> index; // unset: the first 16 images (or all, if fewer)
  MaskSpec mask;
  int samples = 4;
  uint64_t seed = 0;
  std::string out, out_dir;
  int batch = 256;
  int threads = 0; // 0: all cores
  std::string device = "cpu";
  bool tf32 = false;
};

void add_complete_options(CLI::App *cmd, CompleteArgs &a);
int run_complete(const CompleteArgs &a);

} // namespace tarnn
