#include "core/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace optkit {

namespace {

constexpr double width = 760, height = 480, left = 70, right = 190, top = 40, bottom = 56;

} // namespace

double
round_axis_ceiling(double value) {
  if (!(value > 0) || !std::isfinite(value))
    return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(value)));
  for (double step : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (step * magnitude >= value)
      return step * magnitude;
  return 10 * magnitude;
}

std::string
xml_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '&')
      out += "&amp;";
    else if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '"')
      out += "&quot;";
    else
      out += ch;
  }
  return out;
}

double
ChartFrame::x(double value) const {
  return left + std::clamp(value / max_x, 0.0, 1.0) * plot_width();
}

double
ChartFrame::y(double value) const {
  return top + plot_height() - std::clamp(value / max_y, 0.0, 1.0) * plot_height();
}

std::string
svg_frame(const ChartFrame& f, const std::string& title, const std::string& x_label, const std::string& y_label) {
  const double plot_w = f.plot_width(), plot_h = f.plot_height();
  std::string svg = fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" )"
                                R"(viewBox="0 0 {} {}" font-family="sans-serif" font-size="12">)"
                                "\n",
                                f.width, f.height, f.width, f.height);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", f.left,
                     xml_escape(title));
  for (int i = 0; i <= 5; ++i) {
    const double x = f.max_x * i / 5, y = f.max_y * i / 5;
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#eee\"/>\n", f.x(x), f.top,
                       f.x(x), f.top + plot_h);
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n", f.left, f.y(y),
                       f.left + plot_w, f.y(y));
    svg +=
        fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", f.x(x), f.top + plot_h + 16, x);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", f.left - 6, f.y(y) + 4, y);
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", f.left,
                     f.top, plot_w, plot_h);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", f.left + plot_w / 2,
                     f.height - 16, xml_escape(x_label));
  svg += fmt::format("<text transform=\"translate(18 {:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                     f.top + plot_h / 2, xml_escape(y_label));
  return svg;
}

std::string
render_svg(const Chart& chart) {
  double max_x = 0, max_y = 0;
  for (const auto& s : chart.series)
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(x))
        max_x = std::max(max_x, x);
      if (std::isfinite(y))
        max_y = std::max(max_y, y);
    }
  for (const auto& h : chart.horizontal)
    max_y = std::max(max_y, h.value);
  for (const auto& v : chart.vertical)
    max_x = std::max(max_x, v.value);
  max_x = round_axis_ceiling(max_x * 1.05);
  max_y = round_axis_ceiling(max_y * 1.05);
  const ChartFrame frame{width, height, left, right, top, bottom, max_x, max_y};
  const double plot_w = frame.plot_width(), plot_h = frame.plot_height();
  const auto px = [&](double x) { return frame.x(x); };
  const auto py = [&](double y) { return frame.y(y); };
  std::string svg = svg_frame(frame, chart.title, chart.x_label, chart.y_label);
  for (const auto& h : chart.horizontal) {
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"{}\" "
                       "stroke-dasharray=\"6 4\"/>\n",
                       left, py(h.value), left + plot_w, py(h.value), xml_escape(h.colour));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"{}\">{}</text>\n", left + plot_w + 6, py(h.value) + 4,
                       xml_escape(h.colour), xml_escape(h.label));
  }
  for (const auto& v : chart.vertical) {
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"{}\" "
                       "stroke-dasharray=\"2 3\"/>\n",
                       px(v.value), top, px(v.value), top + plot_h, xml_escape(v.colour));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"{}\">{}</text>\n", px(v.value) + 4, top + 14,
                       xml_escape(v.colour), xml_escape(v.label));
  }
  double legend_y = top + plot_h / 2;
  for (const auto& s : chart.series) {
    if (s.line && s.points.size() > 1) {
      std::string points;
      for (const auto& [x, y] : s.points)
        points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
      svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", points,
                         xml_escape(s.colour), s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    }
    if (s.markers)
      for (const auto& [x, y] : s.points)
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", px(x), py(y),
                           xml_escape(s.colour));
    if (!s.label.empty()) {
      svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", width - right + 14,
                         legend_y - 10, xml_escape(s.colour));
      svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", width - right + 32, legend_y, xml_escape(s.label));
      legend_y += 20;
    }
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace optkit
