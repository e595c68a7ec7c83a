// Expressions (kernel_plan.h's Expr) rendered as RVV intrinsics over strips of a block of output
// elements (rvv_codegen.h, VectorExpr), plus the scalar fallback.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include <fmt/format.h>

#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

std::string c_float(double v) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  if (std::isnan(v)) return "NAN";
  std::string s = fmt::format("{:.9g}", static_cast<float>(v));
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s + "f";
}

LeafMode leaf_mode(const IndexMap& m, int64_t block) {
  if (m.mod == 1) return LeafMode::Uniform;
  if (m.div == 1 && m.mod % block == 0) return LeafMode::Contiguous;
  if (m.div % block == 0) return LeafMode::Uniform;
  return LeafMode::Gather;
}

namespace {

bool is_leaf(const ExprNode& n) { return n.kind == ExprNode::Kind::Input || n.kind == ExprNode::Kind::Param; }

std::string tensor_name(const ExprNode& n) {
  return (n.kind == ExprNode::Kind::Input ? "in" : "pr") + std::to_string(n.tensor);
}

// The element a leaf reads for output index `i` (a C expression of type int64_t).
std::string leaf_index(const IndexMap& m, const std::string& i) {
  if (m.mod == 1) return "0";
  std::string q = m.div == 1 ? i : "(" + i + ") / " + std::to_string(m.div);
  return "(" + q + ") % " + std::to_string(m.mod);
}

const std::set<std::string>& helper_ops() {
  static const std::set<std::string> s = {"exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "softplus"};
  return s;
}

const std::set<std::string>& vector_ops() {
  static const std::set<std::string> s = {"neg",        "relu", "relu6", "abs", "sqrt", "rsqrt", "clamp", "hardtanh",
                                          "leaky_relu", "add",  "sub",   "mul", "div",  "max",   "min"};
  return s;
}

}  // namespace

int64_t choose_block(const Expr& e, int64_t total) {
  std::vector<IndexMap> maps;
  for (const auto& n : e.nodes)
    if (is_leaf(n)) maps.push_back(n.index);
  std::vector<int64_t> candidates = {total};
  int64_t g = total;
  for (const auto& m : maps) {
    if (m.mod == 1) continue;
    const int64_t c = m.div == 1 ? m.mod : m.div;
    g = std::gcd(g, c);
    if (total % c == 0) candidates.push_back(c);
  }
  candidates.push_back(g);
  int64_t best = total;
  int best_gathers = 1 << 30;
  for (int64_t L : candidates) {
    if (L <= 0 || total % L != 0 || (L < 32 && L < total)) continue;
    int gathers = 0;
    for (const auto& m : maps) gathers += leaf_mode(m, L) == LeafMode::Gather;
    if (gathers < best_gathers || (gathers == best_gathers && L > best)) best = L, best_gathers = gathers;
  }
  return best;
}

VectorExpr::VectorExpr(const Expr& e, Lmul lm, int64_t block) : e_(e), lm_(lm), block_(block) {
  const size_t n = e.nodes.size();
  reach_.assign(n, false);
  uniform_.assign(n, false);
  fused_.assign(n, false);
  uses_.assign(n, 0);
  rep_.resize(n);
  if (e.empty()) return;
  reach_[e.root] = true;
  for (int i = e.root; i >= 0; --i)
    if (reach_[i])
      for (int a : e.nodes[i].args) reach_[a] = true, ++uses_[a];
  std::map<std::tuple<int, int, int64_t, int64_t>, int> first;  // leaves reading the same element share a load
  for (size_t i = 0; i < n; ++i) {
    const ExprNode& node = e.nodes[i];
    rep_[i] = static_cast<int>(i);
    if (is_leaf(node) && reach_[i]) {
      auto key = std::make_tuple(static_cast<int>(node.kind), node.tensor, node.index.div, node.index.mod);
      auto [it, fresh] = first.emplace(key, static_cast<int>(i));
      rep_[i] = it->second;
      uniform_[i] = leaf_mode(node.index, block_) == LeafMode::Uniform;
    } else if (node.kind == ExprNode::Kind::Const) {
      uniform_[i] = true;
    } else if (node.kind != ExprNode::Kind::Acc) {
      bool all = true;
      for (int a : node.args) all = all && uniform_[a];
      uniform_[i] = all;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!reach_[i]) continue;
    const ExprNode& node = e.nodes[i];
    if (node.kind != ExprNode::Kind::Unary && node.kind != ExprNode::Kind::Binary) continue;
    if (uniform_[i]) {
      // Rendered as scalar C by render_expr; an op it does not know (it answers with a comment)
      // is computed as a vector of its uniform argument instead.
      std::string text = render_expr(
          e, kC, [](const ExprNode&) { return std::string("x"); }, static_cast<int>(i));
      if (text.find("/* unknown op") == std::string::npos) continue;
      uniform_[i] = false;
      for (size_t k = i + 1; k < n; ++k) {  // users of a vector node are vectors
        const ExprNode& user = e.nodes[k];
        if (user.kind != ExprNode::Kind::Unary && user.kind != ExprNode::Kind::Binary) continue;
        for (int a : user.args)
          if (!uniform_[a]) uniform_[k] = false;
      }
    }
    if (helper_ops().count(node.op))
      helpers_.insert(node.op);
    else if (!vector_ops().count(node.op))
      unknown_ops_.insert(node.op);
    if (node.op == "leaky_relu" && node.value < 0) uses_mask_ = true;
    if (node.kind == ExprNode::Kind::Binary) {
      for (int a : node.args) uses_scalar_operands_ = uses_scalar_operands_ || uniform_[a];
      if (node.op == "add" || node.op == "sub") {
        auto fusable = [&](int m) {
          const ExprNode& mn = e.nodes[m];
          return mn.kind == ExprNode::Kind::Binary && mn.op == "mul" && !uniform_[m] && uses_[m] == 1 && !fused_[m];
        };
        int a = node.args[0], b = node.args[1];
        if (fusable(a) && !uniform_[b])
          fused_[a] = true, uses_fma_ = true;
        else if (fusable(b) && !uniform_[a])
          fused_[b] = true, uses_fma_ = true;
      }
    }
  }
}

int VectorExpr::gathered_leaves() const {
  int g = 0;
  for (size_t i = 0; i < e_.nodes.size(); ++i)
    if (reach_[i] && is_leaf(e_.nodes[i]) && rep_[i] == static_cast<int>(i) &&
        leaf_mode(e_.nodes[i].index, block_) == LeafMode::Gather)
      ++g;
  return g;
}

std::string VectorExpr::operand(int i, const std::string& acc, const std::map<int, std::string>& leaves) const {
  const ExprNode& n = e_.nodes[i];
  switch (n.kind) {
    case ExprNode::Kind::Const:
      return c_float(n.value);
    case ExprNode::Kind::Acc:
      return acc;
    case ExprNode::Kind::Input:
    case ExprNode::Kind::Param: {
      if (uniform_[i]) return "u" + std::to_string(rep_[i]);
      auto it = leaves.find(rep_[i]);
      return it != leaves.end() ? it->second : "v" + std::to_string(rep_[i]);
    }
    default:
      return (uniform_[i] ? "s" : "v") + std::to_string(i);
  }
}

std::string VectorExpr::vector_op(int i, const std::string& acc, const std::map<int, std::string>& leaves,
                                  std::string* pre) const {
  const ExprNode& n = e_.nodes[i];
  const Lmul& L = lm_;
  auto operand = [&](int k, const std::string& a) { return this->operand(k, a, leaves); };
  auto x = [&](int k) { return operand(n.args[k], acc); };
  if (n.kind == ExprNode::Kind::Unary) {
    // A uniform argument (a vector op of a per-block scalar) is splat first.
    const std::string a = uniform_[n.args[0]] ? fmt::format("{}({}, vl)", L.f("vfmv_v_f"), x(0)) : x(0);
    const std::string& op = n.op;
    if (helper_ops().count(op)) return fmt::format("mb_{}({}, vl)", op, a);
    if (op == "neg") return fmt::format("{}({}, vl)", L.f("vfneg_v"), a);
    if (op == "abs") return fmt::format("{}({}, vl)", L.f("vfabs_v"), a);
    if (op == "sqrt") return fmt::format("{}({}, vl)", L.f("vfsqrt_v"), a);
    if (op == "rsqrt") return fmt::format("{}({}({}, vl), 1.0f, vl)", L.f("vfrdiv_vf"), L.f("vfsqrt_v"), a);
    if (op == "relu") return fmt::format("{}({}, 0.0f, vl)", L.f("vfmax_vf"), a);
    if (op == "relu6") return fmt::format("{}({}({}, 0.0f, vl), 6.0f, vl)", L.f("vfmin_vf"), L.f("vfmax_vf"), a);
    if (op == "clamp" || op == "hardtanh") {
      std::string r = a;
      if (!std::isinf(n.value)) r = fmt::format("{}({}, {}, vl)", L.f("vfmax_vf"), r, c_float(n.value));
      if (!std::isinf(n.value2)) r = fmt::format("{}({}, {}, vl)", L.f("vfmin_vf"), r, c_float(n.value2));
      return r;
    }
    if (op == "leaky_relu") {
      const double alpha = n.value;
      const std::string ax = fmt::format("{}({}, {}, vl)", L.f("vfmul_vf"), a, c_float(alpha));
      if (alpha >= 0 && alpha <= 1)
        return fmt::format("{}({}, {}, vl)", L.f("vfmax_vv"), a, ax);  // x >= alpha x iff x >= 0
      if (alpha > 1) return fmt::format("{}({}, {}, vl)", L.f("vfmin_vv"), a, ax);
      *pre +=
          fmt::format("{} k{} = __riscv_vmflt_vf_f32{}_{}({}, 0.0f, vl); ", L.mask(), i, L.name(), L.mask_suffix(), a);
      return fmt::format("__riscv_vfmul_vf_f32{}_mu(k{}, {}, {}, {}, vl)", L.name(), i, a, a, c_float(alpha));
    }
    return "";
  }
  // Binary.
  const int ia = n.args[0], ib = n.args[1];
  if ((n.op == "add" || n.op == "sub") && (fused_[ia] || fused_[ib])) {
    const bool left = fused_[ia];
    const ExprNode& m = e_.nodes[left ? ia : ib];
    const std::string c = operand(left ? ib : ia, acc);
    const int mx = m.args[0], my = m.args[1];
    // add: c + x y (vfmacc); sub: x y - c (vfmsac) or c - x y (vfnmsac).
    const std::string fn = n.op == "add" ? "vfmacc" : left ? "vfmsac" : "vfnmsac";
    if (uniform_[mx]) return fmt::format("{}({}, {}, {}, vl)", L.f(fn + "_vf"), c, operand(mx, acc), operand(my, acc));
    if (uniform_[my]) return fmt::format("{}({}, {}, {}, vl)", L.f(fn + "_vf"), c, operand(my, acc), operand(mx, acc));
    return fmt::format("{}({}, {}, {}, vl)", L.f(fn + "_vv"), c, operand(mx, acc), operand(my, acc));
  }
  const std::string a = x(0), b = x(1);
  const bool ua = uniform_[ia], ub = uniform_[ib];
  static const std::map<std::string, std::string> base = {{"add", "vfadd"}, {"sub", "vfsub"}, {"mul", "vfmul"},
                                                          {"div", "vfdiv"}, {"max", "vfmax"}, {"min", "vfmin"}};
  auto it = base.find(n.op);
  if (it == base.end()) return "";
  const std::string& f = it->second;
  if (!ua && !ub) return fmt::format("{}({}, {}, vl)", L.f(f + "_vv"), a, b);
  if (ub) return fmt::format("{}({}, {}, vl)", L.f(f + "_vf"), a, b);
  // scalar op vector: commutative ops swap, sub and div have reversed forms.
  if (n.op == "sub") return fmt::format("{}({}, {}, vl)", L.f("vfrsub_vf"), b, a);
  if (n.op == "div") return fmt::format("{}({}, {}, vl)", L.f("vfrdiv_vf"), b, a);
  return fmt::format("{}({}, {}, vl)", L.f(f + "_vf"), b, a);
}

std::string VectorExpr::block_setup(const std::string& base, const std::string& indent) const {
  std::string s;
  const size_t n = e_.nodes.size();
  for (size_t i = 0; i < n; ++i) {
    const ExprNode& node = e_.nodes[i];
    if (!reach_[i] || !is_leaf(node) || rep_[i] != static_cast<int>(i)) continue;
    const LeafMode mode = leaf_mode(node.index, block_);
    if (mode == LeafMode::Uniform)
      s += fmt::format("{}const float u{} = {}[{}];\n", indent, i, tensor_name(node), leaf_index(node.index, base));
    else if (mode == LeafMode::Contiguous)
      s += fmt::format("{}const float* restrict p{} = {} + ({}) % {};\n", indent, i, tensor_name(node), base,
                       node.index.mod);
  }
  // Uniform operation nodes that a vector node (or the result) uses: one scalar each per block.
  std::vector<bool> needed(n, false);
  if (!e_.empty() && uniform_[e_.root]) needed[e_.root] = true;
  for (size_t i = 0; i < n; ++i)
    if (reach_[i] && !uniform_[i])
      for (int a : e_.nodes[i].args) needed[a] = true;
  auto leaf = [&](const ExprNode& node) {
    const int idx = static_cast<int>(&node - e_.nodes.data());
    return "u" + std::to_string(rep_[idx]);
  };
  for (size_t i = 0; i < n; ++i) {
    const ExprNode& node = e_.nodes[i];
    if (!needed[i] || !uniform_[i] || (node.kind != ExprNode::Kind::Unary && node.kind != ExprNode::Kind::Binary))
      continue;
    s += fmt::format("{}const float s{} = (float)({});\n", indent, i, render_expr(e_, kC, leaf, static_cast<int>(i)));
  }
  return s;
}

std::string VectorExpr::strip(const std::string& base, const std::string& j, const std::string& vl,
                              const std::string& acc, const std::string& result, const std::string& indent) const {
  const Lmul& L = lm_;
  std::string s;
  // Strip-local names `vl` are what vector_op and the helpers use.
  if (vl != "vl") s += fmt::format("{}const size_t vl = {};\n", indent, vl);
  const size_t n = e_.nodes.size();
  bool index_made = false;
  // Leaves are loaded just before their first use. At LMUL 8 (four register groups) a leaf still
  // needed after a math helper would be spilled across it, and a spill plus its reload cost ten
  // instructions where loading the leaf again costs one or two: it is loaded again, behind a
  // compiler barrier so that the two loads are not merged back into one.
  std::map<int, std::string> names;  // leaf rep -> the variable holding it now
  std::map<int, int> loaded_in;      // leaf rep -> the epoch it was loaded in
  int epoch = 0;
  auto ensure_leaf = [&](int a) {
    if (!reach_[a] || uniform_[a] || !is_leaf(e_.nodes[a])) return;
    const int r = rep_[a];
    auto it = loaded_in.find(r);
    if (it != loaded_in.end() && (L.m < 8 || it->second == epoch)) return;
    const std::string name = it == loaded_in.end() ? fmt::format("v{}", r) : fmt::format("v{}_{}", r, epoch);
    if (it != loaded_in.end()) s += indent + "__asm__ volatile(\"\" ::: \"memory\");\n";
    const ExprNode& node = e_.nodes[r];
    if (leaf_mode(node.index, block_) == LeafMode::Contiguous) {
      s += fmt::format("{}{} {} = {}(p{} + {}, vl);\n", indent, L.f32(), name, L.f("vle32_v"), r, j);
    } else {
      // Gathered: element ((base + j + lane) / div) % mod, as byte offsets for an indexed load.
      if (!index_made) {
        s += fmt::format("{}{} gi = __riscv_vadd_vx_u32{}(__riscv_vid_v_u32{}(vl), (uint32_t)({} + {}), vl);\n", indent,
                         L.u32(), L.name(), L.name(), base, j);
        index_made = true;
      }
      std::string idx = "gi";
      if (node.index.div != 1) idx = fmt::format("__riscv_vdivu_vx_u32{}({}, {}u, vl)", L.name(), idx, node.index.div);
      idx = fmt::format("__riscv_vremu_vx_u32{}({}, {}u, vl)", L.name(), idx, node.index.mod);
      s += fmt::format("{}{} {} = __riscv_vluxei32_v_f32{}({}, __riscv_vsll_vx_u32{}({}, 2, vl), vl);\n", indent,
                       L.f32(), name, L.name(), tensor_name(node), L.name(), idx);
    }
    names[r] = name;
    loaded_in[r] = epoch;
  };
  for (size_t i = 0; i < n; ++i) {
    const ExprNode& node = e_.nodes[i];
    if (!reach_[i] || uniform_[i] || fused_[i] || is_leaf(node) || node.kind == ExprNode::Kind::Acc) continue;
    for (int a : node.args) {
      ensure_leaf(a);
      if (fused_[a])
        for (int b : e_.nodes[a].args) ensure_leaf(b);
    }
    std::string pre;
    std::string expr = vector_op(static_cast<int>(i), acc, names, &pre);
    if (!pre.empty()) s += indent + pre + "\n";
    s += fmt::format("{}{} v{} = {};\n", indent, L.f32(), i, expr);
    if (helper_ops().count(node.op)) ++epoch;
  }
  std::string r;
  if (e_.empty()) {
    r = acc;
  } else if (uniform_[e_.root]) {
    r = fmt::format("{}({}, vl)", L.f("vfmv_v_f"), operand(e_.root, acc, names));
  } else {
    ensure_leaf(e_.root);
    r = operand(e_.root, acc, names);
  }
  s += fmt::format("{}{} {} = {};\n", indent, L.f32(), result, r);
  return s;
}

bool renderable(const Expr& e) {
  if (e.empty()) return true;
  const std::string text = render_expr(e, kC, [](const ExprNode&) { return std::string("x"); });
  return text.find("/* unknown op") == std::string::npos;
}

bool has_vector_form(const Expr& e) {
  for (const auto& n : e.nodes)
    if ((n.kind == ExprNode::Kind::Unary || n.kind == ExprNode::Kind::Binary) && !helper_ops().count(n.op) &&
        !vector_ops().count(n.op))
      return false;
  return true;
}

std::string scalar_loop(const Expr& e, const std::string& begin, const std::string& end, const std::string& acc_array,
                        const std::string& indent) {
  auto leaf = [&](const ExprNode& n) {
    if (n.kind == ExprNode::Kind::Acc) return acc_array + "[i]";
    return tensor_name(n) + "[" + leaf_index(n.index, "i") + "]";
  };
  return fmt::format("{}for (int64_t i = {}; i < {}; ++i) out[i] = (float)({});\n", indent, begin, end,
                     render_expr(e, kC, leaf));
}

void add_expr_actions(const VectorExpr& ve, std::vector<std::string>* actions) {
  auto add = [&](const char* id) {
    if (std::find(actions->begin(), actions->end(), id) == actions->end()) actions->push_back(id);
  };
  if (ve.uses_scalar_operands()) add("rvv.scalar-operand-forms");
  if (ve.uses_fma()) add("rvv.fused-multiply-add");
  if (ve.uses_mask()) add("rvv.masking-if-conversion");
  for (const char* h : {"exp", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "softplus"})
    if (ve.helpers().count(h)) add("rvv.exp-polynomial");
}

}  // namespace mblast::policy::rvv
