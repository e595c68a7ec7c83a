// Finding the candidate in an LLM's answer, and checking it against the ABI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "mblast/llm/extract.h"

namespace mblast::llm {
namespace {

const std::string kCuda = R"(#include <mblast/abi.h>
#include <cuda_runtime.h>

__global__ void k(const float* a, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] > 0 ? a[i] : 0;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
                          const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  long long n = out[0].shape[0];
  k<<<(n + 255) / 256, 256, 0, (cudaStream_t)ctx->cuda_stream>>>((const float*)in[0].data, (float*)out[0].data, n);
  return 0;
}
)";

const std::string kRvv = R"(#include <mblast/abi.h>
#include <riscv_vector.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  const float* a = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  for (size_t n = out[0].nbytes / 4, vl; n > 0; n -= vl, a += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    __riscv_vse32_v_f32m8(y, __riscv_vfmax_vf_f32m8(__riscv_vle32_v_f32m8(a, vl), 0.0f, vl), vl);
  }
  return 0;
}
)";

const std::string kOpenCl = R"(#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void relu(__global const float* a, __global float* y) {
  // mblast_run is not defined in here; int mblast_run() { } is just text
  const size_t i = get_global_id(0);
  y[i] = fmax(a[i], 0.0f);
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  const size_t global = (size_t)out[0].shape[0];
  return mblast_cl::launch(ctx, k, 1, &global, (cl_mem)in[0].data, (cl_mem)out[0].data);
}

MBLAST_OPENCL_CANDIDATE(kSource, "relu", enqueue)
)";

std::string fenced(const std::string& tag, const std::string& code, const std::string& fence = "```") {
  return fence + tag + "\n" + code + fence + "\n";
}

TEST(ExtractCandidate, OneFencedBlockAmidProse) {
  const std::string answer = "Here's the optimized kernel. It's using a grid-stride loop.\n\n" + fenced("cuda", kCuda) +
                             "\nThis should be ~2x faster because it doesn't re-read `a`.\n";
  EXPECT_EQ(extract_candidate_code(answer, "cuda"), kCuda);
}

TEST(ExtractCandidate, LanguageTagsAndFenceStyles) {
  for (const char* tag : {"cpp", "c++", "c", "cuda", "cu", "CUDA", "", "cpp title=kernel.cu", "{.cpp}", "cxx"})
    EXPECT_EQ(extract_candidate_code("Answer:\n" + fenced(tag, kCuda), "cuda"), kCuda) << "tag: " << tag;
  EXPECT_EQ(extract_candidate_code(fenced("c", kRvv, "~~~"), "rvv"), kRvv);
  EXPECT_EQ(extract_candidate_code("  ```c\n" + kRvv + "  ```\n", "rvv"), kRvv);  // indented (inside a list)
}

TEST(ExtractCandidate, PicksTheBlockThatDefinesTheEntryPoint) {
  const std::string before = "int old_helper(int x) { return x; }\n__global__ void old_kernel() {}\n";
  const std::string answer = "The current code:\n" + fenced("cpp", before) + "\nThe problem is uncoalesced loads.\n" +
                             fenced("cpp", kCuda) + "\nBuild with:\n" + fenced("bash", "nvcc -O3 -shared x.cu\n");
  EXPECT_EQ(extract_candidate_code(answer, "cuda"), kCuda);
}

TEST(ExtractCandidate, TheLargestOfSeveralCandidates) {
  const std::string small =
      "#include <mblast/abi.h>\nint mblast_run(const mblast_context* c, void* s, const mblast_tensor* i, "
      "int32_t ni, const mblast_tensor* p, int32_t np, mblast_tensor* o, int32_t no) { return 0; }\n";
  EXPECT_EQ(extract_candidate_code(fenced("c", small) + "or better:\n" + fenced("c", kRvv), "rvv"), kRvv);
  EXPECT_EQ(extract_candidate_code(fenced("c", kRvv) + "or simpler:\n" + fenced("c", small), "rvv"), kRvv);
}

TEST(ExtractCandidate, OtherLanguagesAndMentionsDoNotCount) {
  EXPECT_FALSE(extract_candidate_code(fenced("python", "print('int mblast_run(void) { return 0; }')\n"), "cuda"));
  EXPECT_EQ(extract_candidate_code(fenced("python", "x = 1\n" + kCuda) + fenced("cuda", kCuda), "cuda"), kCuda);
  // Mentioned in a comment, declared but not defined, a longer name, a call: none defines it.
  EXPECT_FALSE(
      extract_candidate_code(fenced("cpp", "// TODO: int mblast_run(...) { }\nint f() { return 1; }\n"), "cuda"));
  EXPECT_FALSE(extract_candidate_code(fenced("cpp", "int mblast_run(const mblast_context*, void*);\n"), "cuda"));
  EXPECT_FALSE(extract_candidate_code(fenced("cpp", "int mblast_run_helper(int x) { return x; }\n"), "cuda"));
  EXPECT_FALSE(
      extract_candidate_code(fenced("cpp", "void f() { int r = mblast_run(0, 0, 0, 0, 0, 0, 0, 0); }\n"), "cuda"));
  EXPECT_FALSE(extract_candidate_code(fenced("cpp", "const char* s = \"int mblast_run() { }\";\n"), "cuda"));
}

TEST(ExtractCandidate, NothingUsable) {
  EXPECT_FALSE(extract_candidate_code("", "cuda"));
  EXPECT_FALSE(extract_candidate_code("I'm sorry, I can't make this faster.", "cuda"));
  EXPECT_FALSE(extract_candidate_code("Use `int mblast_run(...)` with shared memory tiling.", "cuda"));
  EXPECT_FALSE(extract_candidate_code(fenced("cpp", "__global__ void k() {}\n"), "cuda"));
}

TEST(ExtractCandidate, UnfencedCodeWithProseAround) {
  const std::string answer = "Here's the kernel you asked for:\n\n" + kRvv + "\nIt's vectorised with LMUL=8.\n";
  EXPECT_EQ(extract_candidate_code(answer, "rvv"), kRvv);
  EXPECT_EQ(extract_candidate_code(kCuda, "cuda"), kCuda);
}

TEST(ExtractCandidate, WindowsLineEndingsAndACutOffAnswer) {
  std::string crlf;
  for (char c : "Sure:\n" + fenced("cuda", kCuda)) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  EXPECT_EQ(extract_candidate_code(crlf, "cuda"), kCuda);
  // The answer stopped (max_tokens) before the closing fence: the block runs to the end.
  EXPECT_EQ(extract_candidate_code("Here:\n```cuda\n" + kCuda, "cuda"), kCuda + "\n");
}

TEST(ExtractCandidate, LongerFencesMayHoldShorterOnes) {
  const std::string code = "// Usage:\n// ```\n// mblast eval\n// ```\n" + kRvv;
  const std::string inner = "/* an example:\n```\nnot the end\n```\n*/\n" + kRvv;
  EXPECT_EQ(extract_candidate_code(fenced("c", inner, "````"), "rvv"), inner);
  EXPECT_EQ(extract_candidate_code(fenced("c", code), "rvv"), code);
}

TEST(ExtractCandidate, OpenClMacroCountsOnlyForOpenCl) {
  EXPECT_EQ(extract_candidate_code("```cpp\n" + kOpenCl + "```", "opencl"), kOpenCl);
  EXPECT_FALSE(extract_candidate_code("```cpp\n" + kOpenCl + "```", "cuda"));
  // The macro's own #define is not a use.
  EXPECT_FALSE(extract_candidate_code(fenced("cpp", "#define MBLAST_OPENCL_CANDIDATE(S, N, E) x\n"), "opencl"));
}

TEST(ExtractCandidate, EntryPointSpreadOverLines) {
  const std::string code =
      "#include <mblast/abi.h>\nextern \"C\"\nint\nmblast_run (const mblast_context* c,\n"
      "    void* s, const mblast_tensor* i, int32_t ni, const mblast_tensor* p, int32_t np,\n"
      "    mblast_tensor* o, int32_t no)\n{\n  return 0;\n}\n";
  EXPECT_EQ(extract_candidate_code(fenced("cpp", code), "cuda"), code);
}

TEST(CheckCandidateAbi, GoodCandidatesPass) {
  EXPECT_EQ(check_candidate_abi(kCuda, "cuda"), "");
  EXPECT_EQ(check_candidate_abi(kRvv, "rvv"), "");
  EXPECT_EQ(check_candidate_abi(kOpenCl, "opencl"), "");
  // A CUDA candidate need not launch a kernel.
  EXPECT_EQ(check_candidate_abi("#include <mblast/abi.h>\nint mblast_run(const mblast_context* c, void* s, "
                                "const mblast_tensor* i, int32_t ni, const mblast_tensor* p, int32_t np, "
                                "mblast_tensor* o, int32_t no) { return 0; }\n",
                                "cuda"),
            "");
}

TEST(CheckCandidateAbi, TheProjectsOwnCandidatesPass) {
  namespace fs = std::filesystem;
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(MBLAST_TEST_SOURCE_DIR) / "problems")) {
    if (!e.is_regular_file() || e.path().parent_path().filename() != "candidates") continue;
    const std::string stem = e.path().stem().string();  // naive.cuda
    const std::string backend = stem.substr(stem.rfind('.') + 1);
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(check_candidate_abi(ss.str(), backend), "") << e.path();
    EXPECT_EQ(extract_candidate_code("Here it is:\n```\n" + ss.str() + "```\nDone.", backend), ss.str()) << e.path();
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST(CheckCandidateAbi, ReasonsAreOneLine) {
  const auto reason = [](const std::string& code, const std::string& backend) {
    const std::string r = check_candidate_abi(code, backend);
    EXPECT_EQ(r.find('\n'), std::string::npos) << r;
    return r;
  };
  EXPECT_NE(reason("__global__ void k() {}\n", "cuda").find("mblast_run"), std::string::npos);
  EXPECT_NE(reason("int main() { return 0; }\n", "opencl").find("MBLAST_OPENCL_CANDIDATE"), std::string::npos);
  EXPECT_NE(reason("", "rvv").find("empty"), std::string::npos);
  EXPECT_NE(reason(kRvv, "metal").find("unknown backend"), std::string::npos);

  EXPECT_NE(reason("#include <cuda_runtime.h>\n" + kRvv, "rvv").find("<cuda_runtime.h> (a CUDA header)"),
            std::string::npos);
  EXPECT_NE(reason("#include <CL/cl.h>\n" + kRvv, "rvv").find("<CL/cl.h> (an OpenCL header)"), std::string::npos);
  EXPECT_NE(reason("#  include \"cuda_fp16.h\"\n" + kRvv, "rvv").find("cuda_fp16.h"), std::string::npos);
  EXPECT_NE(reason("__global__ void k(float* y) {}\n" + kRvv, "rvv").find("__global__"), std::string::npos);
  EXPECT_NE(reason("#include <CL/cl.h>\n" + kCuda, "cuda").find("OpenCL header"), std::string::npos);
  EXPECT_NE(reason("#include <cuda.h>\n" + kOpenCl, "opencl").find("CUDA header"), std::string::npos);
  // What is commented out or inside a string is not looked at.
  EXPECT_EQ(reason("// #include <cuda_runtime.h>\n/* __global__ */\n" + kRvv, "rvv"), "");

  // Linkage: a .cu / .cpp candidate needs C linkage, a C candidate must not say extern "C" bare.
  const std::string plain =
      "int mblast_run(const mblast_context* c, void* s, const mblast_tensor* i, int32_t ni, "
      "const mblast_tensor* p, int32_t np, mblast_tensor* o, int32_t no) { return 0; }\n";
  EXPECT_NE(reason(plain, "cuda").find("C++ linkage"), std::string::npos);
  EXPECT_EQ(reason("extern \"C\" " + plain, "cuda"), "");
  EXPECT_EQ(reason("#include <mblast/abi.h>\n" + plain, "cuda"), "");
  EXPECT_EQ(reason(plain, "rvv"), "");
  EXPECT_NE(reason("extern \"C\" " + plain, "rvv").find("#ifdef __cplusplus"), std::string::npos);
  EXPECT_EQ(reason("#ifdef __cplusplus\nextern \"C\" {\n#endif\n" + plain + "#ifdef __cplusplus\n}\n#endif\n", "rvv"),
            "");
  std::string no_include = kOpenCl;
  no_include.erase(0, no_include.find('\n') + 1);
  EXPECT_NE(reason(no_include, "opencl").find("#include <mblast/opencl_candidate.h>"), std::string::npos);
}

}  // namespace
}  // namespace mblast::llm
