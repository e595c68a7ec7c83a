#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "mblast/verify.h"

namespace mblast {
namespace {

using protocol::FailureKind;

std::vector<std::byte> floats(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

const TensorSpec kSpec{"y", DType::f32, {2, 3}};
const Tolerance kTol{1e-5, 1e-5, 1.0};

TEST(Verify, ExactAndWithinToleranceMatch) {
  auto e = floats({1, -2, 3, 0, 5, 6});
  auto g = floats({1, -2 + 1e-5f, 3, 0, 5, 6});
  auto c = check_output(kSpec, kTol, g, e, std::byte{0xFF});
  EXPECT_TRUE(c.ok()) << c.reason;
  EXPECT_EQ(c.matched, 6u);
}

TEST(Verify, OutsideToleranceIsWrongAndNamesTheElement) {
  auto e = floats({1, 2, 3, 4, 5, 6});
  auto g = floats({1, 2, 3, 4, 5.01f, 6});
  auto c = check_output(kSpec, kTol, g, e, std::byte{0xFF});
  EXPECT_EQ(c.kind, FailureKind::wrong_output);
  EXPECT_NE(c.reason.find("[1, 1]"), std::string::npos) << c.reason;
}

TEST(Verify, PoisonLeftInPlaceIsUnwrittenEvenIfToleranceWouldAllowIt) {
  auto e = floats({1, 2, 3, 4, 5, 6});
  auto g = e;
  std::memset(g.data() + 12, 0xFF, 12);  // the last three elements never written
  Tolerance loose{1e9, 1e9, 0.1};
  auto c = check_output(kSpec, loose, g, e, std::byte{0xFF});
  EXPECT_EQ(c.kind, FailureKind::unwritten_output);
  EXPECT_EQ(c.unwritten, 3u);
  // A finite poison (0x7F bytes = 3.39e38 in f32) is caught the same way.
  std::memset(g.data() + 12, 0x7F, 12);
  EXPECT_EQ(check_output(kSpec, loose, g, e, std::byte{0x7F}).kind, FailureKind::unwritten_output);
}

TEST(Verify, NanWhereReferenceIsFiniteAlwaysFails) {
  auto e = floats({1, 2, 3, 4, 5, 6});
  auto g = floats({1, 2, NAN, 4, 5, 6});
  Tolerance loose{1, 1, 0.5};
  EXPECT_EQ(check_output(kSpec, loose, g, e, std::byte{0xFF}).kind, FailureKind::nan_or_inf);
  auto gi = floats({1, 2, 3, INFINITY, 5, 6});
  EXPECT_EQ(check_output(kSpec, loose, gi, e, std::byte{0xFF}).kind, FailureKind::nan_or_inf);
}

TEST(Verify, MatchedRatioRule) {
  auto e = floats({1, 2, 3, 4, 5, 6});
  auto g = floats({1, 2, 3, 4, 5, 7});  // 5 of 6 match
  EXPECT_TRUE(check_output(kSpec, {1e-5, 1e-5, 0.8}, g, e, std::byte{0xFF}).ok());
  EXPECT_EQ(check_output(kSpec, {1e-5, 1e-5, 0.9}, g, e, std::byte{0xFF}).kind, FailureKind::wrong_output);
}

TEST(Verify, IntegersCompareExactly) {
  TensorSpec s{"idx", DType::i32, {3}};
  std::vector<int32_t> a = {1, 2, 3}, b = {1, 2, 4};
  std::vector<std::byte> ea(12), eb(12);
  std::memcpy(ea.data(), a.data(), 12);
  std::memcpy(eb.data(), b.data(), 12);
  EXPECT_TRUE(check_output(s, default_tolerance(DType::i32), ea, ea, std::byte{0xFF}).ok());
  EXPECT_EQ(check_output(s, default_tolerance(DType::i32), eb, ea, std::byte{0xFF}).kind, FailureKind::wrong_output);
}

TEST(Verify, ReferenceThatEqualsThePoisonIsNotUnwritten) {
  TensorSpec s{"m", DType::i32, {2}};
  std::vector<int32_t> v = {-1, 5};  // -1 is 0xFFFFFFFF, the poison pattern
  std::vector<std::byte> b(8);
  std::memcpy(b.data(), v.data(), 8);
  EXPECT_TRUE(check_output(s, default_tolerance(DType::i32), b, b, std::byte{0xFF}).ok());
}

TEST(Verify, TwoRunsThatDisagreeAreNondeterministic) {
  auto r0 = floats({1, 2, 3, 4, 5, 6});
  auto r1 = floats({1, 2, 3, 4, 5, 6.001f});
  EXPECT_EQ(check_agreement(kSpec, kTol, r0, r1).kind, FailureKind::nondeterministic);
  EXPECT_TRUE(check_agreement(kSpec, kTol, r0, r0).ok());
}

TEST(Verify, IndexStringIsRowMajor) {
  EXPECT_EQ(index_string(TensorSpec{"t", DType::f32, {2, 3, 4}}, 23), "[1, 2, 3]");
}

}  // namespace
}  // namespace mblast
