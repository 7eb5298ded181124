#include "request.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "../io/json_limits.h"
#include "tarnn/error.h"
#include "tarnn/jobs.h"
#include "tarnn/run.h"

namespace tarnn::serve {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string &what) { throw RequestError(400, what); }

// The body as a JSON object, its nesting bounded before it becomes a tree.
json parse_object(const std::string &body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos)
    bad("request: the body is empty: a JSON object is expected (docs/SERVE.md)");
  json j;
  try { // its nesting bounded, and no field given twice
    j = parse_json("request", body.data(), body.size(), 8);
  } catch (const Error &e) {
    bad(e.what());
  }
  if (j.is_discarded())
    bad("request: not valid JSON");
  if (!j.is_object())
    bad("request: a JSON object is expected, not " + short_json(j));
  return j;
}

void only_fields(const json &j, std::initializer_list<const char *> allowed) {
  for (const auto &item : j.items()) {
    bool ok = false;
    for (const char *a : allowed)
      ok = ok || item.key() == a;
    if (!ok)
      bad("unknown field \"" + short_text(item.key()) + "\"");
  }
}

// A whole number in [lo, hi] (JSON integers only: 1.5, "3" and true are refused), or `fallback`.
uint64_t number(const json &j, const char *field, uint64_t lo, uint64_t hi, uint64_t fallback) {
  if (!j.contains(field))
    return fallback;
  const json &v = j[field];
  if (v.is_number_unsigned() && v.get<uint64_t>() >= lo && v.get<uint64_t>() <= hi)
    return v.get<uint64_t>();
  bad(std::string(field) + " must be a whole number in [" + std::to_string(lo) + ", " +
      std::to_string(hi) + "] (got " + short_json(v) + ")");
}

// The sampler's temperature: a JSON number, finite and above 0 as a float (tarnn/run.h:
// sampling_temperature), or 1.
double temperature(const json &j) {
  if (!j.contains("temperature"))
    return 1.0;
  const json &v = j["temperature"];
  if (!v.is_number())
    bad("temperature must be a finite number above 0 (got " + short_json(v) + ")");
  try {
    sampling_temperature(v.get<double>());
  } catch (const Error &e) {
    bad(e.what()); // the library's words name the field as the API does
  }
  return v.get<double>();
}

// The T bytes of an image (or a mask) in base64.
std::vector<uint8_t> image_field(const json &j, const char *field, const Config &c) {
  if (!j.contains(field))
    bad(std::string("missing field \"") + field + "\"");
  if (!j[field].is_string())
    bad(std::string(field) + " must be a base64 string (got " + short_json(j[field]) + ")");
  std::vector<uint8_t> bytes = base64_decode(j[field].get<std::string>(), field);
  const size_t T = size_t(c.bytes_per_image());
  if (bytes.size() != T)
    bad(std::string(field) + " holds " + std::to_string(bytes.size()) + " bytes; this model's " +
        std::to_string(c.height) + "x" + std::to_string(c.width) + "x" +
        std::to_string(c.channels) + " images are " + std::to_string(T));
  return bytes;
}

Job complete(const json &j, const Config &c) {
  only_fields(j, {"image", "mask", "keep_rows", "samples", "seed", "temperature"});
  Job job;
  job.kind = Kind::Complete;
  const std::vector<uint8_t> image = image_field(j, "image", c);
  const size_t T = image.size();
  std::vector<uint8_t> known(T, 0);
  if (j.contains("mask") && j.contains("keep_rows"))
    bad("give mask or keep_rows, not both");
  if (j.contains("mask")) {
    known = image_field(j, "mask", c);
  } else {
    const uint64_t rows = number(j, "keep_rows", 0, uint64_t(c.height), uint64_t(c.height / 2));
    std::fill_n(known.begin(), rows * uint64_t(c.width) * uint64_t(c.channels), 1);
  }
  for (size_t t = 0; t < T; ++t) {
    known[t] = known[t] != 0;
    job.known_bytes += known[t];
  }
  try {
    check_leaves_work(known.data(), T);
  } catch (const Error &e) {
    bad(e.what());
  }
  job.rows = int64_t(number(j, "samples", 1, kMaxSamples, uint64_t(kDefaultSamples)));
  job.seed = number(j, "seed", 0, UINT64_MAX, kDefaultSeed);
  job.temperature = temperature(j);
  for (int64_t k = 0; k < job.rows; ++k) {
    job.given.insert(job.given.end(), image.begin(), image.end());
    job.known.insert(job.known.end(), known.begin(), known.end());
    job.images.push_back(uint64_t(k));
  }
  return job;
}

Job sample(const json &j, const Config &c) {
  only_fields(j, {"n", "seed", "temperature"});
  Job job;
  job.kind = Kind::Sample;
  job.rows = int64_t(number(j, "n", 1, kMaxSamples, 16));
  job.seed = number(j, "seed", 0, UINT64_MAX, kDefaultSeed);
  job.temperature = temperature(j);
  job.given.assign(size_t(job.rows) * size_t(c.bytes_per_image()), 0);
  job.known = job.given; // nothing known: every byte drawn
  for (int64_t i = 0; i < job.rows; ++i)
    job.images.push_back(uint64_t(i));
  return job;
}

Job score(const json &j, const Config &c) {
  only_fields(j, {"image"});
  Job job;
  job.kind = Kind::Score;
  job.rows = 1;
  job.given = image_field(j, "image", c);
  job.known.assign(job.given.size(), 1);
  job.known_bytes = int64_t(job.given.size());
  job.images = {0};
  return job;
}

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

} // namespace

Job parse_request(Kind kind, const std::string &body, const Config &c) {
  if (body.size() > kMaxBodyBytes)
    throw RequestError(413, "request body over " + std::to_string(kMaxBodyBytes) + " bytes");
  const json j = parse_object(body);
  switch (kind) {
  case Kind::Complete:
    return complete(j, c);
  case Kind::Sample:
    return sample(j, c);
  case Kind::Score:
    return score(j, c);
  }
  bad("unknown request");
}

std::string base64_encode(const uint8_t *data, size_t n) {
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t(data[i]) << 16 | (i + 1 < n ? uint32_t(data[i + 1]) << 8 : 0) |
                       (i + 2 < n ? data[i + 2] : 0);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += i + 1 < n ? kAlphabet[v >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

std::vector<uint8_t> base64_decode(const std::string &text, const std::string &field) {
  if (text.size() % 4 != 0)
    bad(field + ": base64 of length " + std::to_string(text.size()) + ", not a multiple of 4");
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char ch = text[i + k];
      const char *at = ch ? std::strchr(kAlphabet, ch) : nullptr;
      if (ch == '=' && i + 4 == text.size() && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        v <<= 6;
      } else if (at && !pad) {
        v = v << 6 | uint32_t(at - kAlphabet);
      } else {
        bad(field + ": not base64 at character " + std::to_string(i + k));
      }
    }
    out.push_back(uint8_t(v >> 16));
    if (pad < 2)
      out.push_back(uint8_t(v >> 8));
    if (pad < 1)
      out.push_back(uint8_t(v));
  }
  return out;
}

} // namespace tarnn::serve
