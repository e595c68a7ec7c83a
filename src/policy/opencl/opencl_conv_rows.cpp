// conv plans as direct kernels shaped for a CPU device: each work-item computes RC output
// channels (of one group) x VW consecutive output positions along a row, as RC floatVW
// accumulators. For every input channel and tap it loads the VW input values the tap meets (one
// vloadVW when the stride is 1 and the window lies inside the row; element by element, zero in
// the padding, otherwise) and multiplies them by RC weights, so each input load feeds RC
// vector FMAs and nothing goes through a temporary. This is how CPU libraries hold a block of
// the output in registers; im2col + SGEMM loses to them on a CPU, where the column matrix costs
// more memory traffic than the products (benchmarks/results/policy-design-figures.json, opencl-conv-rows-vs-im2col).
//
// Work-items are ordered (sample, channel block, output row, position block), positions
// fastest. The epilogue (bias, batch norm, activations) is applied at the store, on the vectors
// when rows are a multiple of VW, else element by element with positions past the row's end not
// stored.
#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

std::string row_lanes_load(int vw, int64_t step, int64_t len, const std::string& idx, const std::string& indent) {
  const std::string fv = fmt::format("float{}", vw);
  std::string k = fmt::format("{}{} xv;\n", indent, fv);
  if (step == 1) {
    k += fmt::format("{}if (iw0 >= 0 && iw0 + {} <= {}) {{\n", indent, vw, len);
    k += fmt::format("{}  xv = vload{}(0, row + iw0);\n", indent, vw);
    k += indent + "} else {\n";
  } else {
    k += indent + "{\n";
  }
  k += fmt::format("{}  float t[{}];\n", indent, vw);
  k += fmt::format("{}  for (int j = 0; j < {}; ++j) {{\n", indent, vw);
  k += fmt::format("{}    const {} iw = iw0 + j * {};\n", indent, idx, step);
  k += fmt::format("{}    t[j] = (iw >= 0 && iw < {}) ? row[iw] : 0.0f;\n", indent, len);
  k += indent + "  }\n";
  k += fmt::format("{}  xv = vload{}(0, t);\n", indent, vw);
  k += indent + "}\n";
  return k;
}

std::string lane_stores(const KernelPlan& plan, int rc, int vw, int64_t step, const std::string& idx) {
  const ConvShape& c = plan.conv;
  std::string k = fmt::format("  float a[{}];\n", vw);
  for (int j = 0; j < rc; ++j) {
    k += fmt::format("  vstore{}(acc{}, 0, a);\n", vw, j);
    k += fmt::format("  for (int l = 0; l < {0} && ow0 + l * {1} < {2}; ++l) {{\n", vw, step, c.out_w);
    k += fmt::format("    const {0} i = ((n * {1} + co0 + {2}) * {3} + oh) * {4} + ow0 + l * {5};\n", idx, c.cout, j,
                     c.out_h, c.out_w, step);
    k += "    const float acc = a[l];\n";
    k += "    out[i] = " + gpu::render_at(plan, kOpenCL, "i", "acc") + ";\n  }\n";
  }
  return k;
}

std::string block_kernel_open(const KernelPlan& plan, const Problem& problem, const std::string& kernel, int64_t items,
                              int rc, int vw) {
  const std::string idx = index_type(plan, problem);
  std::string k = fmt::format("#define ITEMS {}\n\n", items);
  k += "__kernel void " + kernel + "(" + kernel_params(gpu::plan_tensors(plan)) + ") {\n";
  k += fmt::format("  const {0} gid = ({0})get_global_id(0);\n", idx);
  k += "  if (gid >= ITEMS) return;\n";
  for (int j = 0; j < rc; ++j) k += fmt::format("  float{0} acc{1} = (float{0})(0.0f);\n", vw, j);
  return k;
}

Design register_block_design(const KernelPlan& plan, const Problem& problem, const std::string& family,
                             const nlohmann::json& params, const std::string& description, const std::string& kernel,
                             std::string source, int64_t items) {
  const auto tensors = gpu::plan_tensors(plan);
  Design d;
  d.family = family;
  d.params = params;
  d.description = description + (gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"opencl.register-blocking", "opencl.vector-load-store-128bit", "opencl.thread-coarsening",
               "opencl.pocl-cpu-friendly-kernels"};
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("opencl.kernel-fusion");
  if (index_type(plan, problem) == "int") d.actions.push_back("opencl.32bit-index-math");
  d.cpu_first = true;
  d.kernels = std::move(source);
  Launch l;
  l.kernel = kernel;
  l.global = {items, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

namespace {

Design make(const KernelPlan& plan, const Problem& problem, int rc, int vw) {
  const ConvShape& c = plan.conv;
  const int64_t cig = c.cin / c.groups, cog = c.cout / c.groups, taps = cig * c.kh * c.kw;
  const int64_t owb = gpu::ceil_div(c.out_w, vw), cb = c.cout / rc;
  const int64_t items = c.n * cb * c.out_h * owb;
  const std::string idx = index_type(plan, problem);
  const std::string x = gpu::buffer_name({false, plan.source});
  const std::string wt = gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight});

  std::string k = block_kernel_open(plan, problem, "mb_conv_rows", items, rc, vw);
  k += fmt::format(
      "  const {0} pb = gid % {1}, oh = (gid / {1}) % {2}, cb = (gid / ({1} * {2})) % {3}, n = gid / ({1} * {2} * "
      "{3});\n",
      idx, owb, c.out_h, cb);
  k += fmt::format("  const {0} co0 = cb * {1}, ow0 = pb * {2};\n", idx, rc, vw);
  k += fmt::format(
      "  __global const float* xg = {} + (n * {} + co0 / {} * {}) * {};  // the group's first input channel\n", x,
      c.cin, cog, cig, c.h * c.w);
  k += fmt::format("  __global const float* wg = {} + co0 * {};\n", wt, taps);
  k += fmt::format("  for (int ci = 0; ci < {}; ++ci) {{\n", cig);
  k += fmt::format("    for (int r = 0; r < {}; ++r) {{\n", c.kh);
  k += fmt::format("      const {} ih = oh * {} - {} + r * {};\n", idx, c.sh, c.ph, c.dh);
  k += fmt::format("      if (ih < 0 || ih >= {}) continue;\n", c.h);
  k += fmt::format("      __global const float* row = xg + (ci * {} + ih) * {};\n", c.h, c.w);
  k += fmt::format("      __global const float* wr = wg + (ci * {} + r) * {};\n", c.kh, c.kw);
  k += fmt::format("      for (int q = 0; q < {}; ++q) {{\n", c.kw);
  k += fmt::format("        const {} iw0 = ow0 * {} - {} + q * {};\n", idx, c.sw, c.pw, c.dw);
  k += row_lanes_load(vw, c.sw, c.w, idx, "        ");
  for (int j = 0; j < rc; ++j) k += fmt::format("        acc{} += xv * wr[{} + q];\n", j, j * taps);
  k += "      }\n    }\n  }\n";
  if (c.out_w % vw == 0) {
    // Whole vectors of the row, each starting at a multiple of VW: the epilogue on floatVW values
    // (OpenCL's math per component: a GELU's erf vectorised, not one scalar call per element).
    const LaneLeaves leaves(plan, vw);
    for (int j = 0; j < rc; ++j) {
      k += "  {\n";
      k += fmt::format("    const {0} b = ((n * {1} + co0 + {2}) * {3} + oh) * {4} + ow0;\n", idx, c.cout, j, c.out_h,
                       c.out_w);
      k += leaves.store("b", fmt::format("acc{}", j), "    ");
      k += "  }\n";
    }
  } else {
    k += lane_stores(plan, rc, vw, 1, idx);
  }
  k += "}\n";
  return register_block_design(
      plan, problem, "opencl.conv.rows", {{"rc", rc}, {"vw", vw}},
      fmt::format("direct convolution, {} output channel(s) x {} positions of a row per work-item in float{} registers",
                  rc, vw, vw),
      "mb_conv_rows", std::move(k), items);
}

}  // namespace

std::vector<Design> conv_rows_designs(const KernelPlan& plan, const Problem& problem) {
  const ConvShape& c = plan.conv;
  const int64_t cog = c.cout / c.groups;
  // Channel blocks divide the group's output channels: 8 first, then 16 or narrower (which of 8
  // and 16 wins depends on the shape, and 8 is the safer start:
  // benchmarks/results/policy-design-figures.json, opencl-conv-rows-channel-block). Rows shorter
  // than a vector get narrower vectors only.
  std::vector<int> rcs;
  for (int rc : {8, 16, 4, 2, 1})
    if (cog % rc == 0 && rcs.size() < 2) rcs.push_back(rc);
  std::vector<int> vws;
  for (int vw : {16, 8, 4})
    if (vw <= std::max<int64_t>(c.out_w, 4) * 2 && vws.size() < 2) vws.push_back(vw);
  std::vector<Design> v;
  for (int vw : vws)
    for (int rc : rcs) v.push_back(make(plan, problem, rc, vw));
  return v;
}

}  // namespace mblast::policy::opencl
