// serve-deltas' /metrics in the Prometheus text format (0.0.4), named as vLLM names its series
// with an optkit: prefix, so dashboards and `optkit bench` read them the same way: requests
// running and waiting per model (as labels: the base and each variant), KV cache use, preemptions, prompt and
// generation token counters, finished requests by reason, and TTFT / inter-token / end-to-end latency histograms.
// Thread-safe.
#pragma once

#include "serve/delta_store.hpp"
#include "serve/engine.hpp"

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace optkit::serve {

class Histogram {
public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // name_bucket{le=...} (cumulative, +Inf last), name_sum, name_count, with `labels` (k="v",...).
  std::string render(const std::string& name, const std::string& labels) const;

private:
  std::vector<double> m_bounds;
  std::vector<std::uint64_t> m_counts; // per bucket, not cumulative; the last is +Inf
  double m_sum = 0;
  std::uint64_t m_count = 0;
};

// One series set per served model name (the base and each variant, labelled model_name); what
// the engine counts for all of them (KV use, preemptions) carries the base's name. Variants are
// named as they are registered (a name registered again under a new id keeps its series).
class ServeMetrics {
public:
  explicit ServeMetrics(const std::string& base);
  void name_variant(std::int32_t variant, const std::string& name);
  // `variant`: the engine's variant id (-1 the base); one not named counts for the base.
  void request_finished(std::int32_t variant, const StepOutput& last, double ttft_s, double e2e_s);
  void inter_token(std::int32_t variant, double seconds);
  // The engine's series and per-model series; with a delta store, its tiers too: which deltas are
  // resident in host memory (per model_name, 1 or 0), resident bytes, loads from disk, evictions
  // and the seconds loads took.
  std::string render(const EngineStats& engine, const DeltaStore* deltas = nullptr) const;

private:
  struct PerModel {
    std::string label; // model_name="..."
    Histogram ttft, itl, e2e;
    std::uint64_t stop = 0, length = 0, cancelled = 0, error = 0;
    std::uint64_t prompt_tokens = 0, generation_tokens = 0;
  };
  PerModel& of(std::int32_t variant); // m_mutex held
  mutable std::mutex m_mutex;
  std::vector<PerModel> m_models;                   // the base first
  std::map<std::int32_t, std::size_t> m_by_variant; // variant id → index in m_models
};

} // namespace optkit::serve
