#include "serve/metrics.hpp"

#include <fmt/format.h>

namespace optkit::serve {

Histogram::Histogram(std::vector<double> upper_bounds)
    : m_bounds(std::move(upper_bounds)), m_counts(m_bounds.size() + 1, 0) {}

void
Histogram::observe(double value) {
  std::size_t i = 0;
  while (i < m_bounds.size() && value > m_bounds[i])
    ++i;
  ++m_counts[i];
  m_sum += value;
  ++m_count;
}

std::string
Histogram::render(const std::string& name, const std::string& labels) const {
  std::string out;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= m_bounds.size(); ++i) {
    cumulative += m_counts[i];
    const std::string le = i < m_bounds.size() ? fmt::format("{}", m_bounds[i]) : "+Inf";
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, m_sum, name, labels, m_count);
  return out;
}

namespace {

// vLLM's buckets for these three series.
std::vector<double>
ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double>
itl_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double>
e2e_buckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
}

// Label values escape backslash, quote and newline.
std::string
label_value(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '"')
      out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

} // namespace

ServeMetrics::ServeMetrics(std::string model_name)
    : m_model(label_value(model_name)), m_ttft(ttft_buckets()), m_itl(itl_buckets()), m_e2e(e2e_buckets()) {}

void
ServeMetrics::request_finished(const StepOutput& last, double ttft_s, double e2e_s) {
  const std::lock_guard lock(m_mutex);
  switch (last.finish) {
  case FinishReason::stop:
    ++m_stop;
    break;
  case FinishReason::length:
    ++m_length;
    break;
  case FinishReason::cancelled:
    ++m_cancelled;
    return; // no latency for what never finished
  case FinishReason::error:
    ++m_error;
    return;
  case FinishReason::none:
    return;
  }
  if (ttft_s >= 0)
    m_ttft.observe(ttft_s);
  m_e2e.observe(e2e_s);
}

void
ServeMetrics::inter_token(double seconds) {
  const std::lock_guard lock(m_mutex);
  m_itl.observe(seconds);
}

std::string
ServeMetrics::render(const EngineStats& engine) const {
  const std::lock_guard lock(m_mutex);
  const std::string model = fmt::format("model_name=\"{}\"", m_model);
  std::string out;
  const auto series = [&](const char* name, const char* type, const char* help, const std::string& body) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", name, help, name, type, body);
  };
  const auto one = [&](const char* name, const std::string& labels, double value) {
    return fmt::format("{}{{{}}} {}\n", name, labels, value);
  };
  series("optkit:num_requests_running", "gauge", "Requests in the running batch.",
         one("optkit:num_requests_running", model, double(engine.running)));
  series("optkit:num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
         one("optkit:num_requests_waiting", model, double(engine.waiting)));
  const double usage = engine.kv_capacity_blocks && *engine.kv_capacity_blocks > 0
                           ? double(engine.kv_used_blocks) / double(*engine.kv_capacity_blocks)
                           : 0.0;
  series("optkit:kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (1 = full).",
         one("optkit:kv_cache_usage_perc", model, usage));
  series("optkit:num_preemptions_total", "counter", "Sequences preempted for KV cache room (recomputed).",
         one("optkit:num_preemptions_total", model, double(engine.preemptions)));
  series("optkit:prompt_tokens_total", "counter", "Prompt tokens prefilled (recomputation included).",
         one("optkit:prompt_tokens_total", model, double(engine.prompt_tokens)));
  series("optkit:generation_tokens_total", "counter", "Tokens generated.",
         one("optkit:generation_tokens_total", model, double(engine.generated_tokens)));
  std::string finished;
  for (const auto& [reason, count] :
       {std::pair{"stop", m_stop}, {"length", m_length}, {"abort", m_cancelled}, {"error", m_error}})
    finished +=
        one("optkit:request_success_total", model + fmt::format(",finished_reason=\"{}\"", reason), double(count));
  series("optkit:request_success_total", "counter", "Requests finished, by reason.", finished);
  series("optkit:time_to_first_token_seconds", "histogram", "Time to first token.",
         m_ttft.render("optkit:time_to_first_token_seconds", model));
  series("optkit:inter_token_latency_seconds", "histogram", "Time between a request's successive tokens.",
         m_itl.render("optkit:inter_token_latency_seconds", model));
  series("optkit:e2e_request_latency_seconds", "histogram", "Arrival to last token.",
         m_e2e.render("optkit:e2e_request_latency_seconds", model));
  return out;
}

} // namespace optkit::serve
