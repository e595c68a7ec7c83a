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

TEST(Verify, Int64BeyondDoublePrecisionCompareExactly) {
  TensorSpec s{"idx", DType::i64, {2}};
  const int64_t big = (int64_t{1} << 60);
  std::vector<int64_t> a = {big, 7}, b = {big + 1, 7};  // equal as doubles, not as integers
  std::vector<std::byte> ea(16), eb(16);
  std::memcpy(ea.data(), a.data(), 16);
  std::memcpy(eb.data(), b.data(), 16);
  EXPECT_TRUE(check_output(s, default_tolerance(DType::i64), ea, ea, std::byte{0xFF}).ok());
  EXPECT_EQ(check_output(s, default_tolerance(DType::i64), eb, ea, std::byte{0xFF}).kind, FailureKind::wrong_output);
  // A tolerance in problem.json does not loosen an integer comparison.
  EXPECT_EQ(check_output(s, {10, 10, 1.0}, eb, ea, std::byte{0xFF}).kind, FailureKind::wrong_output);
}

TEST(Verify, BoolsAreOneByteZeroOrOne) {
  TensorSpec s{"mask", DType::boolean, {4}};
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
  EXPECT_EQ(parse_safetensors_dtype("BOOL"), DType::boolean);
  auto bytes = [](std::initializer_list<int> v) {
    std::vector<std::byte> b;
    for (int x : v) b.push_back(static_cast<std::byte>(x));
    return b;
  };
  const auto ref = bytes({1, 0, 0, 1});
  EXPECT_TRUE(check_output(s, default_tolerance(DType::boolean), ref, ref, std::byte{0xFF}).ok());
  // "true" written as another non-zero byte is wrong
  EXPECT_EQ(check_output(s, default_tolerance(DType::boolean), bytes({2, 0, 0, 1}), ref, std::byte{0xFF}).kind,
            FailureKind::wrong_output);
  EXPECT_EQ(check_output(s, default_tolerance(DType::boolean), bytes({1, 1, 0, 1}), ref, std::byte{0xFF}).kind,
            FailureKind::wrong_output);
  // the poison is never a bool: an element left holding it was not written
  EXPECT_EQ(check_output(s, default_tolerance(DType::boolean), bytes({1, 0, 0x7F, 1}), ref, std::byte{0x7F}).kind,
            FailureKind::unwritten_output);
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

TEST(Verify, LargeOutputsCheckedInStretchesGiveTheOnePassAnswer) {
  // Over four million elements the check runs on several threads: the first unwritten element,
  // the worst element and every count must still be those of one pass in order.
  const size_t n = (size_t{1} << 24) + 3;
  const TensorSpec spec{"y", DType::f32, {static_cast<int64_t>(n)}};
  std::vector<float> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = static_cast<float>(i % 1000) * 0.5f - 200.f;
  std::vector<float> got = ref;
  got[n - 2] += 1.0f;       // wrong, in the last stretch
  got[9'000'217] += 1.0f;   // as wrong (same reference value), earlier: ties go to the first
  got[12'000'000] += 0.5f;  // wrong, less so
  auto c = check_output(spec, kTol, floats(got), floats(ref), std::byte{0xFF});
  EXPECT_EQ(c.kind, FailureKind::wrong_output);
  EXPECT_EQ(c.matched, n - 3);
  EXPECT_EQ(c.worst_index, 9'000'217u);
  EXPECT_NEAR(c.max_abs_err, 1.0, 1e-3);
  EXPECT_NE(c.reason.find("3 of " + std::to_string(n)), std::string::npos) << c.reason;

  auto bytes = floats(got);
  for (size_t i : {size_t{15'000'000}, size_t{5'000'000}}) std::memset(bytes.data() + 4 * i, 0xFF, 4);
  auto u = check_output(spec, kTol, bytes, floats(ref), std::byte{0xFF});
  EXPECT_EQ(u.kind, FailureKind::unwritten_output);
  EXPECT_EQ(u.unwritten, 2u);
  EXPECT_NE(u.reason.find("[5000000]"), std::string::npos) << u.reason;
}

TEST(Verify, CleanBlocksAndExactBlocksAddUpAsOnePass) {
  // Clean blocks take a fast path and blocks with anything unusual the per-element one: the
  // counts and the largest errors must be those of looking at every element.
  const size_t n = 5000;  // five blocks, the last partial
  const TensorSpec spec{"y", DType::f32, {static_cast<int64_t>(n)}};
  const Tolerance tol{1e-4, 1e-3, 0.5};
  std::vector<float> ref(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    ref[i] = (i % 7 == 0) ? 0.0f : static_cast<float>(i % 13) - 6.5f;
    got[i] = ref[i] + static_cast<float>((i * 37) % 11) * 1e-6f * (i % 2 ? 1.f : -1.f);
  }
  got[1500] = ref[1500] + 0.25f;  // wrong, in the second block
  got[4321] = NAN;                // not finite, in the fifth
  auto bytes = floats(got);
  std::memset(bytes.data() + 4 * 2600, 0xFF, 4);  // never written, in the third
  double max_abs = 0, max_rel = 0;
  size_t within = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i == 2600 || i == 4321) continue;
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]), mag = std::fabs(static_cast<double>(ref[i]));
    max_abs = std::max(max_abs, err);
    if (mag > 0) max_rel = std::max(max_rel, err / mag);
    within += err <= tol.atol + tol.rtol * mag;
  }
  auto c = check_output(spec, tol, bytes, floats(ref), std::byte{0xFF});
  EXPECT_EQ(c.kind, FailureKind::unwritten_output);
  EXPECT_EQ(c.unwritten, 1u);
  EXPECT_EQ(c.matched, within);
  EXPECT_EQ(c.matched, n - 3);
  EXPECT_EQ(c.max_abs_err, max_abs);
  EXPECT_EQ(c.max_rel_err, max_rel);
  EXPECT_NE(c.reason.find("[2600]"), std::string::npos) << c.reason;
}

TEST(Verify, PoisonWithinToleranceIsUnwrittenInEveryBlock) {
  // A tolerance so loose that the poison itself is within it: only the poison test can say
  // "unwritten", in the block-wise first pass as in the per-element one.
  const size_t n = 3000;
  const TensorSpec spec{"y", DType::f32, {static_cast<int64_t>(n)}};
  std::vector<float> ref(n, 1.5f);
  auto bytes = floats(ref);
  std::memset(bytes.data() + 4 * 2047, 0x7F, 4);  // 3.39e38, the last element of the second block
  const Tolerance anything{1e39, 0, 1.0};
  auto c = check_output(spec, anything, bytes, floats(ref), std::byte{0x7F});
  EXPECT_EQ(c.kind, FailureKind::unwritten_output);
  EXPECT_EQ(c.unwritten, 1u);
  EXPECT_NE(c.reason.find("[2047]"), std::string::npos) << c.reason;

  const TensorSpec ints{"k", DType::i32, {static_cast<int64_t>(n)}};
  std::vector<int32_t> zeros(n, 0);
  std::vector<std::byte> ref_i(4 * n), got_i(4 * n);
  std::memcpy(ref_i.data(), zeros.data(), ref_i.size());
  got_i = ref_i;
  std::memset(got_i.data() + 4 * 10, 0xFF, 4);  // -1: one away from the reference, within atol 2
  auto ci = check_output(ints, Tolerance{2, 0, 1.0}, got_i, ref_i, std::byte{0xFF});
  EXPECT_EQ(ci.kind, FailureKind::unwritten_output);
  EXPECT_EQ(ci.unwritten, 1u);
}

TEST(Verify, IndexStringIsRowMajor) {
  EXPECT_EQ(index_string(TensorSpec{"t", DType::f32, {2, 3, 4}}, 23), "[1, 2, 3]");
}

}  // namespace
}  // namespace mblast
