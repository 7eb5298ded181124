// src/cpu/cores.h: the cores this process may use, from its affinity and its cgroup's quota.
#include "cores.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <vector>

namespace tarnn {

namespace {

// The first line of a file ("" where it cannot be read).
std::string first_line(const std::string &path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

bool is_folder(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A whole number > 0, or 0 for anything else ("max", "-1", "", "12abc").
double positive(const std::string &word) {
  if (word.empty() || word.size() > 18 || word.find_first_not_of("0123456789") != word.npos)
    return 0;
  return double(std::strtoll(word.c_str(), nullptr, 10));
}

// One cgroup folder's quota in cores, 0 where it sets none.
double folder_quota(const std::string &dir, bool v2) {
  double quota = 0, period = 0;
  if (v2) { // cpu.max: "max 100000" or "150000 100000"
    std::istringstream words(first_line(dir + "/cpu.max"));
    std::string q, p;
    words >> q >> p;
    quota = positive(q), period = positive(p);
  } else { // cpu.cfs_quota_us is -1 where none is set
    quota = positive(first_line(dir + "/cpu.cfs_quota_us"));
    period = positive(first_line(dir + "/cpu.cfs_period_us"));
  }
  return quota > 0 && period > 0 ? quota / period : 0;
}

// The smallest quota from `dir` up to `top` (the hierarchy's root); a limit set above the
// process's own cgroup binds it too. Folders that are not there (a container that sees its own
// cgroup as the root while /proc/self/cgroup names the host's path) are passed over.
double smallest_quota(const std::string &top, std::string path, bool v2) {
  double least = 0;
  for (;;) {
    const std::string dir = top + path;
    if (is_folder(dir))
      if (const double q = folder_quota(dir, v2); q > 0 && (least == 0 || q < least))
        least = q;
    if (path.empty() || path == "/")
      return least;
    const size_t slash = path.rfind('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
}

} // namespace

double cgroup_cpu_quota(const std::string &root, const std::string &self_cgroup) {
  // Lines "ID:CONTROLLERS:PATH": cgroup v2's is "0::PATH"; v1's cpu controller is named in a
  // list ("4:cpu,cpuacct:PATH") whose hierarchy is mounted under that name, or as "cpu".
  const bool v2 = is_folder(root) && std::ifstream(root + "/cgroup.controllers").good();
  const std::string cpu = "cpu"; // v1's CPU controller (a cgroup's name, not a device's)
  std::istringstream lines(self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = a == line.npos ? a : line.find(':', a + 1);
    if (b == line.npos)
      continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (v2 && line.compare(0, a, "0") == 0 && controllers.empty())
      return smallest_quota(root, path, true);
    if (v2)
      continue;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == cpu)
        for (const std::string &mount : {controllers, cpu})
          if (is_folder(root + "/" + mount))
            return smallest_quota(root + "/" + mount, path, false);
  }
  return 0;
}

UsableCores usable_cores(int affinity, double quota) {
  UsableCores c{affinity, "affinity"};
  if (affinity <= 0)
    c = {int(std::max(1u, std::thread::hardware_concurrency())), "hardware"};
  if (quota > 0) {
    const int cores = int(std::min<double>(std::max(1.0, std::round(quota)), 1 << 20));
    if (cores < c.count)
      c = {cores, "cgroup quota"};
  }
  return c;
}

UsableCores usable_cores() {
  int affinity = 0;
  for (int cpus = CPU_SETSIZE; cpus <= (1 << 20) && affinity == 0; cpus *= 4) {
    cpu_set_t *set = CPU_ALLOC(cpus); // a mask of the machine's size (more than 1024 CPUs)
    if (!set)
      break;
    const size_t bytes = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(0, bytes, set) == 0)
      affinity = CPU_COUNT_S(bytes, set);
    CPU_FREE(set);
  }
  std::ifstream self("/proc/self/cgroup");
  std::stringstream text;
  text << self.rdbuf();
  return usable_cores(affinity, cgroup_cpu_quota("/sys/fs/cgroup", text.str()));
}

} // namespace tarnn
