#include "mblast/driver/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "mblast/driver/html_page.h"
#include "mblast/driver/plot_scale.h"

namespace mblast::report {

namespace {

constexpr double kLeft = 72, kTop = 34, kBottom = 52, kLegend = 260;

// Colour-blind-safe (Okabe-Ito), darkest first.
const char* const kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7f7f7f", "#000000"};

std::string esc(const std::string& s) { return html_escape(s); }

std::string shorten(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return s.substr(0, cut) + "\xE2\x80\xA6";
}

std::string px(double v) { return fmt::format("{:.1f}", v); }

std::string open_svg(int w, int h, const std::string& title) {
  return fmt::format(
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
             "role=\"img\" aria-label=\"{}\">\n",
             w, h, w, h, esc(title)) +
         fmt::format("<rect x=\"0.5\" y=\"0.5\" width=\"{}\" height=\"{}\" fill=\"#fff\" stroke=\"#d8dde6\"/>\n", w - 1,
                     h - 1) +
         fmt::format("<text x=\"{}\" y=\"20\" font-size=\"14\" font-weight=\"600\" fill=\"#1d2430\">{}</text>\n", kLeft,
                     esc(title));
}

bool drawable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// The axis' data extent over the drawable points, with its forced bounds.
std::pair<double, double> extent(const XYPlot& p, bool x_axis) {
  const PlotAxis& a = x_axis ? p.x : p.y;
  const PlotAxis& other = x_axis ? p.y : p.x;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& s : p.series)
    for (const auto& pt : s.points) {
      const double v = x_axis ? pt.x : pt.y, o = x_axis ? pt.y : pt.x;
      if (!drawable(v, a.log) || !drawable(o, other.log)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  for (const auto& r : p.refs)
    if (r.horizontal != x_axis && drawable(r.at, a.log)) lo = std::min(lo, r.at), hi = std::max(hi, r.at);
  if (a.min && drawable(*a.min, a.log)) lo = *a.min;
  if (a.max && drawable(*a.max, a.log)) hi = *a.max;
  return {lo, hi};
}

Scale make_scale(const PlotAxis& a, std::pair<double, double> e, double p0, double p1) {
  if (a.log) return Scale::log10(e.first, e.second, p0, p1);
  // A count's ticks a whole number apart: no more intervals than the range has units.
  const int ticks = a.integer ? static_cast<int>(std::clamp(std::floor(e.second - e.first), 1.0, 6.0)) : 6;
  return Scale::linear(e.first, e.second, p0, p1, ticks);
}

std::string axes(const Scale& xs, const Scale& ys, double x0, double x1, double y0, double y1, const PlotAxis& xa,
                 const PlotAxis& ya) {
  std::string o;
  for (double t : ys.ticks()) {
    const double y = ys(t);
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#edf0f4\"/>\n", px(x0), px(y), px(x1),
                     px(y));
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#5a6475\" text-anchor=\"end\">{}</text>\n",
                     px(x0 - 6), px(y + 4), esc(short_number(t)));
  }
  for (double t : xs.ticks()) {
    const double x = xs(t);
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#edf0f4\"/>\n", px(x), px(y0), px(x),
                     px(y1));
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#5a6475\" text-anchor=\"middle\">{}</text>\n",
                     px(x), px(y0 + 16), esc(short_number(t)));
  }
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#9aa3b1\"/>\n", px(x0),
                   px(y1), px(x1 - x0), px(y0 - y1));
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#1d2430\" text-anchor=\"middle\">{}</text>\n",
                   px((x0 + x1) / 2), px(y0 + 36), esc(xa.label + (xa.log ? " (log)" : "")));
  o += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#1d2430\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 {} {})\">{}</text>\n",
      px(16), px((y0 + y1) / 2), px(16), px((y0 + y1) / 2), esc(ya.label + (ya.log ? " (log)" : "")));
  return o;
}

std::string legend(const std::vector<std::pair<std::string, int>>& items, const std::vector<bool>& dashed, double x,
                   double y) {
  std::string o;
  for (size_t i = 0; i < items.size(); ++i) {
    const double yy = y + 18.0 * static_cast<double>(i);
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"{}/>\n", px(x),
                     px(yy), px(x + 18), px(yy), palette(items[i].second),
                     i < dashed.size() && dashed[i] ? " stroke-dasharray=\"5 3\"" : "");
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#1d2430\"><title>{}</title>{}</text>\n",
                     px(x + 24), px(yy + 4), esc(items[i].first), esc(shorten(items[i].first, 38)));
  }
  return o;
}

}  // namespace

const char* palette(int i) {
  const int n = static_cast<int>(sizeof(kPalette) / sizeof(kPalette[0]));
  return kPalette[((i % n) + n) % n];
}

std::string render_missing(const std::string& title, const std::string& why, int width, int height) {
  std::string o = open_svg(width, height, title);
  o += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff6e5\" stroke=\"#e0a030\" "
      "stroke-dasharray=\"4 3\"/>\n",
      kLeft, kTop, width - kLeft - 20, height - kTop - 16);
  // The reason, wrapped at about 100 characters a line.
  std::vector<std::string> lines;
  std::string line;
  size_t start = 0;
  while (start <= why.size()) {
    size_t sp = why.find(' ', start);
    if (sp == std::string::npos) sp = why.size();
    const std::string word = why.substr(start, sp - start);
    if (!line.empty() && line.size() + word.size() + 1 > 100) lines.push_back(line), line.clear();
    line += (line.empty() ? "" : " ") + word;
    start = sp + 1;
  }
  if (!line.empty()) lines.push_back(line);
  for (size_t i = 0; i < lines.size() && i < 5; ++i)
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\" fill=\"#8a4b00\">{}</text>\n", kLeft + 14,
                     kTop + 26 + 18 * static_cast<double>(i), esc((i == 0 ? "No data: " : "") + lines[i]));
  return o + "</svg>";
}

std::string render_xy(const XYPlot& p) {
  size_t drawn = 0, left_out = 0;
  for (const auto& s : p.series)
    for (const auto& pt : s.points) (drawable(pt.x, p.x.log) && drawable(pt.y, p.y.log) ? drawn : left_out)++;
  if (drawn == 0)
    return render_missing(p.title, p.missing.empty() ? "nothing to draw" : p.missing, p.width,
                          std::max(160, p.height / 2));
  const double x0 = kLeft, x1 = p.width - kLegend, y0 = p.height - kBottom, y1 = kTop;
  const Scale xs = make_scale(p.x, extent(p, true), x0, x1);
  const Scale ys = make_scale(p.y, extent(p, false), y0, y1);
  std::string o = open_svg(p.width, p.height, p.title);
  o += axes(xs, ys, x0, x1, y0, y1, p.x, p.y);
  // An id unique within the page (several plots sit in one document), the same for the same plot.
  std::string key = p.title;
  for (const auto& s : p.series) key += "\n" + s.name + fmt::format(":{}", s.points.size());
  const std::string clip = fmt::format("clip{:x}", std::hash<std::string>{}(key));
  o += fmt::format("<clipPath id=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath>\n", clip,
                   px(x0), px(y1), px(x1 - x0), px(y0 - y1));
  for (const auto& r : p.refs) {
    if (!drawable(r.at, r.horizontal ? p.y.log : p.x.log)) continue;
    if (r.horizontal) {
      const double y = ys(r.at);
      o += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\" stroke-dasharray=\"2 3\"/>\n"
          "<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#444\" text-anchor=\"end\">{}</text>\n",
          px(x0), px(y), px(x1), px(y), px(x1 - 4), px(y - 4), esc(r.label));
    } else {
      const double x = xs(r.at);
      o += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\" stroke-dasharray=\"2 3\"/>\n"
          "<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#444\">{}</text>\n",
          px(x), px(y0), px(x), px(y1), px(x + 4), px(y1 + 12), esc(r.label));
    }
  }
  std::vector<std::pair<std::string, int>> items;
  std::vector<bool> dashed;
  for (size_t si = 0; si < p.series.size(); ++si) {
    const PlotSeries& s = p.series[si];
    const int c = s.color >= 0 ? s.color : static_cast<int>(si);
    const char* col = palette(c);
    std::vector<const PlotPoint*> pts;
    for (const auto& pt : s.points)
      if (drawable(pt.x, p.x.log) && drawable(pt.y, p.y.log)) pts.push_back(&pt);
    if (!s.name.empty()) items.emplace_back(s.name, c), dashed.push_back(s.dashed);
    if (pts.empty()) continue;
    if (s.style != SeriesStyle::markers && pts.size() > 1) {
      std::string d;
      for (size_t i = 0; i < pts.size(); ++i) {
        const double x = xs(pts[i]->x), y = ys(pts[i]->y);
        if (i == 0)
          d += fmt::format("M{} {}", px(x), px(y));
        else if (s.style == SeriesStyle::step)
          d += fmt::format(" H{} V{}", px(x), px(y));
        else
          d += fmt::format(" L{} {}", px(x), px(y));
      }
      o += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} clip-path=\"url(#{})\"/>\n", d,
                       col, s.dashed ? " stroke-dasharray=\"6 4\"" : "", clip);
    }
    if (s.style == SeriesStyle::markers || s.style == SeriesStyle::line_markers || pts.size() == 1)
      for (const PlotPoint* pt : pts) {
        const std::string tip =
            pt->tip.empty() ? s.name + ": " + short_number(pt->x) + ", " + short_number(pt->y) : pt->tip;
        o += fmt::format(
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" fill-opacity=\"0.85\" stroke=\"#fff\" "
            "stroke-width=\"1\"><title>{}</title></circle>\n",
            px(xs(pt->x)), px(ys(pt->y)), s.style == SeriesStyle::markers ? 5 : 3.5, col, esc(tip));
      }
  }
  o += legend(items, dashed, x1 + 16, y1 + 10);
  if (left_out > 0)
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#8a4b00\">{} point(s) not drawn: {}</text>\n",
                     px(x1 + 16), px(y0), left_out,
                     p.x.log || p.y.log ? "zero, negative or missing on a log axis" : "not a number");
  return o + "</svg>";
}

std::string render_bars(const BarPlot& p) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  size_t bars = 0;
  for (const auto& g : p.groups)
    for (const auto& v : g.values)
      if (v && drawable(*v, p.log_y)) lo = std::min(lo, *v), hi = std::max(hi, *v), ++bars;
  if (bars == 0)
    return render_missing(p.title, p.missing.empty() ? "nothing to draw" : p.missing, p.width,
                          std::max(160, p.height / 2));
  if (p.ref) lo = std::min(lo, *p.ref), hi = std::max(hi, *p.ref);
  if (!p.log_y) lo = std::min(lo, 0.0);
  const size_t nser = std::max<size_t>(1, p.series.size());
  const double bar_w = nser > 3 ? 7 : 11, group_w = bar_w * static_cast<double>(nser) + 10;
  // Room on the left and below for the slanted category labels.
  const double left = kLeft + 60, bottom = 120;
  const double plot_w = std::max(p.width - left - kLegend, group_w * static_cast<double>(p.groups.size()));
  const int width = static_cast<int>(left + plot_w + kLegend);
  const double x0 = left, x1 = left + plot_w, y0 = p.height - bottom, y1 = kTop;
  const Scale ys = p.log_y ? Scale::log10(lo, hi, y0, y1) : Scale::linear(lo, hi, y0, y1);
  std::string o = open_svg(width, p.height, p.title);
  for (double t : ys.ticks()) {
    const double y = ys(t);
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#edf0f4\"/>\n", px(x0), px(y), px(x1),
                     px(y));
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#5a6475\" text-anchor=\"end\">{}</text>\n",
                     px(x0 - 6), px(y + 4), esc(short_number(t)));
  }
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#9aa3b1\"/>\n", px(x0),
                   px(y1), px(x1 - x0), px(y0 - y1));
  o += fmt::format(
      "<text x=\"16\" y=\"{}\" font-size=\"12\" fill=\"#1d2430\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 16 {})\">{}</text>\n",
      px((y0 + y1) / 2), px((y0 + y1) / 2), esc(p.y_label + (p.log_y ? " (log)" : "")));
  const double base = p.ref && drawable(*p.ref, p.log_y) ? *p.ref : ys.lo();
  const double by = ys(base);
  const double step = plot_w / static_cast<double>(std::max<size_t>(1, p.groups.size()));
  for (size_t gi = 0; gi < p.groups.size(); ++gi) {
    const BarGroup& g = p.groups[gi];
    const double gx = x0 + step * static_cast<double>(gi) + (step - bar_w * static_cast<double>(nser)) / 2;
    for (size_t si = 0; si < g.values.size() && si < nser; ++si) {
      const std::string tip =
          si < g.tips.size() && !g.tips[si].empty()
              ? g.tips[si]
              : g.category + (si < p.series.size() ? " · " + p.series[si] : "") + ": " +
                    (g.values[si] && std::isfinite(*g.values[si]) ? short_number(*g.values[si]) : "no value");
      const double x = gx + bar_w * static_cast<double>(si);
      if (!g.values[si]) continue;  // not in that series at all
      if (!drawable(*g.values[si], p.log_y)) {
        // No value: a small hollow mark on the base line, so the gap is visibly a gap.
        o += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"6\" fill=\"none\" stroke=\"{}\" "
            "stroke-dasharray=\"2 2\"><title>{}</title></rect>\n",
            px(x + 1), px(by - 3), px(bar_w - 2), palette(static_cast<int>(si)), esc(tip));
        continue;
      }
      const double y = ys(*g.values[si]);
      o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
                       px(x + 0.5), px(std::min(y, by)), px(bar_w - 1), px(std::max(1.0, std::abs(by - y))),
                       palette(static_cast<int>(si)), esc(tip));
    }
    const double lx = x0 + step * (static_cast<double>(gi) + 0.5);
    o += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#1d2430\" text-anchor=\"end\" "
        "transform=\"rotate(-40 {} {})\"><title>{}</title>{}</text>\n",
        px(lx), px(y0 + 14), px(lx), px(y0 + 14), esc(g.category), esc(shorten(g.category, 22)));
  }
  if (p.ref && drawable(*p.ref, p.log_y))
    o += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\" stroke-dasharray=\"2 3\"/>\n"
        "<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#444\" text-anchor=\"end\">{}</text>\n",
        px(x0), px(by), px(x1), px(by), px(x1 - 4), px(by - 4), esc(p.ref_label));
  std::vector<std::pair<std::string, int>> items;
  for (size_t i = 0; i < p.series.size(); ++i) items.emplace_back(p.series[i], static_cast<int>(i));
  o += legend(items, {}, x1 + 16, y1 + 10);
  return o + "</svg>";
}

}  // namespace mblast::report
