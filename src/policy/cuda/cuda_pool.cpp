// CUDA pooling kernels: one thread per output element walks its window (gpu::pool_window), the
// epilogue applied before the one store; neighbouring threads read neighbouring windows, so
// the loads of a warp are coalesced for stride 1 and cached (read-only path) for overlaps.
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

Design make(const KernelPlan& plan, const Problem& problem, int block, bool wave) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  std::string k;
  k += fmt::format("#define N {}\n\n", plan.out_numel);
  k += fmt::format("__global__ void __launch_bounds__({}) mb_pool({}) {{\n", block, kernel_params(tensors));
  k += fmt::format("  const {0} stride = static_cast<{0}>(gridDim.x) * {1};\n", idx, block);
  k += fmt::format("  for ({0} i = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x; i < N; i += stride) {{\n", idx, block);
  k += gpu::pool_window(plan, gpu::buffer_name({false, plan.source}), "i", idx, "    ");
  k += "    (void)plane;\n";
  k += "    out[i] = " + gpu::render_at(plan, kCuda, "i", "acc") + ";\n  }\n}\n";
  Design d;
  d.family = "cuda.pool.direct";
  d.params = {{"block", block}, {"grid", wave ? "wave" : "full"}};
  d.description = fmt::format("{} pooling, one thread per output, {}-thread blocks, {}{}", plan.pool_op, block,
                              wave ? "grid-stride over one wave of resident blocks" : "one thread per output element",
                              gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"cuda.coalesced-global-access", "cuda.block-size-tuning", "cuda.read-only-data-path"};
  if (wave) d.actions.push_back("cuda.grid-stride-loop");
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.device_code = k;
  d.launch_code = grid_stride_launch("mb_pool", block, plan.out_numel, call_args(tensors), wave);
  return d;
}

}  // namespace

std::vector<Design> pool_designs(const KernelPlan& plan, const Problem& problem) {
  std::vector<Design> v;
  for (int block : {128, 256}) v.push_back(make(plan, problem, block, false));
  v.push_back(make(plan, problem, 256, true));
  return v;
}

}  // namespace mblast::policy::cuda
