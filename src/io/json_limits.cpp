#include "json_limits.h"

#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

#include "tarnn/error.h"

namespace tarnn {

void check_json_depth(const std::string &where, const char *text, size_t size, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < size; ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw Error(where + ": JSON nests deeper than " + std::to_string(max_depth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

nlohmann::json parse_json(const std::string &where, const char *text, size_t size, int max_depth) {
  check_json_depth(where, text, size, max_depth);
  using json = nlohmann::json;
  std::vector<std::set<std::string>> keys; // of each object open now, innermost last
  std::string twice;
  const json::parser_callback_t note = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end)
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second && twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  json j = json::parse(text, text + size, note, /*allow_exceptions=*/false);
  if (!twice.empty() && !j.is_discarded())
    throw Error(where + ": \"" + short_text(twice) + "\" is given twice");
  return j;
}

std::string short_text(const std::string &s) {
  constexpr size_t kMax = 40;
  std::string out;
  size_t i = 0;
  // Cut between characters only: half of one is not UTF-8, and JSON (serve's answers) and Python
  // (an exception's text) refuse the whole message for it.
  for (; i < s.size() && (out.size() < kMax || (uint8_t(s[i]) & 0xc0) == 0x80); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += char(c);
    }
  }
  return i < s.size() ? out + "..." : out;
}

std::string short_json(const nlohmann::json &j) {
  if (j.is_array())
    return "an array of " + std::to_string(j.size());
  if (j.is_object())
    return "an object of " + std::to_string(j.size()) + " keys";
  return short_text(j.dump());
}

} // namespace tarnn
