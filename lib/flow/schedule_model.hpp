// What the first wave's schedule cost, replayed from the tasks' measured durations: as the flow
// runs it (a task starts once its own inputs exist) and as OptiKit's Algorithm 2 runs it (a
// barrier: no evaluation starts until every compression trial has finished). Replaying both from
// the same durations compares the schedules, not the noise of two runs.
#pragma once

#include <string>
#include <vector>

namespace optkit::flow {

struct ModelTask {
  std::string name;
  double seconds = 0;
  int wave = 0; // barrier schedule: wave w starts when every task of waves < w has finished
  std::vector<std::string> reads;
};

struct ScheduleReplay {
  double makespan_s = 0;
  double idle_fraction = 0; // of slots × makespan
};

// Greedy list scheduling on `slots`, in the given order among tasks ready at the same time.
ScheduleReplay replay_schedule(const std::vector<ModelTask>& tasks, int slots, bool barrier);

} // namespace optkit::flow
