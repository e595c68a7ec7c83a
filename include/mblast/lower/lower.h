// The lowering pipeline (issue 39), written once for every backend:
//   graph.json["aten"] --lower_graph--> Program (ir.h) --schedule--> kernels --dialect--> source.
// The dialects live in each backend's folder (backends/<name>/codegen/); what they share, the
// C-like printing of expressions and of a kernel's body, is here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/lower/ir.h"
#include "mblast/problem.h"

namespace mblast::lower {

struct Lowered {
  std::optional<Program> program;
  std::string error;  // one line when program is empty: the unsupported op and its node, or the reason
};

// Lowers an ATen-level graph (graph.json's "aten": nodes as tools/kernelbench/graph.py writes them)
// for `problem` (inputs, parameters and outputs in the problem's order). Never throws.
Lowered lower_graph(const nlohmann::json& aten, const Problem& problem);
// The same from <problem dir>/graph.json.
Lowered lower_problem(const Problem& problem);

// The aten ops that have a lowering ("add", "convolution", ...), for reports and tests.
std::vector<std::string> lowered_ops();

// One kernel: a materialised tensor, its body with every inlined producer substituted.
struct Kernel {
  int tensor = -1;
  E body;
  ReduceOp reduce = ReduceOp::None;
  std::vector<int64_t> reduce_extents;
  int output = -1;   // index into the problem's outputs when the kernel writes one, else -1
  std::string name;  // "k0_sum_1"
  // How the work is split (decided by schedule(), printed by kernel_body()):
  int scan_dim = -1;  // a scan: one work item per line along this dim, in order
  // A work item computes `lanes` neighbours of the lane variable (an output dim, or the innermost
  // reduction variable as independent partial sums) times `block` neighbours of a second output
  // dim: independent accumulators that the compiler vectorises, and loads shared between them.
  int lane_var = -1;  // a body variable (output dims first, then reduction variables); -1: none
  int lanes = 1;
  int block_var = -1;  // an output dim, or -1
  int block = 1;
  DType acc = DType::F32;  // the accumulator's dtype for reductions
  int64_t items = 1;       // work items (the global size); in a loop, per step
  // In a loop (Program::loops): launched once per step with the step as an argument; its work
  // item `w` of step `s` has the linear index s * items + w (the step is dim 0, never tiled).
  int loop = -1;
};

struct Schedule {
  Program program;
  std::vector<Kernel> kernels;  // in execution order
  std::vector<int> temps;       // tensor ids that need a temporary buffer (materialised, not an output)
  // What each tensor is stored in: "in<i>", "par<i>", "out<k>", "tmp<j>"; empty for inlined ones.
  std::vector<std::string> buffer;
  std::string summary() const;  // one line per kernel, for `mblast plan`
  // Where kernel i opens / closes a loop's host-side iteration (kernels of one loop are adjacent).
  bool opens_loop(size_t i) const { return kernels[i].loop >= 0 && (i == 0 || kernels[i - 1].loop != kernels[i].loop); }
  bool closes_loop(size_t i) const {
    return kernels[i].loop >= 0 && (i + 1 == kernels.size() || kernels[i + 1].loop != kernels[i].loop);
  }
};

// Inlines producers that are pure index maps or pointwise work into their consumers and
// materialises reductions, outputs, and what is read by several consumers when it is not cheap.
Schedule schedule(const Program& p);

// ---- the shared C-like printer ----
struct Dialect {
  std::string name;                           // "cuda", "opencl", "c"
  std::function<std::string(DType)> type;     // the C type of a value
  std::function<std::string(DType)> storage;  // the element type of a buffer
  bool float_suffix_functions = true;         // expf (C, CUDA) vs exp (OpenCL, overloaded)
};
const Dialect& c_dialect();
const Dialect& cuda_dialect();
const Dialect& opencl_dialect();

// An expression; `var_name(k)` names index variable k, loads index buffers by sched.buffer.
std::string print_expr(const E& e, const Schedule& s, const Dialect& d,
                       const std::function<std::string(int)>& var_name);

// The body of one kernel for one output element whose linear index is the variable `gid`:
// the index decomposition, the reduction loops and the store. Statements at `indent`.
std::string kernel_body(const Schedule& s, const Kernel& k, const Dialect& d, const std::string& gid,
                        const std::string& indent);

// mb_floordiv, mb_mod, mb_max_<t>, mb_min_<t>, mb_remainder_<t>: what printed expressions call,
// each function declared with `qualifier` ("static inline", "__device__ inline", "inline").
std::string helper_functions(const Dialect& d, const std::string& qualifier);

// The buffers a kernel reads (names as in sched.buffer), sorted, without the one it writes.
std::vector<std::string> kernel_reads(const Schedule& s, const Kernel& k);

// DType of the problem's tensor spec; throws for types the lowering does not handle.
DType from_problem(mblast::DType t);

}  // namespace mblast::lower
