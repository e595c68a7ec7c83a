// The OpenCL generators of the builtin policy (src/policy/opencl/): every variant they make for
// the hand-made problems and for the synthetic ones of gpu_test_support.h is built, verified on
// every seed, init and run, and timed, through the real pipeline on every OpenCL target
// available here (pocl-cpu on the development machine). Timing is printed, never asserted.
#include <gtest/gtest.h>

#include "gpu_test_support.h"

namespace mblast::policy {
namespace {

using namespace gpu_test;

TEST(OpenclVariants, StructureAndSeedActions) { check_variant_structure("opencl", ".opencl.cpp"); }

TEST(OpenclVariants, RefusesWhatItCannotGenerate) { check_refusals("opencl"); }

TEST(OpenclVariants, ClblastVariantLinksTheLibrary) {
  const Case c = load_case("matmul");
  bool found = false;
  for (const auto& v : opencl_variants(c.plan, c.problem, generation_target("opencl"))) {
    if (v.family != "opencl.matmul.clblast") continue;
    found = true;
    // The opencl backend links -lclblast when a candidate includes this header.
    EXPECT_NE(v.source.find("#include <clblast_c.h>"), std::string::npos);
    EXPECT_NE(v.source.find("CLBlastSgemm("), std::string::npos);
  }
  EXPECT_TRUE(found);
}

class OpenclVariantsOnTarget : public ::testing::TestWithParam<std::string> {};

TEST_P(OpenclVariantsOnTarget, EveryVariantIsCorrect) { evaluate_every_variant("opencl", GetParam()); }

INSTANTIATE_TEST_SUITE_P(Problems, OpenclVariantsOnTarget, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace mblast::policy
