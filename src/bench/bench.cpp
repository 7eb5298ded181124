// run_bench (include/tarnn/bench.h): checks, then the device's measurement.
#include <fstream>

#include "../cpu/cpu_features.h"
#include "forms.h"
#include "tarnn/error.h"

namespace tarnn {

Form form_of(const std::string &attention) {
  if (attention == "linear")
    return Form::Linear;
  if (attention == "softmax")
    return Form::Softmax;
  if (attention == "softmax-recompute")
    return Form::Recompute;
  throw Error("--attention " + attention + " is not one of linear, softmax, softmax-recompute");
}

const char *describe(Form f) {
  return f == Form::Linear    ? "linear attention in RNN mode"
         : f == Form::Softmax ? "softmax attention with a KV cache"
                              : "softmax attention recomputing the whole prefix every step";
}

double flops_at(const Config &c, Form f, int t) {
  const double D = c.d_model, A = c.d_attn(), F = c.d_ff, dh = c.d_head;
  const double heads = double(c.n_layers) * c.n_heads, n = t + 1.0;
  const double gemm = c.n_layers * 2 * (D * 3 * A + A * D + D * F + F * D);
  const double head = 2 * D * c.d_out(); // the predictor, on the newest position only
  switch (f) {
  case Form::Linear:
    return gemm + heads * (4 * dh * dh + 4 * dh) + head;
  case Form::Softmax:
    return gemm + heads * 4 * dh * n + head;
  case Form::Recompute:
    return n * gemm + heads * 4 * dh * n * (n + 1) / 2 + head;
  }
  return 0;
}

double flops_per_step(const Config &c) { return flops_at(c, Form::Linear, 0); }

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

Model bench_model(const BenchOptions &o) {
  if (!o.model.empty())
    return load_model(o.model);
  if (o.shape != "mnist" && o.shape != "cifar10")
    throw Error("--shape " + o.shape + " is not one of mnist, cifar10");
  return random_model(o.shape == "mnist" ? Config::mnist() : Config::cifar10(), 1);
}

BenchResult run_bench(const BenchOptions &o) {
  if (o.steps < 0)
    throw Error("--steps must be >= 0 (0: every position)");
  form_of(o.attention); // a bad name is an error before any work
  if (o.complete)
    return measure_complete(o);
  if (o.run.device == "cuda") {
    if (o.attention != "linear")
      throw Error("--device cuda runs linear attention; the softmax baselines run on the CPU");
    return measure_cuda(o);
  }
  return measure_cpu(o);
}

} // namespace tarnn
