// The schedule replay: a gate that starts when its own model exists finishes the wave sooner than
// the seed's barrier when trials take unequal time; with equal times the two are the same.
#include "flow/schedule_model.hpp"

#include <doctest/doctest.h>

using namespace optkit::flow;

TEST_CASE("streaming beats the barrier when one trial is slow; the idle fraction counts empty slot time") {
  const std::vector<ModelTask> tasks = {{"c1", 1, 0, {}}, {"c2", 5, 0, {}}, {"g1", 3, 1, {"c1"}}, {"g2", 1, 1, {"c2"}}};
  const auto streaming = replay_schedule(tasks, 2, false);
  const auto barrier = replay_schedule(tasks, 2, true);
  CHECK(streaming.makespan_s == doctest::Approx(6)); // c1 → g1 on one slot while c2 runs
  CHECK(barrier.makespan_s == doctest::Approx(8));   // g1 waits for c2
  CHECK(streaming.idle_fraction == doctest::Approx(1.0 - 10.0 / 12.0));
  CHECK(barrier.idle_fraction == doctest::Approx(1.0 - 10.0 / 16.0));
}

TEST_CASE("equal trials: both schedules take the same time; one slot runs everything back to back") {
  const std::vector<ModelTask> tasks = {{"c1", 2, 0, {}}, {"c2", 2, 0, {}}, {"g1", 1, 1, {"c1"}}, {"g2", 1, 1, {"c2"}}};
  CHECK(replay_schedule(tasks, 2, false).makespan_s == doctest::Approx(3));
  CHECK(replay_schedule(tasks, 2, true).makespan_s == doctest::Approx(3));
  CHECK(replay_schedule(tasks, 1, false).makespan_s == doctest::Approx(6));
  CHECK(replay_schedule(tasks, 1, false).idle_fraction == doctest::Approx(0));
  CHECK_THROWS(replay_schedule({{"g", 1, 1, {"missing"}}}, 2, false));
}
