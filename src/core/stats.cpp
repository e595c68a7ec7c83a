#include "mblast/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mblast {

namespace {
// Linear interpolation between closest ranks (the "type 7" quantile).
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}
}  // namespace

SampleSummary summarize(std::vector<double> s) {
  if (s.empty()) throw std::invalid_argument("summarize: no samples");
  std::sort(s.begin(), s.end());
  SampleSummary r;
  r.count = s.size();
  r.min = s.front();
  r.max = s.back();
  r.median = quantile(s, 0.5);
  r.p25 = quantile(s, 0.25);
  r.p75 = quantile(s, 0.75);
  double sum = 0;
  for (double v : s) sum += v;
  r.mean = sum / static_cast<double>(s.size());
  double var = 0;
  for (double v : s) var += (v - r.mean) * (v - r.mean);
  r.stddev = s.size() > 1 ? std::sqrt(var / static_cast<double>(s.size() - 1)) : 0;
  r.spread_pct = r.median > 0 ? 100.0 * (r.p75 - r.p25) / r.median : 0;
  return r;
}

}  // namespace mblast
