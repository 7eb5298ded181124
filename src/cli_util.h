// Small pieces the subcommands share: the progress bar, JSON output, the model and the threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model.h"

namespace tarnn {

// A progress bar with images/s on stderr, drawn only when stderr is a terminal.
std::function<void(int64_t, int64_t)> progress_bar(int positions_per_image);

int default_threads();

// Writes text to path atomically.
void write_text_file(const std::string &path, const std::string &text);

} // namespace tarnn
