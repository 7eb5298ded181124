// NumPy .npy files of uint8 images (format version 1.0: a magic, a little-endian header length,
// a Python dict literal, padding to 64 bytes, then the data in C order): read for score, written
// chunk by chunk for sample --npy (include/tarnn/io.h: NpyWriter).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "npy.h"
#include "tarnn/error.h"
#include "tarnn/io.h"

namespace tarnn {

namespace {

const char kMagic[] = "\x93NUMPY";

// The header (magic to newline) of a (n, h, w, c) uint8 array, padded to a multiple of 64.
std::string npy_header(int64_t n, int h, int w, int c) {
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(n) +
                     ", " + std::to_string(h) + ", " + std::to_string(w) + ", " +
                     std::to_string(c) + "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  return out + dict;
}

// The integers of "'shape': (a, b, ...)" in a header dict; Error unless 1 to 8 of them.
std::vector<int64_t> shape_of(const std::string &path, const std::string &dict) {
  const size_t at = dict.find("'shape':");
  const size_t open = dict.find('(', at), close = dict.find(')', open);
  if (at == std::string::npos || open == std::string::npos || close == std::string::npos)
    throw Error(path + ": .npy header has no shape");
  std::vector<int64_t> shape;
  const std::string inside = dict.substr(open + 1, close - open - 1);
  size_t i = 0;
  while (i < inside.size()) {
    while (i < inside.size() && (inside[i] == ' ' || inside[i] == ','))
      ++i;
    if (i == inside.size())
      break;
    size_t j = i;
    while (j < inside.size() && inside[j] >= '0' && inside[j] <= '9')
      ++j;
    if (j == i || j - i > 12)
      throw Error(path + ": .npy shape is not a tuple of sizes");
    shape.push_back(std::stoll(inside.substr(i, j - i)));
    i = j;
  }
  if (shape.empty() || shape.size() > 8)
    throw Error(path + ": .npy shape has " + std::to_string(shape.size()) + " dimensions");
  return shape;
}

// numpy's name of a dtype descriptor ('<f4': float32), or the descriptor where it has none.
std::string dtype_name(const std::string &descr) {
  if (descr.size() < 3 ||
      (descr[1] != 'b' && descr[1] != 'i' && descr[1] != 'u' && descr[1] != 'f' && descr[1] != 'c'))
    return descr;
  if (descr[1] == 'b')
    return "bool";
  const std::string kind = descr[1] == 'i'   ? "int"
                           : descr[1] == 'u' ? "uint"
                           : descr[1] == 'f' ? "float"
                                             : "complex";
  const std::string bytes = descr.substr(2);
  if (bytes.empty() || bytes.size() > 2 ||
      bytes.find_first_not_of("0123456789") != std::string::npos)
    return descr;
  return kind + std::to_string(8 * std::stoi(bytes));
}

// "(3, 1, 28, 28)"
std::string tuple_text(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

// A 4-d shape that is an NCHW batch: the model's (n, C, H, W) when it is known (and not also its
// NHWC), else channels (at most 4) second and a wider last axis.
bool channels_first(const std::vector<int64_t> &shape, const Config *c) {
  if (shape.size() != 4)
    return false;
  if (c)
    return shape[1] == c->channels && shape[2] == c->height && shape[3] == c->width &&
           !(shape[1] == c->height && shape[2] == c->width && shape[3] == c->channels);
  return shape[1] <= 4 && shape[3] > 4;
}

} // namespace

bool is_npy(const std::vector<uint8_t> &raw) {
  return raw.size() >= 6 && std::memcmp(raw.data(), kMagic, 6) == 0;
}

ImageSet read_npy(const std::string &path, const std::vector<uint8_t> &raw, const Config *model) {
  if (raw.size() < 10)
    throw Error(path + ": truncated .npy header");
  const int major = raw[6];
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (major < 1 || major > 3 || raw.size() < 8 + len_bytes)
    throw Error(path + ": .npy format version " + std::to_string(major) + " is not supported");
  size_t header = 0;
  for (size_t i = 0; i < len_bytes; ++i)
    header |= size_t(raw[8 + i]) << (8 * i);
  const size_t data = 8 + len_bytes + header;
  if (header > (1 << 20) || data > raw.size())
    throw Error(path + ": truncated .npy header");
  const std::string dict(raw.begin() + long(8 + len_bytes), raw.begin() + long(data));
  if (dict.find("'descr': '|u1'") == std::string::npos &&
      dict.find("'descr': '<u1'") == std::string::npos) {
    const size_t at = dict.find("'descr': '"), end = dict.find('\'', at + 10);
    const std::string descr = at == std::string::npos || end == std::string::npos
                                  ? "another type"
                                  : dict.substr(at + 10, std::min<size_t>(end - at - 10, 40));
    const std::string name = dtype_name(descr);
    throw Error(path + ": .npy holds " + name + (name != descr ? " ('" + descr + "')" : "") +
                ", not uint8 image bytes" +
                (descr.size() > 1 && descr[1] == 'f'
                     ? ": for floats in [0, 1], save (x * 255).round().astype(numpy.uint8)"
                     : ": save x.astype(numpy.uint8) if its values are bytes 0 to 255"));
  }
  if (dict.find("'fortran_order': False") == std::string::npos)
    throw Error(path + ": .npy is in Fortran order (save it in C order)");
  const std::vector<int64_t> shape = shape_of(path, dict);
  if (shape.size() != 3 && shape.size() != 4)
    throw Error(path + ": .npy holds " + std::to_string(shape.size()) +
                " dimensions, not images (n, h, w) or (n, h, w, c)");
  if (channels_first(shape, model))
    throw Error(
        path + ": .npy holds " + tuple_text(shape) + ": channels first (NCHW, PyTorch's layout); " +
        (model ? "the model wants NHWC (n, " + std::to_string(model->height) + ", " +
                     std::to_string(model->width) + ", " + std::to_string(model->channels) + ")"
               : std::string("images are NHWC (n, h, w, c)")) +
        ": save numpy.transpose(x, (0, 2, 3, 1))");
  ImageSet s;
  s.count = shape[0];
  s.height = int(std::min<int64_t>(shape[1], 1 << 20));
  s.width = int(std::min<int64_t>(shape[2], 1 << 20));
  s.channels = shape.size() == 4 ? int(std::min<int64_t>(shape[3], 1 << 20)) : 1;
  if (shape[1] > 65536 || shape[2] > 65536 || (shape.size() == 4 && shape[3] > 4))
    throw Error(path + ": .npy image dimensions out of range");
  const unsigned __int128 want =
      (unsigned __int128)uint64_t(s.count) * uint64_t(s.height) * uint64_t(s.width) * s.channels;
  const uint64_t have = raw.size() - data;
  if (want != have)
    throw Error(path + ": " + (have < want ? "truncated" : "trailing bytes") +
                ": its shape needs " + std::to_string(uint64_t(want)) +
                " bytes of images, the file holds " + std::to_string(have));
  s.bytes.assign(raw.begin() + long(data), raw.end());
  return s;
}

bool npy_is_whole(const std::string &path, int64_t n, int height, int width, int channels) {
  const std::string head = npy_header(n, height, width, channels);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      int64_t(st.st_size) != int64_t(head.size()) + n * int64_t(height) * width * channels)
    return false;
  std::string on_disk(head.size(), '\0');
  std::FILE *f = std::fopen(path.c_str(), "rb");
  const bool read = f && std::fread(on_disk.data(), 1, on_disk.size(), f) == on_disk.size();
  if (f)
    std::fclose(f);
  return read && on_disk == head;
}

std::string NpyWriter::partial() const {
  return target_.stream ? path_ : companion_path(target_.path, ".partial");
}

NpyWriter::NpyWriter(const std::string &path, int64_t n, int height, int width, int channels,
                     int64_t resume_from)
    : path_(path), target_(output_target(path)), n_(n),
      per_image_(int64_t(height) * width * channels) {
  const std::string head = npy_header(n, height, width, channels);
  header_ = head.size();
  if (target_.stream) { // written into in order, as it is: no lock, no partial, no resume
    if (resume_from > 0)
      throw Error(path + ": not a file (a device, a FIFO or a descriptor): a run writing into it "
                         "cannot be resumed",
                  Error::Kind::File);
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0)
      throw Error(os_error(path, "cannot write"), Error::Kind::File);
    write_all(fd_, head.data(), head.size(), path);
    return;
  }
  const std::string part = partial();
  struct stat st {};
  const bool exists = ::stat(part.c_str(), &st) == 0;
  if (resume_from > 0 && !exists)
    throw Error(part + ": not there to resume from", Error::Kind::File);
  // Opened without truncating and locked before anything is read or written: a second run on the
  // same output (resumed or not) is refused here, before it touches the first one's images.
  fd_ =
      ::open(part.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (resume_from > 0 ? 0 : O_CREAT), 0666);
  if (fd_ < 0)
    throw Error(os_error(part, resume_from > 0 ? "cannot open to resume" : "cannot write"),
                Error::Kind::File);
  made_ = resume_from <= 0; // its content is this writer's: truncated, or made, here
  try {
    lock_output(fd_, path_);
    start(head, resume_from, exists ? int64_t(st.st_size) : 0);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    if (!exists) // made here: nothing of it is left behind
      ::unlink(part.c_str());
    throw;
  }
}

void NpyWriter::start(const std::string &head, int64_t resume_from, int64_t size) {
  const std::string part = partial();
  const int64_t total = int64_t(header_) + n_ * per_image_;
  // the whole array's size is known: a disk it cannot fit is found now, not after the work
  check_free_space(part, uint64_t(std::max<int64_t>(total - size, 0)));
  if (resume_from > 0) {
    std::string on_disk(header_, '\0');
    if (::pread(fd_, on_disk.data(), header_, 0) != ssize_t(header_) || on_disk != head)
      throw Error(part + ": not the partial output of this run (another shape or not a .npy)");
    const int64_t have = (size - int64_t(header_)) / per_image_;
    if (have < resume_from || resume_from > n_)
      throw Error(part + ": holds " + std::to_string(have) + " images, fewer than the " +
                  std::to_string(resume_from) + " its run recorded");
    done_ = resume_from; // images past it (written, not yet recorded) are written again
    return;
  }
  if (::ftruncate(fd_, 0) != 0 || ::write(fd_, head.data(), head.size()) != ssize_t(head.size()))
    throw Error(os_error(part, "cannot write"), Error::Kind::File);
}

NpyWriter::~NpyWriter() {
  if (fd_ < 0)
    return;
  ::close(fd_);
  if (made_ && done_ == 0 && !target_.stream) // a header and no image: nothing to resume
    ::unlink(partial().c_str());
}

void NpyWriter::append(const uint8_t *bytes, int64_t count) {
  if (count < 0 || done_ + count > n_)
    throw Error(path_ + ": more images than the " + std::to_string(n_) + " of its shape");
  const size_t size = size_t(count) * size_t(per_image_);
  if (target_.stream) {
    write_all(fd_, bytes, size, path_);
    done_ += count;
    return;
  }
  off_t at = off_t(header_) + off_t(done_) * off_t(per_image_);
  for (size_t written = 0; written < size;) {
    const ssize_t w = ::pwrite(fd_, bytes + written, size - written, at);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (w == 0)
        errno = ENOSPC;
      throw Error(os_error(partial(), "cannot write"), Error::Kind::File);
    }
    written += size_t(w);
    at += w;
  }
  if (::fdatasync(fd_) != 0) // what done() counts is on the disk: a resume may trust it
    throw Error(os_error(partial(), "cannot write (sync)"), Error::Kind::File);
  done_ += count;
}

std::vector<uint8_t> NpyWriter::read(int64_t first, int64_t count) const {
  if (target_.stream)
    throw Error(path_ + ": images written into a device or a FIFO cannot be read back");
  if (first < 0 || count < 0 || first > done_ - count)
    throw Error(partial() + ": holds " + std::to_string(done_) + " images, not " +
                std::to_string(first + count));
  std::vector<uint8_t> bytes(size_t(count) * size_t(per_image_));
  const off_t at = off_t(header_) + off_t(first) * off_t(per_image_);
  for (size_t got = 0; got < bytes.size();) {
    const ssize_t r = ::pread(fd_, bytes.data() + got, bytes.size() - got, at + off_t(got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      throw Error(os_error(partial(), "cannot read back"), Error::Kind::File);
    got += size_t(r);
  }
  return bytes;
}

void NpyWriter::finish() {
  if (done_ != n_)
    throw Error(path_ + ": " + std::to_string(done_) + " of " + std::to_string(n_) +
                " images written");
  if (target_.stream) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      throw Error(os_error(path_, "cannot write (close)"), Error::Kind::File);
    return;
  }
  if (::ftruncate(fd_, off_t(header_) + off_t(n_) * off_t(per_image_)) != 0 || ::fsync(fd_) != 0)
    throw Error(os_error(partial(), "cannot write (sync)"), Error::Kind::File);
  ::close(fd_);
  fd_ = -1;
  if (::rename(partial().c_str(), target_.path.c_str()) != 0) // the file a link names: it stays
    throw Error(os_error(path_, "cannot write"), Error::Kind::File);
}

} // namespace tarnn
