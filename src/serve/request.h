// tarnn serve's JSON API (docs/SERVE.md): each request checked field by field and turned into
// rows of a rollout with their own RNG keys, before anything reaches the engine. Pure functions of
// the body and the model's size: the part of the server that takes untrusted bytes, fuzzed
// (tests/fuzz/fuzz_serve_request.cpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tarnn/config.h"

namespace tarnn::serve {

constexpr int kMaxSamples = 64;            // completions or samples per request
constexpr size_t kMaxBodyBytes = 64 << 10; // a request body: a few images in base64, no more

// A request the server refuses: the HTTP status and a one-line reason.
struct RequestError : std::runtime_error {
  RequestError(int status, const std::string &what) : std::runtime_error(what), status(status) {}
  int status;
};

enum class Kind { Complete, Sample, Score };

// Rows of a rollout. Completion k of a drawn image draws as image k of the run with `seed` (so the
// CLI's `complete --index 0 --samples K --seed S` gives the same images), sample i as image i
// (`sample -n N --seed S`); a score row is all known.
struct Job {
  Kind kind = Kind::Sample;
  int64_t rows = 0;
  uint64_t seed = 0;
  std::vector<uint8_t> given, known; // [rows, T]
  std::vector<uint64_t> images;      // [rows] RNG image index of each row (all under `seed`)
  double temperature = 1.0;          // the sampler's, as given (docs/SPEC.md section 2)
  int64_t known_bytes = 0;           // of one image (complete)
};

// The body of POST /api/complete, /api/sample or /api/score. Throws RequestError (400) naming the
// field: malformed JSON, an unknown or missing field, a wrong type, a number out of range, an
// image or mask of the wrong size, nothing left to generate.
//   complete: {"image": B64, "mask": B64 | "keep_rows": R, "samples": 1..64 (4), "seed": S (0),
//              "temperature": T (1)}; the defaults are every front end's (tarnn/jobs.h:
//              kDefaultSamples, kDefaultSeed)
//   sample:   {"n": 1..64 (16), "seed": S (0), "temperature": T (1)}
//   score:    {"image": B64}
// B64: base64 of the T bytes of an image in raster order (a mask: nonzero = known).
Job parse_request(Kind kind, const std::string &body, const Config &c);

std::string base64_encode(const uint8_t *data, size_t n);
// Throws RequestError (400) on a character outside the alphabet or a bad length or padding.
std::vector<uint8_t> base64_decode(const std::string &text, const std::string &field);

} // namespace tarnn::serve
