// include/tarnn/numerics.h: one row per value of each enum, the only place their names are spelled.
#include "tarnn/numerics.h"

#include "tarnn/error.h"

namespace tarnn {

namespace {

template <class E> struct Row {
  E value;
  const char *name;
  const char *listed; // as the error for an unknown name lists it
  const char *what;   // for help texts
};

constexpr Row<Device> kDevices[] = {{Device::Cpu, "cpu", "cpu", ""},
                                    {Device::Cuda, "cuda", "cuda", ""}};
constexpr Row<Precision> kPrecisions[] = {
    {Precision::Fp32, "fp32", "fp32", "exact reference"},
    {Precision::Bf16, "bf16", "bf16", "bfloat16 inputs, fp32 sums; the state stays fp32"},
    {Precision::Tf32, "tf32", "or tf32 on cuda", "cuda"}};
constexpr Row<StateFormat> kStates[] = {{StateFormat::Fp32, "fp32", "fp32", "the exact reference"}};

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
  std::string s;
  for (size_t i = 0; i < N; ++i)
    s += std::string(i == 0       ? ""
                     : i + 1 == N ? " or "
                                  : ", ") +
         rows[i].name + " (" + rows[i].what + ")";
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
    s += (s.empty() ? "" : ", ") + std::string(r.listed);
  return s;
}

} // namespace

const char *name(Device d) { return name_in(kDevices, d); }
const char *name(Precision p) { return name_in(kPrecisions, p); }
const char *name(StateFormat s) { return name_in(kStates, s); }

const char *describe(Precision p) { return what_in(kPrecisions, p); }
const char *describe(StateFormat s) { return what_in(kStates, s); }
std::string precision_help() { return help_of(kPrecisions); }
std::string state_format_help() { return help_of(kStates); }

std::vector<Device> all_devices() { return values_in(kDevices); }
std::vector<Precision> all_precisions() { return values_in(kPrecisions); }
std::vector<StateFormat> all_state_formats() { return values_in(kStates); }

Device parse_device(const std::string &s) {
  if (const auto *r = find_in(kDevices, s))
    return r->value;
#ifdef TARNN_HAVE_CUDA
  const std::string built = "cpu, cuda";
#else
  const std::string built = "cpu";
#endif
  throw Error("--device " + s + " is not available in this build (" + built + ")");
}

Precision parse_precision(const std::string &s) {
  if (const auto *r = find_in(kPrecisions, s))
    return r->value;
  throw Error("--precision " + s + ": not a precision (" + listed(kPrecisions) + ")");
}

StateFormat parse_state_format(const std::string &s) {
  if (const auto *r = find_in(kStates, s))
    return r->value;
  throw Error("--state " + s + ": not a state format (" + listed(kStates) + ")");
}

int state_element_bytes(StateFormat s) {
  switch (s) {
  case StateFormat::Fp32:
    return 4;
  }
  throw Error("a state format without a size");
}

int64_t state_bytes_per_image(const Config &c, StateFormat s) {
  return c.state_elements_per_image() * state_element_bytes(s);
}

} // namespace tarnn
