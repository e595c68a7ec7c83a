// Generators of CUDA candidates for the builtin policy (include/mblast/policy/variants.h): the
// dispatch by plan kind, and the host code every generated candidate shares.
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy {

namespace cuda {

namespace {

std::string host_code(const Design& d, const KernelPlan& plan, const Problem& problem) {
  std::string s;
  s += "#include <mblast/abi.h>\n\n#include <cuda_runtime.h>\n";
  if (d.cublas) s += "#include <cublas_v2.h>\n";
  s += d.includes;
  s += "\n#include <cstdarg>\n#include <cstddef>\n#include <cstdio>\n\n";
  s += R"CXX(static char g_err[1024];

static int mb_fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
  return -1;
}

// After a launch: a bad configuration or a broken context becomes a non-zero return.
[[maybe_unused]] static int mb_launched(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? 0 : mb_fail("launching %s failed: %s (%s)", kernel, cudaGetErrorString(e), cudaGetErrorName(e));
}

)CXX";
  s += gpu::host_shape_check(problem, "mb_fail");
  s += "\nstruct mb_state {\n  int sms = 0;  // streaming multiprocessors, to size grid-stride grids\n";
  if (d.cublas) s += "  cublasHandle_t handle = nullptr;\n";
  if (!d.temps.empty())
    s += fmt::format("  float* tmp[{}] = {{}};  // intermediate tensors between the kernels\n", d.temps.size());
  s += d.state_fields;
  s += "};\n\n";
  s += "static void mb_free(mb_state* s) {\n  if (!s) return;\n";
  if (d.cublas) s += "  if (s->handle) cublasDestroy(s->handle);\n";
  if (!d.temps.empty())
    s += fmt::format("  for (int i = 0; i < {}; ++i)\n    if (s->tmp[i]) cudaFree(s->tmp[i]);\n", d.temps.size());
  s += d.free_code;
  s += "  delete s;\n}\n\n";
  s += R"CXX(static int mb_init(const mblast_context* ctx, mb_state** out) {
  *out = nullptr;
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) return mb_fail("mblast_context is not a CUDA context");
  mb_state* s = new mb_state();
  const cudaError_t e = cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, ctx->cuda_device);
  if (e != cudaSuccess) return mb_free(s), mb_fail("cudaDeviceGetAttribute(multiProcessorCount) failed: %s", cudaGetErrorString(e));
  if (s->sms < 1) s->sms = 1;
)CXX";
  for (size_t i = 0; i < d.temps.size(); ++i) {
    s += fmt::format(
        "  if (cudaMalloc(&s->tmp[{0}], {1}ULL * sizeof(float)) != cudaSuccess) {{\n    s->tmp[{0}] = nullptr;\n", i,
        d.temps[i]);
    s += fmt::format(
        "    return mb_free(s), mb_fail(\"cudaMalloc of intermediate tensor {} ({} floats) failed\");\n  }}\n", i,
        d.temps[i]);
  }
  if (d.cublas) {
    s += "  cublasStatus_t st = cublasCreate(&s->handle);\n";
    s += "  if (st != CUBLAS_STATUS_SUCCESS) {\n    s->handle = nullptr;\n";
    s += "    return mb_free(s), mb_fail(\"cublasCreate failed with status %d\", static_cast<int>(st));\n  }\n";
    s += std::string("  st = cublasSetMathMode(s->handle, ") +
         (d.tf32 ? "CUBLAS_TF32_TENSOR_OP_MATH" : "CUBLAS_DEFAULT_MATH") + ");\n";
    s += "  if (st != CUBLAS_STATUS_SUCCESS) return mb_free(s), mb_fail(\"cublasSetMathMode failed with status %d\", "
         "static_cast<int>(st));\n";
  }
  s += d.init_code;
  s += "  *out = s;\n  return 0;\n}\n\n";
  s += d.device_code;
  s += "\nstatic int mb_enqueue(const mblast_context* ctx, mb_state* s, const mblast_tensor* in, const mblast_tensor* "
       "par,\n";
  s += "                      mblast_tensor* out) {\n";
  s += "  (void)s;\n  (void)in;\n  (void)par;\n";
  s += "  cudaStream_t stream = static_cast<cudaStream_t>(ctx->cuda_stream);\n";
  s += "  float* out0 = static_cast<float*>(out[0].data);\n";
  for (const auto& t : gpu::plan_tensors(plan))
    s += fmt::format("  const float* {} = static_cast<const float*>({}[{}].data);\n", gpu::buffer_name(t),
                     t.is_param ? "par" : "in", t.index);
  s += d.launch_code;
  s += "  return 0;\n}\n\n";
  s += R"CXX(extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {
  mb_state* s = nullptr;
  const int rc = mb_init(ctx, &s);
  *state = s;
  return rc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
                          const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (mb_check_tensors(in, n_in, par, n_par, out, n_out) != 0) return -1;
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) return mb_fail("mblast_context is not a CUDA context");
  mb_state* s = static_cast<mb_state*>(state);
  if (s) return mb_enqueue(ctx, s, in, par, out);
  // Called without mblast_prepare: transient state for this call.
  if (mb_init(ctx, &s) != 0) return -1;
  const int rc = mb_enqueue(ctx, s, in, par, out);
  mb_free(s);
  return rc;
}

extern "C" void mblast_release(const mblast_context*, void* state) { mb_free(static_cast<mb_state*>(state)); }

extern "C" const char* mblast_last_error(void) { return g_err; }
)CXX";
  return s;
}

}  // namespace

std::string index_type(const KernelPlan& plan, const Problem& problem) {
  return gpu::fits_int32(plan, problem) ? "int" : "long long";
}

std::string kernel_params(const std::vector<gpu::TensorRef>& tensors) {
  std::string s = "float* __restrict__ out";
  for (const auto& t : tensors) s += ", const float* __restrict__ " + gpu::buffer_name(t);
  return s;
}

std::string call_args(const std::vector<gpu::TensorRef>& tensors) {
  std::string s = "out0";
  for (const auto& t : tensors) s += ", " + gpu::buffer_name(t);
  return s;
}

void add_inplace_epilogue(Design& d, const KernelPlan& p, const std::string& idx) {
  if (p.expr.empty() || p.expr.is_identity_epilogue()) return;
  const auto leaves = gpu::expr_tensors(p);
  std::string k;
  k += fmt::format("#define TOTAL {}\n\n", p.out_numel);
  k += "__global__ void __launch_bounds__(256) mb_epilogue(" + kernel_params(leaves) + ") {\n";
  k += fmt::format("  const {0} stride = static_cast<{0}>(gridDim.x) * 256;\n", idx);
  k +=
      fmt::format("  for ({0} i = static_cast<{0}>(blockIdx.x) * 256 + threadIdx.x; i < TOTAL; i += stride) {{\n", idx);
  k += "    const float acc = out[i];\n";
  k += "    out[i] = " + gpu::render_at(p, kCuda, "i", "acc") + ";\n  }\n}\n";
  d.device_code += k;
  std::string launch;
  launch += "  {\n";
  launch += fmt::format("    const long long need = {}, cap = static_cast<long long>(s->sms) * 8;\n",
                        gpu::ceil_div(p.out_numel, 256));
  launch += "    const unsigned grid = static_cast<unsigned>(need < cap ? need : cap);\n";
  launch += "    mb_epilogue<<<grid, 256, 0, stream>>>(" + call_args(leaves) + ");\n";
  launch += "    if (mb_launched(\"mb_epilogue\") != 0) return -1;\n  }\n";
  d.launch_code += launch;
}

Variant finish(const Design& d, const KernelPlan& plan, const Problem& problem) {
  Variant v;
  v.family = d.family;
  v.actions = d.actions;
  v.params = d.params;
  v.description = d.description;
  v.extension = ".cuda.cu";
  v.source = gpu::header_comment(d.family, d.params, plan, problem, "CUDA candidate — " + d.description) +
             host_code(d, plan, problem);
  return v;
}

Arch arch_of(const Target& target) {
  Arch a;
  const auto arch = target.spec.find("arch");
  if (arch != target.spec.end() && arch->is_object()) a.wgmma = arch->value("gencode", "") == "sm_90a";
  return a;
}

std::vector<Design> designs_for(const KernelPlan& plan, const Problem& problem, const Arch& arch) {
  if (!gpu::plan_supported(plan, problem)) return {};
  if (plan.kind == "elementwise") return elementwise_designs(plan, problem);
  if (is_row_kind(plan.kind) || plan.kind == "row_map")
    return reduction_designs(plan, problem);  // reduce, softmax, layernorm, row maps
  if (plan.kind == "matmul") return matmul_designs(plan, problem, arch);
  if (plan.kind == "pool" || plan.kind == "gather") return window_designs(plan, problem);
  if (plan.kind == "cumsum") return scan_designs(plan, problem);
  if (plan.kind == "argmax") return argmax_designs(plan, problem);
  if (plan.kind == "conv_transpose") {  // cuDNN's data gradient first, then the direct gather
    std::vector<Design> v = cudnn_conv_designs(plan, problem);
    for (auto& d : window_designs(plan, problem)) v.push_back(std::move(d));
    return v;
  }
  if (plan.kind == "conv") {
    // A pointwise conv starts from cuBLAS's strict FP32 product, a depthwise one from its
    // shared-memory kernel, any other from cuDNN's.
    std::vector<Design> v = pointwise_conv_designs(plan, problem);
    for (auto& d : depthwise_conv_designs(plan, problem)) v.push_back(std::move(d));
    for (auto& d : cudnn_conv_designs(plan, problem)) v.push_back(std::move(d));
    for (auto& d : window_designs(plan, problem)) v.push_back(std::move(d));
    return v;
  }
  return {};
}

}  // namespace cuda

std::vector<Variant> cuda_variants(const KernelPlan& plan, const Problem& problem, const Target& target) {
  const cuda::Arch arch = cuda::arch_of(target);
  std::vector<Variant> v;
  for (const auto& d :
       plan.kind == "chain" ? cuda::chain_designs(plan, problem, arch) : cuda::designs_for(plan, problem, arch))
    v.push_back(cuda::finish(d, plan, problem));
  return v;
}

}  // namespace mblast::policy
