// CUDA kernels for the window kinds, pooling, direct and transposed convolution and gather (a
// strided copy): one thread per output element walks its window (gpu::pool_window /
// gpu::conv_window / gpu::conv_transpose_window, a gather of the inputs that scatter onto it) or
// reads its one source element (gpu::gather_window), the epilogue (for a conv: its
// bias, a batch norm, activations) applied before the one store; neighbouring threads read
// neighbouring windows, so a warp's loads are coalesced for stride 1 and the overlaps come from
// the read-only cache. No shared-memory tiling, no tensor cores: the direct form, correct for any
// geometry, that tiled and implicit-GEMM designs will be measured against.
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

Design make(const KernelPlan& plan, const Problem& problem, int block, bool wave) {
  const bool conv = plan.kind == "conv";
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const std::string x = gpu::buffer_name({false, plan.source});
  std::string k;
  k += fmt::format("#define N {}\n\n", plan.out_numel);
  k += fmt::format("__global__ void __launch_bounds__({}) mb_window({}) {{\n", block, kernel_params(tensors));
  k += fmt::format("  const {0} stride = static_cast<{0}>(gridDim.x) * {1};\n", idx, block);
  k += fmt::format("  for ({0} i = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x; i < N; i += stride) {{\n", idx,
                   block);
  if (conv) {
    k += gpu::conv_window(plan, x, gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight}), "i", idx, "    ");
    k += "    (void)n;\n";
  } else if (plan.kind == "conv_transpose") {
    k += gpu::conv_transpose_window(plan, x, gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight}), "i", idx,
                                    "    ");
  } else if (plan.kind == "gather") {
    k += gpu::gather_window(plan, x, "i", idx, "    ");
  } else {
    k += gpu::pool_window(plan, x, "i", idx, "    ");
    k += "    (void)plane;\n";
  }
  k += "    out[i] = " + gpu::render_at(plan, kCuda, "i", "acc") + ";\n  }\n}\n";
  Design d;
  d.family = conv ? "cuda.conv.direct" : "cuda." + plan.kind + ".direct";
  d.params = {{"block", block}, {"grid", wave ? "wave" : "full"}};
  d.description =
      fmt::format("{}, one thread per output, {}-thread blocks, {}{}",
                  conv                            ? std::string("direct convolution")
                  : plan.kind == "conv_transpose" ? std::string("transposed convolution as a gather")
                  : plan.kind == "gather"         ? std::string("strided copy")
                                                  : plan.pool_op + " pooling",
                  block, wave ? "grid-stride over one wave of resident blocks" : "one thread per output element",
                  gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"cuda.coalesced-global-access", "cuda.block-size-tuning", "cuda.read-only-data-path"};
  if (wave) d.actions.push_back("cuda.grid-stride-loop");
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.device_code = k;
  d.launch_code = grid_stride_launch("mb_window", block, plan.out_numel, call_args(tensors), wave);
  return d;
}

}  // namespace

std::vector<Design> window_designs(const KernelPlan& plan, const Problem& problem) {
  std::vector<Design> v;
  for (int block : {128, 256}) v.push_back(make(plan, problem, block, false));
  v.push_back(make(plan, problem, 256, true));
  return v;
}

}  // namespace mblast::policy::cuda
