// mblast bench --compare's rule (mblast/driver/bench_report.h): a slowdown is a regression only
// beyond max(threshold, k x the combined spread of the two medians). Synthetic results, so the
// rule is tested apart from any machine's noise.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mblast/driver/bench_report.h"

namespace mblast {
namespace {

using nlohmann::json;

json results(double median_us, double spread_pct) {
  json row = {{"key", "level1/relu"},
              {"level", "level1"},
              {"name", "relu"},
              {"status", "correct"},
              {"correct", true},
              {"candidate", {{"hash", "h"}}},
              {"time", {{"median", median_us}, {"unit", "us"}, {"spread_pct", spread_pct}}}};
  return {{"format", 1},
          {"kind", "mblast-bench"},
          {"meta", {{"target", "pocl-cpu"}, {"size", "small"}}},
          {"problems", json::array({row})}};
}

json verdict(double prev, double prev_spread, double now, double now_spread, CompareRule rule = {}) {
  return compare_bench(results(now, now_spread), results(prev, prev_spread), rule)["problems"][0];
}

TEST(BenchCompare, ASlowdownWithinTheCombinedSpreadIsNoise) {
  // 30 % slower, spreads 4 % and 30 %: combined 30.3 % > 30 %.
  json v = verdict(100, 4, 130, 30);
  EXPECT_EQ(v["verdict"], "unchanged") << v.dump();
  EXPECT_FALSE(v["regressed"].get<bool>());
  EXPECT_NEAR(v["allowed_pct"].get<double>(), 30.27, 0.01);
  // With k = 0 the threshold alone decides: a regression.
  v = verdict(100, 4, 130, 30, CompareRule{10, 0});
  EXPECT_EQ(v["verdict"], "slower") << v.dump();
  EXPECT_TRUE(v["regressed"].get<bool>());
}

TEST(BenchCompare, ASlowdownBeyondTheNoiseAndTheThresholdIsARegression) {
  json v = verdict(100, 4, 140, 3);  // combined 5 %: the 10 % threshold stands
  EXPECT_EQ(v["verdict"], "slower") << v.dump();
  EXPECT_TRUE(v["regressed"].get<bool>());
  EXPECT_DOUBLE_EQ(v["allowed_pct"].get<double>(), 10);
  // Within the threshold, however steady both runs were.
  v = verdict(100, 0.1, 109, 0.1);
  EXPECT_EQ(v["verdict"], "unchanged") << v.dump();
  // Faster is never a regression.
  v = verdict(100, 3, 70, 3);
  EXPECT_EQ(v["verdict"], "faster") << v.dump();
  EXPECT_FALSE(v["regressed"].get<bool>());
}

}  // namespace
}  // namespace mblast
