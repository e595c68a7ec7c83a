// SVG plots written by hand for `mblast report` (no library, nothing fetched at view time): line,
// step and scatter plots on linear or log axes, and grouped bar charts. Each function returns one
// <svg> element, self-contained, with a <title> on every mark (the browser's tooltip). A plot with
// nothing to draw says why in its place instead of being blank. Pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mblast::report {

struct PlotPoint {
  double x = 0, y = 0;
  std::string tip;  // shown on hover; empty: "x, y"
};

enum class SeriesStyle { line, step, markers, line_markers };

struct PlotSeries {
  std::string name;
  std::vector<PlotPoint> points;
  SeriesStyle style = SeriesStyle::line_markers;
  bool dashed = false;
  int color = -1;  // index into the palette; -1: the series' position
};

struct PlotAxis {
  std::string label;
  bool log = false;
  std::optional<double> min, max;  // forced bounds (widened to ticks); default: the data's
  bool integer = false;            // counts (evaluations): ticks at whole numbers only
};

// A straight reference line across the plot: y = at (horizontal) or x = at.
struct RefLine {
  bool horizontal = true;
  double at = 0;
  std::string label;
};

struct XYPlot {
  std::string title;
  PlotAxis x, y;
  std::vector<PlotSeries> series;
  std::vector<RefLine> refs;
  std::string missing;  // what to say when no series has a point to draw
  int width = 920, height = 400;
};

// Points that cannot be drawn (not finite; <= 0 on a log axis) are left out and counted under the
// plot. Without any drawable point the plot is render_missing(title, missing).
std::string render_xy(const XYPlot& plot);

struct BarGroup {
  std::string category;
  // One per series. Empty: the series does not have this category (nothing drawn); NaN: it has it
  // without a value (a hollow mark on the base line, the tip says why).
  std::vector<std::optional<double>> values;
  std::vector<std::string> tips;  // one per series, optional
};

struct BarPlot {
  std::string title, y_label;
  bool log_y = true;
  std::vector<std::string> series;
  std::vector<BarGroup> groups;
  std::optional<double> ref;  // a horizontal line (1x for speedups)
  std::string ref_label;
  std::string missing;
  int width = 920, height = 420;
};

// Bars grow from the reference line (or the axis' lower end) to each value; categories are
// labelled under the axis, slanted. The plot widens with the number of categories.
std::string render_bars(const BarPlot& plot);

// A plot-sized box with the title and the reason there is nothing to draw.
std::string render_missing(const std::string& title, const std::string& why, int width = 920, int height = 160);

// The palette's colour i (wraps around).
const char* palette(int i);

}  // namespace mblast::report
