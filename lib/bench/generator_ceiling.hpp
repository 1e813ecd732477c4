// The load generator's own ceiling (`optkit bench --calibrate` measures it): open-loop trials at rising
// rates against a loopback endpoint that answers every completion at once with a one-chunk
// stream, so the only limit is the client (and this machine). The highest rate it holds with
// p99 dispatch lag within the bound and every scheduled request sent is its ceiling; results
// above that ceiling would measure the generator, not the server.
#pragma once

#include "archive/run_context.hpp"
#include "bench/load_generator.hpp"
#include "core/table.hpp"

#include <cstddef>
#include <vector>

namespace optkit::bench {

struct CeilingStep {
  double target_rate = 0;
  std::size_t requests = 0;
  double achieved_rate = 0; // requests sent / time from first to last send
  double lag_p50_s = 0, lag_p99_s = 0, lag_max_s = 0;
  std::size_t errors = 0;
  bool held = false;
};

struct CeilingMeasurement {
  std::vector<CeilingStep> steps;
  double max_sustained_rate = 0; // highest target held
  double lag_bound_s = 0;
};

// Rates double from `start_rate` up to `max_rate` until one is missed, then two bisection steps
// between the last rate held and the first missed; each step lasts about `seconds`.
CeilingMeasurement measure_generator_ceiling(double start_rate, double max_rate, double seconds, double lag_bound_s);

// The loopback no-op endpoint the ceiling is measured against, listening on a free port until destroyed.
class NoopEndpoint {
public:
  NoopEndpoint();
  ~NoopEndpoint();
  NoopEndpoint(const NoopEndpoint&) = delete;
  NoopEndpoint& operator=(const NoopEndpoint&) = delete;
  // Generator options aimed at it.
  GeneratorOptions generator_options() const;

private:
  struct Impl;
  std::unique_ptr<Impl> m;
};

// One open-loop step: `rate` requests/s for about `seconds`, judged held or not as the ceiling measurement
// judges it.
CeilingStep measure_generator_step(LoadGenerator& generator, double rate, double seconds, double lag_bound_s);

// One row per rate tried.
Table ceiling_table(const CeilingMeasurement& measurement);

// The generator's ceiling every certification carries: the newest one recorded on this host
// (metric `generator_max_rate` of an earlier bench run), else measured now (a short
// measurement, about 10 s) and recorded on this run so later runs find it.
struct GeneratorCeiling {
  double max_rate = 0;
  double lag_bound_s = 0;
  std::string source; // "run 17 (2026-11-23T17:20:01Z)" or "measured now"
};
GeneratorCeiling generator_ceiling(const archive::RunContext& context, double lag_bound_s);
// Records a ceiling measurement's figures on the context's run.
void record_ceiling(const archive::RunContext& context, const CeilingMeasurement& measurement);

} // namespace optkit::bench
