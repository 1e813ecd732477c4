// serve-deltas' /metrics in the Prometheus text format (0.0.4), named as vLLM names its series
// with an optkit: prefix, so dashboards and `optkit bench` read them the same way: requests
// running and waiting per model (as labels: the base and each variant), KV cache use, preemptions, prompt and
// generation token counters, finished requests by reason, and TTFT / inter-token / end-to-end latency histograms.
// Thread-safe.
#pragma once

#include "serve/engine.hpp"

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

// One series set per served model (the base and each variant, labelled model_name); what the
// engine counts for all of them (KV use, preemptions) carries the base's name.
class ServeMetrics {
public:
  // `models[0]` is the base; `models[i]` the variant with id i − 1.
  explicit ServeMetrics(std::vector<std::string> models);
  // `model`: an index into the names given.
  void request_finished(std::size_t model, const StepOutput& last, double ttft_s, double e2e_s);
  void inter_token(std::size_t model, double seconds);
  std::string render(const EngineStats& engine) const;

private:
  struct PerModel {
    std::string label; // model_name="..."
    Histogram ttft, itl, e2e;
    std::uint64_t stop = 0, length = 0, cancelled = 0, error = 0;
    std::uint64_t prompt_tokens = 0, generation_tokens = 0;
  };
  mutable std::mutex m_mutex;
  std::vector<PerModel> m_models;
};

} // namespace optkit::serve
