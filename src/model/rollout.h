// The rollout (include/tarnn/run.h: Rollout), written once over the same `Ops` as forward.h plus
// the batch's memory traffic:
//
//   ops.upload(dst, src, n), ops.download(dst, src, n), ops.download_columns(...), ops.zero(p, n)
//   ops.steps(rows, count)   `count` whole steps (forward.h: step) of `rows` rows
//   ops.sync()               wait for what was issued
//
// The job runs in chunks of ops.buffers().rows images: per chunk the given bytes and the mask go
// in once and the images and log-likelihoods come out once; between, only ops.steps runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "../../kernels/state_format.h"
#include "../base/util.h"
#include "batch.h"
#include "prefill.h"
#include "tarnn/run.h"

namespace tarnn {

// Positions this rollout has done so far (over all its images), after every `report_every`
// steps; it may throw to stop the rollout.
using DoneHook = std::function<void(int64_t done)>;

inline int rollout_steps(const Config &c, const Rollout &job) {
  const int L = c.positions();
  return job.positions < 0 ? L : std::min(job.positions, L);
}

// A backend without a parallel prefill passes no Pre: every position is a step.
struct NoPrefill {};

// Ops whose buffers are in host memory (HostOps: kHostMemory), whose state can be read in place.
template <class Ops, class = void> struct HostMemory : std::false_type {};
template <class Ops>
struct HostMemory<Ops, std::void_t<decltype(Ops::kHostMemory)>> : std::true_type {};

// The largest |S| a chunk's n images hold after position steps - 1, where the ops can read their
// state in place (host memory) and it is stored in fp16 with that position's exponent; else 0.
template <class Ops> float largest_fp16_state(Ops &ops, const Config &c, int n, int steps) {
  if constexpr (HostMemory<Ops>::value) {
    const StepBuffers &b = ops.buffers();
    if (b.state_format == StateFormat::Fp16 && steps > 0)
      return largest_state(
          b.state, size_t(n) * c.n_layers * c.n_heads, c.features(), c.d_head, b.state_format,
          stored_scale_exponent(b.state_format, steps - 1, b.state_chunk), b.state_chunk);
  }
  return 0.0f;
}

// A chunk's start: n images from image0, their state and log-likelihoods zeroed, their given
// bytes and mask uploaded, p_0 of each in `p0` and uploaded (given, or 0: the black corner), and
// each image's RNG key where the job gives them. The chunk's StepParams, keys set.
template <class Ops>
StepParams start_chunk(Ops &ops, const Rollout &job, int64_t image0, int n, int T,
                       std::vector<uint8_t> &p0, std::vector<DrawKey> &keys) {
  const StepBuffers &b = ops.buffers();
  const size_t first = size_t(image0) * T, bytes = size_t(n) * T;
  ops.zero(b.state, size_t(n) * b.state_row_bytes);
  ops.zero(b.log_prob, size_t(n) * 8);
  StepParams p;
  p.has_given = job.given != nullptr;
  p.has_known = job.given && job.known;
  p.seed = job.seed;
  p.temperature = job.temperature;
  p.image_base = uint64_t(job.first_index + image0);
  if (p.has_given)
    ops.upload(b.given, job.given + first, bytes);
  if (p.has_known)
    ops.upload(b.known, job.known + first, bytes);
  for (int r = 0; r < n; ++r) {
    const size_t at = first + size_t(r) * T;
    p0[r] = p.has_given && (!p.has_known || job.known[at]) ? job.given[at] : 0;
  }
  ops.upload(b.cur, p0.data(), size_t(n));
  p.keys = nullptr;
  if (job.seeds) {
    for (int r = 0; r < n; ++r)
      keys[size_t(r)] = draw_key(job, image0 + r);
    ops.upload(b.keys, keys.data(), size_t(n) * sizeof(DrawKey));
    p.keys = b.keys;
  }
  return p;
}

// Runs the job; returns the largest |S| an fp16 state held at the end of an image's rollout, where
// the ops can read it in place (0 otherwise): the Engine warns when it is beyond the magnitudes
// the fp16 state was measured for (docs/STATE.md). Over 60 lines: a chunk's prefill, its steps and
// its reports share the position t, the columns shown so far and the two closures over them
// (show, report), and the order in which a chunk uploads, prefills, steps, syncs and reports
// (what the hook, job.stepped and job.grown see) reads top to bottom in one place; its setup is
// start_chunk's.
template <class Ops, class Pre = NoPrefill>
float rollout(Ops &ops, const Config &c, const Rollout &job, const DoneHook &hook, int report_every,
              Pre *pre = nullptr) {
  float largest = 0.0f;
  const StepBuffers &b = ops.buffers();
  const int T = c.bytes_per_image(), steps = rollout_steps(c, job);
  if (job.log_prob)
    std::fill(job.log_prob, job.log_prob + job.count, 0.0);
  std::vector<uint8_t> p0(size_t(b.rows));
  std::vector<DrawKey> keys(job.seeds ? size_t(b.rows) : 0);
  for (int64_t image0 = 0; image0 < job.count; image0 += b.rows) {
    const int n = int(std::min<int64_t>(b.rows, job.count - image0));
    const size_t first = size_t(image0) * T;
    StepParams p = start_chunk(ops, job, image0, n, T, p0, keys);
    int t = 0, shown = 0; // positions done; columns 1..shown of job.out written
    // Columns shown+1 .. t of the chunk's images into job.out (column 0 too, the first time)
    auto show = [&] {
      if (t > shown)
        ops.download_columns(job.out + first + shown + 1, size_t(T), b.out + shown + 1, size_t(T),
                             size_t(t - shown), size_t(n));
      if (shown == 0)
        for (int r = 0; r < n; ++r)
          job.out[first + size_t(r) * T] = p0[r];
      shown = t;
    };
    auto report = [&] {
      if (job.grown) {
        show();
        job.grown(image0, n, t);
      }
      if (hook)
        hook(image0 * steps + int64_t(t) * n);
    };
    if constexpr (!std::is_same_v<Pre, NoPrefill>) // positions 0 .. P-1 at once (prefill.h)
      if (pre) {
        const auto t0 = std::chrono::steady_clock::now();
        t = prefill(ops, *pre, c, job, image0, n, p0.data(), p, steps, [&](int64_t positions) {
          if (hook) // a stop is taken after each image's prefill, not after the chunk's
            hook(image0 * steps + positions);
        });
        if (t > 0 && job.stepped) { // the prefill's positions at once: one report, at its last
          ops.sync();
          job.stepped(t - 1, seconds_since(t0));
        }
        if (t > 0)
          report();
      }
    ops.upload(b.params, &p, sizeof p);
    while (t < steps) {
      const int k = job.stepped         ? 1
                    : hook || job.grown ? std::min(report_every, steps - t)
                                        : steps - t;
      const auto t0 = std::chrono::steady_clock::now();
      ops.steps(n, k);
      if (job.stepped) {
        ops.sync();
        job.stepped(t, seconds_since(t0));
      }
      t += k;
      if (hook || job.grown) {
        ops.sync();
        report();
      }
    }
    ops.sync();
    show(); // columns 1..steps: what the steps wrote; the rest of job.out is left alone
    if (job.log_prob)
      ops.download(job.log_prob + image0, b.log_prob, size_t(n) * 8);
    largest = std::max(largest, largest_fp16_state(ops, c, n, steps));
  }
  return largest;
}

} // namespace tarnn
