// Reading inputs and encoding images, shared by the image and mask readers and write_png.
#pragma once

#include <cstdint>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace tarnn {

// "PATH: WHAT: " and errno's text, for the Error of a failed system call.
std::string os_error(const std::string &path, const char *what);

// Takes the lock of one output on `fd`, an open file or folder: flock, exclusive, not waiting, held
// until fd is closed (or the process ends, however it ends). Error naming `path` when another
// open of it (another tarnn, or this one) holds it: two runs writing one output would overwrite
// each other's images, and the record one leaves would block the next resume.
void lock_output(int fd, const std::string &path);

// What changes when a file is written, replaced or truncated: its device and inode, size, and
// modification and change times. Equal stamps taken before and after a read mean the bytes read
// are one version of the file (to the filesystem's clock: Linux 6.13 on gives a file whose times
// were read a finer time at its next write; a coarser clock could miss a rewrite of the same size
// within the tick of the previous write).
struct FileStamp {
  uint64_t dev = 0, ino = 0;
  int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileStamp &o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns;
  }
};
FileStamp stamp_of(const struct stat &st);
// The open file's stamp, the same as `before`: false where it moved, or fstat fails.
bool unchanged(int fd, const FileStamp &before);

// "PATH: changed while it was read ...": the Error of a file whose stamp moved during a read.
std::string changed_while_read(const std::string &path);

// `path` opened for reading (a descriptor the caller closes) when it is a regular file; Error
// naming it otherwise (missing, a folder, a FIFO, a device), before it is opened: opening a FIFO
// waits for a writer, for ever if none comes. The file opened is checked again (fstat), so a name
// replaced in between is refused too. Every reader of a file the user names starts here.
int open_regular_file(const std::string &path);

// The whole file, read from one descriptor (open_regular_file) into memory and checked to be one
// version of it (its stamp the same after the read as before); Error naming the path and the
// reason (missing, a folder, a FIFO, unreadable, changed while it was read).
std::vector<uint8_t> read_file(const std::string &path);

// All `size` bytes to `fd` (EINTR retried); Error "PATH: cannot write: REASON" otherwise.
void write_all(int fd, const void *data, size_t size, const std::string &path);

// Before any work: the output `path` can be written as write_file_atomic will write it (its
// temporary made and removed again: the folder exists, is writable, takes such a name), or, a
// stream, opened for writing. Error naming `path` and the reason.
void check_writable(const std::string &path);

struct Png {
  int width = 0, height = 0, channels = 0; // channels as stored (1 to 4)
  std::vector<uint8_t> pixels;             // [height, width, decoded channels]
};

// The PNG's size and stored channels without decoding it; Error if it is not a PNG stb reads.
Png png_info(const std::string &path, const std::vector<uint8_t> &raw);

// Decoded to `channels` channels (0: as stored); Error for any undecodable image.
Png decode_png(const std::string &path, const std::vector<uint8_t> &raw, int channels);

// The PNG file's bytes, encoded in memory.
std::vector<uint8_t> encode_png(int width, int height, int channels, const uint8_t *data);

} // namespace tarnn
