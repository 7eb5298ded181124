// include/tarnn/numerics.h: one row per value of each enum, the only place their names are spelled.
#include "tarnn/numerics.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "../../kernels/state_format.h"
#include "tarnn/error.h"

namespace tarnn {

namespace {

template <class E> struct Row {
  E value;
  const char *name;
  const char *listed;            // as the error for an unknown name lists it
  const char *what;              // for help texts
  const char *refused = nullptr; // why the engine does not offer it, though its kernels exist
  int max_positions = 0;         // state formats: the longest image the study accepts (0: any)
};

constexpr Row<Precision> kPrecisions[] = {
    {Precision::Fp32, "fp32", "fp32", "exact reference"},
    {Precision::Bf16, "bf16", "bf16",
     "weights, biases and GEMM inputs rounded to bfloat16, fp32 sums"},
    {Precision::Int8, "int8", "int8",
     "int8 weights and inputs scaled per row, int32 sums; the head in fp32"},
    {Precision::Tf32, "tf32", "or tf32 on cuda", "TF32 tensor cores; cuda"}};
// bf16's kernels run (the study of docs/STATE.md measures it), but the engine refuses it: with 8
// bits of mantissa a running sum loses the increments of later positions.
constexpr Row<StateFormat> kStates[] = {
    {StateFormat::Fp32, "fp32", "fp32", "the exact reference"},
    {StateFormat::Fp16, "fp16", "fp16", "S in half precision, z fp32: half the bytes", nullptr,
     3071},
    {StateFormat::Bf16, "bf16", "", "S in bfloat16, z fp32",
     "S in bfloat16 moves the shipped model by +0.0049 bits/dim over the 10,000 test digits (the "
     "bar is 0.002; fp16 moves it by 0.0000007): docs/STATE.md"}};

template <class E, size_t N> const char *name_in(const Row<E> (&rows)[N], E value) {
  for (const Row<E> &r : rows)
    if (r.value == value)
      return r.name;
  throw Error("an enum value without a name"); // a row missing above: a bug, said plainly
}

template <class E, size_t N> const char *what_in(const Row<E> (&rows)[N], E value) {
  for (const Row<E> &r : rows)
    if (r.value == value)
      return r.what;
  throw Error("an enum value without a name");
}

template <class E, size_t N> std::string help_of(const Row<E> (&rows)[N]) {
  std::vector<const Row<E> *> offered;
  for (const Row<E> &r : rows)
    if (!r.refused)
      offered.push_back(&r);
  std::string s;
  for (size_t i = 0; i < offered.size(); ++i)
    s += std::string(i == 0                    ? ""
                     : i + 1 == offered.size() ? " or "
                                               : ", ") +
         offered[i]->name + " (" + offered[i]->what + ")";
  return s;
}

template <class E, size_t N> std::vector<E> values_in(const Row<E> (&rows)[N]) {
  std::vector<E> v;
  for (const Row<E> &r : rows)
    v.push_back(r.value);
  return v;
}

template <class E, size_t N> const Row<E> *find_in(const Row<E> (&rows)[N], const std::string &s) {
  for (const Row<E> &r : rows)
    if (s == r.name)
      return &r;
  return nullptr;
}

template <class E, size_t N> std::string listed(const Row<E> (&rows)[N]) {
  std::string s;
  for (const Row<E> &r : rows)
    if (!r.refused)
      s += (s.empty() ? "" : ", ") + std::string(r.listed);
  return s;
}

} // namespace

const char *name(Precision p) { return name_in(kPrecisions, p); }
const char *name(StateFormat s) { return name_in(kStates, s); }

Precision head_precision(Precision p) {
  switch (p) {
  case Precision::Int8:
    return Precision::Fp32;
  case Precision::Fp32:
  case Precision::Bf16:
  case Precision::Tf32:
    break;
  }
  return p;
}

const char *describe(Precision p) { return what_in(kPrecisions, p); }
const char *describe(StateFormat s) { return what_in(kStates, s); }
std::string precision_help() { return help_of(kPrecisions); }
std::string state_format_help() { return help_of(kStates); }
int state_max_positions(StateFormat s) {
  for (const Row<StateFormat> &r : kStates)
    if (r.value == s)
      return r.max_positions;
  return 0;
}

const char *refusal(StateFormat s) {
  for (const Row<StateFormat> &r : kStates)
    if (r.value == s)
      return r.refused;
  return nullptr;
}

std::vector<Precision> all_precisions() { return values_in(kPrecisions); }
std::vector<StateFormat> all_state_formats() { return values_in(kStates); }

Precision parse_precision(const std::string &s) {
  if (const auto *r = find_in(kPrecisions, s))
    return r->value;
  throw Error({param("precision", s), ": not a precision (" + listed(kPrecisions) + ")"});
}

StateFormat parse_state_format(const std::string &s) {
  if (const auto *r = find_in(kStates, s)) {
    if (r->refused)
      throw Error({param("state", s), std::string(": refused: ") + r->refused});
    return r->value;
  }
  throw Error({param("state", s), ": not a state format (" + listed(kStates) + ")"});
}

int state_chunk() {
  const char *v = std::getenv("TARNN_STATE_CHUNK");
  if (!v || !*v)
    return 1;
  const std::string s = v;
  if (s.size() <= 2 &&
      std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    if (const int c = std::stoi(s); c >= 1 && c <= kMaxStateChunk)
      return c;
  throw Error("TARNN_STATE_CHUNK=" + s + ": not a chunk length (1 to " +
              std::to_string(kMaxStateChunk) +
              " positions; unset: 1, the state written at every position)");
}

int64_t state_bytes_per_image(const Config &c, StateFormat s) {
  return int64_t(c.n_layers) * c.n_heads *
         int64_t(state_block_bytes(c.features(), c.d_head, s, state_chunk()));
}

bool keeps_kv_cache(const Config &c) {
  switch (c.attention) {
  case Attention::Linear:
    return false;
  case Attention::Softmax:
    return true;
  }
  return false;
}

int64_t kv_cache_bytes_per_image(const Config &c) {
  return 2 * int64_t(c.positions()) * c.n_layers * c.d_attn() * 4;
}

int64_t memory_bytes_per_image(const Config &c, StateFormat s) {
  return keeps_kv_cache(c) ? kv_cache_bytes_per_image(c) : state_bytes_per_image(c, s);
}

} // namespace tarnn
