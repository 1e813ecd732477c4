// Measures a profile sweep through an OperatorTimer and renders the perf-database CSV tables
// (profiles/perf/<system>/*.csv, the columns PerfDatabase reads), with the peak rates reached.
#pragma once

#include "plan/operator_timer.hpp"
#include "plan/profile_sweep.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace optkit::plan {

// What a profile measured: the child's answer, archived by the run and kept in profile.json.
struct ProfileReport {
  std::string device;
  std::size_t measured = 0;
  std::vector<std::string> failures;         // a point the device refused, and why
  std::map<std::string, double> best_tflops; // GEMM kind → highest rate reached
  double best_copy_gbs = 0;                  // bytes read + written per second
};
nlohmann::json to_json(const ProfileReport& report);
ProfileReport profile_report_from_json(const nlohmann::json& j);

struct MeasuredTables : ProfileReport {
  std::map<std::string, std::string> csv; // table file name → CSV text
};

// Points are measured in sweep order; a point that throws is recorded in `failures` and skipped
// (RuntimeFailure when a 1 MiB copy fails after it as well: the device is no longer usable).
MeasuredTables measure_sweep(const ProfileSweep& sweep, OperatorTimer& timer,
                             const std::function<void(std::size_t done, std::size_t total)>& progress = {});

} // namespace optkit::plan
