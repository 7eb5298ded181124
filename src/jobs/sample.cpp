// sample_images and score_images (include/tarnn/jobs.h): one rollout each.
#include <cmath>

#include "tarnn/error.h"
#include "tarnn/jobs.h"

namespace tarnn {

ImageSet sample_images(Engine &engine, int64_t n, uint64_t seed, int64_t first,
                       const Progress &progress, int64_t batch, float temperature) {
  if (n < 1 || n > kMaxSampleImages)
    throw Error({param("n"), " must be in [1, " + std::to_string(kMaxSampleImages) + "] (got " +
                                 std::to_string(n) + ")"});
  if (first < 0 || first > INT64_MAX - n)
    throw Error({param("first"), " must be in [0, " + std::to_string(INT64_MAX - n) + "] for ",
                 param("n", std::to_string(n)), " (got " + std::to_string(first) + ")"});
  const Config &c = engine.config();
  check_memory(double(n) * c.bytes_per_image() + engine.host_state_bytes(n),
               "sampling " + std::to_string(n) + " images (the images and the state)");
  ImageSet images{n, c.height, c.width, c.channels, {}};
  images.bytes.resize(size_t(n) * images.bytes_per_image());
  Rollout job;
  job.count = n;
  job.seed = seed;
  job.first_index = first;
  job.out = images.bytes.data();
  job.batch = batch;
  job.temperature = temperature;
  engine.run(job, progress);
  return images;
}

std::vector<double> score_images(Engine &engine, const ImageSet &images, const Progress &progress) {
  const Config &c = engine.config();
  if (images.height != c.height || images.width != c.width || images.channels != c.channels)
    throw Error("the images are not the model's size");
  check_memory(double(images.count) * c.bytes_per_image() + engine.host_state_bytes(images.count),
               "scoring " + std::to_string(images.count) + " images (a copy and the state)");
  std::vector<double> log_prob(size_t(images.count));
  std::vector<uint8_t> out(images.bytes.size());
  Rollout job;
  job.count = images.count;
  job.given = images.bytes.data();
  job.out = out.data();
  job.log_prob = log_prob.data();
  engine.run(job, progress);
  std::vector<double> bpd(log_prob.size());
  for (size_t i = 0; i < bpd.size(); ++i) // finite and >= 0: Engine::run refuses anything else
    bpd[i] = bits_per_dim(log_prob[i], c);
  return bpd;
}

double bits_per_dim(double log_prob, const Config &c) {
  return -log_prob / (c.positions() * std::log(2.0));
}

} // namespace tarnn
