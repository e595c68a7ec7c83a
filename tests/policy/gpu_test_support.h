// Shared by opencl_variants_test.cpp and cuda_variants_test.cpp: the kernel plans of the
// hand-made problems written out by hand (independent of plan_kernel), small synthetic problems
// (with reference.py, so the real pipeline can verify them) that reach the generators' other
// paths — broadcast and gathered leaves, vector tails, columns (inner > 1), mean / min,
// log_softmax, transposed, batched and fused-epilogue matrix products — and the seed's action ids.
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "conv_transpose_reference.h"
#include "mblast/measure/evaluate.h"
#include "mblast/measure/runner_client.h"
#include "mblast/policy/variants.h"
#include "mblast/problem.h"
#include "test_env.h"
#include "variant_subset.h"

namespace mblast::policy::gpu_test {

namespace fs = std::filesystem;

// Expression building.
struct ExprBuilder {
  Expr e;
  int add(ExprNode n) {
    e.nodes.push_back(std::move(n));
    e.root = static_cast<int>(e.nodes.size()) - 1;
    return e.root;
  }
  int input(int t, int64_t div, int64_t mod) {
    ExprNode n;
    n.kind = ExprNode::Kind::Input;
    n.tensor = t;
    n.index = {div, mod};
    return add(n);
  }
  int param(int t, int64_t div, int64_t mod) {
    ExprNode n;
    n.kind = ExprNode::Kind::Param;
    n.tensor = t;
    n.index = {div, mod};
    return add(n);
  }
  int constant(double v) {
    ExprNode n;
    n.kind = ExprNode::Kind::Const;
    n.value = v;
    return add(n);
  }
  int acc() {
    ExprNode n;
    n.kind = ExprNode::Kind::Acc;
    return add(n);
  }
  int unary(const std::string& op, int a, double value = 0) {
    ExprNode n;
    n.kind = ExprNode::Kind::Unary;
    n.op = op;
    n.value = value;
    n.args = {a};
    return add(n);
  }
  int binary(const std::string& op, int a, int b) {
    ExprNode n;
    n.kind = ExprNode::Kind::Binary;
    n.op = op;
    n.args = {a, b};
    return add(n);
  }
};

inline int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline Expr identity_epilogue() {
  ExprBuilder b;
  b.acc();
  return b.e;
}

inline KernelPlan elementwise(const std::vector<int64_t>& out, Expr e) {
  KernelPlan p;
  p.kind = "elementwise";
  p.out_shape = out;
  p.out_numel = numel(out);
  p.expr = std::move(e);
  return p;
}

inline KernelPlan reduction(const std::string& kind, const std::string& op, ReduceShape r, std::vector<int64_t> out,
                            Expr e) {
  KernelPlan p;
  p.kind = kind;
  p.reduce_op = op;
  p.source = 0;
  p.rshape = r;
  p.out_shape = std::move(out);
  p.out_numel = numel(p.out_shape);
  p.expr = std::move(e);
  return p;
}

// out[batch?, m, n] = epilogue(A @ B) with A = inputs[a], B = (b_is_param ? parameters : inputs)[b];
// the caller sets the transposes and batching that differ from the plain case.
inline KernelPlan matmul_plan(std::vector<int64_t> out, int a, int b, bool b_is_param, int64_t m, int64_t n, int64_t k,
                              Expr e) {
  KernelPlan p;
  p.kind = "matmul";
  p.out_shape = std::move(out);
  p.out_numel = numel(p.out_shape);
  p.a = a;
  p.b = b;
  p.b_is_param = b_is_param;
  p.batch = p.out_numel / (m * n);
  p.m = m;
  p.n = n;
  p.k = k;
  p.expr = std::move(e);
  return p;
}

// The plans of the hand-made problems, as plan_kernel should find them.
inline KernelPlan hand_plan(const std::string& problem) {
  if (problem == "vec_add") {
    ExprBuilder b;
    b.binary("add", b.input(0, 1, 1048576), b.input(1, 1, 1048576));
    return elementwise({1048576}, b.e);
  }
  if (problem == "relu") {
    ExprBuilder b;
    b.unary("relu", b.input(0, 1, 524288));
    return elementwise({512, 1024}, b.e);
  }
  if (problem == "act_chain") {  // tanh(leaky_relu(x, 0.1) * scale[col]) + 0.5 * x
    ExprBuilder b;
    const int x = b.input(0, 1, 524288);
    const int t = b.unary("tanh", b.binary("mul", b.unary("leaky_relu", x, 0.1), b.param(0, 1, 1024)));
    b.binary("add", t, b.binary("mul", b.constant(0.5), x));
    return elementwise({512, 1024}, b.e);
  }
  if (problem == "row_sum") return reduction("reduce", "sum", {2048, 1024, 1}, {2048}, identity_epilogue());
  if (problem == "softmax") return reduction("softmax", "", {1024, 1024, 1}, {1024, 1024}, identity_epilogue());
  if (problem == "matmul") return matmul_plan({256, 384}, 0, 0, true, 256, 384, 512, identity_epilogue());
  KernelPlan none;
  none.reason = "no hand-written plan for " + problem;
  return none;
}

inline const std::vector<std::string>& hand_problems() {
  static const std::vector<std::string> v = {"vec_add", "relu", "act_chain", "row_sum", "softmax", "matmul"};
  return v;
}

// A synthetic problem: its directory content and its plan.
struct Synthetic {
  std::string name, problem_json, reference_py;
  KernelPlan plan;
};

inline nlohmann::json tensor(const std::string& name, std::vector<int64_t> shape) {
  return {{"name", name}, {"dtype", "f32"}, {"shape", shape}};
}

inline std::string problem_json(const std::string& name, const std::string& op_class, nlohmann::json inputs,
                                nlohmann::json params, nlohmann::json output, double atol, double rtol, int64_t flops) {
  int64_t bytes = 0;
  for (const auto* list : {&inputs, &params})
    for (const auto& t : *list) bytes += 4 * numel(t["shape"].get<std::vector<int64_t>>());
  bytes += 4 * numel(output["shape"].get<std::vector<int64_t>>());
  nlohmann::json j = {
      {"format", 1},
      {"name", name},
      {"description", "synthetic problem of the policy tests (tests/policy/gpu_test_support.h)"},
      {"op_class", op_class},
      {"inputs", inputs},
      {"parameters", params},
      {"outputs", nlohmann::json::array({output})},
      {"tolerance", {{"f32", {{"atol", atol}, {"rtol", rtol}, {"min_match", 1.0}}}}},
      {"flops", flops},
      {"bytes", bytes},
      {"seeds", {{{"seed", 0}, {"distribution", "normal"}}, {{"seed", 1}, {"distribution", "signed_uniform"}}}},
      {"inits", {0, 1}},
      {"provenance", {{"kind", "synthetic"}, {"source", "mblast tests"}, {"reference", "reference.py"}}}};
  return j.dump(1) + "\n";
}

// NCHW pooling in numpy (float64), for the pooling cases' references: window kh x kw, strides,
// padding (skipped), dilation; avg divides by the whole window or by the taps inside.
inline const std::string kPoolReference = R"PY(def pool(x, kh, kw, sh, sw, ph, pw, dh, dw, op, include_pad):
    n, c, h, w = x.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            taps = []
            for r in range(kh):
                for q in range(kw):
                    y0, x0 = i * sh - ph + r * dh, j * sw - pw + q * dw
                    if 0 <= y0 < h and 0 <= x0 < w:
                        taps.append(x[:, :, y0, x0])
            t = np.stack(taps, axis=-1)
            out[:, :, i, j] = t.max(axis=-1) if op == "max" else t.sum(axis=-1) / (kh * kw if include_pad else len(taps))
    return out


)PY";

inline KernelPlan pool_plan(const std::string& op, std::vector<int64_t> out, PoolShape shape, Expr epilogue) {
  KernelPlan p;
  p.kind = "pool";
  p.pool_op = op;
  p.source = 0;
  p.pool = shape;
  p.out_numel = 1;
  for (int64_t d : out) p.out_numel *= d;
  p.out_shape = std::move(out);
  p.expr = std::move(epilogue);
  return p;
}

// NCHW convolution in numpy (float64), zero padding, groups, for the conv cases' references.
inline const std::string kConvReference = R"PY(def conv(x, wt, sh, sw, ph, pw, dh, dw, groups, pw_right=None):
    n, cin, h, w = x.shape
    cout, cig, kh, kw = wt.shape
    pr = pw if pw_right is None else pw_right
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pw + pr - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, cin, h + 2 * ph, w + pw + pr))
    xp[:, :, ph:ph + h, pw:pw + w] = x
    out = np.zeros((n, cout, oh, ow))
    cog = cout // groups
    for co in range(cout):
        g = co // cog
        for r in range(kh):
            for q in range(kw):
                patch = xp[:, g * cig:(g + 1) * cig, r * dh:r * dh + sh * (oh - 1) + 1:sh, q * dw:q * dw + sw * (ow - 1) + 1:sw]
                out[:, co] += np.einsum("nchw,c->nhw", patch, wt[co, :, r, q])
    return out


)PY";

inline KernelPlan conv_plan(std::vector<int64_t> out, ConvShape shape, int weight_param, Expr epilogue) {
  KernelPlan p;
  p.kind = "conv";
  p.source = 0;
  p.conv = shape;
  p.conv_weight = weight_param;
  p.conv_weight_is_param = true;
  p.out_numel = 1;
  for (int64_t d : out) p.out_numel *= d;
  p.out_shape = std::move(out);
  p.expr = std::move(epilogue);
  return p;
}

inline std::vector<Synthetic> synthetic_problems() {
  std::vector<Synthetic> v;
  const std::string head = "import math\nimport numpy as np\n\nfrom mblast_data import sample\n\n";
  {  // gelu(x * s) + c[channel]: a scalar (broadcast) leaf, a per-channel (gathered) leaf, a tail
    Synthetic s;
    s.name = "pt_ew_bcast";
    s.problem_json =
        problem_json(s.name, "elementwise", {tensor("x", {5, 10, 7})}, {tensor("s", {1}), tensor("c", {10, 1})},
                     tensor("y", {5, 10, 7}), 1e-5, 1e-5, 350 * 4);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (5, 10, 7), distribution, "
                     "\"f32\", scale=2.0)}\n\n\n"
                     "def make_params(rng):\n    return {\"s\": sample(rng, (1,), \"normal\", \"f32\"), \"c\": "
                     "sample(rng, (10, 1), \"normal\", \"f32\")}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    v = inputs[\"x\"].astype(np.float64) * params[\"s\"].astype(np.float64)[0]\n"
                     "    erf = np.vectorize(math.erf)\n"
                     "    g = 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)))\n"
                     "    return {\"y\": g + params[\"c\"].astype(np.float64)[None, :, :]}\n";
    ExprBuilder b;
    b.binary("add", b.unary("gelu", b.binary("mul", b.input(0, 1, 350), b.param(0, 1, 1))), b.param(1, 7, 10));
    s.plan = elementwise({5, 10, 7}, b.e);
    v.push_back(s);
  }
  {  // sigmoid(mean over dim 1) * w[col]: a column reduction (inner 33)
    Synthetic s;
    s.name = "pt_col_mean";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {3, 50, 33})}, {tensor("w", {33})},
                                  tensor("y", {3, 33}), 1e-5, 1e-4, 3 * 50 * 33);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (3, 50, 33), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {\"w\": sample(rng, (33,), \"normal\", \"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    m = inputs[\"x\"].astype(np.float64).mean(axis=1)\n"
        "    return {\"y\": 1.0 / (1.0 + np.exp(-m)) * params[\"w\"].astype(np.float64)[None, :]}\n";
    ExprBuilder b;
    b.binary("mul", b.unary("sigmoid", b.acc()), b.param(0, 1, 33));
    s.plan = reduction("reduce", "mean", {3, 50, 33}, {3, 33}, b.e);
    v.push_back(s);
  }
  {  // relu(max over dim 1 + w[col]) and sigmoid(mean over dim 1) * w[col] with 48 columns, a multiple of
     // every vector width: the vector column kernels, their epilogue loading w along the lanes
    for (const std::string op : {"max", "mean"}) {
      Synthetic s;
      s.name = "pt_col_" + op + "_48";
      s.problem_json = problem_json(s.name, "reduction", {tensor("x", {3, 50, 48})}, {tensor("w", {48})},
                                    tensor("y", {3, 48}), 1e-5, 1e-4, 3 * 50 * 48);
      const std::string y = op == "max" ? "np.maximum(inputs[\"x\"].astype(np.float64).max(axis=1) + "
                                          "params[\"w\"].astype(np.float64)[None, :], 0.0)"
                                        : "1.0 / (1.0 + np.exp(-inputs[\"x\"].astype(np.float64).mean(axis=1))) * "
                                          "params[\"w\"].astype(np.float64)[None, :]";
      s.reference_py = head +
                       "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (3, 50, 48), distribution, "
                       "\"f32\")}\n\n\n"
                       "def make_params(rng):\n    return {\"w\": sample(rng, (48,), \"normal\", \"f32\")}\n\n\n"
                       "def reference(inputs, params):\n    return {\"y\": " +
                       y + "}\n";
      ExprBuilder b;
      if (op == "max")
        b.unary("relu", b.binary("add", b.acc(), b.param(0, 1, 48)));
      else
        b.binary("mul", b.unary("sigmoid", b.acc()), b.param(0, 1, 48));
      s.plan = reduction("reduce", op, {3, 50, 48}, {3, 48}, b.e);
      v.push_back(s);
    }
  }
  {  // sum over a long axis of 16384 (inner 40) whose exact sum is 0: the second half is the first,
     // negated and reversed, so running sums of 3 x N(0, 1) grow to ~300 and cancel. A plain running
     // sum in float32 misses by 4-6e-4 here, PyTorch's CPU sum by ~1.3e-4, a compensated one by ~3e-5.
    Synthetic s;
    s.name = "pt_col_sum_long";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {2, 16384, 40})}, nlohmann::json::array(),
                                  tensor("y", {2, 40}), 2e-4, 1e-4, 2 * 16384 * 40);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n"
                     "    a = sample(rng, (2, 8192, 40), \"normal\", \"f32\", scale=3.0)  # a random walk, whatever "
                     "the seed's distribution\n"
                     "    return {\"x\": np.concatenate([a, -a[:, ::-1, :]], axis=1)}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    return {\"y\": inputs[\"x\"].astype(np.float64).sum(axis=1)}\n";
    ExprBuilder b;
    b.acc();
    s.plan = reduction("reduce", "sum", {2, 16384, 40}, {2, 40}, b.e);
    v.push_back(s);
  }
  {  // 2 * min over the last dim of 130 (130 % 4 == 2: vector tails)
    Synthetic s;
    s.name = "pt_row_min";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {37, 130})}, nlohmann::json::array(),
                                  tensor("y", {37}), 1e-6, 1e-6, 37 * 130);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (37, 130), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": 2.0 * inputs[\"x\"].astype(np.float64).min(axis=1)}\n";
    ExprBuilder b;
    b.binary("mul", b.constant(2.0), b.acc());
    s.plan = reduction("reduce", "min", {37, 130, 1}, {37}, b.e);
    v.push_back(s);
  }
  {  // max over the last dim of 64, then relu(acc - 0.5)
    Synthetic s;
    s.name = "pt_row_max";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {20, 64})}, nlohmann::json::array(),
                                  tensor("y", {20}), 1e-6, 1e-6, 20 * 64);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (20, 64), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": np.maximum(inputs[\"x\"].astype(np.float64).max(axis=1) - 0.5, 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.binary("sub", b.acc(), b.constant(0.5)));
    s.plan = reduction("reduce", "max", {20, 64, 1}, {20}, b.e);
    v.push_back(s);
  }
  {  // log_softmax over the last dim of 75 (75 % 4 == 3)
    Synthetic s;
    s.name = "pt_log_softmax";
    s.problem_json = problem_json(s.name, "softmax", {tensor("x", {33, 75})}, nlohmann::json::array(),
                                  tensor("y", {33, 75}), 1e-5, 1e-4, 33 * 75 * 5);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (33, 75), distribution, "
                     "\"f32\", scale=4.0)}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    x = inputs[\"x\"].astype(np.float64)\n"
                     "    z = x - x.max(axis=1, keepdims=True)\n"
                     "    return {\"y\": z - np.log(np.exp(z).sum(axis=1, keepdims=True))}\n";
    s.plan = reduction("log_softmax", "", {33, 75, 1}, {33, 75}, identity_epilogue());
    v.push_back(s);
  }
  {  // softmax over dim 1 of [4, 20, 9] (columns), times x: the epilogue reads the source
    Synthetic s;
    s.name = "pt_softmax_inner";
    s.problem_json = problem_json(s.name, "softmax", {tensor("x", {4, 20, 9})}, nlohmann::json::array(),
                                  tensor("y", {4, 20, 9}), 1e-6, 1e-4, 4 * 20 * 9 * 6);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (4, 20, 9), distribution, "
                     "\"f32\", scale=3.0)}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    x = inputs[\"x\"].astype(np.float64)\n"
                     "    e = np.exp(x - x.max(axis=1, keepdims=True))\n"
                     "    return {\"y\": e / e.sum(axis=1, keepdims=True) * x}\n";
    ExprBuilder b;
    b.binary("mul", b.acc(), b.input(0, 1, 720));
    s.plan = reduction("softmax", "", {4, 20, 9}, {4, 20, 9}, b.e);
    v.push_back(s);
  }
  {  // softmax over the last dim of 75 (75 % 4 == 3), times x: a row kernel's epilogue reads the
     // source while the write pass may read back the exps it stored in the output
    Synthetic s;
    s.name = "pt_softmax_rows_times_x";
    s.problem_json = problem_json(s.name, "softmax", {tensor("x", {33, 75})}, nlohmann::json::array(),
                                  tensor("y", {33, 75}), 1e-6, 1e-4, 33 * 75 * 6);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (33, 75), distribution, "
                     "\"f32\", scale=3.0)}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    x = inputs[\"x\"].astype(np.float64)\n"
                     "    e = np.exp(x - x.max(axis=1, keepdims=True))\n"
                     "    return {\"y\": e / e.sum(axis=1, keepdims=True) * x}\n";
    ExprBuilder b;
    b.binary("mul", b.acc(), b.input(0, 1, 33 * 75));
    s.plan = reduction("softmax", "", {33, 75, 1}, {33, 75}, b.e);
    v.push_back(s);
  }
  {  // relu(x @ W^T + bias): nn.Linear on a batch of A matrices, B shared and stored [n, k]
    Synthetic s;
    s.name = "pt_linear_relu";
    s.problem_json =
        problem_json(s.name, "matmul", {tensor("x", {2, 3, 40})}, {tensor("weight", {50, 40}), tensor("bias", {50})},
                     tensor("y", {2, 3, 50}), 1e-4, 1e-4, 2 * 6 * 50 * 40);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 3, 40), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"weight\": sample(rng, (50, 40), \"normal\", \"f32\"), \"bias\": sample(rng, (50,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = inputs[\"x\"].astype(np.float64) @ params[\"weight\"].astype(np.float64).T + "
        "params[\"bias\"].astype(np.float64)\n"
        "    return {\"y\": np.maximum(y, 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.binary("add", b.acc(), b.param(1, 1, 50)));
    s.plan = matmul_plan({2, 3, 50}, 0, 0, true, 3, 50, 40, b.e);
    s.plan.b_transposed = true;
    s.plan.b_batched = false;
    v.push_back(s);
  }
  {  // gelu(x @ W^T + bias) with 64 outputs a row and 5 rows a batch: dot-rows' epilogue on a float4
     // of a row's outputs (bias loaded as a vector), and its last row block half past M
    Synthetic s;
    s.name = "pt_linear_gelu_64";
    s.problem_json =
        problem_json(s.name, "matmul", {tensor("x", {2, 5, 40})}, {tensor("weight", {64, 40}), tensor("bias", {64})},
                     tensor("y", {2, 5, 64}), 1e-4, 1e-4, 2 * 10 * 64 * 40);
    s.reference_py =
        head + "import math\n\n" +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 5, 40), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"weight\": sample(rng, (64, 40), \"normal\", \"f32\"), \"bias\": sample(rng, (64,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = inputs[\"x\"].astype(np.float64) @ params[\"weight\"].astype(np.float64).T + "
        "params[\"bias\"].astype(np.float64)\n"
        "    return {\"y\": 0.5 * y * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0)))}\n";
    ExprBuilder b;
    b.unary("gelu", b.binary("add", b.acc(), b.param(1, 1, 64)));
    s.plan = matmul_plan({2, 5, 64}, 0, 0, true, 5, 64, 40, b.e);
    s.plan.b_transposed = true;
    s.plan.b_batched = false;
    v.push_back(s);
  }
  {  // tanh(x @ w + bias) with 32 outputs a row: the row-vector kernels' epilogue on their float4/8/16
     // accumulators, the bias loaded along the lanes
    Synthetic s;
    s.name = "pt_mm_bias_tanh_32";
    s.problem_json =
        problem_json(s.name, "matmul", {tensor("x", {12, 40})}, {tensor("w", {40, 32}), tensor("bias", {32})},
                     tensor("y", {12, 32}), 1e-5, 1e-4, 2 * 12 * 32 * 40);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (12, 40), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"w\": sample(rng, (40, 32), \"normal\", \"f32\"), \"bias\": sample(rng, (32,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": np.tanh(inputs[\"x\"].astype(np.float64) @ params[\"w\"].astype(np.float64) + "
        "params[\"bias\"].astype(np.float64))}\n";
    ExprBuilder b;
    b.unary("tanh", b.binary("add", b.acc(), b.param(1, 1, 32)));
    s.plan = matmul_plan({12, 32}, 0, 0, true, 12, 32, 40, b.e);
    v.push_back(s);
  }
  {  // a^T b + r per batch: A stored [b, k, m], a residual input in the epilogue
    Synthetic s;
    s.name = "pt_bmm_at";
    s.problem_json =
        problem_json(s.name, "matmul", {tensor("a", {3, 20, 17}), tensor("b", {3, 20, 23}), tensor("r", {3, 17, 23})},
                     nlohmann::json::array(), tensor("y", {3, 17, 23}), 1e-4, 1e-4, 2 * 3 * 17 * 23 * 20);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n"
                     "    return {\"a\": sample(rng, (3, 20, 17), distribution, \"f32\"), \"b\": sample(rng, (3, 20, "
                     "23), distribution, \"f32\"),\n"
                     "            \"r\": sample(rng, (3, 17, 23), distribution, \"f32\")}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    a = inputs[\"a\"].astype(np.float64).transpose(0, 2, 1)\n"
                     "    return {\"y\": a @ inputs[\"b\"].astype(np.float64) + inputs[\"r\"].astype(np.float64)}\n";
    ExprBuilder b;
    b.binary("add", b.acc(), b.input(2, 1, 3 * 17 * 23));
    s.plan = matmul_plan({3, 17, 23}, 0, 1, false, 17, 23, 20, b.e);
    s.plan.a_transposed = true;
    v.push_back(s);
  }
  {  // a batched matrix-vector product, A [2, 13, 50] @ v [2, 50, 1] + 0.5: rows of A past a
     // work-item's 4 (13 % 4 == 1) and a k of 50 (vector tails) in the dot-rows kernels
    Synthetic s;
    s.name = "pt_matvec";
    s.problem_json = problem_json(s.name, "matmul", {tensor("a", {2, 13, 50}), tensor("v", {2, 50, 1})},
                                  nlohmann::json::array(), tensor("y", {2, 13, 1}), 1e-4, 1e-4, 2 * 2 * 13 * 50);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n"
                     "    return {\"a\": sample(rng, (2, 13, 50), distribution, \"f32\"), \"v\": sample(rng, (2, 50, "
                     "1), distribution, \"f32\")}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    return {\"y\": inputs[\"a\"].astype(np.float64) @ inputs[\"v\"].astype(np.float64) + 0.5}\n";
    ExprBuilder b;
    b.binary("add", b.acc(), b.constant(0.5));
    s.plan = matmul_plan({2, 13, 1}, 0, 1, false, 13, 1, 50, b.e);
    v.push_back(s);
  }
  // A layernorm case's reference: x [rows, cols] normalised over its rows, then `y`: a numpy
  // expression of xn (the normalised x) and the parameters w and b, each of `nparam` elements.
  auto layernorm_case = [&](const std::string& name, int64_t rows, int64_t cols, int64_t nparam, const std::string& y) {
    Synthetic s;
    s.name = name;
    s.problem_json =
        problem_json(name, "norm", {tensor("x", {rows, cols})}, {tensor("w", {nparam}), tensor("b", {nparam})},
                     tensor("y", {rows, cols}), 1e-5, 1e-4, rows * cols * 8);
    const std::string shape = "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
    const std::string pshape = "(" + std::to_string(nparam) + ",)";
    s.reference_py = head + "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, " + shape +
                     ", distribution, \"f32\", scale=3.0)}\n\n\n"
                     "def make_params(rng):\n"
                     "    return {\"w\": sample(rng, " +
                     pshape + ", \"normal\", \"f32\"), \"b\": sample(rng, " + pshape +
                     ", \"normal\", \"f32\")}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    x = inputs[\"x\"].astype(np.float64)\n"
                     "    m = x.mean(axis=1, keepdims=True)\n"
                     "    v = ((x - m) ** 2).mean(axis=1, keepdims=True)\n"
                     "    xn = (x - m) / np.sqrt(v + 1e-5)\n"
                     "    w, b = params[\"w\"].astype(np.float64), params[\"b\"].astype(np.float64)\n"
                     "    return {\"y\": " +
                     y + "}\n";
    return s;
  };
  {  // layernorm over the last dim of 130 (130 % 4 == 2: vector tails), affine, then relu
    Synthetic s = layernorm_case("pt_layernorm", 37, 130, 130, "np.maximum(xn * w + b, 0.0)");
    KernelPlan p = reduction("layernorm", "", {37, 130, 1}, {37, 130}, Expr{});
    p.eps = 1e-5;
    ExprBuilder b;
    b.unary("relu", b.binary("add", b.binary("mul", b.acc(), b.param(0, 1, 130)), b.param(1, 1, 130)));
    p.expr = b.e;
    s.plan = p;
    v.push_back(s);
  }
  {  // layernorm over rows of 128 (a multiple of every vector width: the vector write pass), the
     // affine's weight and bias read as vectors along the row, then relu
    Synthetic s = layernorm_case("pt_layernorm_128", 37, 128, 128, "np.maximum(xn * w + b, 0.0)");
    KernelPlan p = reduction("layernorm", "", {37, 128, 1}, {37, 128}, Expr{});
    p.eps = 1e-5;
    ExprBuilder b;
    b.unary("relu", b.binary("add", b.binary("mul", b.acc(), b.param(0, 1, 128)), b.param(1, 1, 128)));
    p.expr = b.e;
    s.plan = p;
    v.push_back(s);
  }
  {  // RMSNorm, x * rsqrt(mean(x^2) + eps) * w, as the planner makes it: a layernorm without the mean
    Synthetic s;
    s.name = "pt_rmsnorm";
    s.problem_json = problem_json(s.name, "norm", {tensor("x", {37, 130})}, {tensor("w", {130})},
                                  tensor("y", {37, 130}), 1e-5, 1e-4, 37 * 130 * 4);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (37, 130), distribution, "
                     "\"f32\", scale=3.0)}\n\n\n"
                     "def make_params(rng):\n    return {\"w\": sample(rng, (130,), \"normal\", \"f32\")}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    x = inputs[\"x\"].astype(np.float64)\n"
                     "    return {\"y\": x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + 1e-6) * "
                     "params[\"w\"].astype(np.float64)}\n";
    KernelPlan p = reduction("layernorm", "", {37, 130, 1}, {37, 130}, Expr{});
    p.eps = 1e-6;
    p.rms = true;
    ExprBuilder b;
    b.binary("mul", b.acc(), b.param(0, 1, 130));
    p.expr = b.e;
    s.plan = p;
    v.push_back(s);
  }
  {  // GroupNorm(1, 8) of 3 samples of 8 x 5000: three rows of 40000, each over several blocks
     // (a ragged last piece), the per-channel affine as the epilogue
    Synthetic s = layernorm_case("pt_layernorm_long", 3, 40000, 8,
                                 "xn * w[np.repeat(np.arange(8), 5000)] + b[np.repeat(np.arange(8), 5000)]");
    KernelPlan p = reduction("layernorm", "", {3, 40000, 1}, {3, 40000}, Expr{});
    p.eps = 1e-5;
    ExprBuilder b;
    b.binary("add", b.binary("mul", b.acc(), b.param(0, 5000, 8)), b.param(1, 5000, 8));
    p.expr = b.e;
    s.plan = p;
    v.push_back(s);
  }
  {  // relu(conv2d(x, w, b, stride (2, 1), padding 1, dilation (1, 2), groups 2)): every geometry knob, the bias per
     // channel
    Synthetic s;
    s.name = "pt_conv";
    s.problem_json =
        problem_json(s.name, "convolution", {tensor("x", {2, 4, 9, 8})}, {tensor("w", {6, 2, 3, 3}), tensor("b", {6})},
                     tensor("y", {2, 6, 5, 6}), 1e-5, 1e-4, 2 * 2 * 6 * 5 * 6 * 18);
    s.reference_py =
        head + kConvReference +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 4, 9, 8), distribution, "
        "\"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"w\": sample(rng, (6, 2, 3, 3), \"normal\", \"f32\"), \"b\": sample(rng, (6,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = conv(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 2, 1, 1, 1, 1, 2, 2)\n"
        "    return {\"y\": np.maximum(y + params[\"b\"].astype(np.float64)[None, :, None, None], 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.binary("add", b.acc(), b.param(1, 30, 6)));
    s.plan = conv_plan({2, 6, 5, 6}, ConvShape{2, 4, 6, 2, 9, 8, 5, 6, 3, 3, 2, 1, 1, 1, 1, 2}, 0, b.e);
    v.push_back(s);
  }
  {  // relu(conv2d(x, w, b, padding 1)) over rows of 16, a multiple of every vector width: the
     // last vector of a row meets the right padding, which a bound one too loose reads past
    Synthetic s;
    s.name = "pt_conv_same_rows";
    s.problem_json =
        problem_json(s.name, "convolution", {tensor("x", {1, 3, 5, 16})}, {tensor("w", {8, 3, 3, 3}), tensor("b", {8})},
                     tensor("y", {1, 8, 5, 16}), 1e-5, 1e-4, 2 * 8 * 5 * 16 * 27);
    s.reference_py =
        head + kConvReference +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (1, 3, 5, 16), distribution, "
        "\"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"w\": sample(rng, (8, 3, 3, 3), \"normal\", \"f32\"), \"b\": sample(rng, (8,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = conv(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 1, 1, 1, 1, 1, 1, 1)\n"
        "    return {\"y\": np.maximum(y + params[\"b\"].astype(np.float64)[None, :, None, None], 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.binary("add", b.acc(), b.param(1, 80, 8)));
    s.plan = conv_plan({1, 8, 5, 16}, ConvShape{1, 3, 8, 1, 5, 16, 5, 16, 3, 3, 1, 1, 1, 1, 1, 1}, 0, b.e);
    v.push_back(s);
  }
  {  // relu(conv2d(x, w, b, stride (1, 2), padding 1, dilation (2, 1))), one group: the im2col + GEMM path's batched
     // case
    Synthetic s;
    s.name = "pt_conv_dense";
    s.problem_json =
        problem_json(s.name, "convolution", {tensor("x", {2, 3, 7, 6})}, {tensor("w", {4, 3, 3, 2}), tensor("b", {4})},
                     tensor("y", {2, 4, 5, 4}), 1e-5, 1e-4, 2 * 2 * 4 * 5 * 4 * 18);
    s.reference_py =
        head + kConvReference +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 3, 7, 6), distribution, "
        "\"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"w\": sample(rng, (4, 3, 3, 2), \"normal\", \"f32\"), \"b\": sample(rng, (4,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = conv(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 1, 2, 1, 1, 2, 1, 1)\n"
        "    return {\"y\": np.maximum(y + params[\"b\"].astype(np.float64)[None, :, None, None], 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.binary("add", b.acc(), b.param(1, 20, 4)));
    s.plan = conv_plan({2, 4, 5, 4}, ConvShape{2, 3, 4, 1, 7, 6, 5, 4, 3, 2, 1, 2, 1, 1, 2, 1}, 0, b.e);
    v.push_back(s);
  }
  {  // conv2d(x, w) 1x1: a pointwise conv is a GEMM on x itself, no epilogue
    Synthetic s;
    s.name = "pt_conv_pointwise";
    s.problem_json = problem_json(s.name, "convolution", {tensor("x", {2, 5, 4, 3})}, {tensor("w", {6, 5, 1, 1})},
                                  tensor("y", {2, 6, 4, 3}), 1e-5, 1e-4, 2 * 2 * 6 * 12 * 5);
    s.reference_py = head + kConvReference +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 5, 4, 3), distribution, "
                     "\"f32\")}\n\n\n"
                     "def make_params(rng):\n    return {\"w\": sample(rng, (6, 5, 1, 1), \"normal\", \"f32\")}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    return {\"y\": conv(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 1, "
                     "1, 0, 0, 1, 1, 1)}\n";
    s.plan = conv_plan({2, 6, 4, 3}, ConvShape{2, 5, 6, 1, 4, 3, 4, 3, 1, 1, 1, 1, 0, 0, 1, 1}, 0, identity_epilogue());
    v.push_back(s);
  }
  {  // relu(conv2d(x, w, b) 1x1) of three samples: the pointwise conv as per-image products, the
     // bias and relu after them
    Synthetic s;
    s.name = "pt_conv_pointwise_bias";
    s.problem_json =
        problem_json(s.name, "convolution", {tensor("x", {3, 4, 5, 7})}, {tensor("w", {6, 4, 1, 1}), tensor("b", {6})},
                     tensor("y", {3, 6, 5, 7}), 1e-5, 1e-4, 2 * 3 * 6 * 35 * 4);
    s.reference_py =
        head + kConvReference +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (3, 4, 5, 7), distribution, "
        "\"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"w\": sample(rng, (6, 4, 1, 1), \"normal\", \"f32\"), \"b\": sample(rng, (6,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = conv(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 1, 1, 0, 0, 1, 1, 1)\n"
        "    return {\"y\": np.maximum(y + params[\"b\"].astype(np.float64)[None, :, None, None], 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.binary("add", b.acc(), b.param(1, 35, 6)));
    s.plan = conv_plan({3, 6, 5, 7}, ConvShape{3, 4, 6, 1, 5, 7, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1}, 0, b.e);
    v.push_back(s);
  }
  {  // sigmoid(conv2d(x, w, b, padding 1, groups 2)) of one sample: the GEMM path's per-group weights
    Synthetic s;
    s.name = "pt_conv_one_sample";
    s.problem_json =
        problem_json(s.name, "convolution", {tensor("x", {1, 4, 6, 5})}, {tensor("w", {6, 2, 3, 3}), tensor("b", {6})},
                     tensor("y", {1, 6, 6, 5}), 1e-5, 1e-4, 2 * 6 * 30 * 18);
    s.reference_py =
        head + kConvReference +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (1, 4, 6, 5), distribution, "
        "\"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"w\": sample(rng, (6, 2, 3, 3), \"normal\", \"f32\"), \"b\": sample(rng, (6,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = conv(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 1, 1, 1, 1, 1, 1, 2)\n"
        "    return {\"y\": 1.0 / (1.0 + np.exp(-(y + params[\"b\"].astype(np.float64)[None, :, None, None])))}\n";
    ExprBuilder b;
    b.unary("sigmoid", b.binary("add", b.acc(), b.param(1, 30, 6)));
    s.plan = conv_plan({1, 6, 6, 5}, ConvShape{1, 4, 6, 2, 6, 5, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1}, 0, b.e);
    v.push_back(s);
  }
  {  // clamp(conv2d(x, w, b, padding 1, groups 3), 0, 6): a depthwise 3x3 whose 19x17 planes take more
     // than one pass of a block's threads
    Synthetic s;
    s.name = "pt_conv_depthwise";
    s.problem_json = problem_json(s.name, "convolution", {tensor("x", {2, 3, 19, 17})},
                                  {tensor("w", {3, 1, 3, 3}), tensor("b", {3})}, tensor("y", {2, 3, 19, 17}), 1e-5,
                                  1e-4, 2 * 2 * 3 * 323 * 9);
    s.reference_py =
        head + kConvReference +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 3, 19, 17), distribution, "
        "\"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"w\": sample(rng, (3, 1, 3, 3), \"normal\", \"f32\"), \"b\": sample(rng, (3,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = conv(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 1, 1, 1, 1, 1, 1, 3)\n"
        "    return {\"y\": np.clip(y + params[\"b\"].astype(np.float64)[None, :, None, None], 0.0, 6.0)}\n";
    ExprBuilder b;
    b.unary("relu6", b.binary("add", b.acc(), b.param(1, 323, 3)));
    s.plan = conv_plan({2, 3, 19, 17}, ConvShape{2, 3, 3, 3, 19, 17, 19, 17, 3, 3, 1, 1, 1, 1, 1, 1}, 0, b.e);
    v.push_back(s);
  }
  {  // relu(conv1d(F.pad(x, (3, 1)), w, stride 2, dilation 2, depthwise)): uneven padding from an F.pad (a causal conv)
    Synthetic s;
    s.name = "pt_conv_causal";
    s.problem_json = problem_json(s.name, "convolution", {tensor("x", {2, 3, 1, 20})}, {tensor("w", {3, 1, 1, 3})},
                                  tensor("y", {2, 3, 1, 10}), 1e-5, 1e-4, 2 * 2 * 3 * 10 * 3);
    s.reference_py = head + kConvReference +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 3, 1, 20), distribution, "
                     "\"f32\")}\n\n\n"
                     "def make_params(rng):\n    return {\"w\": sample(rng, (3, 1, 1, 3), \"normal\", \"f32\")}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    y = conv(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 1, 2, 0, 3, 1, "
                     "2, 3, pw_right=1)\n"
                     "    return {\"y\": np.maximum(y, 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.acc());
    ConvShape c{2, 3, 3, 3, 1, 20, 1, 10, 1, 3, 1, 2, 0, 3, 1, 2};
    c.pw_right = 1;
    s.plan = conv_plan({2, 3, 1, 10}, c, 0, b.e);
    v.push_back(s);
  }
  {  // relu(max_pool2d(x, 3, stride 2, padding 1, dilation 2)): padding as -inf, odd sizes, a fused epilogue
    Synthetic s;
    s.name = "pt_maxpool";
    s.problem_json = problem_json(s.name, "pooling", {tensor("x", {2, 3, 11, 9})}, nlohmann::json::array(),
                                  tensor("y", {2, 3, 5, 4}), 1e-6, 1e-6, 2 * 3 * 5 * 4 * 9);
    s.reference_py = head + kPoolReference +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 3, 11, 9), distribution, "
                     "\"f32\")}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    return {\"y\": np.maximum(pool(inputs[\"x\"].astype(np.float64), 3, 3, 2, 2, 1, 1, 2, 2, "
                     "\"max\", True), 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.acc());
    s.plan = pool_plan("max", {2, 3, 5, 4}, PoolShape{6, 11, 9, 5, 4, 3, 3, 2, 2, 1, 1, 2, 2, true}, b.e);
    v.push_back(s);
  }
  {  // avg_pool2d(x, (2, 3), stride (1, 2), padding 1, count_include_pad=False): the divisor counts the taps inside
    Synthetic s;
    s.name = "pt_avgpool";
    s.problem_json = problem_json(s.name, "pooling", {tensor("x", {1, 4, 7, 10})}, nlohmann::json::array(),
                                  tensor("y", {1, 4, 8, 5}), 1e-6, 1e-5, 4 * 8 * 5 * 6);
    s.reference_py =
        head + kPoolReference +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (1, 4, 7, 10), distribution, "
        "\"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": pool(inputs[\"x\"].astype(np.float64), 2, 3, 1, 2, 1, 1, 1, 1, \"avg\", False)}\n";
    s.plan =
        pool_plan("avg", {1, 4, 8, 5}, PoolShape{4, 7, 10, 8, 5, 2, 3, 1, 2, 1, 1, 1, 1, false}, identity_epilogue());
    v.push_back(s);
  }
  {  // relu(x.permute(2, 0, 3, 1, 4)[1]): the key heads of a fused QKV tensor [B, S, 3, H, Dh] made dense
    Synthetic s;
    s.name = "pt_gather_heads";
    s.problem_json = problem_json(s.name, "elementwise", {tensor("x", {2, 5, 3, 4, 6})}, nlohmann::json::array(),
                                  tensor("y", {2, 4, 5, 6}), 0.0, 0.0, 240);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 5, 3, 4, 6), distribution, "
        "\"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": np.maximum(inputs[\"x\"].astype(np.float64).transpose(2, 0, 3, 1, 4)[1], 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.acc());
    KernelPlan g;
    g.kind = "gather";
    g.source = 0;
    g.gather_shape = {2, 4, 5, 6};
    g.gather_strides = {360, 6, 72, 1};
    g.gather_offset = 24;
    g.out_shape = {2, 4, 5, 6};
    g.out_numel = 240;
    g.expr = b.e;
    s.plan = g;
    v.push_back(s);
  }
  {  // gelu(x @ W^T + bias) over 2 batches of 8 rows, 48 outputs: nn.Linear's weight repacked at preparation for the
     // row-vector kernels (OpenCL; one with the polynomial erf), A batched and the weight shared
    Synthetic s;
    s.name = "pt_linear_packed";
    s.problem_json =
        problem_json(s.name, "matmul", {tensor("x", {2, 8, 40})}, {tensor("weight", {48, 40}), tensor("bias", {48})},
                     tensor("y", {2, 8, 48}), 1e-5, 1e-4, 2 * 16 * 48 * 40);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 8, 40), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"weight\": sample(rng, (48, 40), \"normal\", \"f32\"), \"bias\": sample(rng, (48,), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    y = inputs[\"x\"].astype(np.float64) @ params[\"weight\"].astype(np.float64).T + "
        "params[\"bias\"].astype(np.float64)\n"
        "    return {\"y\": 0.5 * y * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0)))}\n";
    ExprBuilder b;
    b.unary("gelu", b.binary("add", b.acc(), b.param(1, 1, 48)));
    s.plan = matmul_plan({2, 8, 48}, 0, 0, true, 8, 48, 40, b.e);
    s.plan.b_transposed = true;
    s.plan.b_batched = false;
    v.push_back(s);
  }
  {  // a @ b^T of two inputs (level1/04's layout): on a CPU device b is transposed by a kernel of its own on each
     // call for the row-vector kernels (it is no parameter: preparation cannot do it)
    Synthetic s;
    s.name = "pt_mm_input_bt";
    s.problem_json = problem_json(s.name, "matmul", {tensor("a", {24, 40}), tensor("b", {48, 40})},
                                  nlohmann::json::array(), tensor("y", {24, 48}), 1e-5, 1e-4, 2 * 24 * 48 * 40);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n"
                     "    return {\"a\": sample(rng, (24, 40), distribution, \"f32\"), \"b\": sample(rng, (48, 40), "
                     "distribution, \"f32\")}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    return {\"y\": inputs[\"a\"].astype(np.float64) @ inputs[\"b\"].astype(np.float64).T}\n";
    s.plan = matmul_plan({24, 48}, 0, 1, false, 24, 48, 40, identity_epilogue());
    s.plan.b_transposed = true;
    s.plan.b_batched = false;
    v.push_back(s);
  }
  {  // cumsum(x, -1) * 0.5 over rows of 4096 at an imported problem's tolerance (atol 1e-5): more than one tile
     // of most row designs (a carry); an uncompensated sequential sum drifts past it
    Synthetic s;
    s.name = "pt_cumsum_rows";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {3, 4096})}, nlohmann::json::array(),
                                  tensor("y", {3, 4096}), 1e-5, 1e-4, 12288);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (3, 4096), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": np.cumsum(inputs[\"x\"].astype(np.float64), axis=1) * 0.5}\n";
    ExprBuilder b;
    b.binary("mul", b.acc(), b.constant(0.5));
    KernelPlan c = reduction("cumsum", "", {3, 4096, 1}, {3, 4096}, b.e);
    s.plan = c;
    v.push_back(s);
  }
  {  // relu(cumsum(x, -1)) over rows of 1003: the vector row scans' scalar tail (1003 = 62 x 16 + 11)
    Synthetic s;
    s.name = "pt_cumsum_rows_tail";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {5, 1003})}, nlohmann::json::array(),
                                  tensor("y", {5, 1003}), 1e-5, 1e-4, 5015);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (5, 1003), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": np.maximum(np.cumsum(inputs[\"x\"].astype(np.float64), axis=1), 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.acc());
    s.plan = reduction("cumsum", "", {5, 1003, 1}, {5, 1003}, b.e);
    v.push_back(s);
  }
  {  // cumsum(x, -1) + b[col] over 48 rows of 4096: an epilogue reading a tensor, on the vector row scans' vectors;
     // enough rows that a carry summed without compensation drifts past atol 1e-5 somewhere
    Synthetic s;
    s.name = "pt_cumsum_rows_bias";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {48, 4096})}, {tensor("b", {4096})},
                                  tensor("y", {48, 4096}), 1e-5, 1e-4, 196608);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (48, 4096), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {\"b\": sample(rng, (4096,), \"normal\", \"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": np.cumsum(inputs[\"x\"].astype(np.float64), axis=1) + "
        "params[\"b\"].astype(np.float64)[None, :]}\n";
    ExprBuilder b;
    b.binary("add", b.acc(), b.param(0, 1, 4096));
    s.plan = reduction("cumsum", "", {48, 4096, 1}, {48, 4096}, b.e);
    v.push_back(s);
  }
  {  // cumsum(x, 1) of [2, 50, 7]: along a middle axis (inner 7)
    Synthetic s;
    s.name = "pt_cumsum_columns";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {2, 50, 7})}, nlohmann::json::array(),
                                  tensor("y", {2, 50, 7}), 1e-5, 1e-5, 700);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 50, 7), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": np.cumsum(inputs[\"x\"].astype(np.float64), axis=1)}\n";
    s.plan = reduction("cumsum", "", {2, 50, 7}, {2, 50, 7}, identity_epilogue());
    v.push_back(s);
  }
  {  // argmax(x, -1) over rows of 3000 with ties (the first wins) and NaNs (the first NaN wins), int64 indices
    Synthetic s;
    s.name = "pt_argmax_rows";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {5, 3000})}, nlohmann::json::array(),
                                  {{"name", "y"}, {"dtype", "i64"}, {"shape", {5}}}, 0.0, 0.0, 15000);
    s.reference_py = head +
                     "def make_inputs(rng, distribution):\n"
                     "    x = sample(rng, (5, 3000), distribution, \"f32\")\n"
                     "    x[1, 17] = x[1, 2999] = 50.0\n"
                     "    x[2, 400] = np.nan\n    x[2, 1200] = np.nan\n    x[2, 7] = 60.0\n"
                     "    x[3, 2998] = np.inf\n"
                     "    return {\"x\": x}\n\n\n"
                     "def make_params(rng):\n    return {}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    return {\"y\": np.argmax(inputs[\"x\"], axis=1).astype(np.int64)}\n";
    KernelPlan a = reduction("argmax", "", {5, 3000, 1}, {5}, identity_epilogue());
    s.plan = a;
    v.push_back(s);
  }
  {  // argmax(x, 1) of [4, 50, 6]: along a middle axis (inner 6)
    Synthetic s;
    s.name = "pt_argmax_columns";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {4, 50, 6})}, nlohmann::json::array(),
                                  {{"name", "y"}, {"dtype", "i64"}, {"shape", {4, 6}}}, 0.0, 0.0, 1200);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (4, 50, 6), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": np.argmax(inputs[\"x\"], axis=1).astype(np.int64)}\n";
    s.plan = reduction("argmax", "", {4, 50, 6}, {4, 6}, identity_epilogue());
    v.push_back(s);
  }
  {  // x.transpose(1, 2) * 0.5: a strided innermost dim (stride 9)
    Synthetic s;
    s.name = "pt_gather_transpose";
    s.problem_json = problem_json(s.name, "elementwise", {tensor("x", {3, 7, 9})}, nlohmann::json::array(),
                                  tensor("y", {3, 9, 7}), 0.0, 0.0, 189);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (3, 7, 9), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {}\n\n\n"
        "def reference(inputs, params):\n"
        "    return {\"y\": inputs[\"x\"].astype(np.float64).transpose(0, 2, 1) * 0.5}\n";
    ExprBuilder b;
    b.binary("mul", b.acc(), b.constant(0.5));
    KernelPlan g;
    g.kind = "gather";
    g.source = 0;
    g.gather_shape = {3, 9, 7};
    g.gather_strides = {63, 1, 9};
    g.out_shape = {3, 9, 7};
    g.out_numel = 189;
    g.expr = b.e;
    s.plan = g;
    v.push_back(s);
  }
  return v;
}

// Transposed convolutions (kind conv_transpose), appended to synthetic_problems().
inline std::vector<Synthetic> conv_transpose_problems() {
  std::vector<Synthetic> v;
  const std::string head = "import numpy as np\n\nfrom mblast_data import sample\n\n";
  {  // relu(conv_transpose2d(x, w, b, stride (2, 3), padding (1, 2), output_padding (1, 2), dilation (1, 2), groups
     // 2)): every geometry knob, taps that reach before the row (negative columns) and past it
    Synthetic s;
    s.name = "pt_conv_transpose";
    s.problem_json =
        problem_json(s.name, "convolution", {tensor("x", {2, 4, 5, 4})}, {tensor("w", {4, 3, 3, 4}), tensor("b", {6})},
                     tensor("y", {2, 6, 10, 14}), 1e-5, 1e-4, 2 * 2 * 4 * 5 * 4 * 3 * 3 * 4);
    s.reference_py = head + kConvTransposeReference +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 4, 5, 4), distribution, "
                     "\"f32\")}\n\n\n"
                     "def make_params(rng):\n"
                     "    return {\"w\": sample(rng, (4, 3, 3, 4), \"normal\", \"f32\"), \"b\": sample(rng, (6,), "
                     "\"normal\", \"f32\")}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    y = conv_transpose(inputs[\"x\"].astype(np.float64), params[\"w\"].astype(np.float64), 2, 3, "
                     "1, 2, 1, 2, 1, 2, 2)\n"
                     "    return {\"y\": np.maximum(y + params[\"b\"].astype(np.float64)[None, :, None, None], 0.0)}\n";
    ExprBuilder b;
    b.unary("relu", b.binary("add", b.acc(), b.param(1, 140, 6)));
    s.plan = conv_plan({2, 6, 10, 14}, ConvShape{2, 4, 6, 2, 5, 4, 10, 14, 3, 4, 2, 3, 1, 2, 1, 2}, 0, b.e);
    s.plan.kind = "conv_transpose";
    v.push_back(s);
  }
  {  // conv_transpose2d(x, w, stride 2, padding 1) 4x4 with 16 output channels, rows of 16 per phase: the
     // vector loads of a phase's inputs meet both row ends
    Synthetic s;
    s.name = "pt_conv_transpose_rows";
    s.problem_json = problem_json(s.name, "convolution", {tensor("x", {1, 3, 4, 16})}, {tensor("w", {3, 16, 4, 4})},
                                  tensor("y", {1, 16, 8, 32}), 1e-5, 1e-4, 2 * 3 * 4 * 16 * 16 * 16);
    s.reference_py = head + kConvTransposeReference +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (1, 3, 4, 16), distribution, "
                     "\"f32\")}\n\n\n"
                     "def make_params(rng):\n    return {\"w\": sample(rng, (3, 16, 4, 4), \"normal\", \"f32\")}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    return {\"y\": conv_transpose(inputs[\"x\"].astype(np.float64), "
                     "params[\"w\"].astype(np.float64), 2, 2, 1, 1, 0, 0, 1, 1, 1)}\n";
    s.plan =
        conv_plan({1, 16, 8, 32}, ConvShape{1, 3, 16, 1, 4, 16, 8, 32, 4, 4, 2, 2, 1, 1, 1, 1}, 0, identity_epilogue());
    s.plan.kind = "conv_transpose";
    v.push_back(s);
  }
  return v;
}

// A chain of a reduction of the problem's one input and an elementwise stage after it that reads
// its result as input 1 (temporary 0).
inline KernelPlan reduce_then_map(const KernelPlan& reduce, const KernelPlan& map) {
  KernelPlan p;
  p.kind = "chain";
  p.out_shape = map.out_shape;
  p.out_numel = map.out_numel;
  p.first_temp = 1;
  p.temps = {TensorSpec{"mb_tmp0", DType::f32, reduce.out_shape}};
  p.stages = {reduce, map};
  return p;
}

// Chains of kernels (KernelPlan kind "chain"): stage plans over the problem's tensors and the
// temporaries (input index first_temp + j), written out by hand like the plans above.
inline std::vector<Synthetic> chain_problems() {
  std::vector<Synthetic> v;
  const std::string head = "import numpy as np\n\nfrom mblast_data import sample\n\n";
  {  // softmax(x @ W * 0.5): a matrix product with an epilogue, then a softmax of its result
    Synthetic s;
    s.name = "pt_chain_mm_softmax";
    s.problem_json = problem_json(s.name, "matmul", {tensor("x", {20, 40})}, {tensor("w", {40, 70})},
                                  tensor("y", {20, 70}), 1e-5, 1e-4, 2 * 20 * 40 * 70);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (20, 40), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {\"w\": sample(rng, (40, 70), \"normal\", \"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    z = inputs[\"x\"].astype(np.float64) @ params[\"w\"].astype(np.float64) * 0.5\n"
        "    e = np.exp(z - z.max(axis=1, keepdims=True))\n"
        "    return {\"y\": e / e.sum(axis=1, keepdims=True)}\n";
    ExprBuilder b;
    b.binary("mul", b.acc(), b.constant(0.5));
    KernelPlan mm = matmul_plan({20, 70}, 0, 0, true, 20, 70, 40, b.e);
    KernelPlan sm = reduction("softmax", "", {20, 70, 1}, {20, 70}, identity_epilogue());
    sm.source = 1;  // temporary 0
    KernelPlan p;
    p.kind = "chain";
    p.out_shape = {20, 70};
    p.out_numel = 1400;
    p.first_temp = 1;
    p.temps = {TensorSpec{"mb_tmp0", DType::f32, {20, 70}}};
    p.stages = {mm, sm};
    s.plan = p;
    v.push_back(s);
  }
  {  // relu(rmsnorm(x) * g @ W^T): x*x, its row means (rsqrt(m + eps)), the scaling, a product
    Synthetic s;
    s.name = "pt_chain_rms_linear";
    s.problem_json =
        problem_json(s.name, "matmul", {tensor("x", {12, 48})}, {tensor("g", {48}), tensor("weight", {30, 48})},
                     tensor("y", {12, 30}), 1e-5, 1e-4, 2 * 12 * 48 * 30);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (12, 48), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n"
        "    return {\"g\": sample(rng, (48,), \"normal\", \"f32\"), \"weight\": sample(rng, (30, 48), \"normal\", "
        "\"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    x = inputs[\"x\"].astype(np.float64)\n"
        "    h = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * params[\"g\"].astype(np.float64)\n"
        "    return {\"y\": np.maximum(h @ params[\"weight\"].astype(np.float64).T, 0.0)}\n";
    ExprBuilder sq;
    sq.binary("mul", sq.input(0, 1, 576), sq.input(0, 1, 576));
    KernelPlan s0 = elementwise({12, 48}, sq.e);
    ExprBuilder r;
    r.unary("rsqrt", r.binary("add", r.acc(), r.constant(1e-5)));
    KernelPlan s1 = reduction("reduce", "mean", {12, 48, 1}, {12, 1}, r.e);
    s1.source = 1;  // temporary 0
    ExprBuilder sc;
    sc.binary("mul", sc.binary("mul", sc.input(0, 1, 576), sc.input(2, 48, 12)), sc.param(0, 1, 48));
    KernelPlan s2 = elementwise({12, 48}, sc.e);
    ExprBuilder re;
    re.unary("relu", re.acc());
    KernelPlan s3 = matmul_plan({12, 30}, 3, 1, true, 12, 30, 48, re.e);  // A: temporary 2
    s3.b_transposed = true;
    KernelPlan p;
    p.kind = "chain";
    p.out_shape = {12, 30};
    p.out_numel = 360;
    p.first_temp = 1;
    p.temps = {TensorSpec{"mb_tmp0", DType::f32, {12, 48}}, TensorSpec{"mb_tmp1", DType::f32, {12, 1}},
               TensorSpec{"mb_tmp2", DType::f32, {12, 48}}};
    p.stages = {s0, s1, s2, s3};
    s.plan = p;
    v.push_back(s);
  }
  {  // conv1x1(relu(conv3x3(x))): two convolutions in one candidate (on CUDA two cuDNN stages, each with its own state)
    Synthetic s;
    s.name = "pt_chain_conv_conv";
    s.problem_json = problem_json(s.name, "convolution", {tensor("x", {2, 3, 8, 8})},
                                  {tensor("w0", {4, 3, 3, 3}), tensor("w1", {5, 4, 1, 1})}, tensor("y", {2, 5, 8, 8}),
                                  1e-5, 1e-4, 2 * 2 * 64 * (4 * 27 + 5 * 4));
    s.reference_py = head + kConvReference +
                     "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (2, 3, 8, 8), distribution, "
                     "\"f32\")}\n\n\n"
                     "def make_params(rng):\n"
                     "    return {\"w0\": sample(rng, (4, 3, 3, 3), \"normal\", \"f32\"), \"w1\": sample(rng, (5, 4, "
                     "1, 1), \"normal\", \"f32\")}\n\n\n"
                     "def reference(inputs, params):\n"
                     "    h = np.maximum(conv(inputs[\"x\"].astype(np.float64), params[\"w0\"].astype(np.float64), 1, "
                     "1, 1, 1, 1, 1, 1), 0.0)\n"
                     "    return {\"y\": conv(h, params[\"w1\"].astype(np.float64), 1, 1, 0, 0, 1, 1, 1)}\n";
    ExprBuilder re;
    re.unary("relu", re.acc());
    KernelPlan c0 = conv_plan({2, 4, 8, 8}, ConvShape{2, 3, 4, 1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1}, 0, re.e);
    KernelPlan c1 =
        conv_plan({2, 5, 8, 8}, ConvShape{2, 4, 5, 1, 8, 8, 8, 8, 1, 1, 1, 1, 0, 0, 1, 1}, 1, identity_epilogue());
    c1.source = 1;  // temporary 0
    KernelPlan p;
    p.kind = "chain";
    p.out_shape = {2, 5, 8, 8};
    p.out_numel = 640;
    p.first_temp = 1;
    p.temps = {TensorSpec{"mb_tmp0", DType::f32, {2, 4, 8, 8}}};
    p.stages = {c0, c1};
    s.plan = p;
    v.push_back(s);
  }
  {  // x / x.sum(1, keepdims) * w (level2/15's shape): a row sum, then every element of the row
     // divided by it; x centred on 2, so that the sums are far from zero
    Synthetic s;
    s.name = "pt_chain_row_normalize";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {24, 512})}, {tensor("w", {512})},
                                  tensor("y", {24, 512}), 1e-6, 1e-4, 3 * 24 * 512);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n"
        "    return {\"x\": (sample(rng, (24, 512), distribution, \"f32\") + 2.0).astype(np.float32)}\n\n\n"
        "def make_params(rng):\n    return {\"w\": sample(rng, (512,), \"normal\", \"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    x = inputs[\"x\"].astype(np.float64)\n"
        "    return {\"y\": x / x.sum(axis=1, keepdims=True) * params[\"w\"].astype(np.float64)}\n";
    ExprBuilder m;
    m.binary("mul", m.binary("div", m.input(0, 1, 24 * 512), m.input(1, 512, 24)), m.param(0, 1, 512));
    s.plan = reduce_then_map(reduction("reduce", "sum", {24, 512, 1}, {24, 1}, identity_epilogue()),
                             elementwise({24, 512}, m.e));
    v.push_back(s);
  }
  {  // x - (x.max(1, keepdims) * 0.5 + b): rows of 130 (no float4 loads), the reduction's epilogue
     // reading a per-row parameter
    Synthetic s;
    s.name = "pt_chain_row_max_center";
    s.problem_json = problem_json(s.name, "reduction", {tensor("x", {37, 130})}, {tensor("b", {37, 1})},
                                  tensor("y", {37, 130}), 1e-5, 1e-4, 2 * 37 * 130);
    s.reference_py =
        head +
        "def make_inputs(rng, distribution):\n    return {\"x\": sample(rng, (37, 130), distribution, \"f32\")}\n\n\n"
        "def make_params(rng):\n    return {\"b\": sample(rng, (37, 1), \"normal\", \"f32\")}\n\n\n"
        "def reference(inputs, params):\n"
        "    x = inputs[\"x\"].astype(np.float64)\n"
        "    return {\"y\": x - (x.max(axis=1, keepdims=True) * 0.5 + params[\"b\"].astype(np.float64))}\n";
    ExprBuilder e;
    e.binary("add", e.binary("mul", e.acc(), e.constant(0.5)), e.param(0, 1, 37));
    ExprBuilder m;
    m.binary("sub", m.input(0, 1, 37 * 130), m.input(1, 130, 37));
    s.plan = reduce_then_map(reduction("reduce", "max", {37, 130, 1}, {37, 1}, e.e), elementwise({37, 130}, m.e));
    v.push_back(s);
  }
  return v;
}

// Writes the synthetic problem under the test cache (once; the data generator keeps its data
// while problem.json and reference.py are unchanged) and loads it.
inline Problem materialise(const Synthetic& s) {
  const char* cache = std::getenv("MBLAST_CACHE_DIR");
  const fs::path dir = fs::path(cache && *cache ? cache : "/tmp") / "policy-problems" / s.name;
  fs::create_directories(dir);
  auto write_if_changed = [](const fs::path& f, const std::string& text) {
    std::ifstream in(f);
    std::stringstream old;
    old << in.rdbuf();
    if (in && old.str() == text) return;
    std::ofstream(f, std::ios::trunc) << text;
  };
  write_if_changed(dir / "problem.json", s.problem_json);
  write_if_changed(dir / "reference.py", s.reference_py);
  return load_problem(dir);
}

// Every action id of the seed knowledge (kb_schema/seed/*.jsonl).
inline std::set<std::string> seed_action_ids() {
  std::set<std::string> ids;
  for (const auto& e : fs::directory_iterator(testing::source_dir() / "kb_schema" / "seed")) {
    if (e.path().extension() != ".jsonl") continue;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("id")) ids.insert(j["id"].get<std::string>());
    }
  }
  return ids;
}

// A problem of the suites by name: hand-made (problems/) or synthetic, with its plan.
struct Case {
  Problem problem;
  KernelPlan plan;
  bool hand_made = false;
};

inline Case load_case(const std::string& name) {
  for (const auto& h : hand_problems())
    if (h == name) return {load_problem(testing::source_dir() / "problems" / name), hand_plan(name), true};
  for (const auto& s : synthetic_problems())
    if (s.name == name) return {materialise(s), s.plan, false};
  for (const auto& s : chain_problems())
    if (s.name == name) return {materialise(s), s.plan, false};
  for (const auto& s : conv_transpose_problems())
    if (s.name == name) return {materialise(s), s.plan, false};
  throw std::runtime_error("no policy test case " + name);
}

// The cases every GPU generator handles; with_chains adds the chains (CUDA and OpenCL; RVV has no chain generator yet).
inline std::vector<std::string> case_names(bool with_chains = false) {
  std::vector<std::string> v = hand_problems();
  for (const auto& s : synthetic_problems()) v.push_back(s.name);
  for (const auto& s : conv_transpose_problems()) v.push_back(s.name);
  if (with_chains)
    for (const auto& s : chain_problems()) v.push_back(s.name);
  return v;
}

// A target for generation: for CUDA targets/h200.json (its arch, sm_90a, decides the wgmma
// designs); for OpenCL a stand-in with no device type (the designs for GPU devices).
inline Target generation_target(const std::string& backend) {
  if (backend == "cuda") return find_target("h200");
  Target t;
  t.name = "pocl-cpu";
  t.backend = backend;
  return t;
}

// Writes a variant where the pipeline can read it: <cache>/policy-variants/<backend>/<problem>/.
inline fs::path write_variant(const std::string& backend, const std::string& problem, size_t index, const Variant& v) {
  const char* cache = std::getenv("MBLAST_CACHE_DIR");
  const fs::path dir = fs::path(cache && *cache ? cache : "/tmp") / "policy-variants" / backend / problem;
  fs::create_directories(dir);
  std::string name = std::to_string(index) + "_" + v.family;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  const fs::path file = dir / (name + v.extension);
  std::ofstream(file, std::ios::trunc) << v.source;
  return file;
}

inline std::string label(const Variant& v) { return v.family + " " + v.params.dump(); }

// Verification in full (every seed, init and run), timing kept short: the suites judge
// correctness; the figures they print are indicative.
inline EvalOptions quick_timing() {
  EvalOptions o = mblast::testing::quick_timing();
  o.min_seconds = 0.05;
  return o;
}

// Evaluates the variants of the case's plan for `backend` (every one with
// MBLAST_TEST_EVERY_VARIANT=1, else a covering subset: variant_subset.h) on every target of that
// backend available here (skips, with the reason, when there is none): each must be correct. Prints,
// per target, the best variant's median against the naive candidate's (hand-made problems).
inline void evaluate_every_variant(const std::string& backend, const std::string& name) {
  std::string why;
  const auto targets = testing::available_targets(backend, &why);
  if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
  const Case c = load_case(name);
  const auto variants = generate_variants(c.plan, c.problem, generation_target(backend));
  ASSERT_FALSE(variants.empty()) << "no " << backend << " variants for " << name << ": " << c.plan.summary();
  for (const auto& t : targets) {
    SCOPED_TRACE("target " + t.name);
    RunnerClient client(RunnerAddress{});
    double best = -1;
    std::string best_label, unit;
    size_t correct = 0;
    const std::vector<size_t> chosen = variants_to_evaluate(variants);
    for (size_t i : chosen) {
      const Variant& v = variants[i];
      const fs::path file = write_variant(backend, name, i, v);
      EvalOptions o = quick_timing();
      o.timing = c.hand_made;  // the synthetic problems are too small for timing to mean anything
      const nlohmann::json r = evaluate(c.problem, t, file, o, &client);
      if (!r.value("correct", false)) {
        // Reduced-precision math is offered as its own variant for the verifier to judge: a
        // wrong_output there is the tolerance speaking, not a generator bug.
        if (v.params.value("math", "") == "tf32" && r.value("failure_kind", nlohmann::json()) == "wrong_output") {
          std::printf("[ policy ] %s: %s rejected by the tolerance (expected where it is tighter than TF32)\n",
                      name.c_str(), label(v).c_str());
          continue;
        }
        // The CLBlast variant needs the library where the candidate is built (libclblast-dev).
        if (v.family == "opencl.matmul.clblast" && r.value("failure_kind", nlohmann::json()) == "build_failed" &&
            !fs::exists("/usr/include/clblast_c.h") && !fs::exists("/usr/local/include/clblast_c.h")) {
          std::printf("[ policy ] %s: %s not built: CLBlast is not installed here\n", name.c_str(), label(v).c_str());
          continue;
        }
        ADD_FAILURE() << label(v) << " (" << file.string() << "): " << r.value("failure_kind", nlohmann::json()).dump()
                      << ": " << r.value("reason", nlohmann::json()).dump() << "\n"
                      << r.value("log", "");
        continue;
      }
      ++correct;
      if (!r.contains("time") || !r["time"].is_object()) continue;
      const double median = r["time"]["median"].get<double>();
      unit = r["time"].value("unit", "us");
      if (best < 0 || median < best) best = median, best_label = label(v);
    }
    std::string line = "[ policy ] " + backend + "/" + name + " on " + t.name + ": " + std::to_string(correct) + "/" +
                       std::to_string(chosen.size()) + " variants correct (" + std::to_string(variants.size()) +
                       " generated; MBLAST_TEST_EVERY_VARIANT=1 runs all)";
    if (best >= 0) line += "; best " + best_label + " median " + std::to_string(best) + " " + unit;
    const fs::path naive = c.problem.dir / "candidates" / ("naive." + backend + testing::candidate_extension(backend));
    if (c.hand_made && best >= 0 && fs::exists(naive)) {
      const nlohmann::json r = evaluate(c.problem, t, naive, quick_timing(), &client);
      if (r.value("correct", false)) {
        const double n = r["time"]["median"].get<double>();
        line += "; naive " + std::to_string(n) + " " + unit + " (" + std::to_string(n / best) + "x)";
        ::testing::Test::RecordProperty(backend + "_" + name + "_speedup_vs_naive", std::to_string(n / best));
      }
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
}

// Checks what every variant promises: a stable identity (family + params, unique within the
// plan, the same source when generated again), a description, the candidate extension, a
// source that opens with the comment naming family, params and plan, and actions that exist
// in the seed knowledge.
inline void check_variant_structure(const std::string& backend, const std::string& extension,
                                    const std::vector<std::string>& names) {
  const auto ids = seed_action_ids();
  ASSERT_GT(ids.size(), 20u) << "the seed knowledge was not found under " << testing::source_dir();
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const Case c = load_case(name);
    const auto variants = generate_variants(c.plan, c.problem, generation_target(backend));
    EXPECT_FALSE(variants.empty()) << c.plan.summary();
    EXPECT_LE(variants.size(), 48u);
    const auto again = generate_variants(c.plan, c.problem, generation_target(backend));
    ASSERT_EQ(again.size(), variants.size());
    std::set<std::string> identities;
    for (size_t i = 0; i < variants.size(); ++i) {
      const Variant& v = variants[i];
      SCOPED_TRACE(label(v));
      EXPECT_TRUE(identities.insert(label(v)).second) << "two variants share family and params";
      EXPECT_EQ(v.source, again[i].source) << "generation is not deterministic";
      EXPECT_EQ(v.extension, extension);
      EXPECT_EQ(v.family.rfind(backend + ".", 0), 0u);
      EXPECT_FALSE(v.description.empty());
      EXPECT_EQ(v.source.rfind("// Generated by mblast's builtin policy", 0), 0u);
      EXPECT_NE(v.source.find("// family:  " + v.family + "\n"), std::string::npos);
      EXPECT_NE(v.source.find("// params:  " + v.params.dump() + "\n"), std::string::npos);
      // A row map names the one-kernel plan it makes of the chain.
      const auto fused = fuse_row_map(c.plan);
      const bool row_map = fused && v.family.find(".row-map.") != std::string::npos;
      EXPECT_NE(v.source.find("// plan:    " + (row_map ? fused->summary() : c.plan.summary()) + "\n"),
                std::string::npos);
      EXPECT_NE(v.source.find("mb_check_tensors(in, n_in, par, n_par, out, n_out)"), std::string::npos);
      ASSERT_FALSE(v.actions.empty());
      for (const auto& a : v.actions) {
        EXPECT_TRUE(ids.count(a)) << "action " << a << " is not in kb_schema/seed/*.jsonl";
        EXPECT_EQ(a.rfind(backend + ".", 0), 0u) << a;
      }
    }
  }
}

// Plans the generators must refuse (no variants, no throw).
inline void check_refusals(const std::string& backend) {
  const Case c = load_case("vec_add");
  KernelPlan unsupported;
  unsupported.reason = "test";
  EXPECT_TRUE(generate_variants(unsupported, c.problem, generation_target(backend)).empty());
  Problem f64 = c.problem;
  f64.inputs[0].dtype = DType::f64;
  EXPECT_TRUE(generate_variants(c.plan, f64, generation_target(backend)).empty()) << "an f64 input";
  KernelPlan wrong = c.plan;
  wrong.out_numel = 7;  // not the output's element count
  EXPECT_TRUE(generate_variants(wrong, c.problem, generation_target(backend)).empty());
  KernelPlan bad_leaf = c.plan;
  bad_leaf.expr.nodes[0].index.mod = 1 << 30;  // reads past its tensor
  EXPECT_TRUE(generate_variants(bad_leaf, c.problem, generation_target(backend)).empty());
  const Case g = load_case("pt_gather_heads");
  KernelPlan past = g.plan;
  past.gather_offset = 2 * 24 + 1;  // the last view element one past the end of x
  EXPECT_TRUE(generate_variants(past, g.problem, generation_target(backend)).empty());
}

}  // namespace mblast::policy::gpu_test
