#include "bench/bench_html.hpp"

#include "bench/bench_plots.hpp"
#include "core/svg_chart.hpp"

#include <fmt/format.h>

namespace optkit::bench {

namespace {

constexpr const char* kStyle = "body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
                               "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px "
                               "8px;text-align:left}th{background:#f4f4f4}.pass{color:#2a2}.fail{color:#c00}"
                               "svg{display:block;margin:1em 0}";

std::string
row(const std::string& name, const std::string& value) {
  return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", xml_escape(name), xml_escape(value));
}

std::string
milliseconds(double seconds) {
  return seconds >= 0 ? fmt::format("{:.1f} ms", seconds * 1e3) : "–";
}

std::string
summary_table(const BenchResult& r) {
  const auto& c = r.certification;
  std::string slos;
  for (const auto& rule : r.slos)
    slos += (slos.empty() ? "" : ", ") + rule.text;
  std::string out = "<table>\n";
  out += row("status", to_string(c.status));
  out += row("certified rate", c.certified_rate > 0 ? fmt::format("{:.4g} req/s", c.certified_rate) : "none");
  out += row("lowest failing rate", c.lowest_failing > 0 ? fmt::format("{:.4g} req/s", c.lowest_failing) : "none");
  out += row("one-stream estimate (LB)", fmt::format("{:.4g} req/s", c.lower_bound));
  out += row("binding constraint", c.binding.empty() ? "–" : c.binding);
  out += row("stopped", c.stop_reason);
  out += row("endpoint", r.endpoint);
  out += row("model", r.model);
  out += row("profile", r.profile.name);
  out += row("SLOs", slos.empty() ? "none" : slos);
  out += row("token counter", r.token_counter);
  if (r.ceiling)
    out += row("load generator ceiling", fmt::format("{:.0f} req/s", r.ceiling->max_rate));
  return out + "</table>\n";
}

std::string
trials_table(const Certification& c) {
  std::string out = "<table>\n<tr><th>#</th><th>phase</th><th>rate (req/s)</th><th>result</th><th>e2e p95</th>"
                    "<th>ttft p95</th><th>beta</th><th>cancelled</th><th>wait before</th></tr>\n";
  for (const auto& t : c.trials) {
    const auto& s = t.summary;
    const auto wait =
        t.settle.checked ? fmt::format("{:.2f} s{}", t.settle.waited_s, t.settle.drained ? "" : " (not drained)") : "–";
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td>"
                       "<td>{:.3f}</td><td>{}</td><td>{}</td></tr>\n",
                       t.index, xml_escape(to_string(t.phase)),
                       t.phase == TrialPhase::gate ? "–" : fmt::format("{:.4g}", t.rate), t.passed ? "pass" : "fail",
                       xml_escape(t.passed ? "pass" : s.failure), milliseconds(s.e2e.p95), milliseconds(s.ttft.p95),
                       s.steady.beta, s.cancelled, xml_escape(wait));
  }
  return out + "</table>\n";
}

} // namespace

std::string
bench_report_html(const BenchResult& r) {
  const auto& c = r.certification;
  std::string html = fmt::format("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                                 "<title>optkit bench: {}</title><style>{}</style></head><body>\n",
                                 xml_escape(to_string(c.status)), kStyle);
  html += fmt::format("<h1>optkit bench: {}</h1>\n<p>{}</p>\n", xml_escape(to_string(c.status)),
                      xml_escape(summary_line(r)));
  html += summary_table(r);
  html += "<h2>Latency against request rate</h2>\n" + latency_vs_rate_svg(c, r.slos);
  html += "<h2>Trials</h2>\n" + trials_table(c);
  if (const auto* shown = shown_trial(c)) {
    html +=
        fmt::format("<h2>The trial at {:.4g} req/s ({})</h2>\n", shown->rate, shown->passed ? "certified" : "failed");
    html += steady_state_svg(*shown) + latency_cdf_svg(*shown, r.slos) + timeline_svg(*shown);
  }
  return html + "</body></html>\n";
}

} // namespace optkit::bench
