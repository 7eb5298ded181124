// The backends, found by device: each one's row (model/backend.h: BackendRow), declared in its own
// folder and listed once in registry.cpp. Engine, resolve_run_options, the benchmark and every
// name, help text and refusal of a device read these rows and nothing else about a device; a new
// backend is a folder of its own and one line in registry.cpp (its place there is its Device).
#pragma once

#include <memory>
#include <vector>

#include "../model/backend.h"

namespace tarnn {

// The row of `d` (every Device has one; whether it is in this build, making it says).
const BackendRow &backend_entry(Device d);

// Every row, in the order of the help texts.
const std::vector<const BackendRow *> &backend_rows();

// "cpu", or "cpu or X": the devices whose rows run the attention form f (for messages)
std::string devices_with(AttentionForm f);

// The backend of the row, made by the library or by the row's plugin (engine/plugins.h).
std::unique_ptr<Backend> make_backend(const BackendRow &row, const Model &m, const RunOptions &o,
                                      const Knobs &k);

} // namespace tarnn
