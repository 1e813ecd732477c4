#include "archive/run_report.hpp"

#include "core/clock.hpp"
#include "core/statistics.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

namespace optkit::archive {
namespace {

nlohmann::json
optional_json(const std::optional<std::int64_t>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json
time_json(const std::optional<std::int64_t>& ms) {
  return ms ? nlohmann::json(iso8601_utc(*ms)) : nlohmann::json(nullptr);
}

nlohmann::json
duration_json(std::int64_t start, const std::optional<std::int64_t>& end) {
  return end ? nlohmann::json(static_cast<double>(*end - start) / 1000.0) : nlohmann::json(nullptr);
}

nlohmann::json
text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}

// Flattens nested objects into "a.b.c" keys so two configs can be compared key by key.
void
flatten(const nlohmann::json& value, const std::string& prefix, std::map<std::string, nlohmann::json>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, child] : value.items()) {
      flatten(child, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else {
    out[prefix] = value;
  }
}

} // namespace

Table
runs_table(const std::vector<RunRecord>& runs) {
  Table table({"id", "command", "status", "exit_code", "started_at", "duration_s", "host", "version"});
  for (const auto& run : runs) {
    table.add_row({run.id, run.command, run.status, optional_json(run.exit_code), iso8601_utc(run.started_at),
                   duration_json(run.started_at, run.ended_at), run.host, run.version});
  }
  return table;
}

nlohmann::json
run_json(const RunRecord& run) {
  return {{"id", run.id},
          {"command", run.command},
          {"status", run.status},
          {"exit_code", optional_json(run.exit_code)},
          {"error", text_or_null(run.error)},
          {"started_at", iso8601_utc(run.started_at)},
          {"ended_at", time_json(run.ended_at)},
          {"duration_s", duration_json(run.started_at, run.ended_at)},
          {"argv", run.argv},
          {"config", run.config},
          {"version", run.version},
          {"git_commit", run.git_commit},
          {"host", run.host},
          {"pid", run.pid},
          {"cwd", run.cwd}};
}

nlohmann::json
run_detail_json(const RunDetail& detail) {
  nlohmann::json out = run_json(detail.run);
  out["trials"] = nlohmann::json::array();
  for (const auto& t : detail.trials) {
    out["trials"].push_back({{"id", t.id},
                             {"trial_index", t.trial_index},
                             {"attempt", t.attempt},
                             {"params", t.params},
                             {"status", t.status},
                             {"exit_code", optional_json(t.exit_code)},
                             {"signal", optional_json(t.signal)},
                             {"result", t.result},
                             {"error", text_or_null(t.error)},
                             {"started_at", iso8601_utc(t.started_at)},
                             {"ended_at", time_json(t.ended_at)}});
  }
  out["metrics"] = metrics_table(detail).to_json();
  out["artifacts"] = nlohmann::json::array();
  for (const auto& a : detail.artifacts) {
    out["artifacts"].push_back({{"id", a.id},
                                {"trial_id", optional_json(a.trial_id)},
                                {"path", a.path},
                                {"kind", a.kind},
                                {"sha256", a.sha256},
                                {"bytes", a.bytes}});
  }
  out["events"] = nlohmann::json::array();
  for (const auto& e : detail.events) {
    out["events"].push_back({{"time", iso8601_utc(e.time)},
                             {"trial_id", optional_json(e.trial_id)},
                             {"level", e.level},
                             {"kind", e.kind},
                             {"message", e.message},
                             {"data", e.data}});
  }
  return out;
}

Table
metrics_table(const RunDetail& detail) {
  std::map<std::int64_t, const TrialRecord*> trials;
  for (const auto& t : detail.trials) {
    trials[t.id] = &t;
  }
  Table table({"run_id", "trial_index", "attempt", "name", "value", "unit", "step", "recorded_at"});
  for (const auto& m : detail.metrics) {
    const TrialRecord* trial = m.trial_id && trials.contains(*m.trial_id) ? trials[*m.trial_id] : nullptr;
    table.add_row({m.run_id, trial ? nlohmann::json(trial->trial_index) : nlohmann::json(nullptr),
                   trial ? nlohmann::json(trial->attempt) : nlohmann::json(nullptr), m.name,
                   m.value ? nlohmann::json(*m.value) : nlohmann::json(nullptr), m.unit, optional_json(m.step),
                   iso8601_utc(m.recorded_at)});
  }
  return table;
}

std::map<std::string, MetricSummary>
summarize_metrics(const RunDetail& detail) {
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, std::string> units;
  for (const auto& m : detail.metrics) {
    units[m.name] = m.unit;
    auto& list = values[m.name];
    if (m.value) {
      list.push_back(*m.value);
    }
  }
  std::map<std::string, MetricSummary> out;
  for (const auto& [name, list] : values) {
    const SampleSummary sample = summarize(list);
    out[name] = {.unit = units[name], .count = sample.count, .mean = sample.mean, .stddev = sample.stddev};
  }
  return out;
}

std::string
run_detail_text(const RunDetail& d, bool color) {
  const RunRecord& r = d.run;
  std::string out = fmt::format("run {}: {} — {}", r.id, r.command, r.status);
  if (r.exit_code) {
    out += fmt::format(" (exit {})", *r.exit_code);
  }
  out += "\n";
  out += fmt::format("  started   {}\n", iso8601_utc(r.started_at));
  if (r.ended_at) {
    out += fmt::format("  duration  {}\n", format_duration(static_cast<double>(*r.ended_at - r.started_at) / 1000.0));
  }
  out += fmt::format("  host      {} (pid {})\n  version   {} ({})\n  cwd       {}\n", r.host, r.pid, r.version,
                     r.git_commit, r.cwd);
  std::vector<std::string> args;
  for (const auto& a : r.argv) {
    args.push_back(a.is_string() ? a.get<std::string>() : a.dump());
  }
  out += fmt::format("  argv      {}\n", join(args, " "));
  if (!r.error.empty()) {
    out += fmt::format("  error     {}\n", r.error);
  }
  if (!d.trials.empty()) {
    Table trials({"trial", "attempt", "status", "exit_code", "signal", "duration_s", "error"});
    for (const auto& t : d.trials) {
      trials.add_row({t.trial_index, t.attempt, t.status, optional_json(t.exit_code),
                      t.signal ? nlohmann::json(signal_name(static_cast<int>(*t.signal))) : nlohmann::json(nullptr),
                      duration_json(t.started_at, t.ended_at), text_or_null(t.error)});
    }
    out += fmt::format("\ntrials ({} attempts)\n", d.trials.size()) + trials.render_text(color);
  }
  const auto summary = summarize_metrics(d);
  if (!summary.empty()) {
    Table metrics({"metric", "unit", "n", "mean", "stddev"});
    for (const auto& [name, s] : summary) {
      metrics.add_row(
          {name, s.unit, s.count, std::isfinite(s.mean) ? nlohmann::json(s.mean) : nlohmann::json(nullptr), s.stddev});
    }
    out += "\nmetrics\n" + metrics.render_text(color);
  }
  if (!d.artifacts.empty()) {
    Table artifacts({"kind", "bytes", "sha256", "path"});
    for (const auto& a : d.artifacts) {
      artifacts.add_row({a.kind, a.bytes, a.sha256.substr(0, 16), a.path});
    }
    out += "\nartifacts\n" + artifacts.render_text(color);
  }
  if (!d.events.empty()) {
    Table events({"time", "level", "kind", "message"});
    for (const auto& e : d.events) {
      events.add_row({iso8601_utc(e.time), e.level, e.kind, e.message});
    }
    out += "\nevents\n" + events.render_text(color);
  }
  return out;
}

Table
compare_runs(const RunDetail& a, const RunDetail& b) {
  Table table(
      {"item", "unit", fmt::format("run {}", a.run.id), fmt::format("run {}", b.run.id), "delta", "change_pct"});
  table.add_row({"command", "", a.run.command, b.run.command, nullptr, nullptr});
  table.add_row({"status", "", a.run.status, b.run.status, nullptr, nullptr});
  std::map<std::string, nlohmann::json> config_a, config_b;
  flatten(a.run.config, "", config_a);
  flatten(b.run.config, "", config_b);
  std::set<std::string> keys;
  for (const auto& [k, v] : config_a) {
    keys.insert(k);
  }
  for (const auto& [k, v] : config_b) {
    keys.insert(k);
  }
  for (const auto& key : keys) {
    const auto va = config_a.contains(key) ? config_a[key] : nlohmann::json(nullptr);
    const auto vb = config_b.contains(key) ? config_b[key] : nlohmann::json(nullptr);
    if (va != vb) {
      table.add_row({"config." + key, "", va.is_string() ? va : nlohmann::json(va.dump()),
                     vb.is_string() ? vb : nlohmann::json(vb.dump()), nullptr, nullptr});
    }
  }
  auto ma = summarize_metrics(a);
  auto mb = summarize_metrics(b);
  std::set<std::string> names;
  for (const auto& [n, s] : ma) {
    names.insert(n);
  }
  for (const auto& [n, s] : mb) {
    names.insert(n);
  }
  const auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const auto& name : names) {
    const bool in_a = ma.contains(name) && ma[name].count > 0;
    const bool in_b = mb.contains(name) && mb[name].count > 0;
    const double va = in_a ? ma[name].mean : std::nan("");
    const double vb = in_b ? mb[name].mean : std::nan("");
    const std::string unit = ma.contains(name) ? ma[name].unit : mb[name].unit;
    const double delta = vb - va;
    const double change = in_a && va != 0 ? 100.0 * delta / std::fabs(va) : std::nan("");
    table.add_row({"metric." + name, unit, number(va), number(vb), number(delta), number(change)});
  }
  return table;
}

} // namespace optkit::archive
