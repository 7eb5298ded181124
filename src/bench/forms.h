// What the benchmark's three forms of the same weights cost (the paper's Tables 1 and 2 and
// Figure 1), shared by the measurements and the report.
#pragma once

#include <string>

#include "../model/backend.h"
#include "tarnn/bench.h"

namespace tarnn {

// "linear", "softmax", "softmax-recompute"
AttentionForm form_of(const std::string &attention);
const char *attention_name(AttentionForm f); // form_of's inverse
const char *describe(AttentionForm f);       // "linear attention in RNN mode", ...

// FLOPs (2 x multiply-adds) of one image at position t. The GEMMs are the same in every form;
// attention costs 4 d_head^2 per head in RNN mode (update S and read it), 4 d_head (t + 1) over
// a KV cache (scores and weighted sum), and recomputing runs all t + 1 positions of the prefix.
double flops_at(const Config &c, AttentionForm f, int t);

// The model the benchmark runs: a folder, or the paper's shape with random weights (seed 1).
Model bench_model(const BenchOptions &o);

BenchResult measure_complete(const BenchOptions &o);

// The 1-minute load average now, -1 if unknown.
double load_average();

} // namespace tarnn
