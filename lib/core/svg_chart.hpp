// A small SVG chart: labelled axes with round ticks, point series (lines and/or markers) and
// reference lines, in the plain style every optkit plot uses. Self-contained SVG 1.1 that
// browsers and docs render as is.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace optkit {

struct ChartSeries {
  std::string label;
  std::string colour = "#1f77b4";
  std::vector<std::pair<double, double>> points; // drawn in the given order
  bool line = true;
  bool markers = true;
  bool dashed = false;
};

struct ChartReference {
  double value = 0;
  std::string label;
  std::string colour = "#c00";
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<ChartSeries> series;
  std::vector<ChartReference> horizontal; // y = value across the plot
  std::vector<ChartReference> vertical;   // x = value
};

// Axes start at zero and end at a round value above every point and reference line.
std::string render_svg(const Chart& chart);

// The frame every optkit plot draws in: page size, margins and where each axis ends (it starts
// at zero). Plots that draw more than a Chart holds (plan's Pareto picture) start from it.
struct ChartFrame {
  double width = 760, height = 480, left = 70, right = 190, top = 40, bottom = 56;
  double max_x = 1, max_y = 1;

  double plot_width() const { return width - left - right; }
  double plot_height() const { return height - top - bottom; }
  double x(double value) const; // data → page, clamped to the plot
  double y(double value) const;
};

// The opening <svg> element, a white page, the title, a grid with five ticks per axis, the plot's
// border and both axis labels; the caller adds its marks and the closing "</svg>\n".
std::string svg_frame(const ChartFrame& frame, const std::string& title, const std::string& x_label,
                      const std::string& y_label);

// The smallest of 1, 2, 2.5, 5 × a power of ten at or above `value` (1 for none): an axis end.
double round_axis_ceiling(double value);
// Text safe inside SVG/XML elements and attributes.
std::string xml_escape(const std::string& text);

} // namespace optkit
