// The maths of a plot's axes: data values mapped to pixels on a linear or a logarithmic scale, the
// ticks a reader expects (1-2-5 steps; whole decades on a log scale) and their labels. Pure
// functions; svg_plot.h draws with them.
#pragma once

#include <string>
#include <vector>

namespace mblast::report {

class Scale {
 public:
  // [lo, hi] widened to tick values (nice 1-2-5 steps), mapped onto pixels [p0, p1] (p1 < p0 for a y
  // axis, whose pixels grow downwards). lo == hi is widened around the value; hi < lo is swapped.
  static Scale linear(double lo, double hi, double p0, double p1, int max_ticks = 6);
  // [lo, hi] widened to whole decades, ticked at each decade (every second or third one when there
  // are many); over two decades or fewer, widened to and ticked at 1, 2 and 5 times a power of ten.
  // Both must be > 0 (a value <= 0 has no place on a log axis and is the caller's to leave out);
  // throws std::invalid_argument otherwise.
  static Scale log10(double lo, double hi, double p0, double p1);

  double operator()(double v) const;  // pixel of v; a log scale clamps v <= 0 to its lower end
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  bool is_log() const { return log_; }
  const std::vector<double>& ticks() const { return ticks_; }

 private:
  double lo_ = 0, hi_ = 1, p0_ = 0, p1_ = 1;
  bool log_ = false;
  std::vector<double> ticks_;
};

// Tick values between lo and hi (inclusive) a step of 1, 2 or 5 times a power of ten apart, at most
// max_ticks + 1 of them, the first at or below lo and the last at or above hi.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

// A short label for a tick or a figure: 0.5, 12, 1.5k, 3.2M, 1e-05; SI prefixes from 1e3 up.
std::string short_number(double v);

}  // namespace mblast::report
