#include "mblast/driver/plot_scale.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace mblast::report {

namespace {

// The smallest 1, 2 or 5 times a power of ten that is >= raw (raw > 0).
double nice_step(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-12)) return m * p;
  return 10 * p;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  max_ticks = std::max(1, max_ticks);
  if (hi == lo) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double step = nice_step((hi - lo) / max_ticks);
  for (;;) {
    const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
    if (last - first <= max_ticks) {
      std::vector<double> t;
      for (double k = first; k <= last; ++k) t.push_back(std::abs(k) < 1e-9 ? 0.0 : k * step);
      return t;
    }
    step = nice_step(step * 1.5);  // the next of 1, 2, 5, 10, ...
  }
}

Scale Scale::linear(double lo, double hi, double p0, double p1, int max_ticks) {
  Scale s;
  s.ticks_ = nice_ticks(lo, hi, max_ticks);
  if (s.ticks_.empty()) s.ticks_ = {0, 1};
  s.lo_ = s.ticks_.front();
  s.hi_ = s.ticks_.back();
  s.p0_ = p0;
  s.p1_ = p1;
  return s;
}

Scale Scale::log10(double lo, double hi, double p0, double p1) {
  if (!(lo > 0) || !(hi > 0) || !std::isfinite(lo) || !std::isfinite(hi))
    throw std::invalid_argument("a log scale needs positive, finite bounds");
  if (hi < lo) std::swap(lo, hi);
  Scale s;
  s.log_ = true;
  s.p0_ = p0;
  s.p1_ = p1;
  const double d0 = std::floor(std::log10(lo) + 1e-9);
  double d1 = std::ceil(std::log10(hi) - 1e-9);
  if (d1 <= d0) d1 = d0 + 1;
  if (d1 - d0 <= 2) {
    // Two decades or fewer: bounds and ticks at 1, 2 and 5 times a power of ten, or the data would
    // fill a corner of the axis and there would be too few labels to read a value off.
    std::vector<double> steps;
    for (double d = d0; d <= d1 + 1e-9; ++d)
      for (double m : {1.0, 2.0, 5.0}) steps.push_back(m * std::pow(10.0, d));
    s.lo_ = steps.front();
    for (double v : steps)
      if (v <= lo * (1 + 1e-12)) s.lo_ = v;
    s.hi_ = steps.back();
    for (auto it = steps.rbegin(); it != steps.rend(); ++it)
      if (*it >= hi * (1 - 1e-12)) s.hi_ = *it;
    if (s.hi_ <= s.lo_) s.hi_ = s.lo_ * 2;
    for (double v : steps)
      if (v >= s.lo_ * (1 - 1e-12) && v <= s.hi_ * (1 + 1e-12)) s.ticks_.push_back(v);
    return s;
  }
  s.lo_ = std::pow(10.0, d0);
  s.hi_ = std::pow(10.0, d1);
  // Every decade when there are few; every second or third when many, so labels do not collide.
  const int every = static_cast<int>(std::ceil((d1 - d0) / 8));
  for (double d = d0; d <= d1 + 1e-9; d += every) s.ticks_.push_back(std::pow(10.0, d));
  return s;
}

double Scale::operator()(double v) const {
  double t;
  if (log_) {
    const double a = std::log10(lo_), b = std::log10(hi_);
    t = v > 0 ? (std::log10(v) - a) / (b - a) : 0.0;
  } else {
    t = hi_ == lo_ ? 0.5 : (v - lo_) / (hi_ - lo_);
  }
  return p0_ + t * (p1_ - p0_);
}

std::string short_number(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "n/a" : (v > 0 ? "inf" : "-inf");
  if (v == 0) return "0";
  const double a = std::abs(v);
  static const char* const kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  if (a >= 1e3) {
    int k = 0;
    double m = v;
    while (std::abs(m) >= 1e3 && k < 6) {
      m /= 1e3;
      ++k;
    }
    // 999.95k rounds to "1e+03k": one prefix up instead.
    std::string s = fmt::format("{:.3g}", m);
    if (s.find('e') != std::string::npos && k < 6) s = fmt::format("{:.3g}", m / 1e3), ++k;
    return s + kPrefix[k];
  }
  if (a < 1e-3) return fmt::format("{:.2g}", v);
  return fmt::format("{:.3g}", v);
}

}  // namespace mblast::report
