// conv_transpose plans (ConvTranspose1d/2d) as gathers: an output element sums, over its
// group's input channels and the taps (r, q), the inputs whose scatter lands on it: those with
// oh + ph - r * dh = ih * sh and ow + pw - q * dw = iw * sw. No atomics, every output written
// once with its epilogue.
//
// Two designs:
// - direct: a work-item per output element (any device);
// - phase rows, for CPU devices: outputs of one row whose column has the same phase
//   (ow + pw) mod sw meet the same taps, and for a tap consecutive ones (ow, ow + sw, ...) read
//   consecutive inputs. A work-item takes RC output channels x VW such outputs as RC floatVW
//   accumulators: one vloadVW of the input row per tap feeds RC FMAs (the sub-pixel view of a
//   strided transposed convolution).
#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

// The weight element of (absolute input channel ci, output channel co, tap r, q):
// w[ci, co % cog, r, q].
std::string weight_at(const ConvShape& c, const std::string& ci, const std::string& co_local) {
  return fmt::format("(({} * {} + {}) * {})", ci, c.cout / c.groups, co_local, c.kh * c.kw);
}

// Opens the loops over the group's input channels (ci; xc its plane, wc its weights for output
// channel `col` of the group) and the taps' rows r whose scatter lands on output row oh (th / sh
// the input row); g, n and oh are declared by the caller.
std::string group_row_loops(const ConvShape& c, const std::string& x, const std::string& wt, const std::string& idx,
                            const std::string& col) {
  const int64_t cig = c.cin / c.groups;
  std::string k;
  k += fmt::format("  for (int cj = 0; cj < {}; ++cj) {{\n", cig);
  k += fmt::format("    const {} ci = g * {} + cj;\n", idx, cig);
  k += fmt::format("    __global const float* xc = {} + (n * {} + ci) * {};\n", x, c.cin, c.h * c.w);
  k += fmt::format("    __global const float* wc = {} + {};\n", wt, weight_at(c, "ci", col));
  k += fmt::format("    for (int r = 0; r < {}; ++r) {{\n", c.kh);
  k += fmt::format("      const {} th = oh + {} - r * {};\n", idx, c.ph, c.dh);
  k += fmt::format("      if (th < 0 || th % {0} != 0 || th / {0} >= {1}) continue;\n", c.sh, c.h);
  return k;
}

Design direct(const KernelPlan& plan, const Problem& problem, int wg) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const std::string x = gpu::buffer_name({false, plan.source});
  const std::string wt = gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight});
  std::string k;
  k += fmt::format("#define N {}\n\n", plan.out_numel);
  k += "__kernel void mb_conv_transpose(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} i = ({0})get_global_id(0);\n", idx);
  k += "  if (i >= N) return;\n";
  k += gpu::conv_transpose_window(plan, x, wt, "i", idx, "  ", "__global ");
  k += "  out[i] = " + gpu::render_at(plan, kOpenCL, "i", "acc") + ";\n}\n";
  Design d;
  d.family = "opencl.conv_transpose.direct";
  d.params = {{"wg", wg}};
  d.description = fmt::format("transposed convolution as a gather, a work-item per output element, work-group {}{}",
                              wg ? std::to_string(wg) : std::string("chosen by the implementation"),
                              gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"opencl.coalesced-access", "opencl.avoid-divergence-select"};
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("opencl.kernel-fusion");
  if (idx == "int") d.actions.push_back("opencl.32bit-index-math");
  d.kernels = k;
  Launch l;
  l.kernel = "mb_conv_transpose";
  l.global = {plan.out_numel, 1, 1};
  if (wg > 0) l.local = {wg, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

Design phase_rows(const KernelPlan& plan, const Problem& problem, int rc, int vw) {
  const ConvShape& c = plan.conv;
  const int64_t cog = c.cout / c.groups;
  const int64_t per_phase = gpu::ceil_div(c.out_w, c.sw), mb = gpu::ceil_div(per_phase, vw), cb = c.cout / rc;
  const int64_t items = c.n * cb * c.out_h * c.sw * mb;
  const std::string idx = index_type(plan, problem);
  const std::string x = gpu::buffer_name({false, plan.source});
  const std::string wt = gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight});
  std::string k = block_kernel_open(plan, problem, "mb_conv_transpose", items, rc, vw);
  // (sample, channel block, output row, phase, block of the phase's columns), the last fastest
  k += fmt::format("  const {0} b = gid % {1}, phase = (gid / {1}) % {2}, oh = (gid / ({1} * {2})) % {3};\n", idx, mb,
                   c.sw, c.out_h);
  k += fmt::format("  const {0} cb = (gid / ({1} * {2} * {3})) % {4}, n = gid / ({1} * {2} * {3} * {4});\n", idx, mb,
                   c.sw, c.out_h, cb);
  k += fmt::format("  const {0} co0 = cb * {1}, g = co0 / {2}, col0 = co0 % {2};\n", idx, rc, cog);
  k += fmt::format("  const {0} ow0 = phase + b * {1};  // lane j: column ow0 + j * {2}\n", idx, vw * c.sw, c.sw);
  k += group_row_loops(c, x, wt, idx, "col0");
  k += fmt::format("      __global const float* row = xc + (th / {}) * {};\n", c.sh, c.w);
  k += fmt::format("      for (int q = 0; q < {}; ++q) {{\n", c.kw);
  k += fmt::format("        const {} tw = ow0 + {} - q * {};\n", idx, c.pw, c.dw);
  k += fmt::format("        if (tw % {} != 0) continue;  // this tap misses the phase's columns\n", c.sw);
  k += fmt::format("        const {} iw0 = tw / {};  // lane j reads iw0 + j\n", idx, c.sw);
  k += row_lanes_load(vw, 1, c.w, idx, "        ");
  for (int j = 0; j < rc; ++j)
    k += fmt::format("        acc{} += xv * wc[{} + r * {} + q];\n", j, j * c.kh * c.kw, c.kw);
  k += "      }\n    }\n  }\n";
  k += lane_stores(plan, rc, vw, c.sw, idx);
  k += "}\n";
  return register_block_design(
      plan, problem, "opencl.conv_transpose.phase-rows", {{"rc", rc}, {"vw", vw}},
      fmt::format("transposed convolution by output phase: {} channel(s) x {} same-phase columns per work-item in "
                  "float{} registers, a vector load of the input row per tap",
                  rc, vw, vw),
      "mb_conv_transpose", std::move(k), items);
}

}  // namespace

std::vector<Design> conv_transpose_designs(const KernelPlan& plan, const Problem& problem) {
  const ConvShape& c = plan.conv;
  const int64_t cog = c.cout / c.groups, per_phase = gpu::ceil_div(c.out_w, c.sw);
  std::vector<Design> v = {direct(plan, problem, 0), direct(plan, problem, 256)};
  std::vector<int> rcs;
  for (int rc : {8, 4, 2, 1})
    if (cog % rc == 0 && rcs.size() < 2) rcs.push_back(rc);
  int widths = 0;
  for (int vw : {16, 8, 4}) {
    if (vw > std::max<int64_t>(per_phase, 4) * 2 || widths == 2) continue;
    ++widths;
    for (int rc : rcs) v.push_back(phase_rows(plan, problem, rc, vw));
  }
  return v;
}

}  // namespace mblast::policy::opencl
