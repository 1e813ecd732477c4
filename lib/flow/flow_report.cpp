#include "flow/flow_report.hpp"

#include "bench/bench_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

namespace optkit::flow {

namespace {

// One part of the report, rendered the same way to Markdown and HTML.
struct Section {
  std::string heading;
  std::vector<std::string> paragraphs;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string code;                // a command, shown verbatim
  std::vector<std::string> charts; // SVG, inline in the HTML report (the Markdown one has none)
};

std::string
number(double v, const char* fmt_spec = "{:.4g}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(fmt_spec), v) : "–";
}

// A latency in seconds; "–" when the trial had no samples (−1).
std::string
latency(double seconds) {
  return seconds < 0 ? "–" : number(seconds);
}

std::string
optional_number(const std::optional<double>& v, const char* fmt_spec = "{:.4g}") {
  return v ? fmt::format(fmt::runtime(fmt_spec), *v) : "–";
}

std::vector<Section>
sections(const FlowJob& job, const FlowOutcome& o, const std::vector<std::string>& launch) {
  std::vector<Section> out;
  const auto& chosen = o.trials.at(*o.chosen);
  Section summary{"Summary", {}, {}, {}, {}};
  summary.paragraphs.push_back(fmt::format(
      "Model `{}` compressed with {} recipe(s) × {} trial(s); {} of {} trials passed the quality gate `{}` on `{}`. "
      "Chosen: **{} trial {}** (seed {}, gate margin {}, calibration loss {}), the best gate margin, ties broken "
      "by calibration loss.",
      job.model, job.compress.recipes.size(), job.compress.trials,
      std::count_if(o.trials.begin(), o.trials.end(),
                    [](const CompressTrial& t) { return t.verdict == TrialVerdict::passed; }),
      o.trials.size(), job.gate.gate, job.gate.suite, chosen.recipe, chosen.trial, chosen.seed,
      optional_number(chosen.gate_margin), optional_number(chosen.calibration_loss)));
  const auto* certifying = bench::certifying_trial(*o.bench);
  summary.paragraphs.push_back(
      fmt::format("Certified rate under {}: **{} req/s** (β = {}, {}; trials count only while the load generator's p99 "
                  "dispatch lag stays within {}).",
                  fmt::join(job.bench.slos, ", "), number(o.bench->certified_rate, "{:.3g}"),
                  certifying ? number(certifying->summary.steady.beta, "{:.3f}") : "–", o.bench->stop_reason,
                  job.bench.max_dispatch_lag_ms > 0 ? fmt::format("{} ms", job.bench.max_dispatch_lag_ms)
                                                    : std::string("bench's default bound")));
  if (o.bench_baseline)
    summary.paragraphs.push_back(fmt::format("The uncompressed model under the same SLOs and profile: {} req/s ({}).",
                                             number(o.bench_baseline->certified_rate, "{:.3g}"),
                                             bench::to_string(o.bench_baseline->status)));
  out.push_back(summary);

  Section trials{"Compression trials and the quality gate",
                 {},
                 {"recipe", "trial", "seed", "calibration loss", "compression", "score vs baseline, recovery [95 % CI]",
                  "gate margin", "status", "gate rules"},
                 {},
                 {}};
  for (std::size_t i = 0; i < o.trials.size(); ++i) {
    const auto& t = o.trials[i];
    trials.rows.push_back({t.recipe + (i == *o.chosen ? " (chosen)" : ""), std::to_string(t.trial),
                           std::to_string(t.seed), optional_number(t.calibration_loss),
                           optional_number(t.compression_ratio, "{:.2f}×"),
                           fmt::format("{}", fmt::join(t.quality, "; ")), optional_number(t.gate_margin),
                           status_text(t), fmt::format("{}", fmt::join(t.gate_lines, "; "))});
  }
  out.push_back(trials);

  Section bench{"SLO certification (OptiKit Algorithm 1)",
                {},
                {"phase", "rate req/s", "passed", "requests", "e2e p50 s", "ttft p50 s", "β", "stable", "why not"},
                {},
                {}};
  for (const auto& t : o.bench->trials) {
    const bool gate = t.phase == bench::TrialPhase::gate;
    const auto& s = t.summary;
    bench.rows.push_back({to_string(t.phase), gate ? "–" : number(t.rate, "{:.3g}"), t.passed ? "yes" : "no",
                          number(static_cast<double>(s.requests), "{:.0f}"), latency(s.e2e.p50), latency(s.ttft.p50),
                          number(s.steady.beta, "{:.3f}"), s.steady.stable ? "yes" : "no", s.failure});
  }
  bench.charts = o.bench_charts;
  out.push_back(bench);

  for (const auto* study : {&o.tune_sim, &o.tune_live}) {
    if (!*study)
      continue;
    Section s{study == &o.tune_sim ? "Tuning on the simulator" : "Tuning on the live engine",
              {},
              {"trial", "phase", "config", "status", "value"},
              {},
              {}};
    const auto& result = (*study)->study;
    for (const auto& t : result.trials)
      s.rows.push_back({std::to_string(t.number), tune::to_string(t.phase), t.config.dump(),
                        tune::to_string(t.outcome.status), number(t.outcome.value)});
    s.paragraphs.push_back(
        result.best ? fmt::format("Best: `{}`, median objective {}.", result.best->dump(), number(result.best_median))
                    : "No configuration met the SLO every time.");
    s.charts = study == &o.tune_sim ? o.tune_sim_charts : o.tune_live_charts;
    out.push_back(s);
  }

  Section time{
      "Where the time went (OptiKit's Figure 5)",
      {fmt::format("Wall time of this attempt {:.1f} s on {} slots; its children were busy {:.1f} slot-seconds, "
                   "slots idle {:.0f} % (on a GPU box: GPU idle time). The flow's own work (no child running: "
                   "scheduling, choosing the model): {:.2f} s = {:.2f} % of wall time. Tasks reused from an "
                   "earlier attempt: {} (the table counts them with the time they took when they ran).",
                   o.wall_s, o.slots, o.busy_slot_s,
                   o.wall_s > 0 ? 100.0 * (1.0 - o.busy_slot_s / (o.wall_s * o.slots)) : 0.0, o.orchestration_s,
                   o.wall_s > 0 ? 100.0 * o.orchestration_s / o.wall_s : 0.0, o.reused_tasks)},
      {"stage", "tasks", "reused", "slot-seconds", "slot-hours"},
      {},
      {}};
  if (o.first_wave_streaming.makespan_s > 0)
    time.paragraphs.push_back(fmt::format(
        "First wave (compression, baseline, gates, simulator study) replayed from its measured task times on {} "
        "slots: as the flow schedules it (each gate starts when its own model exists) {:.1f} s with slots idle "
        "{:.0f} %; with OptiKit's stage barrier (no evaluation before every trial is compressed) {:.1f} s, idle {:.0f} "
        "%.",
        o.slots, o.first_wave_streaming.makespan_s, 100.0 * o.first_wave_streaming.idle_fraction,
        o.first_wave_barrier.makespan_s, 100.0 * o.first_wave_barrier.idle_fraction));
  for (const auto& s : o.stages)
    time.rows.push_back({s.stage, std::to_string(s.tasks), std::to_string(s.reused),
                         fmt::format("{:.1f}", s.slot_seconds), fmt::format("{:.4f}", s.slot_seconds / 3600.0)});
  out.push_back(time);

  std::string command;
  for (const auto& a : launch)
    command += (command.empty() ? "" : " ") + a;
  out.push_back(Section{"Deploy", {"From the package folder (deploy/launch.sh runs it):"}, {}, {}, command});
  return out;
}

std::string
escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

// Markdown emphasis and code marks, which a paragraph in HTML shows as plain text.
std::string
without_markup(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '`' || (s[i] == '*' && i + 1 < s.size() && s[i + 1] == '*')) {
      i += s[i] == '*' ? 1u : 0u;
      continue;
    }
    out += s[i];
  }
  return out;
}

std::string
escape_cell(const std::string& s) {
  std::string out;
  for (char c : s)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

} // namespace

std::string
report_markdown(const FlowJob& job, const FlowOutcome& o, const std::vector<std::string>& launch) {
  std::ostringstream md;
  md << "# optkit flow: " << job.name << "\n\n";
  for (const auto& s : sections(job, o, launch)) {
    md << "## " << s.heading << "\n\n";
    for (const auto& p : s.paragraphs)
      md << p << "\n\n";
    if (!s.header.empty()) {
      md << "|";
      for (const auto& h : s.header)
        md << " " << h << " |";
      md << "\n|";
      for (std::size_t i = 0; i < s.header.size(); ++i)
        md << " --- |";
      md << "\n";
      for (const auto& row : s.rows) {
        md << "|";
        for (const auto& cell : row)
          md << " " << escape_cell(cell) << " |";
        md << "\n";
      }
      md << "\n";
    }
    if (!s.code.empty())
      md << "```sh\n" << s.code << "\n```\n\n";
  }
  return md.str();
}

std::string
report_html(const FlowJob& job, const FlowOutcome& o, const std::vector<std::string>& launch) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>optkit flow: " << escape_html(job.name)
    << "</title>\n<style>body{font-family:sans-serif;max-width:72em;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;margin:1em 0;font-size:90%}td,th{border:1px solid #bbb;padding:.25em .5em;"
       "text-align:left;vertical-align:top}th{background:#eee}pre{background:#f4f4f4;padding:.5em;overflow-x:auto}"
       "</style></head><body>\n<h1>optkit flow: "
    << escape_html(job.name) << "</h1>\n";
  for (const auto& s : sections(job, o, launch)) {
    h << "<h2>" << escape_html(s.heading) << "</h2>\n";
    for (const auto& p : s.paragraphs)
      h << "<p>" << escape_html(without_markup(p)) << "</p>\n";
    if (!s.header.empty()) {
      h << "<table><tr>";
      for (const auto& c : s.header)
        h << "<th>" << escape_html(c) << "</th>";
      h << "</tr>\n";
      for (const auto& row : s.rows) {
        h << "<tr>";
        for (const auto& c : row)
          h << "<td>" << escape_html(c) << "</td>";
        h << "</tr>\n";
      }
      h << "</table>\n";
    }
    if (!s.code.empty())
      h << "<pre>" << escape_html(s.code) << "</pre>\n";
    for (const auto& chart : s.charts) // optkit's own SVG, drawn by the stage's child
      h << "<figure>" << chart << "</figure>\n";
  }
  h << "</body></html>\n";
  return h.str();
}

} // namespace optkit::flow
