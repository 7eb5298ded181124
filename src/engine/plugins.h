// Backends in shared libraries of their own (model/plugin_api.h), found and loaded by name the
// first time a job asks for their device, in ggml's manner (ggml_backend_load): libtarnn_NAME.so,
// entry point tarnn_backend_plugin.
#pragma once

#include <string>

#include "../model/plugin_api.h"

namespace tarnn {

// Whether this build made the plugin `name` (CMake's TARNN_PLUGINS).
bool plugin_built(const std::string &name);

// The plugin `name`, loaded once; Error when this build has none of that name or it cannot be
// loaded (not found, another build's, another device's), naming the field "device" (the option
// that asked for it: the command's "--device cuda").
const BackendPlugin &backend_plugin(const std::string &name);

} // namespace tarnn
