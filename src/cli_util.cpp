#include "cli_util.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "error.h"

namespace tarnn {

std::function<void(int64_t, int64_t)> progress_bar(int positions_per_image) {
  if (!isatty(STDERR_FILENO))
    return nullptr;
  const auto start = std::chrono::steady_clock::now();
  return [start, positions_per_image](int64_t done, int64_t total) {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double frac = total ? double(done) / double(total) : 1.0;
    const double rate = secs > 0 ? double(done) / positions_per_image / secs : 0.0;
    const int width = 30, fill = int(frac * width);
    std::fprintf(stderr, "\r[%.*s%*s] %3d%%  %.2f images/s  %.0fs ", fill,
                 "==============================", width - fill, "", int(frac * 100), rate, secs);
    if (done >= total)
      std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

int default_threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }

void write_text_file(const std::string &path, const std::string &text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out.flush()) {
      std::remove(tmp.c_str());
      throw Error(path + ": cannot write");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write: " + std::strerror(errno));
  }
}

} // namespace tarnn
