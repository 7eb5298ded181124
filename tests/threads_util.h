// One Engine used from several threads at once (Python releases the GIL; a server's workers), the
// check the CPU and CUDA backends share: every thread's job gets the images and scores it gets
// alone, whatever runs beside it.
#pragma once

#include <gtest/gtest.h>
#include <string>
#include <thread>
#include <vector>

#include "tarnn/tarnn.h"

namespace tarnn_test {

// Four threads, each sampling `n` images with its own seed, then scoring one shared set.
inline void expect_threads_get_what_each_gets_alone(tarnn::Engine &engine, int64_t n,
                                                    const std::string &label) {
  std::vector<std::vector<uint8_t>> alone(4), together(4);
  for (int i = 0; i < 4; ++i)
    alone[size_t(i)] = tarnn::sample_images(engine, n, uint64_t(100 + i)).bytes;
  const tarnn::ImageSet scored = tarnn::sample_images(engine, n, 7);
  const std::vector<double> want = tarnn::score_images(engine, scored);
  std::vector<std::vector<double>> scores(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      together[size_t(i)] = tarnn::sample_images(engine, n, uint64_t(100 + i)).bytes;
      scores[size_t(i)] = tarnn::score_images(engine, scored);
    });
  for (std::thread &t : threads)
    t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(together[size_t(i)], alone[size_t(i)]) << label << " thread " << i;
    EXPECT_EQ(scores[size_t(i)], want) << label << " thread " << i;
  }
}

} // namespace tarnn_test
