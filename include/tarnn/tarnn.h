// tarnn: autoregressive linear transformers run as RNNs ("Transformers are RNNs", Katharopoulos
// et al., ICML 2020). The whole public API; docs/ARCHITECTURE.md draws what is behind it.
//
//   tarnn::Engine engine(tarnn::load_model("models/mnist"), tarnn::RunOptions{});
//   tarnn::ImageSet digits = tarnn::sample_images(engine, 64, /*seed=*/1);
//   tarnn::write_png("grid.png", ...);  // or make_grid(digits, 8)
#pragma once

#include "bench.h"
#include "config.h"
#include "error.h"
#include "io.h"
#include "jobs.h"
#include "model.h"
#include "numerics.h"
#include "outputs.h"
#include "progress.h"
#include "run.h"
#include "version.h"
