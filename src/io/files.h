// Reading inputs and encoding images, shared by the image and mask readers and write_png.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tarnn {

// The whole file; Error naming the path and the reason (missing, a folder, unreadable).
std::vector<uint8_t> read_file(const std::string &path);

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
