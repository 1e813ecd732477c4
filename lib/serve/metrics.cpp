#include "serve/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

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

ServeMetrics::ServeMetrics(const std::string& base) {
  m_models.push_back({fmt::format("model_name=\"{}\"", label_value(base)), Histogram(ttft_buckets()),
                      Histogram(itl_buckets()), Histogram(e2e_buckets())});
}

void
ServeMetrics::name_variant(std::int32_t variant, const std::string& name) {
  const std::lock_guard lock(m_mutex);
  const std::string label = fmt::format("model_name=\"{}\"", label_value(name));
  const auto it = std::find_if(m_models.begin(), m_models.end(), [&](const PerModel& m) { return m.label == label; });
  if (it != m_models.end()) {
    m_by_variant[variant] = static_cast<std::size_t>(it - m_models.begin());
    return;
  }
  m_models.push_back({label, Histogram(ttft_buckets()), Histogram(itl_buckets()), Histogram(e2e_buckets())});
  m_by_variant[variant] = m_models.size() - 1;
}

ServeMetrics::PerModel&
ServeMetrics::of(std::int32_t variant) {
  const auto it = m_by_variant.find(variant);
  return m_models[it == m_by_variant.end() ? 0 : it->second];
}

void
ServeMetrics::request_finished(std::int32_t variant, const StepOutput& last, double ttft_s, double e2e_s) {
  const std::lock_guard lock(m_mutex);
  PerModel& m = of(variant);
  m.prompt_tokens += static_cast<std::uint64_t>(last.prompt_tokens);
  m.generation_tokens += static_cast<std::uint64_t>(last.generated_tokens);
  switch (last.finish) {
  case FinishReason::stop:
    ++m.stop;
    break;
  case FinishReason::length:
    ++m.length;
    break;
  case FinishReason::cancelled:
    ++m.cancelled;
    return; // no latency for what never finished
  case FinishReason::error:
    ++m.error;
    return;
  case FinishReason::none:
    return;
  }
  if (ttft_s >= 0)
    m.ttft.observe(ttft_s);
  m.e2e.observe(e2e_s);
}

void
ServeMetrics::inter_token(std::int32_t variant, double seconds) {
  const std::lock_guard lock(m_mutex);
  of(variant).itl.observe(seconds);
}

std::string
ServeMetrics::render(const EngineStats& engine, const DeltaStore* deltas) const {
  const std::lock_guard lock(m_mutex);
  std::string out;
  const auto series = [&](const char* name, const char* type, const char* help, const std::string& body) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", name, help, name, type, body);
  };
  const auto one = [](const char* name, const std::string& labels, double value) {
    return fmt::format("{}{{{}}} {}\n", name, labels, value);
  };
  const auto per_model = [&](const char* name, const auto& value) {
    std::string body;
    for (std::size_t i = 0; i < m_models.size(); ++i)
      body += one(name, m_models[i].label, value(i));
    return body;
  };
  // The engine counts by variant id; a model's figure sums the ids that carry its name.
  const auto count_of = [&](const std::map<std::int32_t, std::int64_t>& counts, std::size_t i) {
    double total = 0;
    for (const auto& [variant, count] : counts) {
      const auto it = m_by_variant.find(variant);
      if ((it == m_by_variant.end() ? 0 : it->second) == i)
        total += double(count);
    }
    return total;
  };
  const std::string& base = m_models.front().label;
  series(
      "optkit:num_requests_running", "gauge", "Requests in the running batch.",
      per_model("optkit:num_requests_running", [&](std::size_t i) { return count_of(engine.running_by_variant, i); }));
  series(
      "optkit:num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
      per_model("optkit:num_requests_waiting", [&](std::size_t i) { return count_of(engine.waiting_by_variant, i); }));
  const double usage = engine.kv_capacity_blocks && *engine.kv_capacity_blocks > 0
                           ? double(engine.kv_used_blocks) / double(*engine.kv_capacity_blocks)
                           : 0.0;
  series("optkit:kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (1 = full).",
         one("optkit:kv_cache_usage_perc", base, usage));
  series("optkit:num_preemptions_total", "counter", "Sequences preempted for KV cache room (recomputed).",
         one("optkit:num_preemptions_total", base, double(engine.preemptions)));
  if (engine.prefix_caching) {
    series("optkit:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache at admission.",
           one("optkit:prefix_cache_queries_total", base, double(engine.prefix_cache_queries)));
    series("optkit:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache (not computed).",
           one("optkit:prefix_cache_hits_total", base, double(engine.prefix_cache_hits)));
  }
  series("optkit:prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         per_model("optkit:prompt_tokens_total", [&](std::size_t i) { return double(m_models[i].prompt_tokens); }));
  series("optkit:generation_tokens_total", "counter", "Tokens generated by finished requests.",
         per_model("optkit:generation_tokens_total",
                   [&](std::size_t i) { return double(m_models[i].generation_tokens); }));
  std::string finished;
  for (const auto& m : m_models)
    for (const auto& [reason, count] :
         {std::pair{"stop", m.stop}, {"length", m.length}, {"abort", m.cancelled}, {"error", m.error}})
      finished +=
          one("optkit:request_success_total", m.label + fmt::format(",finished_reason=\"{}\"", reason), double(count));
  series("optkit:request_success_total", "counter", "Requests finished, by reason.", finished);
  const auto histogram = [&](const char* name, const char* help, Histogram PerModel::*member) {
    std::string body;
    for (const auto& m : m_models)
      body += (m.*member).render(name, m.label);
    series(name, "histogram", help, body);
  };
  histogram("optkit:time_to_first_token_seconds", "Time to first token.", &PerModel::ttft);
  histogram("optkit:inter_token_latency_seconds", "Time between a request's successive tokens.", &PerModel::itl);
  histogram("optkit:e2e_request_latency_seconds", "Arrival to last token.", &PerModel::e2e);
  if (deltas != nullptr) {
    std::string resident;
    for (const auto& d : deltas->list())
      resident +=
          one("optkit:delta_resident", fmt::format("model_name=\"{}\"", label_value(d.name)), d.resident ? 1.0 : 0.0);
    series("optkit:delta_resident", "gauge", "1 when the delta is loaded in host memory, 0 when only on disk.",
           resident);
    const auto store = deltas->stats();
    series("optkit:delta_resident_bytes", "gauge", "Host memory the resident deltas hold.",
           one("optkit:delta_resident_bytes", base, double(store.resident_bytes)));
    series("optkit:delta_loads_total", "counter", "Deltas loaded from disk into host memory.",
           one("optkit:delta_loads_total", base, double(store.loads)));
    series("optkit:delta_evictions_total", "counter", "Deltas evicted from host memory.",
           one("optkit:delta_evictions_total", base, double(store.evictions)));
    series("optkit:delta_load_seconds_total", "counter", "Seconds spent loading deltas from disk.",
           one("optkit:delta_load_seconds_total", base, store.load_seconds));
  }
  return out;
}

} // namespace optkit::serve
