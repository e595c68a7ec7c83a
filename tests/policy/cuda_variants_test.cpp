// The CUDA generators of the builtin policy (src/policy/cuda/): the variants they make for the
// hand-made problems and for the synthetic ones of gpu_test_support.h (a covering subset, or all
// with MBLAST_TEST_EVERY_VARIANT=1: variant_subset.h) compile with nvcc for
// sm_90a (the gencode of targets/h100.json and h200.json) with the flags of backends/cuda/cuda_backend.cpp (skipped
// when there is no nvcc), and, where a CUDA device is available, are verified and timed through the real pipeline like
// the OpenCL ones (skipped with the reason otherwise).
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "gpu_test_support.h"
#include "mblast/process.h"

namespace mblast::policy {
namespace {

using namespace gpu_test;

TEST(CudaVariants, StructureAndSeedActions) { check_variant_structure("cuda", ".cuda.cu", case_names(true)); }

TEST(CudaVariants, RefusesWhatItCannotGenerate) { check_refusals("cuda"); }

TEST(CudaVariants, CublasVariantsOfferFp32AndTf32Apart) {
  const Case c = load_case("matmul");
  std::set<std::string> maths;
  for (const auto& v : cuda_variants(c.plan, c.problem, generation_target("cuda"))) {
    if (v.family != "cuda.matmul.cublas") continue;
    maths.insert(v.params.value("math", ""));
    EXPECT_NE(v.source.find("#include <cublas_v2.h>"), std::string::npos);  // the backend links -lcublas for it
    const bool tf32 = v.params.value("math", "") == "tf32";
    EXPECT_EQ(v.source.find("CUBLAS_TF32_TENSOR_OP_MATH") != std::string::npos, tf32);
    EXPECT_EQ(v.actions.front() == "cuda.tf32-tensor-cores", tf32);
  }
  EXPECT_EQ(maths, (std::set<std::string>{"fp32", "tf32"}));
}

TEST(CudaVariants, LargeFp32ProductsStartFromSplitTf32TensorCoresOnSm90a) {
  const Case c = load_case("matmul");  // 256 x 384 x 512, B stored [k][n]: too few tiles to fill an H100
  const auto small = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_GE(small.size(), 3u);
  EXPECT_EQ(small[0].family, "cuda.matmul.cublas");
  EXPECT_EQ(small[0].params.value("math", ""), "fp32");
  EXPECT_EQ(small[1].family, "cuda.matmul.tf32x3");
  for (const auto& v : small) {
    if (v.family != "cuda.matmul.tf32x3") continue;
    // three TF32 products per k8 step, the small terms into a fresh partial sum added in FP32
    EXPECT_NE(v.source.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(v.params.value("bn", 0)) +
                            "k8.f32.tf32.tf32"),
              std::string::npos);
    EXPECT_NE(v.source.find("mb_wgmma(part, mb_desc(a_small + kk * 32), mb_desc(b_big + kk * 32), kk);"),
              std::string::npos);
    EXPECT_NE(v.source.find("mb_wgmma(part, mb_desc(a_big + kk * 32), mb_desc(b_small + kk * 32), 1);"),
              std::string::npos);
    EXPECT_NE(v.source.find("acc[i] += part[i];"), std::string::npos);
    EXPECT_NE(v.source.find("mb_split_t<<<"), std::string::npos) << "B stored [k][n] is transposed while it is split";
  }

  // 8192 x 4096 x 4096: the split products come first.
  KernelPlan big = matmul_plan({8192, 4096}, 0, 0, true, 8192, 4096, 4096, identity_epilogue());
  Problem p = c.problem;
  p.inputs[0].shape = {8192, 4096};
  p.parameters[0].shape = {4096, 4096};
  p.outputs[0].shape = {8192, 4096};
  const auto large = cuda_variants(big, p, generation_target("cuda"));
  ASSERT_GE(large.size(), 3u);
  EXPECT_EQ(large[0].family, "cuda.matmul.tf32x3");
  EXPECT_EQ(large[0].params.value("bn", 0), 256);
  EXPECT_EQ(large[2].family, "cuda.matmul.cublas");

  // Where the split passes cost about as much as the product (level2/09's batched 2048 x 128 x 2048,
  // A the 2048 x 2048 attention weights), cuBLAS's SGEMM comes first, then the 128-wide tile.
  KernelPlan thin = matmul_plan({32, 2048, 128}, 0, 1, false, 2048, 128, 2048, identity_epilogue());
  Problem t = c.problem;
  t.inputs[0].shape = {32, 2048, 2048};
  t.inputs.push_back(t.inputs[0]);
  t.inputs[1].shape = {32, 2048, 128};
  t.outputs[0].shape = {32, 2048, 128};
  const auto thin_vs = cuda_variants(thin, t, generation_target("cuda"));
  ASSERT_GE(thin_vs.size(), 3u);
  EXPECT_EQ(thin_vs[0].family, "cuda.matmul.cublas");
  EXPECT_EQ(thin_vs[1].family, "cuda.matmul.tf32x3");
  EXPECT_EQ(thin_vs[1].params.value("bn", 0), 128);

  // Not where wgmma is missing (an sm_80 target), nor where K is not a multiple of 4 (16-byte copies).
  Target ampere = generation_target("cuda");
  ampere.spec = {{"arch", {{"sm", "80"}, {"gencode", "sm_80"}}}};
  KernelPlan odd = c.plan;
  odd.k = 510;
  Problem q = c.problem;
  q.inputs[0].shape = {256, 510};
  q.parameters[0].shape = {510, 384};
  for (const auto& [vs, why] : {std::pair{cuda_variants(c.plan, c.problem, ampere), "sm_80"},
                                std::pair{cuda_variants(odd, q, generation_target("cuda")), "K = 510"}}) {
    EXPECT_FALSE(vs.empty()) << why;
    for (const auto& v : vs) EXPECT_NE(v.family, "cuda.matmul.tf32x3") << why;
  }
}

TEST(CudaVariants, SoftmaxReadsTheRowOnceFirstAndLongRowsGoToLargeBlocks) {
  // The designs that hold the row in registers come before the online ones (a row read once,
  // not twice): with an empty KB the generators' order decides what a short run tries.
  const Case c = load_case("softmax");  // rows of 1024: a warp per row holds 32 floats a lane
  auto is_cached = [](const Variant& v) { return v.params.value("cache", false); };
  const auto short_rows = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_GE(short_rows.size(), 4u);
  EXPECT_EQ(short_rows.front().family, "cuda.reduce.row-per-warp");
  EXPECT_TRUE(is_cached(short_rows.front()));
  EXPECT_TRUE(std::is_partitioned(short_rows.begin(), short_rows.end(), is_cached));
  // Rows of 16384 (level1/15): blocks first, the largest first; the online ones after in the
  // same order.
  KernelPlan plan = c.plan;
  plan.rshape = {64, 16384, 1};
  plan.out_shape = {64, 16384};
  plan.out_numel = 64 * 16384;
  const auto long_rows = cuda_variants(plan, c.problem, generation_target("cuda"));
  std::vector<std::pair<int, bool>> order;  // (block, cached) of the row-per-block designs
  for (const auto& v : long_rows) {
    if (v.family == "cuda.reduce.row-per-block") order.emplace_back(v.params.value("block", 0), is_cached(v));
  }
  EXPECT_EQ(order,
            (std::vector<std::pair<int, bool>>{
                {1024, true}, {512, true}, {256, true}, {1024, false}, {512, false}, {256, false}, {128, false}}));
  EXPECT_EQ(long_rows.front().family, "cuda.reduce.row-per-block");
  EXPECT_TRUE(std::is_partitioned(long_rows.begin(), long_rows.end(), is_cached));
  // Reductions keep their order: a warp per row first.
  const Case sum = load_case("row_sum");
  EXPECT_EQ(cuda_variants(sum.plan, sum.problem, generation_target("cuda")).front().family, "cuda.reduce.row-per-warp");
}

TEST(CudaVariants, ARowStatisticAndTheWorkThatReadsItRunAsOneKernelFirst) {
  // x / x.sum(1, keepdims) * w: one kernel that reads each row once (held in registers), ahead
  // of the chain's two kernels (the sum into a temporary, then the division reading x again).
  const Case c = load_case("pt_chain_row_normalize");
  ASSERT_TRUE(fuse_row_map(c.plan).has_value());
  const auto vs = generate_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_FALSE(vs.empty());
  const Variant& first = vs.front();
  EXPECT_EQ(first.family, "cuda.row-map.row-per-warp");  // rows of 512: a warp per row
  EXPECT_TRUE(first.params.value("cache", false));
  EXPECT_NE(std::find(first.actions.begin(), first.actions.end(), "cuda.merge-kernels"), first.actions.end());
  size_t kernels = 0;
  for (size_t at = first.source.find("__global__"); at != std::string::npos;
       at = first.source.find("__global__", at + 1))
    ++kernels;
  EXPECT_EQ(kernels, 1u);
  EXPECT_EQ(first.source.find("tmp["), std::string::npos);  // no temporary
  auto is_chain = [](const Variant& v) { return v.family == "cuda.chain"; };
  EXPECT_TRUE(std::is_partitioned(vs.begin(), vs.end(), [&](const Variant& v) { return !is_chain(v); }));
  EXPECT_TRUE(std::any_of(vs.begin(), vs.end(), is_chain));
  // Rows of 4096 (level2/15 has 8192): a block per row first, the largest first, cached first.
  KernelPlan plan = c.plan;
  plan.stages[0].rshape = {3, 4096, 1};
  plan.stages[0].out_shape = {3, 1};
  plan.stages[0].out_numel = 3;
  plan.temps[0].shape = {3, 1};
  plan.out_shape = plan.stages[1].out_shape = {3, 4096};
  for (auto& n : plan.stages[1].expr.nodes) {
    if (n.kind == ExprNode::Kind::Input && n.tensor == plan.first_temp) n.index = {4096, 3};
    if (n.kind == ExprNode::Kind::Param) n.index = {1, 4096};
  }
  Problem problem = c.problem;
  problem.inputs[0].shape = {3, 4096};
  problem.parameters[0].shape = {4096};
  problem.outputs[0].shape = {3, 4096};
  std::vector<std::pair<int, bool>> order;  // (block, cached) of the row-per-block designs
  for (const auto& v : generate_variants(plan, problem, generation_target("cuda")))
    if (v.family == "cuda.row-map.row-per-block")
      order.emplace_back(v.params.value("block", 0), v.params.value("cache", false));
  ASSERT_FALSE(order.empty());
  EXPECT_EQ(order.front(), std::make_pair(1024, true));
}

TEST(CudaVariants, AChainOfConvolutionsTriesEachMathModeInEveryStageRightAfterTheStart) {
  // Two stride-1 convolutions: FFT and TF32 for both at once come right after the all-first
  // (strict FP32) combination, before any mix.
  const Case c = load_case("pt_chain_conv_conv");
  const auto vs = generate_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_GE(vs.size(), 3u);
  auto maths = [](const Variant& v) {
    std::vector<std::string> m;
    for (const auto& st : v.params.at("stages")) m.push_back(st.at("params").value("math", "?"));
    return m;
  };
  EXPECT_EQ(maths(vs[1]), (std::vector<std::string>{"fp32-fft", "fp32-fft"})) << vs[1].params.dump();
  EXPECT_EQ(maths(vs[2]), (std::vector<std::string>{"tf32", "tf32"})) << vs[2].params.dump();
}

TEST(CudaVariants, ArgmaxRowsLoadFloat4FirstWhereTheRowsAllow) {
  const Case c = load_case("pt_argmax_rows");  // rows of 3000: float4 loads, then scalar ones
  const auto vs = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_GE(vs.size(), 6u);
  EXPECT_EQ(vs.front().family, "cuda.argmax.block-rows");
  EXPECT_EQ(vs.front().params.value("vec", 1), 4);
  EXPECT_NE(vs.front().source.find("reinterpret_cast<const float4*>"), std::string::npos);
  KernelPlan odd = c.plan;  // rows of 3001 would misalign every row after the first
  odd.rshape.reduce = 3001;
  Problem p = c.problem;
  p.inputs[0].shape = {5, 3001};
  const auto scalar = cuda_variants(odd, p, generation_target("cuda"));
  ASSERT_FALSE(scalar.empty());
  for (const auto& v : scalar) EXPECT_FALSE(v.params.contains("vec")) << v.params.dump();
}

TEST(CudaVariants, ConvGoesThroughCudnnFirstWithItsMathModesApart) {
  const Case c = load_case("pt_conv");
  const auto variants = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_GE(variants.size(), 4u);
  // The start of a generated run is the strict, direct-sum cuDNN design: the likeliest to pass a
  // strict FP32 tolerance and, on a GPU, far faster than the direct kernels after it.
  EXPECT_EQ(variants.front().family, "cuda.conv.cudnn");
  EXPECT_EQ(variants.front().params.value("math", ""), "fp32");
  std::vector<std::string> maths;
  for (const auto& v : variants) {
    if (v.family != "cuda.conv.cudnn") continue;
    maths.push_back(v.params.value("math", ""));
    EXPECT_NE(v.source.find("#include <cudnn.h>"), std::string::npos);  // the backend links -lcudnn for it
    const bool tf32 = maths.back() == "tf32";
    EXPECT_EQ(v.source.find("CUDNN_DEFAULT_MATH") != std::string::npos, tf32);
    EXPECT_EQ(v.source.find("CUDNN_FMA_MATH") != std::string::npos, !tf32);
    // each strict design keeps to its own algorithms; the TF32 one takes any
    EXPECT_EQ(v.source.find("a != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM") != std::string::npos,
              maths.back() == "fp32");
    EXPECT_EQ(v.source.find("a != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING") != std::string::npos,
              maths.back() == "fp32-fft");
    EXPECT_EQ(v.source.find("a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED") != std::string::npos,
              maths.back() == "fp32-winograd");
    // the epilogue (bias, activation) runs in place after the convolution
    EXPECT_NE(v.source.find("mb_epilogue<<<"), std::string::npos);
  }
  // stride 2 and two groups: no FFT nor Winograd design, which cuDNN would refuse
  EXPECT_EQ(maths, (std::vector<std::string>{"fp32", "tf32"}));
}

TEST(CudaVariants, FftAndWinogradDesignsOnlyWhereCudnnTakesThem) {
  auto cudnn_maths = [](const KernelPlan& plan, const Problem& problem) {
    std::vector<std::string> maths;
    for (const auto& v : cuda_variants(plan, problem, generation_target("cuda")))
      if (v.family == "cuda.conv.cudnn") maths.push_back(v.params.value("math", ""));
    return maths;
  };
  // a dense 3x3 at stride 1 (the chain's first stage): all four
  const Case chain = load_case("pt_chain_conv_conv");
  ASSERT_EQ(chain.plan.stages.size(), 2u);
  EXPECT_EQ(cudnn_maths(chain.plan.stages[0], stage_problem(chain.problem, chain.plan, 0)),
            (std::vector<std::string>{"fp32", "fp32-fft", "fp32-winograd", "tf32"}));
  // a 1x1: FFT but no Winograd
  const Case pw = load_case("pt_conv_pointwise_bias");
  EXPECT_EQ(cudnn_maths(pw.plan, pw.problem), (std::vector<std::string>{"fp32", "fp32-fft", "tf32"}));
}

TEST(CudaVariants, TransposedConvStartsFromCudnnDataGradient) {
  // stride (2, 3), padding (1, 2), output_padding (1, 2), dilation (1, 2), two groups
  const Case c = load_case("pt_conv_transpose");
  const auto variants = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  std::vector<std::string> maths;
  for (const auto& v : variants) {
    if (v.family != "cuda.conv_transpose.cudnn") continue;
    maths.push_back(v.params.value("math", ""));
    // the data gradient of the forward convolution from the 2x6x10x14 output back to the 2x4x5x4
    // input, through PyTorch's [cin, cout / groups, kh, kw] weight as that convolution's filter
    EXPECT_NE(
        v.source.find(
            "cudnnConvolutionBackwardData(s->dnn, &alpha, s->wd, par0, s->xd, in0, s->cd, s->algo, s->ws, s->ws_bytes, "
            "&beta, s->yd, out0)"),
        std::string::npos)
        << v.source;
    EXPECT_NE(v.source.find("cudnnSetFilter4dDescriptor(s->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 4)"),
              std::string::npos);
    EXPECT_NE(v.source.find("cudnnSetConvolution2dDescriptor(s->cd, 1, 2, 2, 3, 1, 2, CUDNN_CROSS_CORRELATION"),
              std::string::npos);
    EXPECT_NE(v.source.find("cudnnSetConvolutionGroupCount(s->cd, 2)"), std::string::npos);
    EXPECT_NE(v.source.find("cudnnSetTensor4dDescriptor(s->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 6, 10, 14)"),
              std::string::npos);
    EXPECT_NE(v.source.find("cudnnGetConvolution2dForwardOutputDim(s->cd, s->yd, s->wd"), std::string::npos);
    EXPECT_NE(v.source.find("if (on != 2 || oc != 4 || oh != 5 || ow != 4)"), std::string::npos);
    // cuDNN's non-deterministic algorithms only in the design that says so
    const bool any = !v.params.value("deterministic", true);
    if (any) maths.back() += " any";
    EXPECT_EQ(v.source.find("perf[i].determinism == CUDNN_DETERMINISTIC") != std::string::npos, !any);
    EXPECT_EQ(v.source.find("a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_1") != std::string::npos, maths.back() != "tf32");
    EXPECT_NE(v.source.find("mb_epilogue<<<"), std::string::npos);  // bias and relu in place
  }
  EXPECT_EQ(maths, (std::vector<std::string>{"fp32", "fp32 any", "tf32"}));
  ASSERT_FALSE(variants.empty());
  EXPECT_EQ(variants.front().family, "cuda.conv_transpose.cudnn");
  EXPECT_EQ(variants.back().family, "cuda.conv_transpose.direct");  // the gather stays, after cuDNN
}

TEST(CudaVariants, PointwiseConvStartsFromCublasPerImageProducts) {
  const Case c = load_case("pt_conv_pointwise_bias");
  const auto variants = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_GE(variants.size(), 6u);
  EXPECT_EQ(variants.front().family, "cuda.conv.cublas");
  EXPECT_EQ(variants.front().params.value("math", ""), "fp32");
  // column-major out^T (hw x cout) = x[n]^T (hw x cin) * W^T (cin x cout): x strided by image, W shared
  EXPECT_NE(variants.front().source.find(
                "cublasSgemmStridedBatched(s->handle, CUBLAS_OP_N, CUBLAS_OP_N, 35, 6, 4, &alpha, in0, 35, 140LL, "
                "par0, 4, 0LL, &beta, out0, 35, 210LL, 3)"),
            std::string::npos)
      << variants.front().source;
  EXPECT_NE(variants.front().source.find("mb_epilogue<<<"), std::string::npos);  // bias and relu in place
  // cuDNN's designs and the direct kernels follow; a 3x3 conv gets no cuBLAS design
  EXPECT_EQ(variants[2].family, "cuda.conv.cudnn");
  for (const auto& v :
       cuda_variants(load_case("pt_conv").plan, load_case("pt_conv").problem, generation_target("cuda")))
    EXPECT_NE(v.family, "cuda.conv.cublas");
}

TEST(CudaVariants, DepthwiseConvStartsFromThePlaneInSharedMemory) {
  const Case c = load_case("pt_conv_depthwise");
  const auto variants = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_GE(variants.size(), 3u);
  EXPECT_EQ(variants.front().family, "cuda.conv.depthwise");
  // one block per (image, channel) plane; the 19x17 plane padded to 21x19
  EXPECT_NE(variants.front().source.find("mb_depthwise<<<6, "), std::string::npos) << variants.front().source;
  EXPECT_NE(variants.front().source.find("__shared__ float plane[399]"), std::string::npos);
  // the causal conv (stride 2, dilation 2, padding 3 left and 1 right) is depthwise too
  const Case causal = load_case("pt_conv_causal");
  const auto cv = cuda_variants(causal.plan, causal.problem, generation_target("cuda"));
  ASSERT_FALSE(cv.empty());
  EXPECT_EQ(cv.front().family, "cuda.conv.depthwise");
  EXPECT_NE(cv.front().source.find("__shared__ float plane[24]"), std::string::npos) << cv.front().source;
  // a grouped conv with two channels per group is not
  for (const auto& v :
       cuda_variants(load_case("pt_conv").plan, load_case("pt_conv").problem, generation_target("cuda")))
    EXPECT_NE(v.family, "cuda.conv.depthwise");
}

TEST(CudaVariants, FewLongLayernormRowsAreSplitAcrossBlocks) {
  const Case c = load_case("pt_layernorm_long");
  const auto variants = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  std::vector<const Variant*> split;
  for (const auto& v : variants)
    if (v.family == "cuda.layernorm.split-row") split.push_back(&v);
  ASSERT_EQ(split.size(), 2u);
  // 40000 = 4 pieces of 8192 and a ragged fifth; 3 rows on grid.y; the pieces' pairs made once in prepare
  EXPECT_NE(split[0]->source.find("const dim3 grid(5, 3)"), std::string::npos) << split[0]->source;
  EXPECT_NE(split[0]->source.find("cudaMalloc(&s->part, 30ULL * sizeof(float))"), std::string::npos);
  EXPECT_NE(split[1]->source.find("const dim3 grid(2, 3)"), std::string::npos);
  // split designs first (a long chain tries few of a cheap stage's designs); short rows
  // (pt_layernorm) are never split
  EXPECT_EQ(variants.front().family, "cuda.layernorm.split-row");
  for (const auto& v :
       cuda_variants(load_case("pt_layernorm").plan, load_case("pt_layernorm").problem, generation_target("cuda")))
    EXPECT_NE(v.family, "cuda.layernorm.split-row");
}

// nvcc as the cuda backend finds it: $MBLAST_NVCC, the toolkit under CUDA_HOME or
// /usr/local/cuda, then PATH.
std::string find_nvcc() {
  if (const char* e = std::getenv("MBLAST_NVCC"); e && *e) return e;
  for (const char* root : {static_cast<const char*>(std::getenv("CUDA_HOME")), "/usr/local/cuda"}) {
    if (!root || !*root) continue;
    const fs::path p = fs::path(root) / "bin" / "nvcc";
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  if (auto p = find_program("nvcc")) return p->string();
  return "";
}

class CudaVariantsCompile : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaVariantsCompile, VariantsBuildForSm90a) {
  const std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc here (set MBLAST_NVCC or CUDA_HOME, or put nvcc on PATH)";
  const Case c = load_case(GetParam());
  const auto variants = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_FALSE(variants.empty()) << c.plan.summary();
  for (size_t i : variants_to_evaluate(variants)) {
    const Variant& v = variants[i];
    const fs::path src = write_variant("cuda", GetParam(), i, v);
    const fs::path so = fs::path(src).replace_extension(".so");
    // The flags of CudaBackend::build for a target with "gencode": "sm_90a".
    std::vector<std::string> argv = {nvcc,
                                     "-std=c++17",
                                     "-O3",
                                     "-shared",
                                     "-Xcompiler",
                                     "-fPIC",
                                     "-cudart",
                                     "shared",
                                     "-lineinfo",
                                     "-gencode",
                                     "arch=compute_90a,code=sm_90a",
                                     "-I" + (testing::source_dir() / "include").string(),
                                     src.string(),
                                     "-o",
                                     so.string(),
                                     "-Xlinker",
                                     "--no-undefined"};
    if (v.source.find("#include <cublas_v2.h>") != std::string::npos)
      argv.insert(argv.end(), {"-lcublas", "-lcublasLt"});
    if (v.source.find("#include <cudnn.h>") != std::string::npos) argv.push_back("-lcudnn");
    const auto r = run_command(argv, 300);
    EXPECT_TRUE(r.ok()) << label(v) << " does not build: " << shell_quote(argv) << "\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Problems, CudaVariantsCompile, ::testing::ValuesIn(case_names(true)),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

class CudaVariantsOnTarget : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaVariantsOnTarget, VariantsAreCorrect) { evaluate_every_variant("cuda", GetParam()); }

INSTANTIATE_TEST_SUITE_P(Problems, CudaVariantsOnTarget, ::testing::ValuesIn(case_names(true)),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace mblast::policy
