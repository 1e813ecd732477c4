// serve-deltas' /metrics in the Prometheus text format (0.0.4), named as vLLM names its series
// with an optkit: prefix, so dashboards and `optkit bench` read them the same way: requests
// running and waiting per model (as labels), KV cache use, preemptions, prompt and generation
// token counters, finished requests by reason, and TTFT / inter-token / end-to-end latency
// histograms. Thread-safe.
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

class ServeMetrics {
public:
  explicit ServeMetrics(std::string model_name);
  void request_finished(const StepOutput& last, double ttft_s, double e2e_s);
  void inter_token(double seconds);
  std::string render(const EngineStats& engine) const;

private:
  std::string m_model;
  mutable std::mutex m_mutex;
  Histogram m_ttft, m_itl, m_e2e;
  std::uint64_t m_stop = 0, m_length = 0, m_cancelled = 0, m_error = 0;
};

} // namespace optkit::serve
