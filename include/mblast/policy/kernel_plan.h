// What the builtin policy knows how to generate: a problem's computation recognised, from its
// graph (graph.json, docs/kernelbench.md "Graph"), as one of a few kernel shapes, with the
// elementwise work around it kept as an expression tree.
//
// Every kind is described in terms of the problem's tensors, so a generator needs nothing else:
// inputs are the problem's inputs in order, params its parameters in order, and the single
// output is outputs[0] (dense, row-major; f32, or int64 for an argmax).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/problem.h"

namespace mblast::policy {

// Where an expression leaf reads from, for output element `i` (its linear index):
// element ((i / div) % mod) of the tensor. Same shape as the output: div 1, mod numel;
// a per-column vector [cols] of a [rows, cols] output: div 1, mod cols; a per-channel
// vector [C] (or [C,1,1]) of an [N,C,H,W] output: div H*W, mod C; a scalar tensor: mod 1.
struct IndexMap {
  int64_t div = 1;
  int64_t mod = 1;
  bool identity(int64_t numel) const { return div == 1 && mod == numel; }
};

struct ExprNode {
  enum class Kind { Input, Param, Const, Acc, Unary, Binary };
  Kind kind = Kind::Const;
  // Unary: neg relu relu6 sigmoid tanh exp log sqrt rsqrt abs gelu (erf form) gelu_tanh silu
  //        leaky_relu (alpha = value) clamp (lo = value, hi = value2; hardtanh becomes clamp) softplus
  // Binary: add sub mul div max min
  std::string op;
  int tensor = -1;        // Input / Param: index into problem.inputs / problem.parameters
  IndexMap index;         // Input / Param
  double value = 0;       // Const; leaky_relu alpha; clamp lo
  double value2 = 0;      // clamp hi
  std::vector<int> args;  // Unary: 1, Binary: 2 (indices into Expr::nodes)
};

// An expression DAG; nodes are topologically ordered (arguments before users), root is last
// unless `root` says otherwise. Kind::Acc is the value a producer (matmul, reduction) computed
// for this element, in epilogues.
struct Expr {
  std::vector<ExprNode> nodes;
  int root = -1;
  bool empty() const { return root < 0; }
  // True when the expression is just Acc (no epilogue work).
  bool is_identity_epilogue() const;
  // Inputs / params the expression reads (indices), each once, in first-use order.
  std::vector<int> inputs_used() const;
  std::vector<int> params_used() const;
};

// One scalar expression rendered as C-like source, for generators of C-like languages.
struct Dialect {
  std::string name;          // "opencl" | "cuda" | "c"
  std::string float_suffix;  // "f" for literals (1.0f)
  // Math function spelling: opencl uses exp/tanh/erf/sqrt/fmax; cuda and c use expf/tanhf/...
  bool suffix_f_functions = false;
  // The function GELU's erf calls; empty: the dialect's own erf (erf / erff). A generator that
  // names another (a polynomial it defines in the kernel source) says so in its variant.
  std::string erf_function;
};
inline const Dialect kOpenCL{"opencl", "f", false, ""};
inline const Dialect kCuda{"cuda", "f", true, ""};
inline const Dialect kC{"c", "f", true, ""};

// Renders node `root` of `e` (default: e.root) as an expression in `d`; `leaf` gives the source
// text of an Input / Param / Acc node (e.g. "x[i]", "scale[i % 1024]", "acc").
std::string render_expr(const Expr& e, const Dialect& d, const std::function<std::string(const ExprNode&)>& leaf,
                        int root = -1);

// Reduction-shaped kinds see their tensor as [outer, reduce, inner] (row-major): reducing
// axis `dim` of a tensor gives outer = prod(shape[:dim]), reduce = shape[dim],
// inner = prod(shape[dim+1:]). inner == 1 is the contiguous (last-dim) case.
struct ReduceShape {
  int64_t outer = 1, reduce = 1, inner = 1;
};

// 2-D pooling of a [planes, h, w] tensor (planes = batch x channels, NCHW) to
// [planes, out_h, out_w]: window kh x kw, strides, zero-based padding and dilation.
struct PoolShape {
  int64_t planes = 1, h = 1, w = 1, out_h = 1, out_w = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool count_include_pad = true;  // avg: divide by the whole window (padding counted) or by the elements inside
};

// A direct 2-D convolution (1-D as height 1), NCHW: x [n, cin, h, w], weight
// [cout, cin / groups, kh, kw], output [n, cout, out_h, out_w]; zero padding, `pw` columns on
// the left and pw_end() on the right (F.pad before a conv, a causal conv's left-only padding).
struct ConvShape {
  int64_t n = 1, cin = 1, cout = 1, groups = 1, h = 1, w = 1, out_h = 1, out_w = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t pw_right = -1;  // -1: the same as pw
  int64_t pw_end() const { return pw_right < 0 ? pw : pw_right; }
  bool symmetric() const { return pw_end() == pw; }
};

// Output length of a sliding window along one dim (PyTorch's rule without ceil mode): `in`
// elements, zero padding `pad` each side, window `k` with dilation `dil`, stride `stride`; 0 or
// less when the window does not fit (floor division, as PyTorch, also when it is negative).
// With `pad_end` given, `pad` is the padding before the first element only.
inline int64_t window_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t pad_end = -1) {
  const int64_t span = in + pad + (pad_end < 0 ? pad : pad_end) - dil * (k - 1) - 1;
  return (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
}

// Output length of a transposed convolution along one dim (PyTorch's rule, output_padding
// not included): `in` elements, padding `pad`, window `k` with dilation `dil`, stride `stride`.
inline int64_t transposed_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return (in - 1) * stride - 2 * pad + dil * (k - 1) + 1;
}

struct KernelPlan {
  // elementwise  output = expr over inputs/params (no producer)
  // reduce       output[o, i] = epilogue(reduce_op over r of pre(x[o, r, i]))  (sum | mean | max | min)
  // row_map      output[o, r] = expr over x[o, r] and the row's statistic (inner 1): Acc is reduce_op
  //              (sum | mean | max | min) over row o of x, and the expression's leaves read x and
  //              other tensors element by element. Never made by plan_kernel(): fuse_row_map()
  //              makes it from a chain, and generate_variants() offers it (x / x.sum(-1, keepdim))
  // softmax      output = softmax(x) along the reduce axis; log_softmax likewise
  // layernorm    output[o, r] = epilogue((x[o, r] - mean_o) * rsqrt(var_o + eps)) over the last
  //              axis (inner 1); the affine weight and bias are epilogue leaves
  // matmul       output[b, m, n] = epilogue(sum_k A[b, m, k] * B[b, k, n])
  // pool         output[p, oh, ow] = epilogue(max | avg over the window of x[p, ...]) (padding is
  //              -inf for max, 0 for avg)
  // conv         output[n, co, oh, ow] = epilogue(sum over ci, r, c of x[n, ci, ...] * w[co, ci, r, c])
  //              (the bias, a following batch norm and activations are the epilogue)
  // conv_transpose output[n, co, oh, ow] = epilogue(sum over ci of co's group, r, c, with
  //              oh = ih * sh - ph + r * dh and ow likewise, of x[n, ci, ih, iw] * w[ci, co % cog, r, c]);
  //              `conv` holds its geometry (h, w: the input; out_h, out_w include output_padding)
  // argmax       output[o, i] = the first r where x[o, r, i] is largest (a NaN counts as the
  //              largest), int64; no epilogue, and only as the whole plan (source, rshape)
  // cumsum       output[o, r, i] = epilogue(sum over r' <= r of x[o, r', i]) (source, rshape)
  // gather       output = epilogue(x viewed with strides): element (i_0, ..., i_r) of
  //              `gather_shape` is x[gather_offset + sum_d i_d * gather_strides[d]] (a permute,
  //              a transpose of any two dims or an x[i] made dense)
  // chain        several of the above run in order (`stages`); each but the last writes a
  //              temporary tensor that later stages read (a graph with more than one producer,
  //              or with work before a producer)
  // unsupported  nothing the generators know (reason says why)
  std::string kind = "unsupported";
  std::string reason;

  std::vector<int64_t> out_shape;  // outputs[0]'s shape
  int64_t out_numel = 0;

  // elementwise: the whole computation; reduce/softmax/matmul: applied to each output
  // element, with Kind::Acc standing for the producer's value (identity when there is none).
  Expr expr;

  // reduce / softmax / log_softmax / layernorm / cumsum / argmax
  int source = -1;  // input index of x
  ReduceShape rshape;
  std::string reduce_op;  // sum | mean | max | min (reduce); "" for softmax
  double eps = 1e-5;      // layernorm: added to the (biased) variance
  bool rms = false;       // layernorm: RMSNorm, no mean subtracted: x * rsqrt(mean(x^2) + eps)

  // pool (x is input `source`)
  std::string pool_op;  // max | avg
  PoolShape pool;

  // conv (x is input `source`; the weight is `conv_weight`, a parameter or an input)
  ConvShape conv;
  int conv_weight = -1;
  bool conv_weight_is_param = true;

  // gather (x is input `source`)
  std::vector<int64_t> gather_shape, gather_strides;
  int64_t gather_offset = 0;

  // matmul: A and B are problem tensors (`a_is_param` / `b_is_param` say which list)
  int a = -1, b = -1;
  bool a_is_param = false, b_is_param = false;
  bool a_transposed = false;  // A stored as [b, k, m]
  bool b_transposed = false;  // B stored as [b, n, k] (nn.Linear's weight)
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool a_batched = true, b_batched = true;  // false: one matrix shared by every batch

  // chain: stage i < stages.size() - 1 writes temps[i]; a stage reads temps[j] as input index
  // first_temp + j (first_temp = the problem's input count), so each stage is an ordinary plan
  // over stage_problem(). The last stage writes outputs[0]. No stage is itself a chain.
  std::vector<KernelPlan> stages;
  std::vector<TensorSpec> temps;
  int first_temp = -1;

  nlohmann::json to_json() const;
  // One line for logs and reports: "matmul 1024x1024x1024 + epilogue(add, relu)".
  std::string summary() const;
  // A rough cost, only to rank the stages of a chain against each other: the larger of the
  // bytes the plan must move (its main inputs and its output, 4 bytes an element) and its
  // FLOPs / 16 (an FP32 GPU's balance: an H200 does about 14 FLOPs per byte of HBM).
  double rough_cost() const;
};

// The kinds that keep `source`, `conv_weight` and the geometry in `conv`.
inline bool is_conv_kind(const std::string& kind) { return kind == "conv" || kind == "conv_transpose"; }

// The kinds that reduce along [outer, reduce, inner] and keep `source`, `rshape`.
inline bool is_row_kind(const std::string& kind) {
  return kind == "reduce" || kind == "softmax" || kind == "log_softmax" || kind == "layernorm";
}

// The problem a chain's stage `i` sees: the problem's inputs followed by the chain's temporaries,
// its parameters, and as its one output the stage's result (temps[i], or outputs[0] for the
// last stage).
Problem stage_problem(const Problem& problem, const KernelPlan& chain, size_t i);

// A chain of two stages, a reduction along the last axis and elementwise work over the reduced
// tensor's shape that reads the reduction's result once per row (x / x.sum(-1, keepdim=True),
// x - x.max(-1, keepdim=True)), as one plan of kind row_map: one kernel, no temporary, the
// statistic kept on chip (and on CUDA the row in registers, read from memory once). The
// reduction's epilogue moves into the expression. nullopt for any other plan.
// generate_variants() offers its variants before the chain's.
std::optional<KernelPlan> fuse_row_map(const KernelPlan& chain);

// Recognises the problem's computation from <problem dir>/graph.json. Never throws for a graph
// it does not understand: kind "unsupported" with the reason (a missing graph included).
KernelPlan plan_kernel(const Problem& problem);
// The same from an already-parsed graph (tests).
KernelPlan plan_kernel(const Problem& problem, const nlohmann::json& graph);

}  // namespace mblast::policy
