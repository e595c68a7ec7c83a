// Inside the CUDA generator: a candidate is designed as device code plus the host statements
// that launch it on the runner's stream; finish() wraps that in the candidate ABI's host code
// (include/mblast/abi.h): tensor checks, the state made in mblast_prepare (SM count, a cuBLAS
// handle when asked), launch-error checks. One file per plan kind makes the kernels.
#pragma once

#include <string>
#include <vector>

#include "../gpu_common.h"

namespace mblast::policy::cuda {

struct Design {
  std::string family;
  nlohmann::json params = nlohmann::json::object();
  std::string description;
  std::vector<std::string> actions;
  std::string device_code;  // kernels and __device__ helpers
  // Statements of mb_enqueue. In scope: `stream` (cudaStream_t), `s` (mb_state*: `sms`, the
  // device's SM count; `handle`, the cuBLAS handle when `cublas`), `out0` (float*) and one
  // `const float*` per plan tensor named by gpu::buffer_name. Failures `return mb_fail(...)`;
  // after a launch: `if (mb_launched("kernel") != 0) return -1;`.
  std::string launch_code;
  bool cublas = false;
  bool tf32 = false;  // the cuBLAS handle in TF32 tensor-op math
  // Device buffers made in mblast_prepare and freed in mblast_release, in floats: `s->tmp[i]`
  // in the launch code (a chain's temporaries).
  std::vector<int64_t> temps;
  // A library of its own (cuDNN): its #include lines, members of mb_state, statements that set
  // them up at the end of mb_init (on failure `return mb_free(s), mb_fail(...)`; `ctx` and `s` in
  // scope) and that release them in mb_free (members may still be null there).
  std::string includes;
  std::string state_fields;
  std::string init_code;
  std::string free_code;
};

// What the target's architecture lets the generators use (from its "arch" entry).
struct Arch {
  bool wgmma = false;  // Hopper's warpgroup MMA: code built for sm_90a
};
Arch arch_of(const Target& target);

// Whether the plan has an epilogue beyond storing the accumulator.
inline bool has_epilogue(const KernelPlan& p) { return !p.expr.empty() && !p.expr.is_identity_epilogue(); }

// The complete candidate source for a design.
Variant finish(const Design& d, const KernelPlan& plan, const Problem& problem);

// "int" or "long long": the kernels' index type for this plan.
std::string index_type(const KernelPlan& plan, const Problem& problem);

// "float* __restrict__ out, const float* __restrict__ in0, ..." and the matching call arguments.
std::string kernel_params(const std::vector<gpu::TensorRef>& tensors);
std::string call_args(const std::vector<gpu::TensorRef>& tensors);

// Launch code for a 1-D grid-stride kernel over `items` work units: a grid of at most one wave of
// resident blocks (`wave`), or one thread per unit (more loads in flight, no loop).
std::string grid_stride_launch(const std::string& kernel, int block, int64_t items, const std::string& args, bool wave);

// For designs whose library writes the plan's accumulator into out0 (cuBLAS, cuDNN): a kernel
// `mb_epilogue` applying the plan's epilogue in place (appended to d.device_code) and its launch
// (appended to d.launch_code). Nothing when the epilogue is the identity.
void add_inplace_epilogue(Design& d, const KernelPlan& plan, const std::string& idx);

// The designs for a plan of one kernel kind (not a chain); empty when the plan is not supported.
std::vector<Design> designs_for(const KernelPlan& plan, const Problem& problem, const Arch& arch);
std::vector<Design> elementwise_designs(const KernelPlan& plan, const Problem& problem);
std::vector<Design> reduction_designs(const KernelPlan& plan,
                                      const Problem& problem);  // reduce, softmax, log_softmax, layernorm, row_map
// cuBLAS (FP32, then TF32) and, on sm_90a, the 3xTF32 wgmma kernels (first where
// tf32x3_leads(), else right after the FP32 SGEMM), then shared-memory tiled kernels.
std::vector<Design> matmul_designs(const KernelPlan& plan, const Problem& problem, const Arch& arch);
// FP32-accurate products on TF32 tensor cores (split operands, wgmma; cuda_tf32x3.cpp): empty
// where K is not a multiple of 4. `a` and `b` name the operands' buffers.
std::vector<Design> tf32x3_matmul_designs(const KernelPlan& plan, const std::string& idx, const std::string& a,
                                          const std::string& b);
// Whether those are expected to beat cuBLAS's FP32 SGEMM by a clear margin (20 %) on Hopper:
// the product fills the GPU, K is deep enough to amortise a tile's prologue and store, and the
// split passes over A and B are small beside the product.
bool tf32x3_leads(const KernelPlan& plan);
// pool, conv, conv_transpose and gather: one thread per output walking its window (cuda_window.cpp).
std::vector<Design> window_designs(const KernelPlan& plan, const Problem& problem);
// cumsum: block-wide scans of contiguous rows, or a thread per column (cuda_scan.cpp).
std::vector<Design> scan_designs(const KernelPlan& plan, const Problem& problem);
// argmax: block-wide (value, index) reductions of rows, or a thread per column (cuda_argmax.cpp).
std::vector<Design> argmax_designs(const KernelPlan& plan, const Problem& problem);
// conv through cuDNN's forward convolution, conv_transpose through its data gradient, then the
// epilogue in place (cuda_cudnn.cpp).
std::vector<Design> cudnn_conv_designs(const KernelPlan& plan, const Problem& problem);
// A 1x1, stride-1, unpadded, ungrouped convolution as cuBLAS products, one per image; none for
// any other convolution.
std::vector<Design> pointwise_conv_designs(const KernelPlan& plan, const Problem& problem);
// A depthwise convolution (groups = in = out channels) whose padded plane fits in shared memory:
// a block per plane staged there (cuda_depthwise.cpp); none for any other.
std::vector<Design> depthwise_conv_designs(const KernelPlan& plan, const Problem& problem);
// A chain's designs: one design per stage, composed (cuda_chain.cpp).
std::vector<Design> chain_designs(const KernelPlan& plan, const Problem& problem, const Arch& arch);

}  // namespace mblast::policy::cuda
