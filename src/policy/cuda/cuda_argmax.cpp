// CUDA kernels for the argmax kind (int64 indices of the first maximum along one axis, NaN
// above all as in PyTorch). Contiguous rows (inner 1): one block per row, each thread keeps the
// best (value, index) of its strided elements (float4 loads where rows are a multiple of 4 long:
// four elements in index order a load), then warp shuffles and one shared-memory pass pick the
// block's, ties to the lower index. Any axis: one thread per (outer, inner) column
// walking the axis (coalesced when inner > 1).
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

// The kernel's parameters and the launch's arguments: the int64 output first, then x.
std::string params(const KernelPlan& plan) {
  return "long long* __restrict__ out, const float* __restrict__ " + gpu::buffer_name({false, plan.source});
}
std::string args(const KernelPlan& plan) {
  return "reinterpret_cast<long long*>(out0), " + gpu::buffer_name({false, plan.source});
}

Design rows(const KernelPlan& plan, int block, bool vec4) {
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  const int warps = block / 32;
  std::string k = gpu::argmax_better();
  k += fmt::format("#define L {}LL\n#define WARPS {}\n\n", r.reduce, warps);
  k += "__device__ __forceinline__ void mb_merge(float v, long long i, float& bv, long long& bi) {\n";
  k += "  if (MB_TAKES(v, i, bv, bi)) {\n    bv = v;\n    bi = i;\n  }\n}\n\n";
  k += fmt::format("__global__ void __launch_bounds__({}) mb_argmax_rows({}) {{\n", block, params(plan));
  k += "  __shared__ float wv[WARPS];\n  __shared__ long long wi[WARPS];\n";
  k += fmt::format("  const float* xr = {} + static_cast<long long>(blockIdx.x) * L;\n", x);
  k += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
  k += "  float bv = -INFINITY;\n  long long bi = 0x7fffffffffffffffLL;\n";
  if (vec4) {
    // A thread's elements in increasing index order, as the scalar loop: ties need no other care.
    k += "  const float4* xr4 = reinterpret_cast<const float4*>(xr);\n";
    k += fmt::format("#pragma unroll 4\n  for (long long j = threadIdx.x; j < L / 4; j += {}) {{\n", block);
    k += "    const float4 q = xr4[j];\n";
    k += "    mb_merge(q.x, 4 * j, bv, bi);\n    mb_merge(q.y, 4 * j + 1, bv, bi);\n";
    k += "    mb_merge(q.z, 4 * j + 2, bv, bi);\n    mb_merge(q.w, 4 * j + 3, bv, bi);\n  }\n";
  } else {
    k += fmt::format("  for (long long j = threadIdx.x; j < L; j += {}) mb_merge(xr[j], j, bv, bi);\n", block);
  }
  k += "#pragma unroll\n  for (int o = 16; o > 0; o >>= 1) {\n";
  k += "    const float v = __shfl_down_sync(0xffffffffu, bv, o);\n    const long long i = "
       "__shfl_down_sync(0xffffffffu, bi, o);\n";
  k += "    mb_merge(v, i, bv, bi);\n  }\n";
  k += "  if (lane == 0) {\n    wv[warp] = bv;\n    wi[warp] = bi;\n  }\n  __syncthreads();\n";
  k += "  if (warp == 0) {\n    bv = lane < WARPS ? wv[lane] : -INFINITY;\n    bi = lane < WARPS ? wi[lane] : "
       "0x7fffffffffffffffLL;\n";
  k += "#pragma unroll\n    for (int o = 16; o > 0; o >>= 1) {\n";
  k += "      const float v = __shfl_down_sync(0xffffffffu, bv, o);\n      const long long i = "
       "__shfl_down_sync(0xffffffffu, bi, o);\n";
  k += "      mb_merge(v, i, bv, bi);\n    }\n";
  k += "    if (lane == 0) out[blockIdx.x] = bi;\n  }\n}\n";
  Design d;
  d.family = "cuda.argmax.block-rows";
  d.params = {{"block", block}};
  if (vec4) d.params["vec"] = 4;
  d.description = fmt::format(
      "argmax, one {}-thread block per row{}, (value, index) pairs reduced by warp shuffles and shared memory", block,
      vec4 ? ", float4 loads" : "");
  d.actions = {"cuda.warp-shuffle-reduction", "cuda.block-size-tuning", "cuda.coalesced-global-access"};
  if (vec4) d.actions.push_back("cuda.vectorized-global-access");
  d.device_code = k;
  d.launch_code = fmt::format(
      "  mb_argmax_rows<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_argmax_rows\") != 0) return -1;\n", r.outer,
      block, args(plan));
  return d;
}

Design columns(const KernelPlan& plan, int block) {
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  std::string k = gpu::argmax_better();
  k += fmt::format("__global__ void __launch_bounds__({}) mb_argmax_columns({}) {{\n", block, params(plan));
  k += fmt::format("  const long long c = static_cast<long long>(blockIdx.x) * {} + threadIdx.x;\n", block);
  k += fmt::format("  if (c >= {}LL) return;\n", r.outer * r.inner);
  k += gpu::argmax_column(plan, x, "long long", "LL", "  ") + "}\n";
  Design d;
  d.family = "cuda.argmax.columns";
  d.params = {{"block", block}};
  d.description = fmt::format("argmax, one thread per column walking the axis, {}-thread blocks", block);
  d.actions = {"cuda.coalesced-global-access", "cuda.block-size-tuning"};
  d.device_code = k;
  d.launch_code = fmt::format(
      "  mb_argmax_columns<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_argmax_columns\") != 0) return -1;\n",
      gpu::ceil_div(r.outer * r.inner, block), block, args(plan));
  return d;
}

}  // namespace

std::vector<Design> argmax_designs(const KernelPlan& plan, const Problem&) {
  std::vector<Design> v;
  if (plan.rshape.inner == 1) {
    if (plan.rshape.reduce % 4 == 0)
      for (int block : {256, 512, 1024}) v.push_back(rows(plan, block, true));
    for (int block : {256, 512, 1024}) v.push_back(rows(plan, block, false));
  }
  for (int block : {128, 256}) v.push_back(columns(plan, block));
  return v;
}

}  // namespace mblast::policy::cuda
