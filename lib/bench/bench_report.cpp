#include "bench/bench_report.hpp"

#include "core/atomic_file.hpp"

#include <fmt/format.h>

#include <cmath>

namespace optkit::bench {

namespace {

nlohmann::json
number_or_null(double value) {
  return value >= 0 && std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

std::string
ms(double seconds) {
  return seconds < 0 ? "-" : fmt::format("{:.1f}", seconds * 1e3);
}

} // namespace

nlohmann::json
to_json(const LatencySummary& s) {
  const auto interval = [](const Interval& i) {
    return i.low < 0 ? nlohmann::json(nullptr) : nlohmann::json::array({i.low, i.high});
  };
  return {{"count", s.count},
          {"mean", number_or_null(s.mean)},
          {"min", number_or_null(s.min)},
          {"max", number_or_null(s.max)},
          {"p50", number_or_null(s.p50)},
          {"p90", number_or_null(s.p90)},
          {"p95", number_or_null(s.p95)},
          {"p99", number_or_null(s.p99)},
          {"p99.9", number_or_null(s.p999)},
          {"p95_ci95", interval(s.p95_ci)},
          {"p99_ci95", interval(s.p99_ci)},
          {"p99.9_ci95", interval(s.p999_ci)}};
}

nlohmann::json
to_json(const TrialSummary& t) {
  nlohmann::json slos = nlohmann::json::array();
  for (const auto& v : t.slos)
    slos.push_back({{"slo", v.rule.text}, {"value_s", number_or_null(v.value)}, {"passed", v.passed}});
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [message, count] : t.errors)
    errors[message] = count;
  return {{"window_s", {t.window_start, t.window_end}},
          {"requests", t.requests},
          {"measured", t.measured},
          {"succeeded", t.succeeded},
          {"failed", t.failed},
          {"cancelled", t.cancelled},
          {"errors", errors},
          {"error_rate", t.error_rate},
          {"scheduled_rate", t.scheduled_rate},
          {"request_throughput", t.request_throughput},
          {"output_token_throughput", t.output_token_throughput},
          {"input_token_throughput", t.input_token_throughput},
          {"goodput", t.goodput},
          {"slo_attainment", t.slo_attainment},
          {"mean_input_tokens", t.mean_input_tokens},
          {"mean_output_tokens", t.mean_output_tokens},
          {"ttft_s", to_json(t.ttft)},
          {"tpot_s", to_json(t.tpot)},
          {"itl_s", to_json(t.itl)},
          {"e2e_s", to_json(t.e2e)},
          {"server_queue_s", to_json(t.server_queue)},
          {"dispatch_lag_s", to_json(t.dispatch_lag)},
          {"sends_achieved", t.sends_achieved},
          {"steady_state",
           {{"beta", t.steady.beta},
            {"alpha", t.steady.alpha},
            {"r", t.steady.r},
            {"n", t.steady.n},
            {"stable", t.steady.stable},
            {"in_flight_slope", t.steady.in_flight_slope},
            {"in_flight_mean", t.steady.in_flight_mean},
            {"backlog_growing", t.steady.backlog_growing}}},
          {"client_limited", t.client_limited},
          {"generator_lagged", t.generator_lagged},
          {"client_limited_reason", t.client_limited_reason},
          {"stopped_early", t.stopped_early.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.stopped_early)},
          {"slos", slos},
          {"tail_samples_needed", t.tail_samples_needed},
          {"failure", t.failure.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.failure)}};
}

nlohmann::json
to_json(const SettleReport& s) {
  if (!s.checked)
    return nullptr;
  const auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"drained", s.drained},
          {"waited_s", s.waited_s},
          {"probes", s.probes},
          {"probe_e2e_s", s.probe_e2e_s},
          {"running_left", optional(s.running_left)},
          {"waiting_left", optional(s.waiting_left)},
          {"running_at_start", optional(s.running_at_start)},
          {"waiting_at_start", optional(s.waiting_at_start)}};
}

nlohmann::json
to_json(const TrialResult& trial) {
  return {{"index", trial.index},
          {"phase", trial.phase},
          {"rate", trial.phase == "gate" ? nlohmann::json(nullptr) : nlohmann::json(trial.rate)},
          {"planned_requests", trial.planned_requests},
          {"duration_s", trial.recording.duration_s},
          {"passed", trial.passed},
          {"settle", to_json(trial.settle)},
          {"summary", to_json(trial.summary)}};
}

nlohmann::json
to_json(const Certification& c) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : c.trials)
    trials.push_back(to_json(t));
  const TrialResult* best = nullptr;
  for (const auto& t : c.trials)
    if (t.phase != "gate" && t.passed && t.rate == c.certified_rate)
      best = &t;
  return {{"status", to_string(c.status)},
          {"certified_rate", c.certified_rate},
          {"lowest_failing_rate", c.lowest_failing > 0 ? nlohmann::json(c.lowest_failing) : nlohmann::json(nullptr)},
          {"lower_bound", c.lower_bound},
          {"binding", c.binding.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.binding)},
          {"beta", best != nullptr ? nlohmann::json(best->summary.steady.beta) : nlohmann::json(nullptr)},
          {"converged", c.converged},
          {"stop_code", to_string(c.stop_code)},
          {"stop_reason", c.stop_reason},
          {"replicate_noise", c.replicate_noise.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.replicate_noise)},
          {"trials", trials}};
}

Table
trials_table(const Certification& c) {
  Table table({"trial", "phase", "rate", "requests", "req/s", "out tok/s", "ttft p95 ms", "tpot p50 ms", "e2e p95 ms",
               "lag p99 ms", "beta", "verdict"});
  for (const auto& t : c.trials) {
    const auto& s = t.summary;
    table.add_row(
        {t.index, t.phase, t.phase == "gate" ? nlohmann::json(nullptr) : nlohmann::json(t.rate), s.requests,
         std::round(s.request_throughput * 100) / 100, std::round(s.output_token_throughput * 10) / 10, ms(s.ttft.p95),
         ms(s.tpot.p50), ms(s.e2e.p95), ms(s.dispatch_lag.p99),
         t.phase == "gate" ? nlohmann::json(nullptr) : nlohmann::json(std::round(s.steady.beta * 1000) / 1000),
         t.passed ? "pass" : s.failure});
  }
  return table;
}

std::string
progress_line(const TrialResult& t) {
  const auto& s = t.summary;
  const std::string what = t.phase == "gate" ? "closed-loop gate (1 stream)" : fmt::format("{:.4g} req/s", t.rate);
  return fmt::format("trial {:>2} {:<28} {:>6} requests  e2e p95 {:>8} ms  ttft p95 {:>8} ms  beta {:.3f}  {}", t.index,
                     what, s.requests, ms(s.e2e.p95), ms(s.ttft.p95), s.steady.beta,
                     t.passed ? "pass" : "FAIL: " + s.failure);
}

void
write_request_rows(const Certification& c, const std::filesystem::path& file) {
  std::string text;
  for (const auto& t : c.trials)
    for (const auto& r : t.recording.requests) {
      nlohmann::json row = {{"trial", t.index},
                            {"phase", t.phase},
                            {"rate", t.rate},
                            {"index", r.index},
                            {"intended_s", r.intended},
                            {"sent_s", number_or_null(r.sent)},
                            {"first_token_s", number_or_null(r.first_token)},
                            {"end_s", number_or_null(r.end)},
                            {"input_tokens", r.input_tokens},
                            {"output_tokens", r.output_tokens},
                            {"chunks", r.chunk_times.size()},
                            {"server_queue_s", number_or_null(r.server_queue_s)},
                            {"status", r.status},
                            {"error", r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error)},
                            {"cancelled", r.cancelled}};
      if (r.conversation >= 0) {
        row["conversation"] = r.conversation;
        row["turn"] = r.turn;
      }
      text += row.dump() + "\n";
    }
  write_file_atomic(file, text);
}

} // namespace optkit::bench
