#include "plan.h"

#include <algorithm>
#include <cstdio>

#include "../model/batch.h"
#include "tarnn/error.h"
#include "tarnn/run.h"

namespace tarnn {

namespace {

std::string gb(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GB", bytes / 1e9);
  return s;
}

} // namespace

int64_t cuda_bytes_per_image(const Config &c, StateFormat state) {
  const int64_t floats = 2 * c.d_model + 4 * c.d_attn() + c.d_ff + c.d_out();
  return floats * 4 + state_bytes_per_image(c, state) + 1 + 3 * int64_t(c.bytes_per_image()) + 8;
}

int64_t cuda_memory_reserve(int64_t free_bytes) {
  return free_bytes / 20 + (int64_t(256) << 20); // 5% and 256 MB
}

int plan_batch(const Config &c, int64_t requested, int64_t count, int64_t free_bytes,
               const std::string &device, StateFormat state) {
  if (requested < 0 || requested > kMaxBatch)
    throw Error({param("batch"), " must be in [1, " + std::to_string(kMaxBatch) +
                                     "] (0 or none: as many as fit in GPU memory) (got " +
                                     std::to_string(requested) + ")"});
  const int64_t budget = free_bytes - cuda_memory_reserve(free_bytes);
  auto fits = [&](int64_t rows) { return int64_t(batch_layout(c, rows, state).total) <= budget; };
  const int64_t want = std::max<int64_t>(1, count);
  if (requested > 0) {
    const int64_t rows = std::min(requested, want);
    if (!fits(rows))
      throw Error({param("batch", std::to_string(rows)),
                   " needs " + gb(double(batch_layout(c, rows, state).total)) + " of GPU memory (" +
                       std::to_string(state_bytes_per_image(c, state)) +
                       " bytes of state per image), but " + device + " has " +
                       gb(double(free_bytes)) + " free and " +
                       gb(double(cuda_memory_reserve(free_bytes))) + " of it is kept spare; omit ",
                   param("batch"), " to take what fits"});
    return int(rows);
  }
  // As many as fit: the layout is affine in rows up to alignment, so estimate, then step down.
  const int64_t per = cuda_bytes_per_image(c, state);
  int64_t rows = budget > 0 ? budget / per : 0;
  rows = std::min({rows, want, kMaxAutoBatch});
  while (rows > 0 && !fits(rows))
    --rows;
  if (rows < 1)
    throw Error("not even one image fits in GPU memory: " + device + " has " +
                gb(double(free_bytes)) + " free and one image needs " +
                gb(double(batch_layout(c, 1, state).total)) + " besides " +
                gb(double(cuda_memory_reserve(free_bytes))) + " kept spare");
  return int(rows);
}

} // namespace tarnn
