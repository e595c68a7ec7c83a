#include <gtest/gtest.h>

#include <stdexcept>

#include "mblast/stats.h"

namespace mblast {
namespace {

TEST(Stats, QuantilesOfAKnownSample) {
  auto s = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p25, 2);
  EXPECT_DOUBLE_EQ(s.p75, 4);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.spread_pct, 100.0 * 2 / 3);
}

TEST(Stats, EvenCountInterpolatesAndOutliersDoNotMoveTheMedian) {
  EXPECT_DOUBLE_EQ(summarize({1, 2, 3, 4}).median, 2.5);
  EXPECT_DOUBLE_EQ(summarize({10, 10, 10, 10, 1e9}).median, 10);
}

TEST(Stats, EmptyThrows) { EXPECT_THROW(summarize({}), std::invalid_argument); }

}  // namespace
}  // namespace mblast
