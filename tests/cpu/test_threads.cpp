// src/cpu/threads.h: every index runs once per call, on its own thread, call after call; the
// first failure comes back to the caller and the team stays usable; a pool lends its teams again.
#include <atomic>
#include <gtest/gtest.h>
#include <set>
#include <stdexcept>
#include <thread>

#include "src/cpu/threads.h"
#include "tarnn/error.h"

using namespace tarnn;

TEST(WorkerTeam, EveryIndexOncePerRunOnItsOwnThread) {
  WorkerTeam team(3);
  ASSERT_EQ(team.size(), 3);
  for (int run = 0; run < 2000; ++run) { // many short calls, as a prefill's GEMMs
    std::atomic<int> count[3] = {0, 0, 0};
    std::thread::id ids[3];
    team.run([&](int i) {
      ++count[i];
      ids[i] = std::this_thread::get_id();
    });
    ASSERT_EQ(count[0] + count[1] + count[2], 3) << "run " << run;
    ASSERT_EQ(count[0], 1);
    EXPECT_EQ(ids[0], std::this_thread::get_id()); // f(0) on the caller
    ASSERT_EQ(std::set<std::thread::id>(ids, ids + 3).size(), 3u);
  }
}

TEST(WorkerTeam, AFailureReachesTheCallerAndTheTeamGoesOn) {
  WorkerTeam team(2);
  EXPECT_THROW(team.run([](int i) {
    if (i == 1)
      throw Error("helper failed");
  }),
               Error);
  EXPECT_THROW(team.run([](int i) {
    if (i == 0)
      throw std::runtime_error("caller failed");
  }),
               std::runtime_error);
  std::atomic<int> done{0};
  team.run([&](int) { ++done; });
  EXPECT_EQ(done, 2);
}

TEST(WorkerTeam, HelpersThatSleptWakeForTheNextRun) {
  WorkerTeam team(2);
  std::atomic<int> done{0};
  for (int run = 0; run < 3; ++run) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // past the spin: asleep
    team.run([&](int) { ++done; });
  }
  EXPECT_EQ(done, 6);
}

TEST(TeamPool, LendsTheSameTeamAgainAndNewOnesWhenBusy) {
  TeamPool pool;
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
  again->run([&](int) { ++done; });
  EXPECT_EQ(done, 2);
}
