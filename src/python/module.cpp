// import tarnn: the library in Python, numpy arrays in and out (docs/PYTHON.md). A thin layer over
// include/tarnn, as the command is: arguments checked, the GIL released while the engine runs,
// Ctrl-C checked between steps, and the library's errors as Python's exceptions.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <set>

#include "../base/util.h"
#include "tarnn/tarnn.h"

namespace py = pybind11;
using namespace tarnn;

namespace {

struct Interrupted {}; // Ctrl-C seen between steps: thrown through the engine, which stops

// The library's words (error.h) in Python's: each field as Model's or a method's keyword
// argument, with its value as Python writes it: "device='tpu'", "batch=9", "samples".
std::string keyword(const Message::Field &f) {
  static const std::set<std::string> strings = {"device", "precision", "state"};
  const std::string name = f.name == "model" ? "path" : f.name;
  if (f.value.empty())
    return name;
  if (strings.count(f.name) != 0)
    return name + "='" + f.value + "'";
  const bool number = f.value.find_first_not_of("-0123456789") == std::string::npos;
  return name + (number ? "=" : " ") + f.value;
}

// ValueError for bad arguments and contents, OSError for files, RuntimeError for the machine.
void translate(std::exception_ptr p) {
  try {
    if (p)
      std::rethrow_exception(p);
  } catch (const Error &e) {
    PyObject *type = e.kind() == Error::Kind::File      ? PyExc_OSError
                     : e.kind() == Error::Kind::Runtime ? PyExc_RuntimeError
                                                        : PyExc_ValueError;
    PyErr_SetString(type, e.said(keyword).c_str());
  } catch (const Interrupted &) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
  }
}

[[noreturn]] void bad(const std::string &what) { throw Error(what); }

// A TypeError that names the argument and its type, never its value (a tensor's repr is pages).
[[noreturn]] void wrong_type(const char *name, py::handle obj, const char *wanted) {
  throw py::type_error(std::string(name) + " must be " + wanted + ", not " +
                       std::string(py::str(py::type::of(obj).attr("__name__"))));
}

// A path from str, bytes or any os.PathLike (pathlib.Path), as open() takes them.
std::string path_of(py::handle obj, const char *name) {
  if (!py::isinstance<py::str>(obj) && !py::isinstance<py::bytes>(obj) &&
      !py::hasattr(obj, "__fspath__"))
    wrong_type(name, obj, "a str or an os.PathLike such as pathlib.Path");
  return py::str(py::module_::import("os").attr("fsdecode")(obj));
}

// A numpy array of anything the ecosystem holds images in: numpy arrays and views, and whatever
// has __array__ or DLPack (torch tensors on the CPU, jax arrays); read, never copied here.
py::array array_of(py::handle obj, const char *name) {
  if (py::isinstance<py::array>(obj))
    return py::reinterpret_borrow<py::array>(obj);
  const py::module_ np = py::module_::import("numpy");
  if (py::hasattr(obj, "__array__") || py::hasattr(obj, "__array_interface__"))
    return np.attr("asarray")(obj).cast<py::array>();
  if (py::hasattr(obj, "__dlpack__"))
    return np.attr("from_dlpack")(obj).cast<py::array>();
  wrong_type(name, obj, "an array (numpy, or anything with __array__ or __dlpack__: torch, jax)");
}

// `a` as a C-ordered array of T: `a` itself where it is one, else a copy (of a view, a broadcast,
// or with Cast = forcecast another dtype). Every array argument is converted here, never with
// array_t::ensure: that drops NumPy's MemoryError and returns a null array, which its callers
// read (a broadcast view of 2**31 images crashed the interpreter). A copy larger than the
// machine's memory is a MemoryError before NumPy tries (where memory is overcommitted, its
// allocation would succeed and the copy be killed), and so is one NumPy cannot allocate; each
// names the argument and the size.
template <typename T, int Cast = 0>
py::array_t<T, py::array::c_style> c_order(const py::array &a, const char *name) {
  using Out = py::array_t<T, py::array::c_style>;
  const double bytes = double(a.size()) * sizeof(T);
  auto refuse = [&](PyObject *type, const std::string &why) {
    const std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
    PyErr_SetString(type, (std::string(name) + ": its copy as a " +
                           std::string(py::str(py::tuple(py::cast(shape)))) + " " +
                           std::string(py::str(py::dtype::of<T>())) +
                           " array in C order would be " + size_text(bytes) + ", " + why)
                              .c_str());
    throw py::error_already_set();
  };
  const double memory = double(physical_memory_bytes());
  if (!Out::check_(a) && bytes > memory)
    refuse(PyExc_MemoryError, "more than this machine's " + size_text(memory) + " of memory");
  try {
    const py::array_t<T, py::array::c_style | Cast> out(py::reinterpret_borrow<py::object>(a));
    return py::reinterpret_borrow<Out>(out);
  } catch (py::error_already_set &e) {
    if (e.matches(PyExc_MemoryError))
      refuse(PyExc_MemoryError, "more than there is memory for");
    throw;
  }
}

// A uint8 array (any strides: copied to C order when it is not), or ValueError.
py::array_t<uint8_t, py::array::c_style> bytes_of(const py::array &a, const char *name) {
  if (!a.dtype().is(py::dtype::of<uint8_t>()))
    bad(std::string(name) + " must be a uint8 array, not " + std::string(py::str(a.dtype())) +
        (a.dtype().kind() == 'f' ? " (tarnn.to_uint8 converts images in [0, 1])" : ""));
  return c_order<uint8_t>(a, name);
}

// Image bytes from anything array_of takes, uint8 or a ValueError: what every function that takes
// images converts them with (score, complete, grid, write_png, to_float).
py::array_t<uint8_t, py::array::c_style> uint8_of(py::handle obj, const char *name) {
  return bytes_of(array_of(obj, name), name);
}

// The model's images from a (n, H, W) or (n, H, W, C) array, or any array_of takes; an NCHW batch
// (PyTorch's layout) is refused with the permutation that makes it NHWC.
ImageSet images_of(py::handle obj, const Config &c, const char *name) {
  const auto arr = uint8_of(obj, name);
  const bool gray3 = arr.ndim() == 3 && c.channels == 1;
  const std::vector<py::ssize_t> shape(arr.shape(), arr.shape() + arr.ndim());
  if (!(gray3 || arr.ndim() == 4) || arr.shape(1) != c.height || arr.shape(2) != c.width ||
      (arr.ndim() == 4 && arr.shape(3) != c.channels)) {
    const bool nchw = arr.ndim() == 4 && arr.shape(1) == c.channels && arr.shape(2) == c.height &&
                      arr.shape(3) == c.width;
    const std::string hw = std::to_string(c.height) + ", " + std::to_string(c.width);
    bad(std::string(name) + " must be NHWC, shape (n, " + hw + ", " + std::to_string(c.channels) +
        ")" + (c.channels == 1 ? ", or NHW (n, " + hw + ")" : "") + ", not " +
        std::string(py::str(py::tuple(py::cast(shape)))) +
        (nchw ? ": an NCHW batch (PyTorch's layout) is NHWC after .permute(0, 2, 3, 1)" : ""));
  }
  ImageSet s{arr.shape(0), c.height, c.width, c.channels, {}};
  s.bytes.assign(arr.data(), arr.data() + arr.size());
  return s;
}

py::array_t<uint8_t> to_array(const ImageSet &s, std::vector<py::ssize_t> shape) {
  py::array_t<uint8_t> out(shape);
  std::copy(s.bytes.begin(), s.bytes.end(), out.mutable_data());
  return out;
}

// A seed as Python passes it: any integer (numpy's too) in [0, 2^64); outside, a ValueError
// naming it, not pybind11's TypeError about the signature (seed=-1 was one).
uint64_t seed_of(const py::object &seed) {
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(seed.ptr()));
  if (!index)
    throw py::error_already_set(); // not an integer (a float, a string): TypeError
  const unsigned long long v = PyLong_AsUnsignedLongLong(index.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    bad("seed must be in [0, 2**64 - 1] (got " + std::string(py::str(index)) + ")");
  }
  return v;
}

// Progress for a job of `units` (images or completions): a bar when asked, tqdm's if it is
// installed, else tarnn/progress.h's text on sys.stderr by tqdm's rules (a bar redrawn with \r on
// a terminal; in a log, a line with count, rate and ETA every TARNN_PROGRESS_SECONDS, 10 by
// default, and the last one at the end); and in any case Ctrl-C, checked a few times a second
// with the GIL held.
Progress progress_for(bool bar, int64_t units, int positions_per_unit, const char *unit) {
  py::object tqdm = py::none(), err = py::module_::import("sys").attr("stderr");
  std::shared_ptr<ProgressText> text;
  if (bar) {
    try {
      tqdm = py::module_::import("tqdm").attr("tqdm")(py::arg("total") = units,
                                                      py::arg("unit") = unit);
    } catch (const py::error_already_set &) {
      const bool terminal = py::bool_(err.attr("isatty")());
      text = std::make_shared<ProgressText>(unit, terminal, terminal ? 0.0 : progress_interval());
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto last = std::make_shared<int64_t>(0);
  const double per = std::max(positions_per_unit, 1);
  return [bar, tqdm, err, text, start, last, per](int64_t done, int64_t total) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      PyErr_Clear();
      throw Interrupted{};
    }
    if (!bar)
      return;
    if (!tqdm.is_none()) {
      const int64_t units_done = int64_t(double(done) / per);
      tqdm.attr("update")(units_done - *last);
      *last = units_done;
      if (done >= total)
        tqdm.attr("close")();
      return;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string s = done < total
                              ? text->update(double(done) / per, double(total) / per, seconds)
                              : text->finish(double(total) / per, seconds);
    if (!s.empty()) {
      err.attr("write")(s);
      err.attr("flush")();
    }
  };
}

// Where a model's name is looked up beside the module: PREFIX/share/tarnn/models for
// PREFIX/lib/python3.X/{site,dist}-packages/tarnn*.so, where pip and cmake --install put them;
// for a module anywhere else (a build tree: PYTHONPATH=build/python), the models of the source
// tree it was built from, so the README's route finds "mnist" as an installed module does.
std::vector<std::string> installed_model_roots() {
  const std::string file = py::str(py::module_::import("tarnn").attr("__file__"));
  std::string dir = file.substr(0, file.rfind('/'));
  const std::string site = dir.substr(dir.rfind('/') + 1);
  if (site != "site-packages" && site != "dist-packages")
    return {TARNN_SOURCE_MODELS_DIR};
  for (int up = 0; up < 3; ++up)
    dir = dir.substr(0, dir.rfind('/'));
  return {dir + "/share/tarnn/models"};
}

// Floats in [0, 1] as bytes, round half up: to_float's x / 255 comes back exactly.
py::array to_uint8(py::object images) {
  const py::array a = array_of(images, "images");
  if (a.dtype().is(py::dtype::of<uint8_t>()))
    return a;
  if (a.dtype().kind() != 'f')
    bad("images must be floats in [0, 1] (or uint8), not " + std::string(py::str(a.dtype())));
  const auto x = c_order<double, py::array::forcecast>(a, "images");
  py::array_t<uint8_t> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  uint8_t *o = out.mutable_data();
  for (py::ssize_t i = 0; i < x.size(); ++i) {
    const double v = x.data()[i];
    if (!(v >= 0.0 && v <= 1.0)) // NaN too
      bad("images must be in [0, 1], not " + std::string(py::str(py::float_(v))) +
          " (for floats in 0..255: images.astype(numpy.uint8))");
    o[i] = uint8_t(std::floor(v * 255.0 + 0.5));
  }
  return std::move(out);
}

py::array_t<float> to_float(py::object images) {
  const auto x = uint8_of(images, "images");
  py::array_t<float> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  for (py::ssize_t i = 0; i < x.size(); ++i)
    out.mutable_data()[i] = float(x.data()[i]) / 255.0f;
  return out;
}

class PyModel {
public:
  PyModel(py::object path, const std::string &device, std::optional<int> threads,
          const std::string &precision, std::optional<int64_t> batch, const std::string &state)
      : engine_(load_model(find_model(path_of(path, "path"), installed_model_roots())),
                options(device, threads, precision, batch, state)) {}

  // tarnn.Model('models/mnist', device='cpu', ...): (28, 28, 1) images, 1,234 parameters
  std::string repr() const {
    const Config &c = engine_.config();
    const RunOptions &o = engine_.options();
    return "tarnn.Model('" + engine_.model().source + "', device='" + name(o.device) +
           "', precision='" + name(o.precision) + "', state='" + name(o.state) +
           "', threads=" + std::to_string(o.threads) +
           ", batch=" + (o.batch > 0 ? std::to_string(o.batch) : "None") + "): (" +
           std::to_string(c.height) + ", " + std::to_string(c.width) + ", " +
           std::to_string(c.channels) + ") images, " + std::to_string(c.parameter_count()) +
           " parameters, on " + engine_.device();
  }

  // config.json's keys as the engine read them (Config::to_json: linear attention's feature_map
  // included), so a key added to the config reaches Python with no line here
  py::dict config() const {
    return py::module_::import("json").attr("loads")(engine_.config().to_json());
  }
  int64_t parameters() const { return engine_.config().parameter_count(); }
  int64_t state_bytes() const {
    return memory_bytes_per_image(engine_.config(), engine_.options().state);
  }
  std::string device() const { return engine_.device(); }

  py::array_t<uint8_t> sample(int64_t n, const py::object &seed_arg, int64_t first,
                              std::optional<int64_t> batch, bool progress, double temperature) {
    const uint64_t seed = seed_of(seed_arg);
    const float T = sampling_temperature(temperature);
    if (n < 1 || n > kMaxSampleImages)
      bad("n must be in [1, " + std::to_string(kMaxSampleImages) + "] (got " + std::to_string(n) +
          ")");
    const Config &c = engine_.config();
    ImageSet images;
    {
      Progress p = progress_for(progress, n, c.positions(), "images");
      py::gil_scoped_release release;
      images = sample_images(engine_, n, seed, first, p, batch.value_or(0), T);
    }
    warn_new();
    return to_array(images, {n, c.height, c.width, c.channels});
  }

  py::array_t<double> score(py::object images, bool progress) {
    const ImageSet in = images_of(images, engine_.config(), "images");
    std::vector<double> bpd;
    {
      Progress p = progress_for(progress, in.count, engine_.config().positions(), "images");
      py::gil_scoped_release release;
      bpd = score_images(engine_, in, p);
    }
    warn_new();
    return py::array_t<double>(py::ssize_t(bpd.size()), bpd.data());
  }

  py::array_t<uint8_t> complete(py::object images, py::object known, int samples,
                                const py::object &seed_arg, bool progress, double temperature) {
    const uint64_t seed = seed_of(seed_arg);
    const float T = sampling_temperature(temperature);
    const Config &c = engine_.config();
    const ImageSet in = images_of(images, c, "images");
    const std::vector<uint8_t> mask = mask_of(known, c, in.count);
    std::vector<int64_t> index(size_t(in.count));
    for (int64_t i = 0; i < in.count; ++i)
      index[size_t(i)] = i;
    ImageSet out;
    {
      Progress p = progress_for(progress, in.count * samples, c.positions(), "completions");
      py::gil_scoped_release release;
      out = complete_images(engine_, in, index, mask, samples, seed, p, T);
    }
    warn_new();
    return to_array(out, {in.count, samples, c.height, c.width, c.channels});
  }

private:
  // The engine's warnings not yet given (Engine::warnings: once each), as RuntimeWarnings.
  void warn_new() {
    const std::vector<Message> all = engine_.warnings();
    for (; warned_ < all.size(); ++warned_)
      if (PyErr_WarnEx(PyExc_RuntimeWarning, all[warned_].said(keyword).c_str(), 1) != 0)
        throw py::error_already_set(); // warnings made errors
  }

  static RunOptions options(const std::string &device, std::optional<int> threads,
                            const std::string &precision, std::optional<int64_t> batch,
                            const std::string &state) {
    RunOptions o;
    o.device = parse_device(device);
    o.precision = parse_precision(precision);
    o.state = parse_state_format(state); // the rest checked by the engine
    o.threads = threads.value_or(0);
    if (threads && *threads < 1)
      bad("threads must be at least 1 (None: every core)");
    o.batch = batch.value_or(0);
    return o;
  }

  // `known`: booleans (or 0/1 bytes) of the image's shape, (H, W) covering every channel, or one
  // per image: one byte per image byte, as complete_images takes it.
  static std::vector<uint8_t> mask_of(py::handle known, const Config &c, int64_t n) {
    const py::array k = array_of(known, "known");
    const auto arr = k.dtype().is(py::dtype::of<bool>())
                         ? c_order<uint8_t, py::array::forcecast>(k, "known")
                         : bytes_of(k, "known");
    const auto T = size_t(c.bytes_per_image());
    auto is = [&](std::initializer_list<py::ssize_t> shape) {
      return std::vector<py::ssize_t>(arr.shape(), arr.shape() + arr.ndim()) ==
             std::vector<py::ssize_t>(shape);
    };
    std::vector<uint8_t> mask;
    if (is({c.height, c.width}) || is({n, c.height, c.width})) { // pixels: every channel
      const size_t pixels = size_t(arr.size());
      mask.resize(pixels * c.channels);
      for (size_t p = 0; p < pixels; ++p)
        for (int j = 0; j < c.channels; ++j)
          mask[p * c.channels + j] = arr.data()[p] != 0;
    } else if (is({c.height, c.width, c.channels}) || is({n, c.height, c.width, c.channels})) {
      mask.assign(arr.data(), arr.data() + arr.size());
      for (uint8_t &m : mask)
        m = m != 0;
    } else {
      bad("known must have the image's shape (" + std::to_string(c.height) + ", " +
          std::to_string(c.width) + ") or (" + std::to_string(c.height) + ", " +
          std::to_string(c.width) + ", " + std::to_string(c.channels) + "), or one such per image");
    }
    if (mask.size() != T && mask.size() != T * size_t(n))
      bad("known does not match the images");
    return mask;
  }

  Engine engine_;
  size_t warned_ = 0;
};

// grid(images, nrow=None, ...): the images tiled as torchvision's make_grid, then scaled.
py::array_t<uint8_t> grid_array(py::object images, std::optional<int> nrow, int padding,
                                int pad_value, std::optional<int> scale, std::optional<int> cols) {
  const auto arr = uint8_of(images, "images");
  const std::string shape = py::str(py::tuple(py::cast(arr.request().shape)));
  if (arr.ndim() != 4 && arr.ndim() != 3)
    bad("images must have shape (n, H, W) or (n, H, W, C), not " + shape);
  const int C = arr.ndim() == 4 ? int(arr.shape(3)) : 1;
  if (C > 4) // (n, C, H, W) read as channels last would be C = W: garbage
    bad("images of shape " + shape + " would have " + std::to_string(C) +
        " channels: grid takes channels last, (n, H, W) or (n, H, W, C) with C 1 to 4 "
        "(NHWC); for channels first (NCHW, PyTorch's), pass images.transpose(0, 2, 3, 1)");
  if (nrow && cols)
    bad("give nrow or cols (its older name), not both");
  // None, not the command's 0, asks for the automatic choice
  const int k = nrow.value_or(cols.value_or(1)), z = scale.value_or(1);
  if (k < 1 || k > kMaxGridImages)
    bad("nrow must be in [1, " + std::to_string(kMaxGridImages) + "] (got " + std::to_string(k) +
        "; None: a square-ish grid)");
  if (z < 1 || z > kMaxGridScale)
    bad("scale must be in [1, " + std::to_string(kMaxGridScale) + "] (got " + std::to_string(z) +
        "; None: whole pixels toward 600)");
  const GridLayout layout{nrow.value_or(cols.value_or(0)), padding, pad_value, scale.value_or(0)};
  ImageSet s{arr.shape(0), int(arr.shape(1)), int(arr.shape(2)), C, {}};
  s.bytes.assign(arr.data(), arr.data() + arr.size());
  const ImageSet g = draw_grid(s, layout);
  return to_array(g, {g.height, g.width, g.channels});
}

// write_png(path, image): a uint8 (H, W) or (H, W, C) array as a PNG.
void write_png_array(py::object path, py::object image) {
  const auto arr = uint8_of(image, "image");
  if (arr.ndim() != 2 && arr.ndim() != 3)
    bad("image must have shape (H, W) or (H, W, C)");
  const int C = arr.ndim() == 3 ? int(arr.shape(2)) : 1;
  write_png(path_of(path, "path"), int(arr.shape(1)), int(arr.shape(0)), C, arr.data());
}

// Model's constructor's docstring: its arguments and their values.
std::string model_doc() {
  return "Model(path, device='cpu', threads=None, precision='fp32', batch=None, state='fp32')\n\n"
         "path: a model folder (config.json + model.safetensors), or an installed model's name "
         "('mnist'), found as `tarnn --model` finds it; a str or an os.PathLike.\n"
         "device: " +
         device_help() +
         ".\n"
         "threads: CPU threads (None: every core).\n"
         "precision: the GEMMs: " +
         precision_help() +
         ".\n"
         "batch: images whose state is in memory at once (None: " +
         batch_help() +
         ").\n"
         "state: how S and z are stored: " +
         state_format_help() + ".";
}

// tarnn.Model: a model made ready on a device, and its three jobs.
void bind_model(py::module_ &m) {
  static const std::string doc = model_doc();
  py::class_<PyModel>(m, "Model",
                      "A model made ready on a device (weights loaded and laid out "
                      "once); its methods run the engine.")
      .def(py::init<py::object, const std::string &, std::optional<int>, const std::string &,
                    std::optional<int64_t>, const std::string &>(),
           py::arg("path"), py::arg("device") = "cpu", py::arg("threads") = py::none(),
           py::arg("precision") = "fp32", py::arg("batch") = py::none(), py::arg("state") = "fp32",
           doc.c_str())
      .def("__repr__", &PyModel::repr)
      .def_property_readonly("config", &PyModel::config, "The model's config.json, as a dict.")
      .def_property_readonly("parameters", &PyModel::parameters,
                             "Parameter count (the stored positional table included).")
      .def_property_readonly("state_bytes_per_image", &PyModel::state_bytes,
                             "Bytes of state per image: S and z of every layer and head, "
                             "constant in the position (linear attention), or a softmax "
                             "model's KV cache at the last position (it grows with the "
                             "position).")
      .def_property_readonly("device", &PyModel::device, "The device it runs on, in words.")
      .def("sample", &PyModel::sample, py::arg("n"), py::arg("seed") = kDefaultSeed,
           py::arg("first") = 0, py::arg("batch") = py::none(), py::arg("progress") = false,
           py::arg("temperature") = 1.0,
           "sample(n, seed=0, first=0, batch=None, progress=False, temperature=1.0) -> uint8 "
           "array (n, H, W, C)\n\n"
           "Images first .. first + n - 1 of a run with `seed`: image i is the same, byte for "
           "byte, as `tarnn sample --seed SEED` writes for i, whatever the batch or threads.\n"
           "batch: images in memory at once for this call (None: the model's).\n"
           "temperature: the sampler's, as `--temperature` (docs/SPEC.md section 2): the "
           "mixture's logits divided by it, its scales multiplied; 1 is the model's "
           "distribution, below 1 sharper. A finite number above 0.\n"
           "progress: show a bar (tqdm if installed). Ctrl-C stops the run between steps and "
           "raises KeyboardInterrupt; the model stays usable.")
      .def("score", &PyModel::score, py::arg("images"), py::arg("progress") = false,
           "score(images, progress=False) -> float64 array (n,)\n\n"
           "Teacher-forced bits/dim of each image, as `tarnn score`. images: uint8, NHWC (n, H, W, "
           "C) or (n, H, W) for a one-channel model: a numpy array, or anything with __array__ "
           "or __dlpack__ (a torch tensor on the CPU); NCHW is refused.")
      .def("complete", &PyModel::complete, py::arg("images"), py::arg("known"),
           py::arg("samples") = kDefaultSamples, py::arg("seed") = kDefaultSeed,
           py::arg("progress") = false, py::arg("temperature") = 1.0,
           "complete(images, known, samples=4, seed=0, progress=False, temperature=1.0) -> uint8 "
           "(n, samples, H, W, C)\n\n"
           "Completes each image `samples` times: bytes where `known` is true are kept (fed to "
           "the model), the others sampled. images: as score's. known: a boolean array of shape "
           "(H, W) (every channel of a pixel) or (H, W, C), or one per image (n, H, W[, C]). "
           "Completion k of image i uses the random numbers of image i * samples + k, as `tarnn "
           "complete`; the unknown bytes are drawn at `temperature`, as sample's.");
}

// The image functions around the jobs: files in and out, conversions, grids.
void bind_image_functions(py::module_ &m) {
  m.def(
      "read_images",
      [](py::object path) {
        const ImageSet s = read_images(path_of(path, "path"));
        return to_array(s, {s.count, s.height, s.width, s.channels});
      },
      py::arg("path"),
      "read_images(path) -> uint8 array (n, H, W, C): an IDX file (MNIST's format) or a PNG, as "
      "stored.");
  m.def("to_uint8", &to_uint8, py::arg("images"),
        "to_uint8(images) -> uint8 array of the same shape: floats in [0, 1] (torchvision's "
        "ToTensor) as the bytes the models take, round(x * 255); a value outside [0, 1] or NaN "
        "is a ValueError. uint8 comes back as it is.");
  m.def("to_float", &to_float, py::arg("images"),
        "to_float(images) -> float32 array of the same shape: uint8 bytes as floats in [0, 1], "
        "x / 255 (to_uint8 undoes it exactly).");
  m.def(
      "grid", &grid_array, py::arg("images"), py::arg("nrow") = py::none(), py::arg("padding") = 2,
      py::arg("pad_value") = 64, py::arg("scale") = py::none(), py::kw_only(),
      py::arg("cols") = py::none(),
      "grid(images, nrow=None, padding=2, pad_value=64, scale=None) -> uint8 array (H', W', C)\n\n"
      "The images (n, H, W) or (n, H, W, C), uint8, as score takes them (numpy, a torch tensor), "
      "tiled as torchvision's make_grid, then each pixel "
      "drawn scale x scale times: the same bytes as `tarnn sample -o` with --nrow, --padding, "
      "--pad-value and --scale, and the same defaults.\n"
      "nrow: images per row (None: a square-ish grid; `cols` is its older name).\n"
      "padding: pixels between and around the images, before scaling (0 to 64).\n"
      "pad_value: the padding's level in every channel, 0 to 255 (the images are uint8; "
      "torchvision's 0 to 1 is for float images).\n"
      "scale: grid pixels per image pixel, 1 to 16 (None: whole pixels toward 600, 1 to 8; "
      "scale=1 is make_grid's size).");
  m.def("write_png", &write_png_array, py::arg("path"), py::arg("image"),
        "write_png(path, image): a PNG of a uint8 (H, W) or (H, W, C) array, written atomically; "
        "the name must end in .png (any case), as `tarnn sample -o`.");
}

} // namespace

PYBIND11_MODULE(tarnn, m) {
  m.doc() = "tarnn: autoregressive linear transformers run as RNNs (Katharopoulos et al., 2020). "
            "Load a model folder (config.json + model.safetensors) and sample, score and complete "
            "images as numpy arrays. See docs/PYTHON.md.";
  py::register_exception_translator(&translate);
  m.attr("__version__") = version();
  m.attr("git_commit") = git_commit();
  bind_model(m);
  bind_image_functions(m);
}
