#include "json_limits.h"

#include <cstdio>

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

std::string short_text(const std::string &s) {
  constexpr size_t kMax = 40;
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += char(c);
    }
  }
  return out.size() < s.size() ? out + "..." : out;
}

std::string short_json(const nlohmann::json &j) {
  if (j.is_array())
    return "an array of " + std::to_string(j.size());
  if (j.is_object())
    return "an object of " + std::to_string(j.size()) + " keys";
  return short_text(j.dump());
}

} // namespace tarnn
