// The CPUs optkit sizes its thread pools by: the affinity mask and a cgroup CPU quota, not every
// CPU of the machine. The quota parser against cgroup v2 and v1 texts; the count against what the
// kernel reports for this process; and, run by ctest under `taskset -c 0` with
// OPTKIT_TEST_EXPECT_CPUS=1, a default pool of one thread where the machine has more.
#include "core/available_cpus.hpp"
#include "core/thread_pool.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include <sched.h>

using namespace optkit;

TEST_CASE("a cgroup CPU quota is read as the CPUs it allows, rounded up") {
  CHECK(quota_cpus("200000 100000") == 2u);
  CHECK(quota_cpus("150000 100000\n") == 2u);
  CHECK(quota_cpus("100000 100000") == 1u);
  CHECK(quota_cpus("5000 100000") == 1u); // a fraction of a CPU still gets one thread
  CHECK(quota_cpus("1600000 100000") == 16u);
  CHECK_FALSE(quota_cpus("max 100000")); // cgroup v2: no quota
  CHECK_FALSE(quota_cpus("-1 100000"));  // cgroup v1: no quota
  CHECK_FALSE(quota_cpus(""));
  CHECK_FALSE(quota_cpus("200000"));
  CHECK_FALSE(quota_cpus("2e5 100000"));
  CHECK_FALSE(quota_cpus("200000 0"));
  CHECK_FALSE(quota_cpus("200000 100000 7"));
}

TEST_CASE("the available CPUs are at most the machine's and the process's affinity, and size a default pool") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const unsigned affinity = static_cast<unsigned>(CPU_COUNT(&set));
  MESSAGE("available " << available_cpus() << ", affinity " << affinity << ", hardware "
                       << std::thread::hardware_concurrency());
  CHECK(available_cpus() >= 1);
  CHECK(available_cpus() <= affinity);
  CHECK(available_cpus() <= std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool;
  CHECK(pool.size() == available_cpus());
  if (const char* expected = std::getenv("OPTKIT_TEST_EXPECT_CPUS")) {
    CHECK(available_cpus() == static_cast<unsigned>(std::stoul(expected)));
    CHECK(pool.size() == static_cast<unsigned>(std::stoul(expected)));
  }
  // An oversubscribed pool (more threads than CPUs: it sleeps instead of spinning) still runs
  // every item exactly once.
  ThreadPool crowded(available_cpus() * 3 + 1);
  std::atomic<std::int64_t> sum{0};
  for (int round = 0; round < 200; ++round)
    crowded.parallel_for(
        1000,
        [&](std::int64_t a, std::int64_t b) {
          for (std::int64_t i = a; i < b; ++i)
            sum += i;
        },
        round % 2 == 0 ? 0 : 7);
  CHECK(sum.load() == 200 * (999 * 1000 / 2));
}
