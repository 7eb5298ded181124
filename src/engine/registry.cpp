#include "registry.h"

#include <algorithm>

#include "../cpu/cpu_backend.h"
#include "../cuda/row.h"
#include "plugins.h"
#include "tarnn/error.h"

namespace tarnn {

// Every backend, one line each: Device(i) is row i (Device::Cpu and Device::Cuda name the first
// two, numerics.h).
const std::vector<const BackendRow *> &backend_rows() {
  static const std::vector<const BackendRow *> rows = {&cpu_row(), &cuda_row()};
  return rows;
}

const BackendRow &backend_entry(Device d) {
  const std::vector<const BackendRow *> &rows = backend_rows();
  if (int(d) < 0 || size_t(d) >= rows.size())
    throw Error("a device without a row in the registry"); // a bug, said plainly
  return *rows[size_t(d)];
}

std::unique_ptr<Backend> make_backend(const BackendRow &row, const Model &m, const RunOptions &o,
                                      const Knobs &k) {
  if (row.make)
    return row.make(m, o, k);
  return backend_plugin(row.name).make_backend(m, o, k);
}

namespace {

bool built(const BackendRow &r) { return r.make || plugin_built(r.name); }

} // namespace

std::string devices_with(AttentionForm f) {
  std::string s;
  for (const BackendRow *r : backend_rows())
    if (std::find(r->forms.begin(), r->forms.end(), f) != r->forms.end())
      s += (s.empty() ? "" : " or ") + std::string(r->name);
  return s;
}

// The public face of the rows (include/tarnn/numerics.h, run.h)

const char *name(Device d) { return backend_entry(d).name; }

std::vector<Device> all_devices() {
  std::vector<Device> v;
  for (size_t i = 0; i < backend_rows().size(); ++i)
    v.push_back(Device(i));
  return v;
}

// Every row's name (making a backend not in this build says so), listing those built.
Device parse_device(const std::string &s) {
  std::string listed;
  const std::vector<const BackendRow *> &rows = backend_rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    const BackendRow *r = rows[i];
    if (s == r->name)
      return Device(i);
    if (built(*r))
      listed += (listed.empty() ? "" : ", ") + std::string(r->name);
  }
  throw Error({param("device", s), " is not available in this build (" + listed + ")"});
}

std::string device_help() {
  std::string s;
  const std::vector<const BackendRow *> &rows = backend_rows();
  for (size_t i = 0; i < rows.size(); ++i)
    s += std::string(i == 0                 ? ""
                     : i + 1 == rows.size() ? " or "
                                            : ", ") +
         rows[i]->name + " (" + rows[i]->what + (built(*rows[i]) ? "" : "; not in this build") +
         ")";
  return s;
}

std::string batch_help() {
  std::string s;
  const std::vector<const BackendRow *> &rows = backend_rows();
  for (size_t i = 0; i < rows.size(); ++i)
    s += std::string(i == 0 ? "" : ", ") + rows[i]->batch_help + " on " + rows[i]->name;
  return s;
}

bool device_built(Device d) { return built(backend_entry(d)); }

std::string device_here(Device d) {
  const BackendRow &r = backend_entry(d);
  if (r.make) // in the library: this machine
    return r.what;
  return backend_plugin(r.name).device();
}

} // namespace tarnn
