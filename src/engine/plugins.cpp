// Finds and loads a backend plugin (model/plugin_api.h) the first time its device is asked for.
#include "plugins.h"

#include <dlfcn.h>
#include <map>
#include <mutex>
#include <sys/stat.h>
#include <vector>

#include "../base/util.h"
#include "tarnn/error.h"
#include "tarnn/version.h"

namespace tarnn {

namespace {

std::string plugin_version() { return std::string(version()) + " " + git_commit(); }

std::string file_of(const std::string &name) { return "libtarnn_" + name + ".so"; }

// "cuda" -> TARNN_CUDA_PLUGIN, the variable that names a plugin's file (docs/ENVIRONMENT.md)
std::string variable_of(const std::string &name) {
  std::string v = "TARNN_";
  for (char ch : name)
    v += char(std::toupper(static_cast<unsigned char>(ch)));
  return v + "_PLUGIN";
}

// Where to look: $TARNN_NAME_PLUGIN, then beside the code of this library (the binary, or a
// shared libtarnn), its ../lib, the build tree, and the install prefix.
std::vector<std::string> candidates(const std::string &name) {
  const std::string file = file_of(name);
  std::vector<std::string> paths;
  if (const char *env = std::getenv(variable_of(name).c_str()); env && *env)
    paths.push_back(env);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&candidates), &info) && info.dli_fname) {
    const std::string here = folder_of(info.dli_fname);
    paths.push_back(here + "/" + file);
    paths.push_back(here + "/../lib/" + file);
  }
#ifdef TARNN_PLUGIN_BUILD_DIR
  paths.push_back(std::string(TARNN_PLUGIN_BUILD_DIR) + "/" + file);
#endif
#ifdef TARNN_PLUGIN_INSTALL_DIR
  paths.push_back(std::string(TARNN_PLUGIN_INSTALL_DIR) + "/" + file);
#endif
  return paths;
}

bool exists(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

const BackendPlugin *load(const std::string &name, std::string &why) {
  std::string looked;
  for (const std::string &path : candidates(name)) {
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
    using Entry = const BackendPlugin *(*)();
    const auto entry = reinterpret_cast<Entry>(dlsym(handle, "tarnn_backend_plugin"));
    const BackendPlugin *api = entry ? entry() : nullptr;
    if (!api || api->abi != kPluginAbi || plugin_version() != api->version || api->name != name) {
      why = path + " is not the " + name + " backend of this build (" + plugin_version() + ")";
      return nullptr;
    }
    return api;
  }
  why = file_of(name) + " not found (looked in " + looked + "; set " + variable_of(name) + ")";
  return nullptr;
}

struct Loaded {
  const BackendPlugin *api = nullptr;
  std::string why; // where api is null
};

} // namespace

bool plugin_built(const std::string &name) {
#ifdef TARNN_PLUGINS
  const std::string built = std::string(",") + TARNN_PLUGINS + ",";
  return built.find("," + name + ",") != std::string::npos;
#else
  (void)name;
  return false;
#endif
}

const BackendPlugin &backend_plugin(const std::string &name) {
  if (!plugin_built(name))
    throw Error({param("device", name), " is not available in this build (its backend, " +
                                            file_of(name) +
                                            ", was not built: its compiler was not found or its "
                                            "option was OFF)"});
  static std::mutex mutex;
  static std::map<std::string, Loaded> loaded; // each plugin tried once
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, first] = loaded.try_emplace(name);
  if (first)
    it->second.api = load(name, it->second.why);
  if (!it->second.api)
    throw Error(
        {param("device", name), ": the " + name + " backend cannot be loaded: " + it->second.why},
        Error::Kind::Runtime);
  return *it->second.api;
}

} // namespace tarnn
