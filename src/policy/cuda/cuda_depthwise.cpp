// CUDA depthwise convolution (groups = in channels = out channels): one block per (image,
// channel) plane. The block copies the plane, zero-padded, into shared memory with coalesced
// loads, holds the channel's kh x kw weights in registers, and each thread then computes outputs
// of the plane from shared memory (neighbouring threads, neighbouring outputs: no bank conflicts
// at stride 1), the epilogue (bias, activations) applied before one coalesced store. Every input
// element is read from global memory once, where the direct kernel (cuda_window.cpp) reads each
// up to kh x kw times through the cache and recomputes its window's indices per output.
// Depthwise convs are memory-bound (2 FLOPs per weight per output), and both cuDNN's legacy
// algorithms and eager PyTorch's own kernel stay far below the copy ceiling on them
// (benchmarks/results/policy-design-figures.json, cuda-depthwise-bandwidth).
// Offered when the padded plane fits in 48 KB of shared memory.
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

constexpr int64_t kSharedLimit = 48 * 1024;

Design make(const KernelPlan& plan, const Problem& problem, int block) {
  const ConvShape& c = plan.conv;
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const std::string x = gpu::buffer_name({false, plan.source});
  const std::string w = gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight});
  const int64_t sh_rows = c.h + 2 * c.ph, sh_cols = c.w + c.pw + c.pw_end();
  const int64_t ohw = c.out_h * c.out_w, taps = c.kh * c.kw;
  std::string k;
  k += fmt::format("__global__ void __launch_bounds__({}) mb_depthwise({}) {{\n", block, kernel_params(tensors));
  k += fmt::format("  __shared__ float plane[{}];  // the input plane, {} x {} with its zero padding\n",
                   sh_rows * sh_cols, sh_rows, sh_cols);
  k += fmt::format("  const {0} p = static_cast<{0}>(blockIdx.x);  // image * channels + channel\n", idx);
  k += fmt::format("  const int ch = static_cast<int>(p % {});\n", c.cin);
  k += fmt::format("  const float* __restrict__ xp = {} + p * {};\n", x, c.h * c.w);
  k += fmt::format("  for (int e = threadIdx.x; e < {}; e += {}) {{\n", sh_rows * sh_cols, block);
  k += fmt::format("    const int r = e / {0} - {1}, q = e % {0} - {2};\n", sh_cols, c.ph, c.pw);
  k += fmt::format("    plane[e] = (r >= 0 && r < {} && q >= 0 && q < {}) ? xp[r * {} + q] : 0.0f;\n", c.h, c.w, c.w);
  k += "  }\n";
  k += fmt::format("  float wk[{}];\n", taps);
  k += "#pragma unroll\n";
  k += fmt::format("  for (int t = 0; t < {}; ++t) wk[t] = {}[ch * {} + t];\n", taps, w, taps);
  k += "  __syncthreads();\n";
  k += fmt::format("  for (int o = threadIdx.x; o < {}; o += {}) {{\n", ohw, block);
  k += fmt::format("    const int oh = o / {0}, ow = o % {0};\n", c.out_w);
  k += fmt::format("    const float* s = plane + oh * {} + ow * {};\n", c.sh * sh_cols, c.sw);
  k += "    float acc = 0.0f;\n";
  k += "#pragma unroll\n";
  k += fmt::format("    for (int r = 0; r < {}; ++r)\n", c.kh);
  k += "#pragma unroll\n";
  k += fmt::format("      for (int q = 0; q < {}; ++q) acc += s[r * {} + q * {}] * wk[r * {} + q];\n", c.kw,
                   c.dh * sh_cols, c.dw, c.kw);
  k += fmt::format("    const {} i = p * {} + o;\n", idx, ohw);
  k += "    out[i] = " + gpu::render_at(plan, kCuda, "i", "acc") + ";\n  }\n}\n";
  Design d;
  d.family = "cuda.conv.depthwise";
  d.params = {{"block", block}};
  d.description = fmt::format(
      "depthwise convolution, one {}-thread block per plane staged in shared memory, weights in registers{}", block,
      gpu::expr_has_ops(plan.expr) ? ", epilogue fused" : "");
  d.actions = {"cuda.shared-memory-tiling", "cuda.coalesced-global-access", "cuda.block-size-tuning"};
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.device_code = k;
  d.launch_code =
      fmt::format("  mb_depthwise<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_depthwise\") != 0) return -1;\n",
                  c.n * c.cin, block, call_args(tensors));
  return d;
}

}  // namespace

std::vector<Design> depthwise_conv_designs(const KernelPlan& plan, const Problem& problem) {
  const ConvShape& c = plan.conv;
  if (c.groups != c.cin || c.cout != c.cin) return {};  // one filter per channel, one channel per filter
  const int64_t padded = (c.h + 2 * c.ph) * (c.w + c.pw + c.pw_end());
  if (padded * 4 > kSharedLimit || c.n * c.cin > 0x7fffffff) return {};
  std::vector<Design> v;
  for (int block : {128, 256}) v.push_back(make(plan, problem, block));
  return v;
}

}  // namespace mblast::policy::cuda
