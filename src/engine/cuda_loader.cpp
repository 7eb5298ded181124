// Finds and loads libtarnn_cuda.so (model/plugin_api.h) the first time --device cuda is asked for.
#include <dlfcn.h>
#include <mutex>
#include <sys/stat.h>
#include <vector>

#include "../base/util.h"
#include "../model/plugin_api.h"
#include "cuda_loader.h"
#include "tarnn/error.h"
#include "tarnn/version.h"

namespace tarnn {

namespace {

constexpr const char *kPlugin = "libtarnn_cuda.so";

std::string plugin_version() { return std::string(version()) + " " + git_commit(); }

// Where to look: $TARNN_CUDA_PLUGIN, then beside the code of this library (the binary, or a
// shared libtarnn), its ../lib, the build tree, and the install prefix.
std::vector<std::string> candidates() {
  std::vector<std::string> paths;
  if (const char *env = std::getenv("TARNN_CUDA_PLUGIN"); env && *env)
    paths.push_back(env);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&candidates), &info) && info.dli_fname) {
    const std::string here = folder_of(info.dli_fname);
    paths.push_back(here + "/" + kPlugin);
    paths.push_back(here + "/../lib/" + kPlugin);
  }
#ifdef TARNN_CUDA_PLUGIN_BUILD_DIR
  paths.push_back(std::string(TARNN_CUDA_PLUGIN_BUILD_DIR) + "/" + kPlugin);
#endif
#ifdef TARNN_CUDA_PLUGIN_INSTALL_DIR
  paths.push_back(std::string(TARNN_CUDA_PLUGIN_INSTALL_DIR) + "/" + kPlugin);
#endif
  return paths;
}

bool exists(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

const CudaPluginApi *load(std::string &why) {
  std::string looked;
  for (const std::string &path : candidates()) {
    if (!exists(path)) {
      looked += (looked.empty() ? "" : ", ") + path;
      continue;
    }
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL); // never closed: its code runs on
    if (!handle) {
      const char *e = dlerror();
      why = "cannot load " + path + ": " + (e ? e : "unknown error");
      return nullptr;
    }
    using Entry = const CudaPluginApi *(*)();
    const auto entry = reinterpret_cast<Entry>(dlsym(handle, "tarnn_cuda_plugin"));
    const CudaPluginApi *api = entry ? entry() : nullptr;
    if (!api || api->abi != kCudaPluginAbi || plugin_version() != api->version) {
      why = path + " is not the CUDA backend of this build (" + plugin_version() + ")";
      return nullptr;
    }
    return api;
  }
  why = std::string(kPlugin) + " not found (looked in " + looked + "; set TARNN_CUDA_PLUGIN)";
  return nullptr;
}

const CudaPluginApi &plugin() {
  if (!cuda_built())
    throw Error({param("device", "cuda"), " is not available in this build (built without CUDA: "
                                          "nvcc was not found or TARNN_CUDA was OFF)"});
  static std::once_flag once;
  static const CudaPluginApi *api = nullptr;
  static std::string why;
  std::call_once(once, [] { api = load(why); });
  if (!api)
    throw Error({param("device", "cuda"), ": the CUDA backend cannot be loaded: " + why},
                Error::Kind::Runtime);
  return *api;
}

} // namespace

bool cuda_built() {
#ifdef TARNN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string cuda_device() { return plugin().device(); }

std::unique_ptr<Backend> make_cuda_backend(const Model &m, const RunOptions &o, const Knobs &k) {
  return plugin().make_backend(m, o, k);
}

} // namespace tarnn
