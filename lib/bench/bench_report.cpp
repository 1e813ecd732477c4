#include "bench/bench_report.hpp"

#include "core/atomic_file.hpp"
#include "core/json_fields.hpp"

#include <fmt/format.h>

#include <array>
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
          {"phase", to_string(trial.phase)},
          {"rate", trial.phase == TrialPhase::gate ? nlohmann::json(nullptr) : nlohmann::json(trial.rate)},
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
  const TrialResult* best = certifying_trial(c);
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

const TrialResult*
certifying_trial(const Certification& c) {
  const TrialResult* best = nullptr;
  for (const auto& t : c.trials)
    if (t.phase != TrialPhase::gate && t.passed && t.rate == c.certified_rate)
      best = &t;
  return best;
}

namespace {

// The value of `Enum` whose name (to_string) is `j`; out_of_range naming the field otherwise.
template <class Enum, std::size_t N>
Enum
named_value(const nlohmann::json& j, const std::array<Enum, N>& values) {
  for (const Enum value : values)
    if (to_string(value) == j.get<std::string>())
      return value;
  throw nlohmann::json::out_of_range::create(406, "'" + j.get<std::string>() + "' is not a value bench writes", &j);
}

double
number_or_unset(const nlohmann::json& j) { // the inverse of number_or_null
  return j.is_null() ? -1 : j.get<double>();
}

std::string
text_or_empty(const nlohmann::json& j) {
  return j.is_null() ? std::string() : j.get<std::string>();
}

Interval
interval_from_json(const nlohmann::json& j) {
  return j.is_null() ? Interval{-1, -1} : Interval{j.at(0).get<double>(), j.at(1).get<double>()};
}

LatencySummary
latency_from_json(const nlohmann::json& j) {
  LatencySummary s;
  s.count = json_integer<std::size_t>(j.at("count"));
  s.mean = number_or_unset(j.at("mean"));
  s.min = number_or_unset(j.at("min"));
  s.max = number_or_unset(j.at("max"));
  s.p50 = number_or_unset(j.at("p50"));
  s.p90 = number_or_unset(j.at("p90"));
  s.p95 = number_or_unset(j.at("p95"));
  s.p99 = number_or_unset(j.at("p99"));
  s.p999 = number_or_unset(j.at("p99.9"));
  s.p95_ci = interval_from_json(j.at("p95_ci95"));
  s.p99_ci = interval_from_json(j.at("p99_ci95"));
  s.p999_ci = interval_from_json(j.at("p99.9_ci95"));
  return s;
}

SteadyState
steady_from_json(const nlohmann::json& j) {
  SteadyState s;
  s.beta = j.at("beta").get<double>();
  s.alpha = j.at("alpha").get<double>();
  s.r = j.at("r").get<double>();
  s.n = json_integer<std::size_t>(j.at("n"));
  s.stable = j.at("stable").get<bool>();
  s.in_flight_slope = j.at("in_flight_slope").get<double>();
  s.in_flight_mean = j.at("in_flight_mean").get<double>();
  s.backlog_growing = j.at("backlog_growing").get<bool>();
  return s;
}

void
read_counts(const nlohmann::json& j, TrialSummary& t) {
  t.window_start = j.at("window_s").at(0).get<double>();
  t.window_end = j.at("window_s").at(1).get<double>();
  t.requests = json_integer<std::size_t>(j.at("requests"));
  t.measured = json_integer<std::size_t>(j.at("measured"));
  t.succeeded = json_integer<std::size_t>(j.at("succeeded"));
  t.failed = json_integer<std::size_t>(j.at("failed"));
  t.cancelled = json_integer<std::size_t>(j.at("cancelled"));
  for (const auto& [message, count] : j.at("errors").items())
    t.errors[message] = json_integer<std::size_t>(count);
  t.tail_samples_needed = json_integer<std::size_t>(j.at("tail_samples_needed"));
}

void
read_rates(const nlohmann::json& j, TrialSummary& t) {
  t.error_rate = j.at("error_rate").get<double>();
  t.scheduled_rate = j.at("scheduled_rate").get<double>();
  t.request_throughput = j.at("request_throughput").get<double>();
  t.output_token_throughput = j.at("output_token_throughput").get<double>();
  t.input_token_throughput = j.at("input_token_throughput").get<double>();
  t.goodput = j.at("goodput").get<double>();
  t.slo_attainment = j.at("slo_attainment").get<double>();
  t.mean_input_tokens = j.at("mean_input_tokens").get<double>();
  t.mean_output_tokens = j.at("mean_output_tokens").get<double>();
  t.sends_achieved = j.at("sends_achieved").get<double>();
}

void
read_verdicts(const nlohmann::json& j, TrialSummary& t) {
  t.client_limited = j.at("client_limited").get<bool>();
  t.generator_lagged = j.at("generator_lagged").get<bool>();
  t.client_limited_reason = j.at("client_limited_reason").get<std::string>();
  t.stopped_early = text_or_empty(j.at("stopped_early"));
  t.failure = text_or_empty(j.at("failure"));
  for (const auto& v : j.at("slos")) {
    t.slos.push_back(
        {parse_slo(v.at("slo").get<std::string>()), number_or_unset(v.at("value_s")), v.at("passed").get<bool>()});
    t.slos_passed = t.slos_passed && t.slos.back().passed;
  }
}

TrialSummary
summary_from_json(const nlohmann::json& j) {
  TrialSummary t;
  read_counts(j, t);
  read_rates(j, t);
  read_verdicts(j, t);
  t.ttft = latency_from_json(j.at("ttft_s"));
  t.tpot = latency_from_json(j.at("tpot_s"));
  t.itl = latency_from_json(j.at("itl_s"));
  t.e2e = latency_from_json(j.at("e2e_s"));
  t.server_queue = latency_from_json(j.at("server_queue_s"));
  t.dispatch_lag = latency_from_json(j.at("dispatch_lag_s"));
  t.steady = steady_from_json(j.at("steady_state"));
  return t;
}

SettleReport
settle_from_json(const nlohmann::json& j) {
  SettleReport s;
  if (j.is_null())
    return s;
  const auto optional = [](const nlohmann::json& v) {
    return v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
  };
  s.checked = true;
  s.drained = j.at("drained").get<bool>();
  s.waited_s = j.at("waited_s").get<double>();
  s.probes = json_integer<int>(j.at("probes"));
  s.probe_e2e_s = j.at("probe_e2e_s").get<double>();
  s.running_left = optional(j.at("running_left"));
  s.waiting_left = optional(j.at("waiting_left"));
  s.running_at_start = optional(j.at("running_at_start"));
  s.waiting_at_start = optional(j.at("waiting_at_start"));
  return s;
}

TrialResult
trial_from_json(const nlohmann::json& j) {
  using Phase = TrialPhase;
  TrialResult t;
  t.index = json_integer<int>(j.at("index"));
  t.phase = named_value(j.at("phase"), std::array{Phase::gate, Phase::search, Phase::replicate, Phase::trace,
                                                  Phase::rate, Phase::concurrency});
  t.rate = j.at("rate").is_null() ? 0.0 : j.at("rate").get<double>();
  t.planned_requests = json_integer<std::size_t>(j.at("planned_requests"));
  t.recording.duration_s = j.at("duration_s").get<double>();
  t.passed = j.at("passed").get<bool>();
  t.settle = settle_from_json(j.at("settle"));
  t.summary = summary_from_json(j.at("summary"));
  t.client_limited = t.summary.client_limited;
  return t;
}

} // namespace

Certification
certification_from_json(const nlohmann::json& j, const std::string& source) {
  return read_json_fields(source, [&] {
    using Status = CertificationStatus;
    Certification c;
    c.status = named_value(j.at("status"), std::array{Status::feasible, Status::infeasible, Status::client_limited,
                                                      Status::noisy, Status::interrupted});
    c.certified_rate = j.at("certified_rate").get<double>();
    c.lowest_failing = j.at("lowest_failing_rate").is_null() ? 0.0 : j.at("lowest_failing_rate").get<double>();
    c.lower_bound = j.at("lower_bound").get<double>();
    c.binding = text_or_empty(j.at("binding"));
    c.converged = j.at("converged").get<bool>();
    c.stop_code = named_value(j.at("stop_code"),
                              std::array{StopCode::gate_failed, StopCode::converged, StopCode::trial_budget,
                                         StopCode::client_limited, StopCode::interrupted, StopCode::single_trial});
    c.stop_reason = j.at("stop_reason").get<std::string>();
    c.replicate_noise = text_or_empty(j.at("replicate_noise"));
    for (const auto& t : j.at("trials"))
      c.trials.push_back(trial_from_json(t));
    return c;
  });
}

Table
trials_table(const Certification& c) {
  Table table({"trial", "phase", "rate", "requests", "req/s", "out tok/s", "ttft p95 ms", "tpot p50 ms", "e2e p95 ms",
               "lag p99 ms", "beta", "verdict"});
  for (const auto& t : c.trials) {
    const auto& s = t.summary;
    table.add_row({t.index, to_string(t.phase),
                   t.phase == TrialPhase::gate ? nlohmann::json(nullptr) : nlohmann::json(t.rate), s.requests,
                   std::round(s.request_throughput * 100) / 100, std::round(s.output_token_throughput * 10) / 10,
                   ms(s.ttft.p95), ms(s.tpot.p50), ms(s.e2e.p95), ms(s.dispatch_lag.p99),
                   t.phase == TrialPhase::gate ? nlohmann::json(nullptr)
                                               : nlohmann::json(std::round(s.steady.beta * 1000) / 1000),
                   t.passed ? "pass" : s.failure});
  }
  return table;
}

std::string
progress_line(const TrialResult& t) {
  const auto& s = t.summary;
  const std::string what =
      t.phase == TrialPhase::gate ? "closed-loop gate (1 stream)" : fmt::format("{:.4g} req/s", t.rate);
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
                            {"phase", to_string(t.phase)},
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
