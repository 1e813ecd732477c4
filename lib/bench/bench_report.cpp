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

double
number_or_unset(const nlohmann::json& j) { // the inverse of number_or_null
  return j.is_null() ? -1 : j.get<double>();
}

std::string
ms(double seconds) {
  return seconds < 0 ? "-" : fmt::format("{:.1f}", seconds * 1e3);
}

// A struct's fields as its JSON carries them, by name: to_json writes them from these tables and
// certification_from_json reads them back through the same ones, so the two cannot drift apart.
template <class S, class T> using Field = std::pair<const char*, T S::*>;

template <class S, class T, std::size_t N>
void
write_fields(nlohmann::json& j, const S& s, const Field<S, T> (&fields)[N]) {
  for (const auto& [name, member] : fields)
    j[name] = s.*member;
}

template <class S, class T, std::size_t N>
void
read_fields(const nlohmann::json& j, S& s, const Field<S, T> (&fields)[N]) {
  for (const auto& [name, member] : fields)
    if constexpr (std::is_same_v<T, std::size_t>)
      s.*member = json_integer<std::size_t>(j.at(name));
    else
      s.*member = j.at(name).template get<T>();
}

constexpr Field<LatencySummary, double> kLatencyFigures[] = {
    {"mean", &LatencySummary::mean}, {"min", &LatencySummary::min},   {"max", &LatencySummary::max},
    {"p50", &LatencySummary::p50},   {"p90", &LatencySummary::p90},   {"p95", &LatencySummary::p95},
    {"p99", &LatencySummary::p99},   {"p99.9", &LatencySummary::p999}}; // null: no samples
constexpr Field<LatencySummary, Interval> kLatencyIntervals[] = {{"p95_ci95", &LatencySummary::p95_ci},
                                                                 {"p99_ci95", &LatencySummary::p99_ci},
                                                                 {"p99.9_ci95", &LatencySummary::p999_ci}};

constexpr Field<TrialSummary, std::size_t> kTrialCounts[] = {
    {"requests", &TrialSummary::requests},   {"measured", &TrialSummary::measured},
    {"succeeded", &TrialSummary::succeeded}, {"failed", &TrialSummary::failed},
    {"cancelled", &TrialSummary::cancelled}, {"tail_samples_needed", &TrialSummary::tail_samples_needed}};
constexpr Field<TrialSummary, double> kTrialFigures[] = {
    {"error_rate", &TrialSummary::error_rate},
    {"scheduled_rate", &TrialSummary::scheduled_rate},
    {"request_throughput", &TrialSummary::request_throughput},
    {"output_token_throughput", &TrialSummary::output_token_throughput},
    {"input_token_throughput", &TrialSummary::input_token_throughput},
    {"goodput", &TrialSummary::goodput},
    {"slo_attainment", &TrialSummary::slo_attainment},
    {"mean_input_tokens", &TrialSummary::mean_input_tokens},
    {"mean_output_tokens", &TrialSummary::mean_output_tokens},
    {"sends_achieved", &TrialSummary::sends_achieved}};
constexpr Field<TrialSummary, bool> kTrialFlags[] = {{"client_limited", &TrialSummary::client_limited},
                                                     {"generator_lagged", &TrialSummary::generator_lagged}};
constexpr Field<TrialSummary, std::string> kTrialTexts[] = {
    {"client_limited_reason", &TrialSummary::client_limited_reason}};
constexpr Field<TrialSummary, LatencySummary> kTrialLatencies[] = {{"ttft_s", &TrialSummary::ttft},
                                                                   {"tpot_s", &TrialSummary::tpot},
                                                                   {"itl_s", &TrialSummary::itl},
                                                                   {"e2e_s", &TrialSummary::e2e},
                                                                   {"server_queue_s", &TrialSummary::server_queue},
                                                                   {"dispatch_lag_s", &TrialSummary::dispatch_lag}};
constexpr Field<TrialSummary, std::string> kTrialNotes[] = {{"stopped_early", &TrialSummary::stopped_early},
                                                            {"failure", &TrialSummary::failure}};

constexpr Field<SteadyState, double> kSteadyFigures[] = {{"beta", &SteadyState::beta},
                                                         {"alpha", &SteadyState::alpha},
                                                         {"r", &SteadyState::r},
                                                         {"in_flight_slope", &SteadyState::in_flight_slope},
                                                         {"in_flight_mean", &SteadyState::in_flight_mean}};
constexpr Field<SteadyState, bool> kSteadyFlags[] = {{"stable", &SteadyState::stable},
                                                     {"backlog_growing", &SteadyState::backlog_growing}};

} // namespace

nlohmann::json
to_json(const LatencySummary& s) {
  nlohmann::json j = {{"count", s.count}};
  for (const auto& [name, member] : kLatencyFigures)
    j[name] = number_or_null(s.*member);
  for (const auto& [name, member] : kLatencyIntervals)
    j[name] =
        (s.*member).low < 0 ? nlohmann::json(nullptr) : nlohmann::json::array({(s.*member).low, (s.*member).high});
  return j;
}

nlohmann::json
to_json(const TrialSummary& t) {
  nlohmann::json j = {
      {"window_s", {t.window_start, t.window_end}}, {"errors", t.errors}, {"slos", nlohmann::json::array()}};
  write_fields(j, t, kTrialCounts);
  write_fields(j, t, kTrialFigures);
  write_fields(j, t, kTrialFlags);
  write_fields(j, t, kTrialTexts);
  for (const auto& [name, member] : kTrialLatencies)
    j[name] = to_json(t.*member);
  for (const auto& [name, member] : kTrialNotes)
    j[name] = (t.*member).empty() ? nlohmann::json(nullptr) : nlohmann::json(t.*member);
  for (const auto& v : t.slos)
    j["slos"].push_back({{"slo", v.rule.text}, {"value_s", number_or_null(v.value)}, {"passed", v.passed}});
  auto& steady = j["steady_state"] = {{"n", t.steady.n}};
  write_fields(steady, t.steady, kSteadyFigures);
  write_fields(steady, t.steady, kSteadyFlags);
  return j;
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

constexpr const char* kWrittenByBench = "a value bench writes";

std::string
text_or_empty(const nlohmann::json& j) {
  return j.is_null() ? std::string() : j.get<std::string>();
}

LatencySummary
latency_from_json(const nlohmann::json& j) {
  LatencySummary s;
  s.count = json_integer<std::size_t>(j.at("count"));
  for (const auto& [name, member] : kLatencyFigures)
    s.*member = number_or_unset(j.at(name));
  for (const auto& [name, member] : kLatencyIntervals) {
    const auto& interval = j.at(name);
    s.*member =
        interval.is_null() ? Interval{-1, -1} : Interval{interval.at(0).get<double>(), interval.at(1).get<double>()};
  }
  return s;
}

TrialSummary
summary_from_json(const nlohmann::json& j) {
  TrialSummary t;
  t.window_start = j.at("window_s").at(0).get<double>();
  t.window_end = j.at("window_s").at(1).get<double>();
  for (const auto& [message, count] : j.at("errors").items())
    t.errors[message] = json_integer<std::size_t>(count);
  read_fields(j, t, kTrialCounts);
  read_fields(j, t, kTrialFigures);
  read_fields(j, t, kTrialFlags);
  read_fields(j, t, kTrialTexts);
  for (const auto& [name, member] : kTrialLatencies)
    t.*member = latency_from_json(j.at(name));
  for (const auto& [name, member] : kTrialNotes)
    t.*member = text_or_empty(j.at(name));
  for (const auto& v : j.at("slos")) {
    t.slos.push_back(
        {parse_slo(v.at("slo").get<std::string>()), number_or_unset(v.at("value_s")), v.at("passed").get<bool>()});
    t.slos_passed = t.slos_passed && t.slos.back().passed;
  }
  const auto& steady = j.at("steady_state");
  t.steady.n = json_integer<std::size_t>(steady.at("n"));
  read_fields(steady, t.steady, kSteadyFigures);
  read_fields(steady, t.steady, kSteadyFlags);
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
  t.phase =
      json_enum(j.at("phase"),
                std::array{Phase::gate, Phase::search, Phase::replicate, Phase::trace, Phase::rate, Phase::concurrency},
                kWrittenByBench);
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
    c.status = json_enum(
        j.at("status"),
        std::array{Status::feasible, Status::infeasible, Status::client_limited, Status::noisy, Status::interrupted},
        kWrittenByBench);
    c.certified_rate = j.at("certified_rate").get<double>();
    c.lowest_failing = j.at("lowest_failing_rate").is_null() ? 0.0 : j.at("lowest_failing_rate").get<double>();
    c.lower_bound = j.at("lower_bound").get<double>();
    c.binding = text_or_empty(j.at("binding"));
    c.converged = j.at("converged").get<bool>();
    c.stop_code = json_enum(j.at("stop_code"),
                            std::array{StopCode::gate_failed, StopCode::converged, StopCode::trial_budget,
                                       StopCode::client_limited, StopCode::interrupted, StopCode::single_trial},
                            kWrittenByBench);
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
