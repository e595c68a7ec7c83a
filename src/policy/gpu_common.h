// What the OpenCL and CUDA generators share: which tensors a plan reads, how an expression leaf
// indexes its tensor, the host-side shape check every generated candidate carries, and the
// comment that opens every generated source. Both backends' host code is C++, so the check is
// emitted once here; kernels differ per backend and live in src/policy/<backend>/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/policy/kernel_plan.h"
#include "mblast/policy/variants.h"

namespace mblast::policy::gpu {

// A problem tensor a kernel reads: problem.inputs[index] or problem.parameters[index].
struct TensorRef {
  bool is_param = false;
  int index = -1;
  bool operator==(const TensorRef& o) const { return is_param == o.is_param && index == o.index; }
};

// The name a kernel argument gets for the tensor: "in0", "par1".
std::string buffer_name(const TensorRef& t);

// The tensors a plan's kernels read, each once: the producer's operands first (x; A then B),
// then the expression's leaves in first-use order. For a chain, the problem's tensors that any
// stage reads (not its temporaries), stage by stage.
std::vector<TensorRef> plan_tensors(const KernelPlan& plan);
// Those of plan_tensors that the plan's expression reads (an in-place epilogue's arguments).
std::vector<TensorRef> expr_tensors(const KernelPlan& plan);

// True when every tensor the plan touches, and the output, is f32 and the plan is a kind the
// GPU generators handle (elementwise, reduce, softmax, log_softmax, matmul) with sane sizes.
bool plan_supported(const KernelPlan& plan, const Problem& problem);

// A pool plan's window: its sizes consistent with the input and the output (PyTorch's rule for
// the output size, no ceil mode).
bool pool_fits(const KernelPlan& plan, const Problem& problem);

// C statements (valid CUDA, OpenCL C and C) that compute `float acc`, the max or average over
// the window of output element `i` (an expression of type `idx`) of a pool plan, `x` being the
// input's pointer (in address space `space`: "__global " in OpenCL C, else ""); `plane`, `oh`,
// `ow` are declared for the epilogue. Padding is skipped (-inf for max, 0 for avg); NaN
// propagates through max as in PyTorch.
std::string pool_window(const KernelPlan& plan, const std::string& x, const std::string& i, const std::string& idx,
                        const std::string& indent, const std::string& space = "");

// A conv plan's geometry consistent with its input, weight and output.
bool conv_fits(const KernelPlan& plan, const Problem& problem);

// Like pool_window for a conv plan: `float acc`, the sum over the output element's input channels
// (those of its group) and window taps of x * w, `x` and `wt` the input's and weight's pointers;
// `n`, `co`, `oh`, `ow` are declared. Zero padding is skipped.
std::string conv_window(const KernelPlan& plan, const std::string& x, const std::string& wt, const std::string& i,
                        const std::string& idx, const std::string& indent, const std::string& space = "");
// The same for a conv_transpose plan, as a gather: the input elements whose scatter lands on the
// output element (input row th / sh where th = oh + ph - r * dh is a non-negative multiple of sh
// inside the input, columns alike); `n`, `co`, `oh`, `ow`, `g`, `col` are declared.
std::string conv_transpose_window(const KernelPlan& plan, const std::string& x, const std::string& wt,
                                  const std::string& i, const std::string& idx, const std::string& indent,
                                  const std::string& space = "");

// An argmax plan: f32 input of [outer, reduce, inner], int64 output of [outer, inner], no epilogue.
bool argmax_fits(const KernelPlan& plan, const Problem& problem);
// `#define MB_TAKES(v, i, bv, bi)`: true when value v at index i replaces the best so far (bv at
// bi) under PyTorch's argmax rule (the first maximum; NaN above all, the first NaN). C, CUDA and
// OpenCL C alike.
std::string argmax_better();
// The statements of an argmax over column `c` of x ([outer, reduce, inner]) storing out[c]: `i64`
// is the 64-bit integer type ("long long" in CUDA, "long" in OpenCL C), `suffix` its literal's.
std::string argmax_column(const KernelPlan& plan, const std::string& x, const std::string& i64,
                          const std::string& suffix, const std::string& indent);

// A cumsum plan's [outer, reduce, inner] consistent with its input and output.
bool scan_fits(const KernelPlan& plan, const Problem& problem);

// Pieces of the cumsum kernels both GPU backends write (C statements valid in CUDA and OpenCL C):
// scan_column walks column `c` (outer o, inner in: an index expression of type `idx`) of x in
// order, writing each element through the epilogue (the running sum compensated, Kahan's way:
// a long sequential float sum drifts by sqrt(L) roundings, beyond the tolerance at L = 4096); scan_tile_parts declares
// `float part[V]` and `float run`, the running sums of the V elements from xr[first] (zeros past L); and
// scan_tile_store writes out[row * L + first + j] = epilogue(before + (part[j] + lo)): `before` the
// tile's prefix for the thread plus the carry, `lo` what their sums lost to rounding (one rounding
// at the row's magnitude).
std::string scan_column(const KernelPlan& plan, const Dialect& d, const std::string& x, const std::string& c,
                        const std::string& idx, const std::string& indent);
std::string scan_tile_parts(const Dialect& d, const std::string& indent);
std::string scan_tile_store(const KernelPlan& plan, const Dialect& d, const std::string& idx,
                            const std::string& indent);

// A gather plan's view inside its source tensor (every element it reads exists).
bool gather_fits(const KernelPlan& plan, const Problem& problem);

// `src`, the offset in the gather's source tensor of the element that output element `i`
// copies (the plan's offset and strides applied to i's coordinates in the gather's shape).
std::string gather_source_offset(const KernelPlan& plan, const std::string& i, const std::string& idx,
                                 const std::string& indent);

// Like pool_window for a gather plan: `float acc`, the source element that output element `i`
// copies (its offset and strides applied to i's coordinates in the gather's shape).
std::string gather_window(const KernelPlan& plan, const std::string& x, const std::string& i, const std::string& idx,
                          const std::string& indent);

// True when every index the plan's kernels form fits in a signed 32-bit int (then kernels use
// int index math, which is cheaper on GPUs than 64-bit).
bool fits_int32(const KernelPlan& plan, const Problem& problem);

// Source text of element ((i / div) % mod) of a leaf's tensor, where `i` is the text of the
// output's linear index (already parenthesised when it is not a plain name) and out_numel the
// output's element count: the identity map gives "i", a scalar "0".
std::string leaf_index(const IndexMap& m, int64_t out_numel, const std::string& i);

// render_expr with the standard leaves: Input/Param read "<buffer>[<leaf_index(i)>]", Acc is
// `acc`. An empty expression renders as `acc`. With `source_element`, the leaves that read the
// plan's `source` element by element (a row map's x, held in registers) render as that text.
std::string render_at(const KernelPlan& plan, const Dialect& d, const std::string& i, const std::string& acc,
                      const std::string& source_element = "");

// True when the expression does real work beyond Acc or a single leaf (for the fusion tags).
bool expr_has_ops(const Expr& e);

// How a leaf's values vary over `width` consecutive output elements starting at a multiple of
// `width`: contiguous (one vector load at the leaf index of the first), constant (one scalar
// load), or neither (gather).
enum class LeafAccess { Contiguous, Broadcast, Gather };
LeafAccess leaf_access(const IndexMap& m, int64_t out_numel, int width);

// The comment that opens every generated source: family, params, the plan's summary and the
// tensors, in the language's // comments.
std::string header_comment(const std::string& family, const nlohmann::json& params, const KernelPlan& plan,
                           const Problem& problem, const std::string& what);

// Host C++ (for both backends): `static int mb_check_tensors(in, n_in, par, n_par, out, n_out)`
// that returns 0 when counts, dtypes, ranks, shapes and byte sizes are exactly the problem's,
// else writes the reason with `fail_fmt` (a printf-like function or macro returning int) and
// returns its value.
std::string host_shape_check(const Problem& problem, const std::string& fail_fmt);

// "{\"tile\": 16}" rendered compactly, for comments and descriptions.
std::string params_text(const nlohmann::json& params);

// `text` with every occurrence of `from` replaced by `to`, left to right (what is put in is not
// searched again): the generators' token substitution.
std::string replace_all(std::string text, const std::string& from, const std::string& to);

// Chains (a plan of several stages, each designed by its kind's generator):
// "#undef NAME" for every "#define NAME" in `code`, so the next stage's sizes can be defined.
std::string undefs(const std::string& code);
// Which combinations of the stages' designs to offer, as one design index per stage: the search
// space is their product, so at most `cap` tuples, the all-first one first (each generator lists
// its likely best designs first). They come in order of a penalty, then lexicographically: each
// step down a stage's list costs sqrt(largest cost / that stage's cost), with `costs` the
// stages' rough costs (KernelPlan::rough_cost), so the designs of the stages that take the time
// are tried first and further down. Without costs (or with equal ones) every step costs 1: the
// order of the sum of the indices.
std::vector<std::vector<size_t>> chain_combinations(const std::vector<size_t>& sizes,
                                                    const std::vector<double>& costs = {}, size_t cap = 16);

// Combinations that move stages together: for each value of a parameter of the stages' first
// designs (a flattened key=value) that two or more stages offer in a later design, one
// combination in which every such stage takes its first design with that value and the others
// their first (cuDNN's FFT for every convolution of a chain at once, which steps of one or two
// stages from the all-first combination never reach in a long chain). In order of first
// appearance, at most `cap`.
// `params[s]` lists stage s's designs' params.
std::vector<std::vector<size_t>> aligned_combinations(const std::vector<std::vector<nlohmann::json>>& params,
                                                      size_t cap = 4);
// `combos` (chain_combinations', the all-first one first) with `aligned` right after its first,
// none twice, at most `cap` in all.
std::vector<std::vector<size_t>> with_aligned(std::vector<std::vector<size_t>> combos,
                                              const std::vector<std::vector<size_t>>& aligned, size_t cap = 16);
// A chain's candidates, for any backend's design type D (with family, params, description and
// actions): `make(stage plan, stage problem)` lists each stage's designs (none: no chain), and
// `compose(parts)` joins one design per stage, for each combination chain_combinations() offers,
// the aligned ones (aligned_combinations) right after the all-first one.
template <class D, class Make, class Compose>
std::vector<D> compose_chain(const KernelPlan& plan, const Problem& problem, Make make, Compose compose) {
  if (plan.kind != "chain" || plan.stages.empty() || plan.temps.size() + 1 != plan.stages.size()) return {};
  std::vector<std::vector<D>> per_stage;
  std::vector<size_t> sizes;
  std::vector<double> costs;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    std::vector<D> ds = make(plan.stages[i], stage_problem(problem, plan, i));
    if (ds.empty()) return {};  // a stage no generator makes: no chain
    sizes.push_back(ds.size());
    costs.push_back(plan.stages[i].rough_cost());
    per_stage.push_back(std::move(ds));
  }
  std::vector<std::vector<nlohmann::json>> params(per_stage.size());
  for (size_t i = 0; i < per_stage.size(); ++i)
    for (const auto& d : per_stage[i]) params[i].push_back(d.params);
  std::vector<D> out;
  for (const auto& combo : with_aligned(chain_combinations(sizes, costs), aligned_combinations(params))) {
    std::vector<const D*> parts;
    for (size_t i = 0; i < combo.size(); ++i) parts.push_back(&per_stage[i][combo[i]]);
    out.push_back(compose(parts));
  }
  return out;
}

// What a composed chain says of itself, from its parts: family, params {"stages": [{family,
// params}...]}, "N kernels in order: a; then b", and the union of the parts' actions.
template <class D>
void describe_chain(const std::vector<const D*>& parts, const std::string& family, D* out) {
  out->family = family;
  out->params = {{"stages", nlohmann::json::array()}};
  out->description = std::to_string(parts.size()) + " kernels in order: ";
  for (size_t i = 0; i < parts.size(); ++i) {
    const D& p = *parts[i];
    out->params["stages"].push_back({{"family", p.family}, {"params", p.params}});
    out->description += (i ? "; then " : "") + p.description;
    for (const auto& a : p.actions)
      if (std::find(out->actions.begin(), out->actions.end(), a) == out->actions.end()) out->actions.push_back(a);
  }
}

// Integer ceil division.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace mblast::policy::gpu
