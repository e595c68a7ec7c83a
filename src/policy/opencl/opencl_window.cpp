// OpenCL kernels for the window kinds, pooling, direct convolution and gather (a strided copy):
// one work-item per output element (or a few, strided) walks its window (gpu::pool_window /
// gpu::conv_window) or reads its one source element (gpu::gather_window), the epilogue applied
// before the one store.
#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

// ept outputs per work-item, work-group size wg (0: the implementation chooses).
Design make(const KernelPlan& plan, const Problem& problem, int ept, int wg) {
  const bool conv = plan.kind == "conv";
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const std::string x = gpu::buffer_name({false, plan.source});
  const int64_t n = plan.out_numel, items = gpu::ceil_div(n, ept);
  std::string k;
  k += fmt::format("#define N {}\n#define ITEMS {}\n\n", n, items);
  k += "__kernel void mb_window(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} g = ({0})get_global_id(0);\n", idx);
  k += "  if (g >= ITEMS) return;\n";
  k += fmt::format("  for (int j = 0; j < {}; ++j) {{\n", ept);
  k += fmt::format("    const {0} i = g + ({0})j * ITEMS;\n", idx);
  k += "    if (i >= N) break;\n";
  if (conv) {
    k += gpu::conv_window(plan, x, gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight}), "i", idx, "    ",
                          "__global ");
    k += "    (void)n;\n";
  } else if (plan.kind == "gather") {
    k += gpu::gather_window(plan, x, "i", idx, "    ");
  } else {
    k += gpu::pool_window(plan, x, "i", idx, "    ", "__global ");
    k += "    (void)plane;\n";
  }
  k += "    out[i] = " + gpu::render_at(plan, kOpenCL, "i", "acc") + ";\n  }\n}\n";
  Design d;
  d.family = conv ? "opencl.conv.direct" : plan.kind == "gather" ? "opencl.gather.direct" : "opencl.pool.direct";
  d.params = {{"ept", ept}, {"wg", wg}};
  d.description = fmt::format("{}, {} output(s) per work-item (strided), work-group {}{}",
                              conv                    ? std::string("direct convolution")
                              : plan.kind == "gather" ? std::string("strided copy")
                                                      : plan.pool_op + " pooling",
                              ept, wg ? std::to_string(wg) : std::string("chosen by the implementation"),
                              gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"opencl.coalesced-access", "opencl.pocl-cpu-friendly-kernels"};
  if (ept > 1) d.actions.push_back("opencl.thread-coarsening");
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("opencl.kernel-fusion");
  if (idx == "int") d.actions.push_back("opencl.32bit-index-math");
  d.kernels = k;
  Launch l;
  l.kernel = "mb_window";
  l.global = {items, 1, 1};
  if (wg > 0) l.local = {wg, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

}  // namespace

std::vector<Design> window_designs(const KernelPlan& plan, const Problem& problem) {
  std::vector<Design> v;
  for (int wg : {0, 64, 256}) v.push_back(make(plan, problem, 1, wg));
  v.push_back(make(plan, problem, 4, 0));
  return v;
}

}  // namespace mblast::policy::opencl
