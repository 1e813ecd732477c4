#include "flow/schedule_model.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>

namespace optkit::flow {

ScheduleReplay
replay_schedule(const std::vector<ModelTask>& tasks, int slots, bool barrier) {
  if (slots < 1)
    throw std::invalid_argument("replay_schedule: slots < 1");
  std::vector<double> slot_free(static_cast<std::size_t>(slots), 0.0);
  std::map<std::string, double> finish;
  std::map<int, double> wave_end; // latest finish of each wave scheduled so far
  std::vector<bool> placed(tasks.size(), false);
  double busy = 0, makespan = 0;
  for (std::size_t n = 0; n < tasks.size(); ++n) {
    // The task that can start earliest (list order breaks ties) on the earliest free slot.
    const auto slot = std::min_element(slot_free.begin(), slot_free.end());
    std::size_t best = tasks.size();
    double best_start = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (placed[i])
        continue;
      const auto& t = tasks[i];
      double ready = 0;
      bool inputs_known = true;
      for (const auto& r : t.reads) {
        const auto f = finish.find(r);
        if (f == finish.end()) {
          inputs_known = false;
          break;
        }
        ready = std::max(ready, f->second);
      }
      if (!inputs_known)
        continue;
      if (barrier) {
        // Every task of the earlier waves must be placed and finished.
        bool earlier_pending = false;
        for (std::size_t j = 0; j < tasks.size(); ++j)
          earlier_pending = earlier_pending || (!placed[j] && tasks[j].wave < t.wave);
        if (earlier_pending)
          continue;
        for (const auto& [w, end] : wave_end)
          if (w < t.wave)
            ready = std::max(ready, end);
      }
      const double start = std::max(*slot, ready);
      if (start < best_start) {
        best_start = start;
        best = i;
      }
    }
    if (best == tasks.size())
      throw std::invalid_argument("replay_schedule: a task reads one that is not in the list");
    placed[best] = true;
    const double end = best_start + tasks[best].seconds;
    *slot = end;
    finish[tasks[best].name] = end;
    wave_end[tasks[best].wave] = std::max(wave_end[tasks[best].wave], end);
    busy += tasks[best].seconds;
    makespan = std::max(makespan, end);
  }
  ScheduleReplay r;
  r.makespan_s = makespan;
  r.idle_fraction = makespan > 0 ? 1.0 - busy / (makespan * slots) : 0.0;
  return r;
}

} // namespace optkit::flow
