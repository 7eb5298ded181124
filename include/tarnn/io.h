// Files in and out: images (MNIST IDX files and PNGs in; PNGs and grids out) and the one way
// every output is written. Image bytes are raster order with channels interleaved, as the model
// reads them (docs/SPEC.md section 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"

namespace tarnn {

struct ImageSet {
  int64_t count = 0;
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> bytes; // [count, height, width, channels]

  size_t bytes_per_image() const { return size_t(height) * width * channels; }
  const uint8_t *image(int64_t i) const { return bytes.data() + size_t(i) * bytes_per_image(); }
};

// An IDX file ([n, h, w] or [n, h, w, c] unsigned bytes), a NumPy .npy of uint8 ((n, h, w) or
// (n, h, w, c), C order) or a PNG; throws Error on anything malformed, and when the images are not
// the model's height, width and channels (no resizing).
ImageSet read_images(const std::string &path, const Config &c);

// The same without a model: the images as the file stores them (a PNG's channels, alpha included).
ImageSet read_images(const std::string &path);

// Where an output named `path` is written. A symbolic link is followed (a chain of them, a
// relative one from its own folder) to the file it names, which is written and replaced there: the
// link stays a link. A `path` that exists and is not a regular file or a folder (a device such as
// /dev/null, a FIFO, a terminal), or that leads through /proc (/dev/stdout: an open descriptor),
// is a stream: written into as it is, in order, never replaced (no temporary, no rename, nothing
// to resume).
struct OutputTarget {
  std::string path;    // the file the links lead to (`path` itself when it is no link)
  bool stream = false; // written into, not replaced
};
OutputTarget output_target(const std::string &path);

// `path` with `suffix` added to its name (and a leading dot when `hidden`): an output's companion
// (its temporary, an .npy's partial output and record). Where that name would be longer than a
// name may be (NAME_MAX), the name's first bytes and a hash of all of it, so that any name an
// output may have has companions, and two long names different ones.
std::string companion_path(const std::string &path, const std::string &suffix, bool hidden = false);

// The one way tarnn writes a file: to a new temporary beside the file `path` names
// (output_target: links followed), every write checked, synced, then renamed over it. On any
// failure the file is as it was, the temporary is gone, and the Error names `path` and the
// reason. A stream (a device, a FIFO, a terminal, /dev/stdout) is written into instead.
void write_file_atomic(const std::string &path, const void *data, size_t size);
void write_file_atomic(const std::string &path, const std::string &text);

// Before the first image: the disk holding `path` (a folder, or a file whose folder exists) has
// room for `bytes` more bytes and `files` more files, where its filesystem can say (statvfs).
// Error naming both figures otherwise: a run that cannot fit is refused before any work, not
// after it.
void check_free_space(const std::string &path, uint64_t bytes, uint64_t files = 0);

// A NumPy .npy of uint8 images (n, h, w, c), filled in order, chunk by chunk, without holding them:
// the data goes to a partial file beside the file PATH names (partial(): PATH.partial, links
// followed), which becomes that file (synced, renamed) only when all n are in. An interrupted run
// leaves the partial with its first images complete; opened again with resume_from = k (the
// images known to be in it), it continues after the k-th. It holds the output's lock (a second
// writer of PATH is refused) and checks the disk has room for the whole array before the first
// image; a writer refused, or closed before its first image, leaves no partial it made. A PATH
// that is a stream (output_target: a FIFO, a device, /dev/stdout) is written straight into, in
// order: nothing to lock, resume or read back.
class NpyWriter {
public:
  NpyWriter(const std::string &path, int64_t n, int height, int width, int channels,
            int64_t resume_from = -1);
  ~NpyWriter(); // closes; the partial stays unless finished (or it holds no image of this writer)
  NpyWriter(const NpyWriter &) = delete;
  NpyWriter &operator=(const NpyWriter &) = delete;

  // Appends `count` images (their bytes in order) after the done() already in; synced.
  void append(const uint8_t *bytes, int64_t count);
  int64_t done() const { return done_; }
  // The bytes of images [first, first + count) (first + count <= done()).
  std::vector<uint8_t> read(int64_t first, int64_t count) const;
  // All n in: the partial becomes the file PATH names.
  void finish();
  const std::string &path() const { return path_; }
  std::string partial() const; // the file being filled (PATH itself for a stream)

private:
  // After the lock: the free space, then a new array's header, or a resumed one's checks.
  void start(const std::string &head, int64_t resume_from, int64_t size);
  std::string path_;
  OutputTarget target_;
  int64_t n_, per_image_, done_ = 0;
  size_t header_ = 0;
  int fd_ = -1;
  bool made_ = false; // the partial holds only this writer's images (not resumed)
};

// Whether PATH (its links followed) is a finished NpyWriter's array of n images of this size: a
// regular file with its header, and its size to the byte (an interrupted run's is its partial;
// `--resume` of a finished run finds it whole). A stream never is.
bool npy_is_whole(const std::string &path, int64_t n, int height, int width, int channels);

// For programs (the tarnn command calls it first): on SIGINT, SIGTERM or SIGHUP, delete the
// temporaries of writes in progress, then die of the signal as before. Without it an interrupted
// write leaves its hidden temporary behind (the target itself is never half-written).
void remove_temporaries_on_signals();
// The same from a signal handler of the program's own: async-signal-safe; does not return.
[[noreturn]] void remove_temporaries_and_die(int signal);

// Whether `path` ends in `ext` (".png"), letters in any case: the one rule for the names of the
// files tarnn writes, in the command (checked before any work) and in the bindings.
bool has_extension(const std::string &path, const std::string &ext);

// A PNG (1 to 4 channels), written as write_file_atomic does; Error (before writing) when the
// name does not end in .png (has_extension): grid.PNG is a PNG, grid.jpg is not.
void write_png(const std::string &path, int width, int height, int channels, const uint8_t *data);

// Images tiled in rows of `cols`, separated by `pad` pixels of value `pad_value`.
ImageSet make_grid(const ImageSet &images, int cols, int pad = 2, uint8_t pad_value = 64);

// A grid is for looking at: at most this many images (a 256 x 256 tiling), and at most this many
// bytes (a PNG's sizes are ints).
constexpr int64_t kMaxGridImages = 65536;
constexpr int64_t kMaxGridBytes = int64_t(1) << 28;

// A grid's scale for a comfortable view: whole pixels, the longer side about 600 (1 to 8).
int grid_scale(int width, int height);
// Each pixel drawn `scale` x `scale` times.
ImageSet scale_image(const ImageSet &image, int scale);

// The columns of a square-ish grid of `count` images, and a check, before any work, that such a
// grid of images of this size can be written (Error otherwise, pointing to per-image outputs):
// its bytes.
int grid_columns(int64_t count);
int64_t check_grid(int64_t count, int height, int width, int channels, int cols, int pad = 2);

} // namespace tarnn
