// Usage errors: a command line that cannot run whatever the model and the files, found before any
// model is loaded. Every command's flag checks throw UsageError; main prints it as it prints
// CLI11's own parse errors, "tarnn: usage error: ... (see tarnn CMD --help)", and exits 2 (other
// errors: "tarnn: error: ...", exit 1). A mistyped command or flag gets the closest known name.
#pragma once

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tarnn/error.h"

namespace tarnn::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The library's words in the command's: each field as its flag, with its value ("n" is -n,
// "batch" --batch, "keep_rows" --keep-rows, "device tpu" --device tpu).
std::string flag_of(const Message::Field &field);
inline std::string in_flags(const Error &e) { return e.said(flag_of); }
inline std::string in_flags(const Message &m) { return m.said(flag_of); }

// Runs `check`, turning the library's Error about a value (Kind::Invalid: a flag's value it
// refused) into a UsageError; errors about files and the machine stay what they are.
template <class F> auto as_usage(F &&check) -> decltype(check()) {
  try {
    return check();
  } catch (const Error &e) {
    if (e.kind() != Error::Kind::Invalid)
      throw;
    throw UsageError(in_flags(e));
  }
}

// Throws UsageError "FLAG PATH: must end in EXT (any case)HINT" unless has_extension(path, ext)
// (the library's one rule, which write_png applies too):
// an output whose name says another format than the one written.
void require_extension(const std::string &flag, const std::string &path, const std::string &ext,
                       const std::string &hint = "");

// The known name nearest `typed` by edit distance (a swap of neighbours counts one), or "" when
// none is near enough to be what was meant.
std::string closest(const std::string &typed, const std::vector<std::string> &known);

// What to say of a command line CLI11 refused (`what`, its message): a mistyped command or flag,
// with the closest known name ("unknown flag --modle (did you mean --model?)"), else `what`.
std::string explain_parse_error(const CLI::App &app, int argc, char **argv,
                                const std::string &what);

// Prints "tarnn: usage error: MESSAGE (see tarnn CMD --help)" on stderr; returns 2, the exit
// status of every usage error.
int report_usage_error(const std::string &message, const CLI::App &app, int argc, char **argv);

} // namespace tarnn::cli
