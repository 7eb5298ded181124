// What the accuracy studies (tools/state_study.cpp, tools/int8_study.cpp) share: their common
// options, CPU decoders teacher-forced side by side through the same images one position at a
// time, the threads that share the images out, the merge of what each thread found, and the JSON
// they write. Decoder 0 is the reference (fp32) the others' mixture parameters are measured
// against.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "../src/cpu/cpu_ops.h"
#include "../src/model/decoder.h"
#include "tarnn/tarnn.h"

namespace tarnn::study {

// The options every study takes (--model, --images, --limit, --batch, --threads, --out), with
// the study's defaults for --limit and --batch.
struct Options {
  std::string model, images, out = "-";
  int64_t limit;
  int batch, threads = 2;
  Options(int64_t limit, int batch) : limit(limit), batch(batch) {}
};

// Reads argv's "--key value" pairs: the common ones into o, any other through own(key, value),
// which returns false for a key it does not know. Error on an unknown key or one without a value.
void parse_options(int argc, char **argv, Options &o,
                   const std::function<bool(const std::string &, const std::string &)> &own);
// v as a whole number; Error naming key when it is not one.
int64_t whole_number(const std::string &key, const std::string &v);

// What one thread finds over its batches, per decoder.
struct Found {
  std::vector<std::vector<double>> worst, sum;              // [decoder][t] |o_t - o_t(reference)|
  std::vector<std::vector<std::pair<int64_t, double>>> bpd; // [decoder] (image, bits/dim)
  Found(size_t decoders, int positions);
};

using MakeDecoder = std::function<std::unique_ptr<Decoder<CpuOps>>(size_t decoder, int rows)>;
// Called after each position with the reference decoder (state_study reads its state there).
using AfterStep = std::function<void(const Decoder<CpuOps> &reference, int rows)>;

// Teacher-forces images first..first+n-1 through `decoders` decoders made by make, one position
// at a time, adding to found each one's errors against decoder 0 and each image's bits/dim.
void teacher_force(const Config &c, const ImageSet &images, size_t decoders,
                   const MakeDecoder &make, int64_t first, int n, Found &found,
                   const AfterStep &after_step = {});

// Shares images 0..count-1 out to `threads` threads, `batch` at a time: job(thread, at, n) for
// each batch, and a line on stderr as each is done ("N of COUNT images").
void share_out(int64_t count, int batch, int threads,
               const std::function<void(int thread, int64_t at, int n)> &job);

// Decoder k's findings over every thread, as JSON: "bits_per_dim" (images first..first+count-1)
// and, but for the reference, "worst_param_error_at_t" (the largest error per position) and, named
// sum_name, the errors per position summed in the threads' order.
nlohmann::json findings(const std::vector<Found> &found, size_t k, int64_t first, int64_t count,
                        int positions, const std::string &sum_name);

// j's text and a newline: on stdout for "-", else to the file (written atomically).
void write_json(const std::string &out, const nlohmann::json &j);

} // namespace tarnn::study
