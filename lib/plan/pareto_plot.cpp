#include "plan/pareto_plot.hpp"

#include "core/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace optkit::plan {

namespace {

constexpr double width = 760, height = 500, left = 70, right = 170, top = 40, bottom = 60;

} // namespace

std::string
pareto_svg(const PlanResult& result, const PlanRequest& request, const std::string& title) {
  double max_x = 1000.0 / request.tpot_limit_ms, max_y = 0;
  for (const auto& row : result.rows) {
    max_x = std::max(max_x, row.tokens_per_s_per_user);
    max_y = std::max(max_y, row.tokens_per_s_per_gpu);
  }
  max_x = round_axis_ceiling(max_x * 1.05);
  max_y = round_axis_ceiling(max_y * 1.05);
  const ChartFrame frame{width, height, left, right, top, bottom, max_x, max_y};
  const double plot_h = frame.plot_height();
  const auto px = [&](double x) { return frame.x(x); };
  const auto py = [&](double y) { return frame.y(y); };
  std::string svg = svg_frame(frame, title, "tokens/s/user", "tokens/s/GPU");
  // SLA: the TPOT limit as a minimum speed per user.
  const double sla_x = px(1000.0 / request.tpot_limit_ms);
  svg +=
      fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#c00\" stroke-dasharray=\"6 4\"/>\n",
                  sla_x, top, sla_x, top + plot_h);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"#c00\">TPOT {:g} ms</text>\n", sla_x + 4, top + 14,
                     request.tpot_limit_ms);

  struct Series {
    ServingMode mode;
    const char* colour;
    const char* label;
  };
  const Series series[] = {{ServingMode::aggregated, "#1f77b4", "aggregated"},
                           {ServingMode::disaggregated, "#2ca02c", "disaggregated"},
                           {ServingMode::static_batching, "#ff7f0e", "static"}};
  double legend_y = top + 10;
  for (const auto& s : series) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < result.rows.size(); ++i)
      if (result.rows[i].mode == s.mode)
        members.push_back(i);
    if (members.empty())
      continue;
    for (std::size_t i : members) {
      const auto& row = result.rows[i];
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"{}\" fill-opacity=\"{}\"/>\n",
                         px(row.tokens_per_s_per_user), py(row.tokens_per_s_per_gpu), s.colour,
                         row.meets_sla ? "0.55" : "0.2");
    }
    std::string points;
    for (std::size_t i : pareto_front(result.rows, members))
      points += fmt::format("{:.1f},{:.1f} ", px(result.rows[i].tokens_per_s_per_user),
                            py(result.rows[i].tokens_per_s_per_gpu));
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", points, s.colour);
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", width - right + 14,
                       legend_y - 10, s.colour);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", width - right + 32, legend_y, s.label);
    legend_y += 20;
  }
  if (result.best) {
    const auto& row = result.rows[*result.best];
    svg +=
        fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"7\" fill=\"none\" stroke=\"#c00\" stroke-width=\"2\"/>\n",
                    px(row.tokens_per_s_per_user), py(row.tokens_per_s_per_gpu));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#c00\">chosen: {:.0f} tok/s/GPU</text>\n",
                       width - right + 14, legend_y + 6, row.tokens_per_s_per_gpu);
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace optkit::plan
