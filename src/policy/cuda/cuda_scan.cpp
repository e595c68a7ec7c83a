// CUDA kernels for the scan kind (an inclusive cumulative sum along one axis, then the
// epilogue). Contiguous rows (inner 1): one block per row walks it in tiles of block x V
// elements; each thread sums its V consecutive elements, warp shuffles and one shared-memory
// pass turn the threads' totals into a block-wide prefix, and the tile's total carries into the
// next tile (a Kahan-compensated running sum, as the column walk's); the prefix passes keep each
// add's rounding error. Any axis: one thread per (outer, inner) column walks the axis in order, neighbouring
// threads on neighbouring columns (coalesced when inner > 1).
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

Design rows(const KernelPlan& plan, const Problem& problem, int block, int per_thread) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  const int warps = block / 32;
  std::string k;
  k += fmt::format("#define L {}\n#define V {}\n#define WARPS {}\n\n", r.reduce, per_thread, warps);
  k += fmt::format("__global__ void __launch_bounds__({}) mb_scan_rows({}) {{\n", block, kernel_params(tensors));
  k += "  __shared__ float warp_total[WARPS], warp_low[WARPS];  // the warps' sums and what they lost to rounding\n";
  k += fmt::format("  const {0} row = static_cast<{0}>(blockIdx.x);\n", idx);
  k += fmt::format("  const float* xr = {} + row * L;\n", x);
  k += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
  k += "  float carry = 0.0f, comp = 0.0f;  // the sum of the row's earlier tiles, compensated (Kahan)\n";
  k += fmt::format("  for ({} base = 0; base < L; base += {} * V) {{\n", idx, block);
  k += fmt::format("    const {} first = base + static_cast<{}>(threadIdx.x) * V;\n", idx, idx);
  k += gpu::scan_tile_parts(kCuda, "    ");
  // Each add of the two prefix passes is a two-sum (Knuth): s + e = a + b exactly, e kept in the
  // _low partner. Long rows under a tight absolute tolerance leave no room for a dozen roundings
  // at the row's magnitude (benchmarks/results/policy-design-figures.json, cuda-scan-two-sum).
  k += "    float incl = run, incl_low = 0.0f;  // inclusive prefix of the threads' totals within the warp\n";
  k += "#pragma unroll\n    for (int o = 1; o < 32; o <<= 1) {\n";
  k += "      const float t = __shfl_up_sync(0xffffffffu, incl, o), tl = __shfl_up_sync(0xffffffffu, incl_low, o);\n";
  k += "      if (lane >= o) {\n        const float s = incl + t, b = s - incl;\n";
  k += "        incl_low += tl + ((incl - (s - b)) + (t - b));\n        incl = s;\n      }\n    }\n";
  k += "    if (lane == 31) warp_total[warp] = incl, warp_low[warp] = incl_low;\n    __syncthreads();\n";
  k += "    if (warp == 0) {\n";
  k += "      float w = lane < WARPS ? warp_total[lane] : 0.0f, wl = lane < WARPS ? warp_low[lane] : 0.0f;\n";
  k += "#pragma unroll\n      for (int o = 1; o < WARPS; o <<= 1) {\n";
  k += "        const float t = __shfl_up_sync(0xffffffffu, w, o), tl = __shfl_up_sync(0xffffffffu, wl, o);\n";
  k += "        if (lane >= o) {\n          const float s = w + t, b = s - w;\n";
  k += "          wl += tl + ((w - (s - b)) + (t - b));\n          w = s;\n        }\n      }\n";
  k += "      if (lane < WARPS) warp_total[lane] = w, warp_low[lane] = wl;\n    }\n    __syncthreads();\n";
  // before + lo: the thread's exclusive prefix plus the carry, `before` rounded once, so that the
  // store's before + (part[j] + lo) rounds once at the row's magnitude
  k += "    const float ph = warp > 0 ? warp_total[warp - 1] : 0.0f, pl = warp > 0 ? warp_low[warp - 1] : 0.0f;\n";
  k += "    const float d = incl - run, db = d - incl, d_err = (incl - (d - db)) + (-run - db);\n";
  k += "    const float ex = ph + d, eb = ex - ph, ex_err = (ph - (ex - eb)) + (d - eb);\n";
  k += "    const float before = carry + ex, bb = before - carry;\n";
  k += "    const float lo = (((pl + incl_low) + (d_err + ex_err)) + ((carry - (before - bb)) + (ex - bb))) - comp;\n";
  k += gpu::scan_tile_store(plan, kCuda, idx, "    ");
  k += "    const float y = (warp_total[WARPS - 1] + warp_low[WARPS - 1]) - comp, t = carry + y;\n    comp = (t - "
       "carry) - y;\n    carry = t;\n";
  k += "    __syncthreads();  // warp_total is rewritten by the next tile\n  }\n}\n";
  Design d;
  d.family = "cuda.scan.block-rows";
  d.params = {{"block", block}, {"per_thread", per_thread}};
  d.description = fmt::format(
      "inclusive scan, one {}-thread block per row in tiles of {} ({} consecutive elements per thread), "
      "warp shuffles and a shared-memory pass for the prefix, the tile's total carried{}",
      block, block * per_thread, per_thread, gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"cuda.warp-shuffle-reduction", "cuda.block-size-tuning", "cuda.shared-memory-tiling"};
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.device_code = k;
  d.launch_code =
      fmt::format("  mb_scan_rows<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_scan_rows\") != 0) return -1;\n",
                  r.outer, block, call_args(tensors));
  return d;
}

Design columns(const KernelPlan& plan, const Problem& problem, int block) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  std::string k;
  k += fmt::format("__global__ void __launch_bounds__({}) mb_scan_columns({}) {{\n", block, kernel_params(tensors));
  k += fmt::format("  const {0} c = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x;\n", idx, block);
  k += fmt::format("  if (c >= {}) return;\n", r.outer * r.inner);
  k += gpu::scan_column(plan, kCuda, x, "c", idx, "  ") + "}\n";
  Design d;
  d.family = "cuda.scan.columns";
  d.params = {{"block", block}};
  d.description = fmt::format("inclusive scan, one thread per column walking the axis in order, {}-thread blocks{}",
                              block, gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"cuda.coalesced-global-access", "cuda.block-size-tuning"};
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.device_code = k;
  d.launch_code = fmt::format(
      "  mb_scan_columns<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_scan_columns\") != 0) return -1;\n",
      gpu::ceil_div(r.outer * r.inner, block), block, call_args(tensors));
  return d;
}

}  // namespace

std::vector<Design> scan_designs(const KernelPlan& plan, const Problem& problem) {
  std::vector<Design> v;
  if (plan.rshape.inner == 1) {
    for (int block : {256, 512, 1024})
      for (int per_thread : {4, 8}) v.push_back(rows(plan, problem, block, per_thread));
    v.push_back(columns(plan, problem, 128));
  } else {
    for (int block : {128, 256}) v.push_back(columns(plan, problem, block));
  }
  return v;
}

}  // namespace mblast::policy::cuda
