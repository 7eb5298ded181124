// Where generated images go: one family of sinks that `sample` and `complete` share. A sink is
// made before any work (its constructor checks that its output can be written), takes the run's
// images chunk by chunk in index order, and is made whole by finish(). Beside the streamed ones,
// a ResumeRecord says how many images are on the disk, so that an interrupted run goes on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io.h"

namespace tarnn {

// Before any work: `path` can be written (its folder exists and is a writable folder, and it is
// not itself a folder). Throws Error naming it.
void check_output_file(const std::string &path);
// Before any work: `dir` is a folder or can be made one (it is made here).
void make_output_folder(const std::string &dir);

// The file names of per-image outputs: image 42 of a run "00000042.png"; completion 3 of file
// image 42 "00000042-03.png".
std::string image_png_name(int64_t index);
std::string completion_png_name(int64_t index, int k);

// A picture of many images (a grid, a completion grid) as a PNG, each pixel drawn scale x scale
// times (0: grid_scale's choice, the longer side about 600 pixels).
void write_grid_png(const std::string &path, const ImageSet &picture, int scale);

class ImageSink {
public:
  virtual ~ImageSink() = default;
  // The next images of the run, in order.
  virtual void add(const ImageSet &images) = 0;
  // Every image in: the output made whole.
  virtual void finish() {}
  // The host memory it holds for a run (what check_memory counts).
  virtual double memory_bytes() const { return 0; }
  // The first `count` images it wrote, read back (a resumed run's grid needs them); Error where
  // it cannot.
  virtual ImageSet read_back(int64_t count) const;
  virtual std::string where() const = 0; // the path, for messages
};

// n images tiled in `cols` columns (0: a square-ish grid), written as one PNG by finish(): it
// holds every image until then. Checks the grid's size and the path at once.
std::unique_ptr<ImageSink> grid_sink(const std::string &path, int64_t n, int height, int width,
                                     int channels, int cols, int scale);
// One PNG per image in `dir` (made at once), named name(i) for the i-th image of the run;
// resume_from > 0: the first that many are in the folder already, and the next added is that one.
std::unique_ptr<ImageSink> png_folder_sink(const std::string &dir, int height, int width,
                                           int channels, std::function<std::string(int64_t)> name,
                                           int64_t resume_from = 0);
// A NumPy array of n images filled in order (NpyWriter); resume_from > 0: the first that many are
// in its .partial already.
std::unique_ptr<ImageSink> npy_sink(const std::string &path, int64_t n, int height, int width,
                                    int channels, int64_t resume_from = 0);

// The record beside a run's streamed outputs: what a resume must match (`run`, a JSON object's
// text: model, seed, sizes, outputs) and how many images are written. Added last, after the sinks
// that write images: it is saved (atomically) once they hold a chunk, and removed by finish(), when
// the run is complete and nothing is left to resume.
class ResumeRecord : public ImageSink {
public:
  ResumeRecord(std::string path, std::string run);
  // The images an earlier run of the same job wrote (0 if it left no record); Error if the record
  // is another run's or not a record. Counting goes on from there.
  int64_t load();
  void add(const ImageSet &images) override;
  void finish() override;
  std::string where() const override { return path_; }

private:
  std::string path_, run_;
  int64_t done_ = 0;
};

} // namespace tarnn
