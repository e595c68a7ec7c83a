// OpenCL kernels for the argmax kind (int64 indices of the first maximum along one axis, NaN
// above all as in PyTorch). One work-item per (outer, inner) column walking the axis (on a CPU
// device a row per work-item is the fast form); contiguous rows also get one work-group per row,
// each work-item's best of its strided elements merged by a tree in local memory, ties to the
// lower index.
#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

std::string params(const KernelPlan& plan) {
  return "__global long* restrict out, __global const float* restrict " + gpu::buffer_name({false, plan.source});
}

Design columns(const KernelPlan& plan, int wg) {
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  std::string k = gpu::argmax_better();
  k += "__kernel void mb_argmax_columns(" + params(plan) + ") {\n";
  k += "  const long c = (long)get_global_id(0);\n";
  k += fmt::format("  if (c >= {}L) return;\n", r.outer * r.inner);
  k += gpu::argmax_column(plan, x, "long", "L", "  ") + "}\n";
  Design d;
  d.family = "opencl.argmax.columns";
  d.params = {{"wg", wg}};
  d.description = fmt::format("argmax, one work-item per column walking the axis, work-group {}",
                              wg ? std::to_string(wg) : std::string("chosen by the implementation"));
  d.actions = {"opencl.pocl-cpu-friendly-kernels", "opencl.coalesced-access"};
  d.kernels = k;
  Launch l;
  l.kernel = "mb_argmax_columns";
  l.global = {r.outer * r.inner, 1, 1};
  if (wg > 0) l.local = {wg, 1, 1};
  l.args = {"out", gpu::buffer_name({false, plan.source})};
  d.launches.push_back(l);
  return d;
}

Design group_rows(const KernelPlan& plan, int wg) {
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  std::string k = gpu::argmax_better();
  k += fmt::format("#define WG {}\n\n", wg);
  k += "__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void mb_argmax_rows(" + params(plan) + ") {\n";
  k += "  __local float lv[WG];\n  __local long li[WG];\n";
  k += "  const long row = (long)get_group_id(0);\n  const int t = (int)get_local_id(0);\n";
  k += fmt::format("  __global const float* xr = {} + row * {}L;\n", x, r.reduce);
  k += "  float bv = -INFINITY;\n  long bi = 0x7fffffffffffffffL;\n";
  k += fmt::format("  for (long j = t; j < {}L; j += WG) {{\n", r.reduce);
  k += "    const float v = xr[j];\n    if (MB_TAKES(v, j, bv, bi)) {\n      bv = v;\n      bi = j;\n    }\n  }\n";
  k += "  lv[t] = bv;\n  li[t] = bi;\n  barrier(CLK_LOCAL_MEM_FENCE);\n";
  k += "  for (int s = WG / 2; s > 0; s >>= 1) {\n    if (t < s && MB_TAKES(lv[t + s], li[t + s], lv[t], li[t])) {\n";
  k += "      lv[t] = lv[t + s];\n      li[t] = li[t + s];\n    }\n    barrier(CLK_LOCAL_MEM_FENCE);\n  }\n";
  k += "  if (t == 0) out[row] = li[0];\n}\n";
  Design d;
  d.family = "opencl.argmax.group-rows";
  d.params = {{"wg", wg}};
  d.description =
      fmt::format("argmax, one work-group of {} per row, (value, index) pairs merged by a tree in local memory", wg);
  d.actions = {"opencl.local-memory-tiling", "opencl.reqd-work-group-size", "opencl.coalesced-access"};
  d.kernels = k;
  Launch l;
  l.kernel = "mb_argmax_rows";
  l.global = {r.outer * wg, 1, 1};
  l.local = {wg, 1, 1};
  l.args = {"out", gpu::buffer_name({false, plan.source})};
  d.launches.push_back(l);
  return d;
}

}  // namespace

std::vector<Design> argmax_designs(const KernelPlan& plan, const Problem&) {
  std::vector<Design> v;
  v.push_back(columns(plan, 0));
  v.push_back(columns(plan, 64));
  if (plan.rshape.inner == 1)
    for (int wg : {64, 256}) v.push_back(group_rows(plan, wg));
  return v;
}

}  // namespace mblast::policy::opencl
