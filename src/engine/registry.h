// The backends, found by device: what each one runs (its precisions and state formats), where it
// keeps the state, and how it is made. Engine and resolve_run_options read this table and nothing
// else about a device; a new backend is a folder of its own and one row here.
#pragma once

#include <memory>
#include <vector>

#include "../model/backend.h"

namespace tarnn {

struct BackendEntry {
  Device device;
  std::vector<Precision> precisions; // what its GEMMs run
  std::vector<StateFormat> states;   // how it may store S and z
  std::vector<AttentionForm> forms;  // what the benchmark may time on it (Backend::time_steps)
  int64_t default_batch;             // --batch 0 means this; 0: as many as fit, per job
  bool host_state;                   // S and z in this machine's memory (check_memory counts it)
  // `options` are resolved; throws Error when the device cannot run the model
  std::unique_ptr<Backend> (*make)(const Model &, const RunOptions &options, const Knobs &);
};

// The entry of `d` (every Device has one; whether it is in this build, making it says).
const BackendEntry &backend_entry(Device d);

} // namespace tarnn
