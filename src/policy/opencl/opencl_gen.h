// Inside the OpenCL generator: a candidate is designed as OpenCL C kernels plus a list of
// launches (kernels or CLBlast GEMMs, in order) and the temporaries they share; finish() wraps
// that in the host code of the candidate ABI (include/mblast/abi.h). One file per plan kind
// makes the kernels; opencl_chain.cpp composes them for a chain plan.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "../gpu_common.h"

namespace mblast::policy::opencl {

// Component names of a vector (.s0 .. .sf), lane by lane.
inline constexpr const char* kLane = "0123456789abcdef";

// A row-major (batched) SGEMM through CLBlast on the runner's queue: C = A B, the buffers
// being the launch's args (C, A, B).
struct ClblastGemm {
  bool a_trans = false, b_trans = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

// One clEnqueueNDRangeKernel of a generated candidate, or one CLBlast call (`gemm`).
struct Launch {
  std::string kernel;  // function name in the program (empty for a GEMM)
  std::optional<ClblastGemm> gemm;
  int dims = 1;                            // 1..3
  std::array<int64_t, 3> global{1, 1, 1};  // work-items the kernel needs; rounded up to `local` (kernels guard)
  std::array<int64_t, 3> local{0, 0, 0};   // 0: NULL, the implementation chooses
  bool local_from_kernel_info = false;     // 1-D: a multiple of the kernel's preferred multiple, at most 256
  std::vector<std::string> args;  // "out", "tmpJ" (temporary J) or gpu::buffer_name() of a tensor, in kernel order
};

struct Design {
  std::string family;
  nlohmann::json params = nlohmann::json::object();
  std::string description;
  std::vector<std::string> actions;
  std::string kernels;  // OpenCL C
  std::vector<Launch> launches;
  std::vector<int64_t> temps;  // elements of each temporary (f32), allocated once in mblast_prepare
  // Enqueued once in mblast_prepare, after the temporaries exist, and finished before it returns:
  // work on parameters only (their args are "tmpJ" and "parJ"), such as a weight repacked into a
  // temporary. Untimed (the ABI's preparation); a run without mblast_prepare does it first.
  std::vector<Launch> prepare_launches;
  // Tried before the kernel's other designs on a CPU device (designs_for): set by generators
  // for designs shaped for a CPU (a work-item per row, register blocks), which a GPU-first
  // order would reach late.
  bool cpu_first = false;
};

// The complete candidate source for a design.
Variant finish(const Design& d, const KernelPlan& plan, const Problem& problem);

// "int" or "long": the kernels' index type for this plan.
std::string index_type(const KernelPlan& plan, const Problem& problem);

// The kernel parameter list for `tensors` after the output: "__global float* restrict out, __global const float*
// restrict in0, ...".
std::string kernel_params(const std::vector<gpu::TensorRef>& tensors);
// The launch argument list matching kernel_params.
std::vector<std::string> launch_args(const std::vector<gpu::TensorRef>& tensors);

// The leaves of plan.expr for `width` consecutive output elements starting at an index that is
// a multiple of `width` (the output's linear index, as text): one load per distinct (tensor,
// index map); contiguous lanes through vloadN, a broadcast leaf as one scalar, any other
// gathered element by element.
class LaneLeaves {
 public:
  // `erf_function`: what GELU's erf calls (empty: OpenCL's erf; see poly_erf_name).
  LaneLeaves(const KernelPlan& plan, int width, const std::string& erf_function = {});
  // Declarations of the loads, each line starting with `indent`.
  std::string loads(const std::string& base, const std::string& indent) const;
  // The expression for lane `lane` (a float), Acc being `acc`.
  std::string lane_expr(int lane, const std::string& base, const std::string& acc) const;
  // The expression for all lanes at once (a floatN; OpenCL's math functions, operators and ?:
  // work per component), Acc being the floatN `acc`.
  std::string vector_expr(const std::string& base, const std::string& acc) const;
  // The loads, then vstoreN of the expression for `acc` (a floatN) at out + base: the epilogue
  // of a vector of outputs, each line starting with `indent`.
  std::string store(const std::string& base, const std::string& acc, const std::string& indent) const;
  // True when the expression reads any tensor (then `base` must be declared).
  bool reads_tensors() const { return !leaves_.empty(); }

 private:
  struct Leaf {
    bool is_param;
    int tensor;
    IndexMap map;
    std::string var;
    gpu::LeafAccess access;
  };
  const Leaf* find(const ExprNode& n) const;
  const KernelPlan& plan_;
  int width_;
  Dialect dialect_;
  std::vector<Leaf> leaves_;
};

// True when `e` calls erf (GELU's exact form).
bool uses_erf(const Expr& e);
// erf as a polynomial for PoCL's CPU devices, where the built-in (a vectorised Sleef erf) is the
// most expensive part of a GELU: Abramowitz & Stegun 7.1.26, erf(x) = 1 - t (a1 + t (a2 + t (a3 +
// t (a4 + t a5)))) e^(-x^2) with t = 1 / (1 + p|x|) for x >= 0, odd in x; |error| <= 1.5e-7 in
// exact arithmetic. PyTorch 1.13's CPU GELU evidently uses the same approximation, so a GELU
// built on it is as accurate as the reference it is checked against (the comparison:
// benchmarks/results/policy-design-figures.json, opencl-polynomial-erf). poly_erf_name(w) is the
// function for float (w = 1) or floatW, poly_erf_source(w) its definition for the kernel source.
std::string poly_erf_name(int width);
std::string poly_erf_source(int width);

std::vector<Design> elementwise_designs(const KernelPlan& plan, const Problem& problem);
std::vector<Design> reduction_designs(const KernelPlan& plan,
                                      const Problem& problem);  // reduce, softmax, log_softmax, layernorm, row_map
std::vector<Design> matmul_designs(const KernelPlan& plan, const Problem& problem);
// pool and conv: one work-item per output walking its window (*_window.cpp).
std::vector<Design> window_designs(const KernelPlan& plan, const Problem& problem);
// cumsum: a work-item per column, or work-group scans of contiguous rows (opencl_scan.cpp).
std::vector<Design> scan_designs(const KernelPlan& plan, const Problem& problem);
// argmax: a work-item per column, or work-group trees over rows (opencl_argmax.cpp).
std::vector<Design> argmax_designs(const KernelPlan& plan, const Problem& problem);
// conv as GEMMs through CLBlast: im2col into a temporary (none for a pointwise conv), one
// strided-batched SGEMM, the epilogue in place (opencl_conv_gemm.cpp).
std::vector<Design> conv_gemm_designs(const KernelPlan& plan, const Problem& problem);
// conv as direct kernels for a CPU device: RC output channels x VW positions of a row per
// work-item in floatVW registers (opencl_conv_rows.cpp).
std::vector<Design> conv_rows_designs(const KernelPlan& plan, const Problem& problem);
// Pieces of the register-blocked row kernels (opencl_conv_rows.cpp), shared with the
// transposed ones: `floatVW xv` = row[iw0 + j * step] for lanes j (zero outside [0, len); one
// vloadVW when step is 1 and every lane is inside), with `row`, `iw0` declared by the caller;
// the RC accumulators acc0.. stored lane by lane through the epilogue at output column
// ow0 + l * step of row oh (n, co0, oh, ow0 declared), lanes past the row not stored; the design
// around a kernel of `items` work-items, first on a CPU. block_kernel_open opens such a kernel:
// ITEMS, the signature, `gid` (returning past ITEMS) and the RC floatVW accumulators acc0...
std::string block_kernel_open(const KernelPlan& plan, const Problem& problem, const std::string& kernel, int64_t items,
                              int rc, int vw);
std::string row_lanes_load(int vw, int64_t step, int64_t len, const std::string& idx, const std::string& indent);
std::string lane_stores(const KernelPlan& plan, int rc, int vw, int64_t step, const std::string& idx);
Design register_block_design(const KernelPlan& plan, const Problem& problem, const std::string& family,
                             const nlohmann::json& params, const std::string& description, const std::string& kernel,
                             std::string source, int64_t items);
// conv_transpose as gathers: a work-item per output element, and for CPU devices RC channels x
// VW same-phase columns per work-item (opencl_conv_transpose.cpp).
std::vector<Design> conv_transpose_designs(const KernelPlan& plan, const Problem& problem);

// For designs whose library writes the plan's accumulator into `out` (CLBlast): a kernel
// `mb_epilogue` applying the plan's epilogue in place (appended to d.kernels) and its launch
// (appended to d.launches). Nothing when the epilogue is the identity.
void add_inplace_epilogue(Design& d, const KernelPlan& plan, const std::string& idx);
// The designs for a single-kernel plan (not a chain), by its kind; none for a kind not generated.
// `cpu_device`: the target's device type is "cpu"; the designs marked `cpu_first` come first.
std::vector<Design> designs_for(const KernelPlan& plan, const Problem& problem, bool cpu_device);
// The designs for a chain plan: its stages' designs composed (opencl_chain.cpp).
std::vector<Design> chain_designs(const KernelPlan& plan, const Problem& problem, bool cpu_device);

}  // namespace mblast::policy::opencl
