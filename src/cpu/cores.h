// The cores this process may use: what "every core" means (--threads 0, Python's threads=None,
// tarnn serve), and how many threads may spin without taking a core from one at work.
#pragma once

#include <string>

namespace tarnn {

struct UsableCores {
  int count = 1;    // at least 1
  const char *from; // what said so: "affinity", "cgroup quota" or "hardware" (no affinity read)
};

// This process's: its CPU affinity (sched_getaffinity: taskset, Slurm, a container's cpuset),
// lowered by a cgroup CPU quota where one is set at its cgroup or any above it.
UsableCores usable_cores();

// The CPU quota, in cores (quota / period), of the cgroup that `self_cgroup` (the text of
// /proc/self/cgroup) names, under `root` (where the cgroup filesystems are mounted,
// /sys/fs/cgroup): the smallest of its cgroup's and its ancestors' (cgroup v2: cpu.max; v1:
// cpu.cfs_quota_us / cpu.cfs_period_us of the cpu controller's hierarchy). 0: none set, or none
// readable. The tests give it fixture folders.
double cgroup_cpu_quota(const std::string &root, const std::string &self_cgroup);

// `affinity` cores (0: unknown, then std::thread::hardware_concurrency) and a quota of `quota`
// cores (0: none): the quota rounded to the nearest whole core (1.5 -> 2), at least 1, where it
// is below the affinity's count.
UsableCores usable_cores(int affinity, double quota);

} // namespace tarnn
