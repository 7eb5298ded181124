// src/cpu/threads.h: every task runs once per call, on its own thread, call after call; the
// first failure comes back to the caller and the team stays usable; a pool lends its teams again.
// src/cpu/cores.h: the cores this process may use, from its affinity and cgroup quota files.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sched.h>
#include <set>
#include <stdexcept>
#include <thread>
#include <unistd.h>

#include "src/cpu/cores.h"
#include "src/cpu/threads.h"
#include "tarnn/error.h"

using namespace tarnn;

TEST(WorkerTeam, EveryIndexOncePerRunOnItsOwnThread) {
  for (const bool spin : {true, false}) {
    WorkerTeam team(3, spin);
    ASSERT_EQ(team.size(), 3);
    // many short calls, as a prefill's GEMMs (fewer spinning: 3 spinning threads on a machine
    // with fewer free cores wait for each other's time slices)
    for (int run = 0; run < (spin ? 200 : 2000); ++run) {
      std::atomic<int> count[3] = {0, 0, 0};
      std::thread::id ids[3];
      team.run(3, [&](int i) {
        ++count[i];
        ids[i] = std::this_thread::get_id();
      });
      ASSERT_EQ(count[0] + count[1] + count[2], 3) << "run " << run << ", spin " << spin;
      ASSERT_EQ(count[0], 1);
      EXPECT_EQ(ids[0], std::this_thread::get_id()); // f(0) on the caller
      ASSERT_EQ(std::set<std::thread::id>(ids, ids + 3).size(), 3u);
    }
  }
}

// A run hands out the indices of its tasks only: a team of 4 given 2 tasks calls f for tasks 0
// and 1, once each (a prefill's 39 rows make 2 slices of 16: a thread given an index past them
// ran rows past the buffers), and a team given more tasks than threads runs every one once.
TEST(WorkerTeam, RunsOnlyTheTasksItIsGiven) {
  for (const bool spin : {true, false}) {
    WorkerTeam team(4, spin);
    for (const int tasks : {0, 1, 2, 4, 9}) {
      std::atomic<int> count[9] = {};
      team.run(tasks, [&](int i) {
        ASSERT_TRUE(i >= 0 && i < tasks) << "task " << i << " of " << tasks;
        ++count[i];
      });
      for (int i = 0; i < 9; ++i)
        EXPECT_EQ(count[i], i < tasks ? 1 : 0)
            << "task " << i << " of " << tasks << ", spin " << spin;
    }
    std::atomic<int> watched[3] = {};
    team.run_watched(
        2, [&](int i) { ++watched[i]; }, [] {});
    EXPECT_EQ(watched[0] + watched[1] + watched[2], 2);
    EXPECT_EQ(watched[0], 1);
    EXPECT_EQ(watched[1], 1);
  }
}

TEST(WorkerTeam, AFailureReachesTheCallerAndTheTeamGoesOn) {
  WorkerTeam team(2, true);
  EXPECT_THROW(team.run(2,
                        [](int i) {
                          if (i == 1)
                            throw Error("helper failed");
                        }),
               Error);
  EXPECT_THROW(team.run(2,
                        [](int i) {
                          if (i == 0)
                            throw std::runtime_error("caller failed");
                        }),
               std::runtime_error);
  std::atomic<int> done{0};
  team.run(2, [&](int) { ++done; });
  EXPECT_EQ(done, 2);
}

TEST(WorkerTeam, HelpersThatSleepWakeForTheNextRun) {
  WorkerTeam team(2, false); // no spin: a helper sleeps as soon as its call is done
  std::atomic<int> done{0};
  for (int run = 0; run < 100; ++run)
    team.run(2, [&](int) { ++done; });
  EXPECT_EQ(done, 200);
}

TEST(TeamPool, LendsTheSameTeamAgainAndNewOnesWhenBusy) {
  TeamPool pool(true);
  WorkerTeam *first = nullptr, *second = nullptr;
  {
    const auto a = pool.lend(2);
    const auto b = pool.lend(2); // a is out: a second team
    first = a.get();
    second = b.get();
    EXPECT_NE(second, first);
    EXPECT_EQ(pool.lend(3)->size(), 3);
  }
  const auto again = pool.lend(2); // one of the two, back in the pool
  EXPECT_TRUE(again.get() == first || again.get() == second);
  std::atomic<int> done{0};
  again->run(again->size(), [&](int) { ++done; });
  EXPECT_EQ(done, 2);
}

// ---- cores.h ----------------------------------------------------------------------------------

namespace {

// A fixture folder standing for /sys/fs/cgroup: files written where named, removed at the end.
struct CgroupRoot {
  std::filesystem::path root = std::filesystem::temp_directory_path() /
                               ("tarnn-cgroup-" + std::to_string(::getpid()) + "-" +
                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
  CgroupRoot() { std::filesystem::create_directories(root); }
  ~CgroupRoot() { std::filesystem::remove_all(root); }
  void file(const std::string &path, const std::string &text) const {
    std::filesystem::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text << "\n";
  }
  double quota(const std::string &self_cgroup) const {
    return cgroup_cpu_quota(root.string(), self_cgroup);
  }
};

} // namespace

TEST(Cores, CgroupV2QuotaIsTheSmallestOnThePathUp) {
  CgroupRoot g;
  g.file("cgroup.controllers", "cpuset cpu io memory pids");
  g.file("cpu.max", "max 100000"); // (the root has none; a file saying so changes nothing)
  g.file("job/cpu.max", "max 100000");
  g.file("job/step/cpu.max", "150000 100000");
  EXPECT_DOUBLE_EQ(g.quota("0::/job/step\n"), 1.5);
  g.file("job/cpu.max", "50000 100000"); // a parent's limit binds its children
  EXPECT_DOUBLE_EQ(g.quota("0::/job/step\n"), 0.5);
  EXPECT_DOUBLE_EQ(g.quota("0::/\n"), 0); // the root: no quota
  EXPECT_DOUBLE_EQ(g.quota("0::/other\n"), 0);
  g.file("job/step/cpu.max", "max 100000");
  g.file("job/cpu.max", "max 100000");
  EXPECT_DOUBLE_EQ(g.quota("0::/job/step\n"), 0); // "max": none
  for (const char *bad : {"abc 100000", "100000 0", "-5 100000", "", "100000"}) {
    g.file("job/step/cpu.max", bad);
    EXPECT_DOUBLE_EQ(g.quota("0::/job/step\n"), 0) << "cpu.max '" << bad << "'";
  }
}

TEST(Cores, CgroupV1QuotaOfTheCpuHierarchy) {
  CgroupRoot g; // no cgroup.controllers at the root: v1 (or hybrid: v2 without the cpu controller)
  g.file("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000");
  g.file("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
  g.file("cpu,cpuacct/cpu.cfs_quota_us", "-1");
  g.file("cpu,cpuacct/cpu.cfs_period_us", "100000");
  const std::string self = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";
  EXPECT_DOUBLE_EQ(g.quota(self), 2.0);
  g.file("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1");
  EXPECT_DOUBLE_EQ(g.quota(self), 0); // -1: none
  // a container that sees its own cgroup as the hierarchy's root, while /proc/self/cgroup names
  // the host's path: the folders not there are passed over, up to the root's quota
  CgroupRoot c;
  c.file("cpu/cpu.cfs_quota_us", "300000");
  c.file("cpu/cpu.cfs_period_us", "100000");
  EXPECT_DOUBLE_EQ(c.quota("3:cpu:/kubepods/pod1/ctr\n"), 3.0);
  EXPECT_DOUBLE_EQ(c.quota("3:memory:/kubepods/pod1/ctr\n"), 0); // no cpu controller named
  EXPECT_DOUBLE_EQ(c.quota(""), 0);
  EXPECT_DOUBLE_EQ(c.quota("garbage\n::\n"), 0);
}

TEST(Cores, TheQuotaRoundedBoundsTheAffinityNeverBelowOne) {
  const UsableCores none = usable_cores(4, 0);
  EXPECT_EQ(none.count, 4);
  EXPECT_STREQ(none.from, "affinity");
  for (const auto &[quota, want] : {std::pair{1.5, 2}, {0.2, 1}, {1.4, 1}, {3.0, 3}}) {
    const UsableCores c = usable_cores(4, quota);
    EXPECT_EQ(c.count, want) << quota;
    EXPECT_STREQ(c.from, "cgroup quota") << quota;
  }
  const UsableCores wide = usable_cores(2, 8.0); // a quota above the affinity: the affinity's
  EXPECT_EQ(wide.count, 2);
  EXPECT_STREQ(wide.from, "affinity");
  const UsableCores unknown = usable_cores(0, 0);
  EXPECT_GE(unknown.count, 1);
  EXPECT_STREQ(unknown.from, "hardware");
}

TEST(Cores, ThisProcessesAreItsAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  const UsableCores c = usable_cores();
  EXPECT_GE(c.count, 1);
  EXPECT_LE(c.count, CPU_COUNT(&set)); // a quota may lower it, never raise it
  if (std::string(c.from) == "affinity") {
    EXPECT_EQ(c.count, CPU_COUNT(&set));
  }
}

// run_watched: the helpers run f(0) .. f(n - 2), each once on its own thread, while the caller
// runs none of f and calls watch() (at least once: a job's progress); a failure of f comes back
// to the caller, and the team stays usable.
TEST(WorkerTeam, WatchedRunLeavesTheCallerToWatch) {
  for (const bool spin : {true, false}) {
    WorkerTeam team(4, spin);
    for (int run = 0; run < 50; ++run) {
      std::atomic<int> count[3] = {0, 0, 0};
      std::thread::id ids[3];
      int watched = 0;
      team.run_watched(
          3,
          [&](int i) {
            ++count[i];
            ids[i] = std::this_thread::get_id();
          },
          [&] { ++watched; });
      for (int i = 0; i < 3; ++i)
        ASSERT_EQ(count[i], 1) << "run " << run << ", spin " << spin;
      EXPECT_GE(watched, 1);
      ASSERT_EQ(std::set<std::thread::id>(ids, ids + 3).size(), 3u);
      EXPECT_EQ(std::set<std::thread::id>(ids, ids + 3).count(std::this_thread::get_id()), 0u);
    }
    EXPECT_THROW(team.run_watched(
                     3,
                     [](int i) {
                       if (i == 2)
                         throw std::runtime_error("helper 2");
                     },
                     [] {}),
                 std::runtime_error);
    std::atomic<int> after{0};
    team.run_watched(
        3, [&](int) { ++after; }, [] {});
    EXPECT_EQ(after, 3);
  }
}
