// The OpenCL generators of the builtin policy (src/policy/opencl/): the variants they make for
// the hand-made problems and for the synthetic ones of gpu_test_support.h (a covering subset, or
// all with MBLAST_TEST_EVERY_VARIANT=1: variant_subset.h) are built, verified on
// every seed, init and run, and timed, through the real pipeline on every OpenCL target
// available here (pocl-cpu on the development machine). Timing is printed, never asserted.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>

#include "gpu_test_support.h"

namespace mblast::policy {
namespace {

using namespace gpu_test;

TEST(OpenclVariants, StructureAndSeedActions) { check_variant_structure("opencl", ".opencl.cpp", case_names(true)); }

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

TEST(OpenclVariants, ConvAsGemmWhereOneStridePerOperandHolds) {
  auto gemm_of = [](const std::string& name) -> std::optional<Variant> {
    const Case c = load_case(name);
    const auto variants = opencl_variants(c.plan, c.problem, generation_target("opencl"));
    if (!variants.empty() && variants.front().family == "opencl.conv.gemm") return variants.front();
    return std::nullopt;
  };
  auto dense = gemm_of("pt_conv_dense");  // one group, two samples: W shared (stride 0)
  ASSERT_TRUE(dense);
  EXPECT_NE(dense->source.find("mb_im2col"), std::string::npos);
  EXPECT_NE(dense->source.find("CLBlastSgemmStridedBatched("), std::string::npos);
  EXPECT_NE(dense->source.find("mb_epilogue"), std::string::npos);
  auto pointwise = gemm_of("pt_conv_pointwise");  // x is already the column matrix
  ASSERT_TRUE(pointwise);
  EXPECT_EQ(pointwise->source.find("mb_im2col"), std::string::npos);
  EXPECT_EQ(pointwise->source.find("mb_epilogue"), std::string::npos);  // nothing to apply
  EXPECT_TRUE(gemm_of("pt_conv_one_sample"));                           // groups of one sample: W's groups in turn
  EXPECT_FALSE(gemm_of("pt_conv"));  // two groups and two samples: no single stride for W
}

// The same designs on every OpenCL device, in another order on a CPU: a work-item per row
// first (on PoCL it beat the work-group start 2.5-3.8x), a work-group per row first on a GPU;
// likewise matmul's row-vector kernels, conv's row kernels and elementwise math on vectors.
TEST(OpenclVariants, RowKernelsOnACpuDeviceStartWithAWorkItemPerRow) {
  for (const std::string name : {"softmax", "row_sum"}) {
    SCOPED_TRACE(name);
    const Case c = load_case(name);  // 1024 and 2048 rows
    const auto on_cpu = opencl_variants(c.plan, c.problem, find_target("pocl-cpu"));
    const auto on_gpu = opencl_variants(c.plan, c.problem, find_target("nvidia-opencl"));
    ASSERT_FALSE(on_cpu.empty());
    EXPECT_EQ(on_cpu.front().family, "opencl.reduce.row-per-item");
    EXPECT_EQ(on_gpu.front().family, "opencl.reduce.row-per-group");
    std::multiset<std::string> a, b;
    for (const auto& v : on_cpu) a.insert(v.source);
    for (const auto& v : on_gpu) b.insert(v.source);
    EXPECT_EQ(a, b) << "the same candidates, reordered";
  }
  // matmul: the row-vector kernels (no local memory) first on a CPU, the tiled ones on a GPU
  const Case mm = load_case("matmul");
  const auto mm_cpu = opencl_variants(mm.plan, mm.problem, find_target("pocl-cpu"));
  EXPECT_EQ(mm_cpu.front().family, "opencl.matmul.row-vector");
  // the widest block (1 x float4 was 10x slower), first in work-groups of two column slabs (B,
  // 512 x 384, is the larger operand: each work-group streams half of it, all 32 row groups)
  EXPECT_EQ(mm_cpu.front().params, nlohmann::json({{"rm", 8}, {"slabs", 2}, {"vec", 16}}));
  EXPECT_NE(mm_cpu.front().source.find("const size_t local[3] = {12, 32, 1};"),
            std::string::npos);  // 384 / 16 / 2, 256 / 8
  EXPECT_EQ(mm_cpu.at(2).params, nlohmann::json({{"rm", 8}, {"vec", 16}}))
      << "and with the implementation's work-groups";
  // A taller than B is wide: no slabs (level1/02 small: 328 us, 2 slabs 542). 512 rows: a
  // work-group of two slabs would still fit (12 x 64 work-items).
  KernelPlan tall = mm.plan;
  Problem tall_problem = mm.problem;
  tall.m = 512;
  tall.out_shape = {512, 384};
  tall.out_numel = 512 * 384;
  tall_problem.inputs.at(0).shape = {512, 512};
  tall_problem.outputs.at(0).shape = {512, 384};
  const auto tall_cpu = opencl_variants(tall, tall_problem, find_target("pocl-cpu"));
  ASSERT_FALSE(tall_cpu.empty());
  EXPECT_EQ(tall_cpu.front().family, "opencl.matmul.row-vector");
  for (const auto& v : tall_cpu) EXPECT_FALSE(v.params.contains("slabs")) << v.params.dump();
  EXPECT_EQ(opencl_variants(mm.plan, mm.problem, find_target("nvidia-opencl")).front().family, "opencl.matmul.tiled");
  // conv: the register-blocked row kernels first on a CPU (im2col + CLBlast was 0.15-0.63x of
  // PyTorch on PoCL), im2col + CLBlast on a GPU
  // elementwise: math on float16 values first on a CPU (one vectorised Sleef call per vector;
  // per lane, PoCL made one scalar call per element: a GELU 9x slower)
  const Case ew = load_case("act_chain");
  const auto ew_cpu = opencl_variants(ew.plan, ew.problem, find_target("pocl-cpu"));
  ASSERT_FALSE(ew_cpu.empty());
  EXPECT_EQ(ew_cpu.front().family, "opencl.elementwise.vector");
  EXPECT_EQ(ew_cpu.front().params.value("math", ""), "vector");
  EXPECT_EQ(ew_cpu.front().params.value("vec", 0), 16);
  EXPECT_EQ(opencl_variants(ew.plan, ew.problem, find_target("nvidia-opencl")).front().family,
            "opencl.elementwise.scalar");
  // with a GELU in it, the polynomial erf first on a CPU (PoCL's vectorised erf: level1/21 1.3 ms
  // against 0.35 ms); only expressions that call erf get those variants
  EXPECT_FALSE(ew_cpu.front().params.contains("erf")) << ew.plan.summary();
  const Case gelu = load_case("pt_ew_bcast");
  const auto gelu_cpu = opencl_variants(gelu.plan, gelu.problem, find_target("pocl-cpu"));
  ASSERT_FALSE(gelu_cpu.empty());
  EXPECT_EQ(gelu_cpu.front().params.value("erf", ""), "polynomial");
  EXPECT_NE(gelu_cpu.front().source.find("mb_erf16("), std::string::npos);
  for (const auto& v : ew_cpu) EXPECT_FALSE(v.params.contains("erf")) << v.family << " " << v.params.dump();
  // nn.Linear's weight: transposed once at preparation for the row-vector kernels, first on a CPU
  const Case lin = load_case("pt_linear_packed");
  const auto lin_cpu = opencl_variants(lin.plan, lin.problem, find_target("pocl-cpu"));
  ASSERT_FALSE(lin_cpu.empty());
  EXPECT_EQ(lin_cpu.front().family, "opencl.matmul.packed-row-vector");
  EXPECT_NE(lin_cpu.front().source.find("mb_prepare_enqueue(ctx, s, par)"), std::string::npos);
  EXPECT_EQ(opencl_variants(lin.plan, lin.problem, find_target("nvidia-opencl")).front().family, "opencl.matmul.tiled");
  // B^T an input: transposed by a kernel before the product on each call, first on a CPU
  const Case bt = load_case("pt_mm_input_bt");
  const auto bt_cpu = opencl_variants(bt.plan, bt.problem, find_target("pocl-cpu"));
  ASSERT_FALSE(bt_cpu.empty());
  EXPECT_EQ(bt_cpu.front().family, "opencl.matmul.transposed-row-vector");
  EXPECT_EQ(bt_cpu.front().source.find("mb_prepare_enqueue(ctx, s, par)"),
            std::string::npos);                       // nothing at preparation
  const std::string& bt_src = bt_cpu.front().source;  // enqueued on each call, the transpose first
  ASSERT_NE(bt_src.find("clEnqueueNDRangeKernel(mb_matmul)"), std::string::npos);
  EXPECT_LT(bt_src.find("clEnqueueNDRangeKernel(mb_pack_b)"), bt_src.find("clEnqueueNDRangeKernel(mb_matmul)"));
  const Case cv = load_case("pt_conv_dense");
  EXPECT_EQ(opencl_variants(cv.plan, cv.problem, find_target("pocl-cpu")).front().family, "opencl.conv.rows");
  EXPECT_EQ(opencl_variants(cv.plan, cv.problem, find_target("nvidia-opencl")).front().family, "opencl.conv.gemm");
}

// A generated candidate has its plan's shapes compiled in: given other tensors, mblast_run
// refuses with the reason instead of computing garbage.
TEST(OpenclVariants, ARowStatisticAndTheWorkThatReadsItRunAsOneKernelFirst) {
  const Case c = load_case("pt_chain_row_normalize");  // x / x.sum(1, keepdims) * w
  for (const std::string target : {"pocl-cpu", "nvidia-opencl"}) {
    SCOPED_TRACE(target);
    const auto vs = generate_variants(c.plan, c.problem, find_target(target));
    ASSERT_FALSE(vs.empty());
    auto is_map = [](const Variant& v) { return v.family.rfind("opencl.row-map.", 0) == 0; };
    EXPECT_TRUE(is_map(vs.front())) << vs.front().family;
    EXPECT_TRUE(std::is_partitioned(vs.begin(), vs.end(), is_map));
    EXPECT_TRUE(std::any_of(vs.begin(), vs.end(), [](const Variant& v) { return v.family == "opencl.chain"; }));
    for (const auto& v : vs) {
      if (!is_map(v)) continue;
      size_t kernels = 0;
      for (size_t at = v.source.find("__kernel"); at != std::string::npos; at = v.source.find("__kernel", at + 1))
        ++kernels;
      EXPECT_EQ(kernels, 1u) << label(v);
    }
  }
}

TEST(OpenclVariants, CandidateRejectsOtherShapes) {
  std::string why;
  const auto targets = testing::available_targets("opencl", &why);
  if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
  const Case row_sum = load_case("row_sum");  // x [2048, 1024]
  const Case softmax = load_case("softmax");  // x [1024, 1024]
  const auto variants = opencl_variants(row_sum.plan, row_sum.problem, generation_target("opencl"));
  ASSERT_FALSE(variants.empty());
  const fs::path file = write_variant("opencl", "row_sum_on_softmax", 0, variants.back());
  EvalOptions o = quick_timing();
  o.timing = false;
  RunnerClient client(RunnerAddress{});
  const nlohmann::json r = evaluate(softmax.problem, targets.front(), file, o, &client);
  EXPECT_FALSE(r.value("correct", true));
  EXPECT_EQ(r.value("failure_kind", nlohmann::json()), "launch_failed") << r.dump();
  EXPECT_NE(r.value("reason", nlohmann::json("")).dump().find("this candidate was generated for 2048"),
            std::string::npos)
      << r.dump();
}

class OpenclVariantsOnTarget : public ::testing::TestWithParam<std::string> {};

TEST_P(OpenclVariantsOnTarget, VariantsAreCorrect) { evaluate_every_variant("opencl", GetParam()); }

INSTANTIATE_TEST_SUITE_P(Problems, OpenclVariantsOnTarget, ::testing::ValuesIn(case_names(true)),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace mblast::policy
