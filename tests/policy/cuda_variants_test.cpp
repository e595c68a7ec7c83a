// The CUDA generators of the builtin policy (src/policy/cuda/): the variants they make for the
// hand-made problems and for the synthetic ones of gpu_test_support.h (a covering subset, or all
// with MBLAST_TEST_EVERY_VARIANT=1: variant_subset.h) compile with nvcc for
// sm_90 with the flags of backends/cuda/cuda_backend.cpp (skipped when there is no nvcc), and,
// where a CUDA device is available, are verified and timed through the real pipeline like the
// OpenCL ones (skipped with the reason otherwise).
#include <unistd.h>

#include <gtest/gtest.h>

#include "gpu_test_support.h"
#include "mblast/process.h"

namespace mblast::policy {
namespace {

using namespace gpu_test;

TEST(CudaVariants, StructureAndSeedActions) { check_variant_structure("cuda", ".cuda.cu", true); }

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
    // only the direct-sum design leaves Winograd and FFT out
    EXPECT_EQ(v.source.find("a != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM") != std::string::npos, maths.back() == "fp32");
    // the epilogue (bias, activation) runs in place after the convolution
    EXPECT_NE(v.source.find("mb_epilogue<<<"), std::string::npos);
  }
  EXPECT_EQ(maths, (std::vector<std::string>{"fp32", "fp32-any", "tf32"}));
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

TEST_P(CudaVariantsCompile, VariantsBuildForSm90) {
  const std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc here (set MBLAST_NVCC or CUDA_HOME, or put nvcc on PATH)";
  const Case c = load_case(GetParam());
  const auto variants = cuda_variants(c.plan, c.problem, generation_target("cuda"));
  ASSERT_FALSE(variants.empty()) << c.plan.summary();
  for (size_t i : variants_to_evaluate(variants)) {
    const Variant& v = variants[i];
    const fs::path src = write_variant("cuda", GetParam(), i, v);
    const fs::path so = fs::path(src).replace_extension(".so");
    // The flags of CudaBackend::build for a target with "gencode": "sm_90".
    std::vector<std::string> argv = {nvcc, "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
                                     "-lineinfo", "-gencode", "arch=compute_90,code=sm_90",
                                     "-I" + (testing::source_dir() / "include").string(), src.string(), "-o", so.string(),
                                     "-Xlinker", "--no-undefined"};
    if (v.source.find("#include <cublas_v2.h>") != std::string::npos) argv.insert(argv.end(), {"-lcublas", "-lcublasLt"});
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
