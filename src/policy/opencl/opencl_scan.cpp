// OpenCL kernels for the scan kind (an inclusive cumulative sum along one axis, then the
// epilogue). One work-item per (outer, inner) column walking the axis in order: on a CPU
// device (PoCL) a row per work-item is the fast form, and for inner > 1 neighbouring work-items
// read neighbouring columns. Contiguous rows (inner 1) also get one work-group per row: each
// work-item sums V consecutive elements, a Hillis-Steele pass in local memory gives the
// work-items' prefix (each add a two-sum, its rounding error kept beside it: rows of 4096 at
// atol 1e-5 left no room for the tree's eight roundings at the row's magnitude), and the tile's
// total carries into the next tile (Kahan-compensated, as the column walk's sum);
// and, first on a CPU, a work-item per row scanning VW elements at a time in registers.
#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

Design columns(const KernelPlan& plan, const Problem& problem, int wg) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  std::string k;
  k += "__kernel void mb_scan_columns(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} c = ({0})get_global_id(0);\n", idx);
  k += fmt::format("  if (c >= {}) return;\n", r.outer * r.inner);
  k += gpu::scan_column(plan, kOpenCL, x, "c", idx, "  ") + "}\n";
  Design d;
  d.family = "opencl.scan.columns";
  d.params = {{"wg", wg}};
  d.description = fmt::format("inclusive scan, one work-item per column walking the axis in order, work-group {}{}",
                              wg ? std::to_string(wg) : std::string("chosen by the implementation"),
                              gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"opencl.pocl-cpu-friendly-kernels", "opencl.coalesced-access"};
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("opencl.kernel-fusion");
  if (idx == "int") d.actions.push_back("opencl.32bit-index-math");
  d.kernels = k;
  Launch l;
  l.kernel = "mb_scan_columns";
  l.global = {r.outer * r.inner, 1, 1};
  if (wg > 0) l.local = {wg, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

Design group_rows(const KernelPlan& plan, const Problem& problem, int wg, int per_item) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  std::string k;
  k += fmt::format("#define L {}\n#define V {}\n#define WG {}\n\n", r.reduce, per_item, wg);
  k += "__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void mb_scan_rows(" + kernel_params(tensors) + ") {\n";
  k += "  __local float total[WG], low[WG];  // the tree's sums and what they lost to rounding\n";
  k += fmt::format("  const {0} row = ({0})get_group_id(0);\n", idx);
  k += "  const int t = (int)get_local_id(0);\n";
  k += fmt::format("  __global const float* xr = {} + row * L;\n", x);
  k += "  float carry = 0.0f, comp = 0.0f;  // the sum of the row's earlier tiles, compensated (Kahan)\n";
  k += fmt::format("  for ({} base = 0; base < L; base += WG * V) {{\n", idx);
  k += fmt::format("    const {} first = base + ({})t * V;\n", idx, idx);
  k += gpu::scan_tile_parts(kOpenCL, "    ");
  k += "    total[t] = run;\n    low[t] = 0.0f;\n    barrier(CLK_LOCAL_MEM_FENCE);\n";
  k += "    for (int o = 1; o < WG; o <<= 1) {  // Hillis-Steele: total[t] + low[t] becomes the inclusive prefix\n";
  k += "      const float add = t >= o ? total[t - o] : 0.0f, add_low = t >= o ? low[t - o] : 0.0f;\n";
  k += "      barrier(CLK_LOCAL_MEM_FENCE);\n";
  k += "      const float a = total[t], s = a + add, b = s - a;  // Knuth's two-sum: s + e = a + add exactly\n";
  k += "      low[t] += add_low + ((a - (s - b)) + (add - b));\n";
  k += "      total[t] = s;\n      barrier(CLK_LOCAL_MEM_FENCE);\n    }\n";
  // before + lo is the tile's exclusive prefix for this work-item plus the row's carry, `before`
  // rounded once: the store's acc = before + (part[j] + lo) then rounds once at the row's magnitude
  k += "    const float ex = total[t] - run, eb = ex - total[t];  // two-sums: what each big add lost\n";
  k += "    const float ex_err = (total[t] - (ex - eb)) + (-run - eb);\n";
  k += "    const float before = carry + ex, bb = before - carry;\n";
  k += "    const float lo = ((low[t] + ex_err) + ((carry - (before - bb)) + (ex - bb))) - comp;\n";
  k += gpu::scan_tile_store(plan, kOpenCL, idx, "    ");
  k += "    const float y = (total[WG - 1] + low[WG - 1]) - comp, tc = carry + y;\n    comp = (tc - carry) - y;\n    "
       "carry = tc;\n";
  k += "    barrier(CLK_LOCAL_MEM_FENCE);  // total is rewritten by the next tile\n  }\n}\n";
  Design d;
  d.family = "opencl.scan.group-rows";
  d.params = {{"wg", wg}, {"per_item", per_item}};
  d.description = fmt::format(
      "inclusive scan, one work-group of {} per row in tiles of {} ({} consecutive elements per work-item), "
      "a Hillis-Steele pass in local memory for the prefix, the tile's total carried{}",
      wg, wg * per_item, per_item, gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"opencl.local-memory-tiling", "opencl.thread-coarsening", "opencl.reqd-work-group-size"};
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("opencl.kernel-fusion");
  if (idx == "int") d.actions.push_back("opencl.32bit-index-math");
  d.kernels = k;
  Launch l;
  l.kernel = "mb_scan_rows";
  l.global = {r.outer * wg, 1, 1};
  l.local = {wg, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

// For CPU devices, contiguous rows (inner 1): a work-item per row, VW elements a step through
// one vloadVW and an in-register scan (log2 VW shifted adds), the row's carry compensated
// (Kahan) a vector at a time, the epilogue on the vector; a compensated scalar tail. Sequential
// per element (the column walk), the carry's add chain bounded the row; here it is one chain per
// VW elements.
Design rows_vector(const KernelPlan& plan, const Problem& problem, int vw) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const ReduceShape& r = plan.rshape;
  const std::string x = gpu::buffer_name({false, plan.source});
  const std::string vt = "float" + std::to_string(vw);
  const int64_t body = r.reduce / vw * vw;
  std::string k;
  k += fmt::format("#define L {}\n#define ROWS {}\n\n", r.reduce, r.outer);
  k += "__kernel void mb_scan_rows_vec(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} row = ({0})get_global_id(0);\n", idx);
  k += "  if (row >= ROWS) return;\n";
  k += fmt::format("  __global const float* xr = {} + row * L;\n", x);
  k += "  float carry = 0.0f, comp = 0.0f;  // the row's sum so far; comp is what carry lost to rounding\n";
  k += fmt::format("  for ({} j = 0; j < {}; j += {}) {{\n", idx, body, vw);
  k += fmt::format("    {} v = vload{}(0, xr + j);\n", vt, vw);
  for (int shift = 1; shift < vw; shift *= 2) {  // v.s[i] += v.s[i - shift]
    std::string lanes;
    for (int i = 0; i < vw; ++i)
      lanes += std::string(i ? ", " : "") + (i < shift ? "0.0f" : std::string("v.s") + kLane[i - shift]);
    k += fmt::format("    v += ({})({});\n", vt, lanes);
  }
  k += fmt::format("    const {0} acc = ({0})(carry) + (v - ({0})(comp));\n", vt);
  k += fmt::format("    const {} base = row * L + j;\n", idx);
  k += LaneLeaves(plan, vw).store("base", "acc", "    ");
  k += fmt::format("    const float y = v.s{} - comp, t = carry + y;\n", kLane[vw - 1]);
  k += "    comp = (t - carry) - y;\n    carry = t;\n  }\n";
  if (body < r.reduce) {
    k += fmt::format("  for ({} j = {}; j < L; ++j) {{\n", idx, body);
    k += "    const float y = xr[j] - comp, t = carry + y;\n    comp = (t - carry) - y;\n    carry = t;\n";
    k += fmt::format("    const {} i = row * L + j;\n", idx);
    k += fmt::format("    out[i] = {};\n  }}\n", gpu::render_at(plan, kOpenCL, "i", "carry"));
  }
  k += "}\n";
  Design d;
  d.family = "opencl.scan.rows-vec";
  d.params = {{"vw", vw}};
  d.description = fmt::format(
      "inclusive scan, one work-item per row, {} elements a step scanned in a float{} (shifted adds), the row's "
      "carry compensated{}",
      vw, vw, gpu::expr_has_ops(plan.expr) ? ", epilogue fused on the vector" : "");
  d.actions = {"opencl.pocl-cpu-friendly-kernels", "opencl.vector-load-store-128bit"};
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("opencl.kernel-fusion");
  if (idx == "int") d.actions.push_back("opencl.32bit-index-math");
  d.kernels = k;
  d.cpu_first = true;
  Launch l;
  l.kernel = "mb_scan_rows_vec";
  l.global = {r.outer, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

}  // namespace

std::vector<Design> scan_designs(const KernelPlan& plan, const Problem& problem) {
  std::vector<Design> v;
  v.push_back(columns(plan, problem, 0));
  v.push_back(columns(plan, problem, 64));
  if (plan.rshape.inner == 1) {
    for (int wg : {64, 256})
      for (int per_item : {4, 16}) v.push_back(group_rows(plan, problem, wg, per_item));
    // LaneLeaves needs the vector's first index a multiple of VW when the epilogue reads tensors
    for (int vw : {16, 8})
      if (plan.rshape.reduce >= vw && (plan.rshape.reduce % vw == 0 || !LaneLeaves(plan, vw).reads_tensors()))
        v.push_back(rows_vector(plan, problem, vw));
  }
  return v;
}

}  // namespace mblast::policy::opencl
