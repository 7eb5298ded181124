// include/tarnn/outputs.h: the sinks of generated images and the resume record.
#include "tarnn/outputs.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/util.h"
#include "../io/files.h"
#include "../io/json_limits.h"
#include "tarnn/error.h"

namespace tarnn {

void check_output_file(const std::string &path) {
  if (path.empty())
    throw Error("an output path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(path + ": cannot write: is a folder");
  if (!output_target(path).stream) { // a new file, in the folder of the file the links lead to
    const std::string dir = folder_of(output_target(path).path);
    if (::stat(dir.c_str(), &st) != 0)
      throw Error(path + ": cannot write: " + dir + ": " + std::strerror(errno));
    if (!S_ISDIR(st.st_mode))
      throw Error(path + ": cannot write: " + dir + " is not a folder");
    if (::access(dir.c_str(), W_OK) != 0)
      throw Error(path + ": cannot write: " + dir + ": " + std::strerror(errno));
  }
  check_writable(path); // and what access() cannot see: a read-only or pseudo filesystem, a name
}

bool make_output_folder(const std::string &dir) {
  std::error_code e;
  const bool made = std::filesystem::create_directories(dir, e);
  if (e || !std::filesystem::is_directory(dir))
    throw Error(dir + ": cannot make the output folder: " +
                (e ? e.message() : std::string("a file of that name is in the way")));
  std::string why;
  if (::access(dir.c_str(), W_OK) != 0) {
    why = std::strerror(errno);
  } else {
    try { // a file made in it and removed: /proc, or a read-only filesystem, pass access() as root
      check_writable(dir + "/" + image_png_name(0));
    } catch (const Error &x) {
      why = x.what();
      why = why.substr(why.rfind(": ") + 2);
    }
  }
  if (!why.empty())
    throw Error(dir + ": not a writable folder (" + why + ")", Error::Kind::File);
  return made;
}

OutputFolder::OutputFolder(const std::string &dir) : dir_(dir), made_(make_output_folder(dir)) {}

OutputFolder::~OutputFolder() {
  if (made_)
    ::rmdir(dir_.c_str()); // only while empty: a folder with any image in it stays
}

std::string image_png_name(int64_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "%08lld.png", static_cast<long long>(index));
  return name;
}

std::string completion_png_name(int64_t index, int k) {
  char name[48];
  std::snprintf(name, sizeof name, "%08lld-%02d.png", static_cast<long long>(index), k);
  return name;
}

namespace {

void check_in(const char *name, int value, int lo, int hi) {
  if (value < lo || value > hi)
    throw Error(std::string(name) + " must be in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "] (got " + std::to_string(value) + ")");
}

int grid_nrow(int64_t count, const GridLayout &layout) {
  return layout.nrow > 0 ? int(std::min<int64_t>(layout.nrow, std::max<int64_t>(count, 1)))
                         : grid_columns(count);
}

} // namespace

void check_grid_layout(const GridLayout &layout) {
  check_in("nrow", layout.nrow, 0, int(kMaxGridImages));
  check_in("padding", layout.padding, 0, kMaxGridPadding);
  check_in("pad_value", layout.pad_value, 0, 255);
  check_in("scale", layout.scale, 0, kMaxGridScale);
}

int picture_scale(int width, int height, int scale) {
  return scale > 0 ? scale : grid_scale(width, height);
}

int64_t check_grid(int64_t count, int height, int width, int channels, const GridLayout &layout) {
  check_grid_layout(layout);
  if (count < 1)
    throw Error("a grid needs at least one image");
  const int cols = grid_nrow(count, layout), pad = layout.padding;
  check_grid(count, height, width, channels, cols, pad); // the count, and the bytes unscaled
  const int64_t rows = (count + cols - 1) / cols;
  return check_picture(rows * height + (rows + 1) * pad, int64_t(cols) * width + (cols + 1) * pad,
                       channels, layout.scale);
}

int64_t check_picture(int64_t height, int64_t width, int channels, int scale) {
  const int64_t most = kMaxGridBytes / std::max(channels, 1);
  if (height > most || width > most) // (and so height * width has no overflow below)
    throw Error("a grid of " + std::to_string(width) + "x" + std::to_string(height) +
                " pixels is over the " + std::to_string(kMaxGridBytes / 1000000) +
                " MB a grid PNG holds");
  const int64_t s = picture_scale(int(width), int(height), scale);
  const int64_t bytes = height * s * width * s * channels;
  if (bytes > kMaxGridBytes)
    throw Error("a grid of " + std::to_string(width) + "x" + std::to_string(height) +
                " pixels drawn at scale " + std::to_string(s) + " is " +
                std::to_string(bytes / 1000000) + " MB, over the " +
                std::to_string(kMaxGridBytes / 1000000) +
                " MB a grid PNG holds: a smaller scale, or one PNG per image");
  return bytes;
}

ImageSet draw_grid(const ImageSet &images, const GridLayout &layout) {
  check_grid(images.count, images.height, images.width, images.channels, layout);
  const ImageSet tiled =
      make_grid(images, grid_nrow(images.count, layout), layout.padding, uint8_t(layout.pad_value));
  return scale_image(tiled, picture_scale(tiled.width, tiled.height, layout.scale));
}

void write_grid_png(const std::string &path, const ImageSet &picture, int scale) {
  const ImageSet big = scale_image(picture, picture_scale(picture.width, picture.height, scale));
  write_png(path, big.width, big.height, big.channels, big.bytes.data());
}

ImageSet ImageSink::read_back(int64_t, int64_t) const {
  throw Error(where() + ": images written to it cannot be read back");
}

namespace {

class GridSink : public ImageSink {
public:
  GridSink(const std::string &path, int64_t n, int height, int width, int channels,
           const GridLayout &layout)
      : path_(path), layout_(layout), grid_bytes_(check_grid(n, height, width, channels, layout)),
        all_{n, height, width, channels, {}} {
    check_output_file(path);
    all_.bytes.reserve(size_t(n) * all_.bytes_per_image());
  }
  void add(const ImageSet &images) override {
    all_.bytes.insert(all_.bytes.end(), images.bytes.begin(), images.bytes.end());
  }
  void finish() override {
    const ImageSet g = draw_grid(all_, layout_);
    write_png(path_, g.width, g.height, g.channels, g.bytes.data());
  }
  double memory_bytes() const override { // the images, the grid and its scaled copy
    return double(all_.count) * double(all_.bytes_per_image()) + 2.0 * double(grid_bytes_);
  }
  std::string where() const override { return path_; }

private:
  std::string path_;
  GridLayout layout_;
  int64_t grid_bytes_;
  ImageSet all_; // every image, in order, until finish()
};

class PngFolderSink : public ImageSink {
public:
  PngFolderSink(const std::string &dir, int height, int width, int channels,
                std::function<std::string(int64_t)> name, int64_t resume_from)
      : dir_(dir), height_(height), width_(width), channels_(channels), name_(std::move(name)),
        added_(std::max<int64_t>(resume_from, 0)) {
    make_output_folder(dir);
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0)
      throw Error(os_error(dir, "cannot open the output folder"), Error::Kind::File);
    try {
      lock_output(fd_, dir); // the folder's images are this run's alone while it lasts
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }
  ~PngFolderSink() override { ::close(fd_); }
  PngFolderSink(const PngFolderSink &) = delete;
  PngFolderSink &operator=(const PngFolderSink &) = delete;
  void add(const ImageSet &images) override {
    for (int64_t i = 0; i < images.count; ++i)
      write_png(path(added_ + i), width_, height_, channels_, images.image(i));
    added_ += images.count;
  }
  ImageSet read_back(int64_t first, int64_t count) const override {
    ImageSet s{count, height_, width_, channels_, {}};
    for (int64_t i = first; i < first + count; ++i) {
      const ImageSet one = read_images(path(i));
      if (one.count != 1 || one.height != height_ || one.width != width_ ||
          one.channels != channels_)
        throw Error(path(i) + ": not an image of this run");
      s.bytes.insert(s.bytes.end(), one.bytes.begin(), one.bytes.end());
    }
    return s;
  }
  std::string where() const override { return dir_; }

private:
  std::string path(int64_t i) const { return dir_ + "/" + name_(i); }
  std::string dir_;
  int height_, width_, channels_;
  std::function<std::string(int64_t)> name_;
  int64_t added_; // images in the folder: the next one added is added_
  int fd_ = -1;   // the folder, open while the sink lives: its lock
};

class NpySink : public ImageSink {
public:
  NpySink(const std::string &path, int64_t n, int height, int width, int channels,
          int64_t resume_from)
      : height_(height), width_(width), channels_(channels),
        writer_((check_output_file(path), path), n, height, width, channels,
                resume_from > 0 ? resume_from : -1) {}
  void add(const ImageSet &images) override { writer_.append(images.bytes.data(), images.count); }
  void finish() override { writer_.finish(); }
  ImageSet read_back(int64_t first, int64_t count) const override {
    return ImageSet{count, height_, width_, channels_, writer_.read(first, count)};
  }
  std::string where() const override { return writer_.path(); }

private:
  int height_, width_, channels_;
  NpyWriter writer_;
};

} // namespace

std::unique_ptr<ImageSink> grid_sink(const std::string &path, int64_t n, int height, int width,
                                     int channels, const GridLayout &layout) {
  return std::make_unique<GridSink>(path, n, height, width, channels, layout);
}

void check_folder_space(const std::string &dir, int64_t images) {
  // A PNG's compressed size is not known before it is drawn: the smallest a PNG can be (its
  // signature, IHDR, one IDAT and IEND chunks: 67 bytes) is the bound, and each is a file.
  constexpr uint64_t kSmallestPng = 67;
  check_free_space(dir, uint64_t(images) * kSmallestPng, uint64_t(images));
}

bool png_folder_is_whole(const std::string &dir, int64_t n,
                         const std::function<std::string(int64_t)> &name) {
  struct stat st {};
  for (int64_t i = 0; i < n; ++i)
    if (::stat((dir + "/" + name(i)).c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
      return false;
  return n > 0;
}

std::unique_ptr<ImageSink> png_folder_sink(const std::string &dir, int height, int width,
                                           int channels, std::function<std::string(int64_t)> name,
                                           int64_t resume_from) {
  return std::make_unique<PngFolderSink>(dir, height, width, channels, std::move(name),
                                         resume_from);
}

std::unique_ptr<ImageSink> npy_sink(const std::string &path, int64_t n, int height, int width,
                                    int channels, int64_t resume_from) {
  return std::make_unique<NpySink>(path, n, height, width, channels, resume_from);
}

namespace {

constexpr uint64_t kFnvBasis = 14695981039346656037ull, kFnvPrime = 1099511628211ull;

uint64_t fnv1a(uint64_t h, const std::vector<uint8_t> &bytes) {
  for (const uint8_t b : bytes)
    h = (h ^ b) * kFnvPrime;
  return h;
}

std::string hex64(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

} // namespace

ResumeRecord::ResumeRecord(std::string path, std::string run)
    : path_(std::move(path)), run_(std::move(run)), checksum_(kFnvBasis) {}

bool ResumeRecord::exists() const {
  struct stat st {};
  return ::lstat(path_.c_str(), &st) == 0;
}

int64_t ResumeRecord::count_on_disk() const {
  std::vector<uint8_t> text;
  try {
    text = read_file(path_);
  } catch (const Error &) { // none, or not readable
    return -1;
  }
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  return j.is_object() && j.contains("done") && j["done"].is_number_integer()
             ? std::max<int64_t>(j["done"].get<int64_t>(), -1)
             : -1;
}

void ResumeRecord::discard() const {
  if (std::remove(path_.c_str()) != 0 && errno != ENOENT)
    throw Error(os_error(path_, "cannot remove"), Error::Kind::File);
}

int64_t ResumeRecord::load() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0 && errno == ENOENT)
    return done_ = 0; // nothing written yet: start from the beginning
  const std::vector<uint8_t> text = read_file(path_); // one version of it, or an Error
  const nlohmann::json j =
      parse_json(path_, reinterpret_cast<const char *>(text.data()), text.size(), 4);
  if (j.is_discarded() || !j.is_object() || !j.contains("done"))
    throw Error(path_ + ": not a tarnn run record");
  const nlohmann::json run = nlohmann::json::parse(run_);
  // Both ways: a field only one of them has (a run's optional field, such as a temperature other
  // than 1, on one side) differs too.
  auto differs = [&](const std::string &key) {
    if (key == "done" || key == "checksum")
      return false;
    return !j.contains(key) || !run.contains(key) || j[key] != run[key];
  };
  for (const nlohmann::json *fields : {&run, &j})
    for (const auto &field : fields->items())
      if (differs(field.key()))
        throw Error({path_ + ": was written by another run (" + field.key() + " differs): ",
                     param("resume"), " needs the same model, ", param("n"), ", ", param("seed"),
                     ", ", param("temperature"), ", ", param("first"), ", ", param("shard"),
                     " and outputs"});
  // Every field as a run writes it, before anything on the disk is touched: a record edited or
  // damaged by hand ("done": -5 once truncated the partial output) is refused, not trusted.
  const int64_t n = run.contains("n") ? run["n"].get<int64_t>() : INT64_MAX;
  const auto &done = j["done"];
  if (!done.is_number_integer() || done.get<int64_t>() < 0 || done.get<int64_t>() > n)
    throw Error(path_ + ": \"done\" must be a whole number of images in [0, " + std::to_string(n) +
                "] (got " + short_text(done.dump()) +
                "): not a record a run wrote; remove it (and the partial output) to start again");
  const auto &sum = j.contains("checksum") ? j["checksum"] : nlohmann::json();
  const std::string hex = sum.is_string() ? sum.get<std::string>() : "";
  char *end = nullptr;
  const unsigned long long value = std::strtoull(hex.c_str(), &end, 16);
  if (hex.size() != 16 || *end != '\0' || hex.find_first_of("+- ") != std::string::npos)
    throw Error(path_ + ": \"checksum\" must be 16 hex digits (got " +
                short_text(j.contains("checksum") ? sum.dump() : "none") +
                "): not a record this tarnn wrote; remove it (and the partial output) to start "
                "again");
  checksum_ = value;
  return done_ = done.get<int64_t>();
}

void ResumeRecord::verify(const ImageSink &written) const {
  uint64_t h = kFnvBasis;
  constexpr int64_t kChunk = 1024; // images read back at a time: memory bounded for any run
  try {
    for (int64_t first = 0; first < done_; first += kChunk)
      h = fnv1a(h, written.read_back(first, std::min(kChunk, done_ - first)).bytes);
  } catch (const Error &e) { // a file missing or not whole
    throw Error(std::string(e.what()) + " (its record, " + path_ + ", says " +
                    std::to_string(done_) + " images were written: remove both to start again)",
                e.kind());
  }
  if (h != checksum_)
    throw Error(written.where() + ": the " + std::to_string(done_) +
                " images written before are not those its record (" + path_ +
                ") describes (changed since?): remove both to start again");
}

void ResumeRecord::add(const ImageSet &images) {
  done_ += images.count;
  checksum_ = fnv1a(checksum_, images.bytes);
  nlohmann::json j = nlohmann::json::parse(run_);
  j["done"] = done_;
  j["checksum"] = hex64(checksum_);
  write_file_atomic(path_, j.dump(2) + "\n");
}

void ResumeRecord::finish() { std::remove(path_.c_str()); }

} // namespace tarnn
