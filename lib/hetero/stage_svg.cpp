#include "hetero/stage_svg.hpp"

#include "core/svg_chart.hpp"
#include "perf/perf_database.hpp"
#include "perf/system_spec.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace optkit::hetero {

namespace {

constexpr double label_width = 250, panel_width = 200, panel_gap = 30, row_height = 34, top = 78, bottom = 40;

struct Panel {
  const char* title;
  const char* unit;
  double axis_end;
};

std::string
bar(double x, double y, double width, double height, const char* colour, const std::string& tooltip) {
  return fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{}</title>"
                     "</rect>\n",
                     x, y, std::max(0.0, width), height, colour, xml_escape(tooltip));
}

} // namespace

std::string
stage_svg(const HeteroRun& run) {
  const auto& p = run.plan;
  double capacity = 0, prefill = 0, decode = 0;
  for (const auto& s : p.stages) {
    capacity = std::max({capacity, s.capacity_bytes / perf::kGiB, s.memory_bytes / perf::kGiB});
    prefill = std::max(prefill, s.prefill_s * 1e3);
    decode = std::max(decode, s.decode_s * 1e3);
  }
  const Panel panels[] = {{"memory used / capacity", "GiB", round_axis_ceiling(capacity)},
                          {"prefill, one micro-batch", "ms", round_axis_ceiling(prefill * 1.05)},
                          {"decode, one step", "ms", round_axis_ceiling(decode * 1.05)}};
  const double width = label_width + 3 * (panel_width + panel_gap) + 10;
  const double height = top + row_height * static_cast<double>(p.stages.size()) + bottom;
  const auto panel_x = [&](int i) { return label_width + i * (panel_width + panel_gap); };

  std::string svg = fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" )"
                                R"(viewBox="0 0 {0} {1}" font-family="sans-serif" font-size="12">)"
                                "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
                                width, height);
  svg += fmt::format("<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{} on {}</text>\n",
                     xml_escape(run.model_name), xml_escape(run.cluster_name));
  svg += fmt::format("<text x=\"10\" y=\"38\">batch {} (ISL {}, OSL {}), micro-batches {} prefill / {} decode: "
                     "{:.3g} s per batch, {:.4g} tokens/s, indicator {:.4g}, {}{}</text>\n",
                     run.workload.batch, run.workload.isl, run.workload.osl, p.prefill_micro_batch,
                     p.decode_micro_batch, p.latency_s, p.throughput_tokens_per_s, p.indicator, p.method,
                     p.proven_optimal ? " (proven optimal)" : "");
  for (int i = 0; i < 3; ++i) {
    const double x0 = panel_x(i);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", x0, top - 14, panels[i].title);
    for (int t = 0; t <= 4; ++t) {
      const double x = x0 + panel_width * t / 4;
      svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>\n", x,
                         top - 4, height - bottom);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:g}</text>\n", x,
                         height - bottom + 14, panels[i].axis_end * t / 4);
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x0 + panel_width / 2,
                       height - 8, panels[i].unit);
  }
  for (std::size_t j = 0; j < p.stages.size(); ++j) {
    const auto& s = p.stages[j];
    const double y = top + row_height * static_cast<double>(j);
    svg += fmt::format("<text x=\"10\" y=\"{:.1f}\">{} {}{} ({}) layers {}-{}</text>\n", y + 12, j, xml_escape(s.gpu),
                       s.tp > 1 ? fmt::format(" ×{} TP{}", s.tp, s.tp) : std::string(), xml_escape(s.node),
                       s.first_layer, s.end_layer - 1);
    svg += fmt::format("<text x=\"10\" y=\"{:.1f}\" fill=\"#555\">bits {} · {}</text>\n", y + 26,
                       bits_text(p.layer_bits, s.first_layer, s.end_layer), xml_escape(perf::source_names(s.sources)));
    const double scale0 = panel_width / panels[0].axis_end;
    svg += bar(panel_x(0), y + 4, s.capacity_bytes / perf::kGiB * scale0, 24, "#ddd",
               fmt::format("capacity {:.1f} GiB", s.capacity_bytes / perf::kGiB));
    svg += bar(panel_x(0), y + 8, s.memory_bytes / perf::kGiB * scale0, 16,
               s.memory_bytes > s.capacity_bytes ? "#c00" : "#1f77b4",
               fmt::format("used {:.2f} GiB of {:.1f}", s.memory_bytes / perf::kGiB, s.capacity_bytes / perf::kGiB));
    svg += bar(panel_x(1), y + 8, s.prefill_s * 1e3 * panel_width / panels[1].axis_end, 16, "#ff7f0e",
               fmt::format("prefill {:.3g} ms", s.prefill_s * 1e3));
    svg += bar(panel_x(2), y + 8, s.decode_s * 1e3 * panel_width / panels[2].axis_end, 16, "#2ca02c",
               fmt::format("decode {:.3g} ms", s.decode_s * 1e3));
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace optkit::hetero
