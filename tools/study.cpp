// What the accuracy studies share (tools/study.h).
#include "study.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <thread>

namespace tarnn::study {

int64_t whole_number(const std::string &key, const std::string &v) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size())
    throw Error(key + " " + v + ": not a whole number");
  return n;
}

void parse_options(int argc, char **argv, Options &o,
                   const std::function<bool(const std::string &, const std::string &)> &own) {
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 == argc)
      throw Error(k + ": no value");
    const std::string v = argv[i + 1];
    if (k == "--model")
      o.model = v;
    else if (k == "--images")
      o.images = v;
    else if (k == "--limit")
      o.limit = whole_number(k, v);
    else if (k == "--batch")
      o.batch = int(whole_number(k, v));
    else if (k == "--threads")
      o.threads = int(whole_number(k, v));
    else if (k == "--out")
      o.out = v;
    else if (!own(k, v))
      throw Error("unknown option " + k);
  }
  if (o.batch < 1)
    throw Error("--batch " + std::to_string(o.batch) + ": not a positive number");
}

Found::Found(size_t decoders, int positions)
    : worst(decoders, std::vector<double>(size_t(positions), 0.0)), sum(worst), bpd(decoders) {}

void teacher_force(const Config &c, const ImageSet &images, size_t decoders,
                   const MakeDecoder &make, int64_t first, int n, Found &found,
                   const AfterStep &after_step) {
  const int L = c.positions(), K3 = c.d_out();
  std::vector<std::unique_ptr<Decoder<CpuOps>>> dec;
  for (size_t k = 0; k < decoders; ++k)
    dec.push_back(make(k, n));
  std::vector<uint8_t> cur(static_cast<size_t>(n));
  std::vector<std::vector<float>> o(decoders, std::vector<float>(size_t(n) * K3));
  std::vector<std::vector<double>> lp(decoders, std::vector<double>(size_t(n), 0.0));
  for (int t = 0; t < L; ++t) {
    for (int r = 0; r < n; ++r)
      cur[size_t(r)] = images.image(first + r)[t];
    for (size_t k = 0; k < decoders; ++k) {
      dec[k]->step(t, cur.data(), o[k].data());
      for (int r = 0; r < n; ++r)
        lp[k][size_t(r)] +=
            mixture_log_prob(&o[k][size_t(r) * K3], c.mixtures, images.image(first + r)[t + 1]);
    }
    for (size_t k = 1; k < decoders; ++k)
      for (size_t i = 0; i < o[k].size(); ++i) {
        const double e = std::fabs(double(o[k][i]) - double(o[0][i]));
        found.worst[k][size_t(t)] = std::max(found.worst[k][size_t(t)], e);
        found.sum[k][size_t(t)] += e;
      }
    if (after_step)
      after_step(*dec[0], n);
  }
  for (size_t k = 0; k < decoders; ++k)
    for (int r = 0; r < n; ++r)
      found.bpd[k].emplace_back(first + r, -lp[k][size_t(r)] / (L * std::log(2.0)));
}

void share_out(int64_t count, int batch, int threads,
               const std::function<void(int thread, int64_t at, int n)> &job) {
  std::atomic<int64_t> next{0}, done{0};
  std::vector<std::thread> team;
  for (int i = 0; i < threads; ++i)
    team.emplace_back([&, i] {
      for (int64_t at; (at = next.fetch_add(batch)) < count;) {
        const int n = int(std::min<int64_t>(batch, count - at));
        job(i, at, n);
        std::fprintf(stderr, "%lld of %lld images\n", static_cast<long long>(done += n),
                     static_cast<long long>(count));
      }
    });
  for (std::thread &t : team)
    t.join();
}

nlohmann::json findings(const std::vector<Found> &found, size_t k, int64_t first, int64_t count,
                        int positions, const std::string &sum_name) {
  std::vector<double> worst(size_t(positions), 0.0), sum(size_t(positions), 0.0);
  std::vector<double> bpd(static_cast<size_t>(count));
  for (const Found &f : found) {
    for (size_t t = 0; t < size_t(positions); ++t) {
      worst[t] = std::max(worst[t], f.worst[k][t]);
      sum[t] += f.sum[k][t];
    }
    for (const auto &[image, b] : f.bpd[k])
      bpd[size_t(image - first)] = b;
  }
  nlohmann::json j = {{"bits_per_dim", bpd}};
  if (k > 0) {
    j["worst_param_error_at_t"] = worst;
    j[sum_name] = sum;
  }
  return j;
}

void write_json(const std::string &out, const nlohmann::json &j) {
  const std::string text = j.dump() + "\n";
  if (out == "-")
    std::fputs(text.c_str(), stdout);
  else
    write_file_atomic(out, text);
}

} // namespace tarnn::study
