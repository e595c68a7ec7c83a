// Summary statistics of timing samples.
#pragma once

#include <cstddef>
#include <vector>

namespace mblast {

struct SampleSummary {
  size_t count = 0;
  double median = 0, mean = 0, min = 0, max = 0, p25 = 0, p75 = 0;
  double stddev = 0;
  // Interquartile range over the median, in percent: the spread figure mblast reports.
  double spread_pct = 0;
};

// Throws std::invalid_argument on an empty sample.
SampleSummary summarize(std::vector<double> samples);

}  // namespace mblast
