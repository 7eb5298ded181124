// Where generated images go: one family of sinks that `sample` and `complete` share. A sink is
// made before any work (its constructor checks that its output can be written), takes the run's
// images batch by batch in index order, and is made whole by finish(). Beside the streamed ones,
// a ResumeRecord says how many images are on the disk, so that an interrupted run goes on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io.h"

namespace tarnn {

// Before any work: `path` can be written (its folder exists and is a writable folder, it takes
// such a name, and it is not itself a folder; or it is a stream: io.h, output_target). Throws
// Error naming it.
void check_output_file(const std::string &path);
// Before any work: `dir` is a writable folder or can be made one (it is made here: true when it
// was not there).
bool make_output_folder(const std::string &dir);

// An output folder for one run, made (make_output_folder) when the run starts; one that this run
// made and that is still empty when it ends (it failed or was stopped before its first image) is
// removed again, so a run that finished nothing leaves nothing. A folder that was there stays.
class OutputFolder {
public:
  explicit OutputFolder(const std::string &dir);
  ~OutputFolder();
  OutputFolder(const OutputFolder &) = delete;
  OutputFolder &operator=(const OutputFolder &) = delete;

private:
  std::string dir_;
  bool made_;
};

// The file names of per-image outputs: image 42 of a run "00000042.png"; completion 3 of file
// image 42 "00000042-03.png".
std::string image_png_name(int64_t index);
std::string completion_png_name(int64_t index, int k);

// How a grid is drawn: one layout for `tarnn sample -o` and Python's tarnn.grid (and its padding,
// pad_value and scale for `tarnn complete -o`), so the same arguments give the same bytes. It is
// torchvision's make_grid (nrow, padding, pad_value) and then each pixel drawn scale x scale
// times. The defaults are the command's look: a square-ish grid, 2 pixels of grey 64 around
// each image, scaled by whole pixels toward 600 (64 MNIST digits: 242 pixels, drawn at 484).
struct GridLayout {
  int nrow = 0;       // images per row; 0: a square-ish grid (grid_columns)
  int padding = 2;    // pixels between and around the images, before scaling
  int pad_value = 64; // the padding's level in every channel: 0..255, as the uint8 images
  int scale = 0;      // grid pixels per image pixel; 0: the longer side toward 600 (1 to 8)
};
constexpr int kMaxGridPadding = 64, kMaxGridScale = 16;

// Throws Error naming the first value out of range ("padding must be in [0, 64] (got 99)").
void check_grid_layout(const GridLayout &layout);
// Before any work: the layout is valid and a grid of `count` images of this size can be written
// (at most kMaxGridImages images and, scaled, kMaxGridBytes bytes); its bytes. Error otherwise.
int64_t check_grid(int64_t count, int height, int width, int channels, const GridLayout &layout);
// The grid of `images` (1 to kMaxGridImages of them) drawn as `layout` says: a single image.
ImageSet draw_grid(const ImageSet &images, const GridLayout &layout);

// The scale a picture of this size is drawn at: `scale`, or for 0 grid_scale's choice.
int picture_scale(int width, int height, int scale);
// Before any work: a picture of this size (a grid, a completion grid) drawn at `scale` fits in a
// grid PNG (kMaxGridBytes); its bytes. Error otherwise.
int64_t check_picture(int64_t height, int64_t width, int channels, int scale);
// A picture of many images (a grid, a completion grid) as a PNG, each pixel drawn scale x scale
// times (0: grid_scale's choice, the longer side toward 600 pixels).
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
  // Images [first, first + count) it wrote, read back (a resumed run's grid and the record's
  // checksum need them); Error where it cannot (a file missing, or not one of the run's).
  virtual ImageSet read_back(int64_t first, int64_t count) const;
  ImageSet read_back(int64_t count) const { return read_back(0, count); }
  virtual std::string where() const = 0; // the path, for messages
};

// n images drawn as `layout` says (draw_grid), written as one PNG by finish(): it holds every
// image until then. Checks the layout, the grid's size and the path at once.
std::unique_ptr<ImageSink> grid_sink(const std::string &path, int64_t n, int height, int width,
                                     int channels, const GridLayout &layout = {});
// Before the first image: room for `images` more PNGs in `dir` (check_free_space: as many files,
// and bytes for the smallest PNG each, since their compressed size is not known before).
void check_folder_space(const std::string &dir, int64_t images);
// Whether `dir` holds the PNG of every one of a run's n images, named name(i) (a finished run's
// folder: `--resume` finds nothing left to do).
bool png_folder_is_whole(const std::string &dir, int64_t n,
                         const std::function<std::string(int64_t)> &name);
// One PNG per image in `dir` (made at once), named name(i) for the i-th image of the run;
// resume_from > 0: the first that many are in the folder already, and the next added is that one.
// It locks the folder while it lives: a second run writing into it is refused (Error).
std::unique_ptr<ImageSink> png_folder_sink(const std::string &dir, int height, int width,
                                           int channels, std::function<std::string(int64_t)> name,
                                           int64_t resume_from = 0);
// A NumPy array of n images filled in order (NpyWriter); resume_from > 0: the first that many are
// in its .partial already.
std::unique_ptr<ImageSink> npy_sink(const std::string &path, int64_t n, int height, int width,
                                    int channels, int64_t resume_from = 0);

// The record beside a run's streamed outputs: what a resume must match (`run`, a JSON object's
// text: model, seed, sizes, outputs) and how many images are written. Added last, after the sinks
// that write images: it is saved (atomically) once they hold a batch, and removed by finish(), when
// the run is complete and nothing is left to resume.
class ResumeRecord : public ImageSink {
public:
  ResumeRecord(std::string path, std::string run);
  // Whether an earlier run left it: an interrupted one (a finished run removes it), whose images
  // a new run would write over. Its count, without load()'s checks: -1 where it cannot be read.
  bool exists() const;
  int64_t count_on_disk() const;
  // Removes it (the run starts over: --overwrite). Call it while the outputs' locks are held.
  void discard() const;
  // The images an earlier run of the same job wrote (0 if it left no record); Error if the record
  // is another run's, not a record, or a field of it is not what a run writes (checked before
  // anything on the disk is touched). Counting goes on from there.
  int64_t load();
  // The loaded count's images, read back from `written` (the streamed output), against the
  // record's checksum of their bytes: Error where one is missing, changed or not whole.
  void verify(const ImageSink &written) const;
  void add(const ImageSet &images) override;
  void finish() override;
  std::string where() const override { return path_; }

private:
  std::string path_, run_;
  int64_t done_ = 0;
  uint64_t checksum_; // FNV-1a (64-bit) of the bytes of the done_ images, in order
};

} // namespace tarnn
