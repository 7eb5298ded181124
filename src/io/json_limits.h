// JSON from files and requests parsed one way; bounds on it before it becomes a tree (a hostile
// header may nest a million levels, which would overflow the stack of any recursive walk), and
// messages that quote file content cut to one short line.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace tarnn {

// Throws Error "WHERE: JSON nests deeper than MAX levels" when brackets and braces (outside
// strings) nest deeper than `max_depth`.
void check_json_depth(const std::string &where, const char *text, size_t size, int max_depth);

// `text` parsed as JSON the one way every reader does (config.json, a safetensors header, a run
// record, serve's requests): its nesting checked first (check_json_depth), and no key given twice
// in one object: Error "WHERE: "KEY" is given twice" (nlohmann::json keeps the last silently; a
// file or a request that says two things is a mistake). Text that is not JSON gives a discarded
// value, for the caller's own words.
nlohmann::json parse_json(const std::string &where, const char *text, size_t size, int max_depth);

// At most 40 characters of `s`, control characters escaped, "..." when cut.
std::string short_text(const std::string &s);

// A value as short JSON: scalars as themselves (cut), arrays and objects by size.
std::string short_json(const nlohmann::json &j);

} // namespace tarnn
