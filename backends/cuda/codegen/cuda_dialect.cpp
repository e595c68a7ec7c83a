// The lowering pipeline's CUDA dialect: one __global__ kernel per scheduled kernel (a thread
// per work item of the schedule, 256 per block), temporaries allocated in mblast_prepare and freed in
// mblast_release, every launch on the runner's stream.
#include <stdexcept>

#include <fmt/format.h>

#include "mblast/lower/dialects.h"

namespace mblast::lower {

std::string emit_cuda(const Schedule& s, const Problem& problem, const Stitches& st) {
  const Dialect& d = cuda_dialect();
  std::string h = candidate_comment(s, problem, "CUDA candidate");
  h += R"CXX(#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>

)CXX";
  if (!st.empty()) h += stitched_sources(st);
  h += error_reporting("std::vsnprintf");
  h += helper_functions(d, "static __device__ inline");
  for (const auto& kr : s.kernels) {
    h += fmt::format("\n__global__ void __launch_bounds__(256) {}({}{}) {{\n", kr.name,
                     kernel_params(s, kr,
                                   [&](const std::string& b, DType dt, bool w) {
                                     return fmt::format("{}{}* __restrict__ {}", w ? "" : "const ", d.storage(dt), b);
                                   }),
                     kr.loop >= 0 ? ", const long long mb_step" : "");
    if (kr.loop >= 0) {
      h += "  const long long mb_local = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;\n";
      h += loop_gid(kr, "long long", "mb_local", "  ");
    } else {
      h += "  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;\n";
      h += fmt::format("  if (gid >= {}LL) return;\n", kr.items);
    }
    h += kernel_body(s, kr, d, "gid", "  ");
    h += "}\n";
  }
  h += "\n" + tensor_checks(problem, "mb_fail");
  h += fmt::format(
      "\nstruct mb_state {{\n  void* tmp[{}];\n  void* group[{}] = {{}};  // the stitched groups' states\n}};\n\n",
      std::max<size_t>(s.temps.size(), 1), std::max<size_t>(st.size(), 1));
  h += "static const size_t kTempBytes[] = {";
  for (size_t i = 0; i < s.temps.size(); ++i) {
    const auto& t = s.program.tensors[static_cast<size_t>(s.temps[i])];
    h += fmt::format("{}{}u * sizeof({})", i ? ", " : "", std::max<int64_t>(t.numel(), 1), d.storage(t.dtype));
  }
  if (s.temps.empty()) h += "0";
  h += "};\n";
  h += fmt::format("static const int kTemps = {}, kGroups = {};\n", s.temps.size(), st.size());
  auto data_of = [](const std::string& b) {
    if (b.rfind("tmp", 0) == 0) return fmt::format("s->tmp[{}]", b.substr(3));
    if (b.rfind("par", 0) == 0) return fmt::format("par[{}].data", b.substr(3));
    if (b.rfind("out", 0) == 0) return fmt::format("out[{}].data", b.substr(3));
    return fmt::format("in[{}].data", b.substr(2));
  };
  h += R"CXX(
static void mb_free(const mblast_context* ctx, mb_state* s) {
  (void)ctx;
  if (!s) return;
)CXX";
  h += stitch_release(st, "s->group");
  h += R"CXX(  for (int i = 0; i < kTemps; ++i)
    if (s->tmp[i]) cudaFree(s->tmp[i]);
  delete s;
}

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor* par, int32_t, void** state) {
  (void)par;
  *state = nullptr;
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) return mb_fail("mblast_context is not a CUDA context");
  mb_state* s = new mb_state();
  for (int i = 0; i < kTemps; ++i) s->tmp[i] = nullptr;
  for (int i = 0; i < kTemps; ++i) {
    const cudaError_t e = cudaMalloc(&s->tmp[i], kTempBytes[i]);
    if (e != cudaSuccess) {
      mb_free(ctx, s);
      return mb_fail("cudaMalloc of temporary %d (%zu bytes) failed: %s", i, kTempBytes[i], cudaGetErrorString(e));
    }
  }
)CXX";
  h += stitch_prepare(st, data_of, "s->group", "mb_free(ctx, s), mb_fail");
  h += R"CXX(  *state = s;
  return 0;
}

extern "C" void mblast_release(const mblast_context* ctx, void* state) { mb_free(ctx, static_cast<mb_state*>(state)); }

extern "C" const char* mblast_last_error(void) { return g_err; }

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
                          const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) return mb_fail("mblast_context is not a CUDA context");
  if (mb_check_tensors(in, n_in, par, n_par, out, n_out) != 0) return -1;
  mb_state* s = static_cast<mb_state*>(state);
  if (!s && (kTemps > 0 || kGroups > 0))
    return mb_fail("mblast_prepare did not run: the temporaries and stitched groups are made there");
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->cuda_stream);
  (void)in;
  (void)par;
)CXX";
  auto ptr = [&](const std::string& b, DType t, bool w) {
    const std::string ty = d.storage(t);
    if (b.rfind("tmp", 0) == 0)
      return fmt::format("static_cast<{}{}*>(s->tmp[{}])", w ? "" : "const ", ty, b.substr(3));
    if (b.rfind("par", 0) == 0) return fmt::format("static_cast<const {}*>(par[{}].data)", ty, b.substr(3));
    if (b.rfind("out", 0) == 0)
      return fmt::format("static_cast<{}{}*>(out[{}].data)", w ? "" : "const ", ty, b.substr(3));
    return fmt::format("static_cast<const {}*>(in[{}].data)", ty, b.substr(2));
  };
  for (size_t ki = 0; ki < s.kernels.size(); ++ki) {
    const auto& kr = s.kernels[ki];
    if (const int j = stitch_of(st, ki); j >= 0) {
      if (kr.loop >= 0) throw std::runtime_error("a stitched group inside a loop: " + kr.name);
      h += stitch_run(st, static_cast<size_t>(j), data_of, "s->group", "mb_fail");
      continue;
    }
    const auto args = kernel_args(s, kr);
    const int64_t n = std::max<int64_t>(kr.items, 1);
    std::string a;
    for (size_t i = 0; i < args.size(); ++i) {
      const DType t = i == 0 ? s.program.tensors[static_cast<size_t>(kr.tensor)].dtype : buffer_dtype(s, args[i]);
      a += (i ? ", " : "") + ptr(args[i], t, i == 0);
    }
    if (kr.loop >= 0) a += ", mb_step";
    h += loop_open(s, ki, "long long");
    h += fmt::format("  {}<<<{}, 256, 0, stream>>>({});\n", kr.name, (n + 255) / 256, a);
    h += "  {\n    const cudaError_t e = cudaGetLastError();\n";
    h += fmt::format(
        "    if (e != cudaSuccess) return mb_fail(\"launching {} failed: %s\", cudaGetErrorString(e));\n  }}\n",
        kr.name);
    h += loop_close(s, ki);
  }
  h += "  return 0;\n}\n";
  return h;
}

}  // namespace mblast::lower
