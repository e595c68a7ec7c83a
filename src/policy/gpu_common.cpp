// Shared pieces of the OpenCL and CUDA generators (gpu_common.h).
#include "gpu_common.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace mblast::policy::gpu {

namespace {

const std::vector<TensorSpec>& list_of(const Problem& p, bool is_param) { return is_param ? p.parameters : p.inputs; }

const TensorSpec* spec_of(const Problem& p, const TensorRef& t) {
  const auto& list = list_of(p, t.is_param);
  if (t.index < 0 || static_cast<size_t>(t.index) >= list.size()) return nullptr;
  return &list[static_cast<size_t>(t.index)];
}

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A C string literal's contents: tensor names are identifiers with dots, but be safe.
std::string c_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r;
}

std::string shape_list(const std::vector<int64_t>& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r;
}

const std::set<std::string> kKinds = {"elementwise", "reduce", "softmax", "log_softmax",    "layernorm",
                                      "matmul",      "pool",   "conv",    "conv_transpose", "gather",
                                      "cumsum",      "argmax", "row_map"};
const std::set<std::string> kReduceOps = {"sum", "mean", "max", "min"};

}  // namespace

std::string buffer_name(const TensorRef& t) { return (t.is_param ? "par" : "in") + std::to_string(t.index); }

std::vector<TensorRef> expr_tensors(const KernelPlan& plan) {
  std::vector<TensorRef> v;
  for (const auto& t : plan_tensors(plan))
    for (const auto& node : plan.expr.nodes)
      if ((node.kind == ExprNode::Kind::Input || node.kind == ExprNode::Kind::Param) && node.tensor == t.index &&
          (node.kind == ExprNode::Kind::Param) == t.is_param) {
        v.push_back(t);
        break;
      }
  return v;
}

std::vector<TensorRef> plan_tensors(const KernelPlan& plan) {
  std::vector<TensorRef> r;
  auto add = [&](TensorRef t) {
    if (t.index >= 0 && std::find(r.begin(), r.end(), t) == r.end()) r.push_back(t);
  };
  if (plan.kind == "chain") {  // the problem tensors any stage reads; temporaries are not among them
    for (const auto& stage : plan.stages)
      for (const auto& t : plan_tensors(stage))
        if (t.is_param || t.index < plan.first_temp) add(t);
    return r;
  }
  if (is_row_kind(plan.kind) || plan.kind == "row_map" || plan.kind == "pool" || is_conv_kind(plan.kind) ||
      plan.kind == "gather" || plan.kind == "cumsum" || plan.kind == "argmax")
    add({false, plan.source});
  if (is_conv_kind(plan.kind)) add({plan.conv_weight_is_param, plan.conv_weight});
  if (plan.kind == "matmul") {
    add({plan.a_is_param, plan.a});
    add({plan.b_is_param, plan.b});
  }
  for (const auto& n : plan.expr.nodes) {
    if (n.kind == ExprNode::Kind::Input) add({false, n.tensor});
    if (n.kind == ExprNode::Kind::Param) add({true, n.tensor});
  }
  return r;
}

bool pool_fits(const KernelPlan& plan, const Problem& problem) {
  if (plan.kind != "pool" || (plan.pool_op != "max" && plan.pool_op != "avg")) return false;
  const PoolShape& p = plan.pool;
  const auto* x = spec_of(problem, {false, plan.source});
  if (!x || x->dtype != DType::f32 || static_cast<int64_t>(x->numel()) != p.planes * p.h * p.w) return false;
  if (p.kh < 1 || p.kw < 1 || p.sh < 1 || p.sw < 1 || p.dh < 1 || p.dw < 1 || p.ph < 0 || p.pw < 0) return false;
  if (p.out_h != window_out(p.h, p.kh, p.sh, p.ph, p.dh) || p.out_w != window_out(p.w, p.kw, p.sw, p.pw, p.dw))
    return false;
  return p.out_h >= 1 && p.out_w >= 1 && plan.out_numel == p.planes * p.out_h * p.out_w;
}

std::string pool_window(const KernelPlan& plan, const std::string& x, const std::string& i, const std::string& idx,
                        const std::string& indent, const std::string& space) {
  const PoolShape& p = plan.pool;
  const bool is_max = plan.pool_op == "max";
  const std::string in = indent + "  ", in2 = indent + "    ";
  std::string s;
  s += fmt::format("{}const {} plane = {} / {}, ohw = {} % {};\n", indent, idx, i, p.out_h * p.out_w, i,
                   p.out_h * p.out_w);
  s += fmt::format("{}const {} oh = ohw / {}, ow = ohw % {};\n", indent, idx, p.out_w, p.out_w);
  s += fmt::format("{}const {}float* xp = {} + plane * {};\n", indent, space, x, p.h * p.w);
  s += fmt::format("{}float acc = {};\n", indent, is_max ? "-INFINITY" : "0.0f");
  if (!is_max && !p.count_include_pad) s += indent + "int count = 0;\n";
  s += fmt::format("{}for (int r = 0; r < {}; ++r) {{\n", indent, p.kh);
  s += fmt::format("{}const {} ih = oh * {} - {} + r * {};\n", in, idx, p.sh, p.ph, p.dh);
  s += fmt::format("{}if (ih < 0 || ih >= {}) continue;\n", in, p.h);
  s += fmt::format("{}for (int c = 0; c < {}; ++c) {{\n", in, p.kw);
  s += fmt::format("{}const {} iw = ow * {} - {} + c * {};\n", in2, idx, p.sw, p.pw, p.dw);
  s += fmt::format("{}if (iw < 0 || iw >= {}) continue;\n", in2, p.w);
  s += fmt::format("{}const float v = xp[ih * {} + iw];\n", in2, p.w);
  if (is_max)
    s += in2 + "acc = (v > acc || v != v) ? v : acc;  // NaN propagates, as in PyTorch\n";
  else
    s += in2 + "acc += v;\n" + (p.count_include_pad ? "" : in2 + "++count;\n");
  s += in + "}\n" + indent + "}\n";
  if (!is_max) {
    if (p.count_include_pad)
      s += fmt::format("{}acc = acc / {}.0f;  // PyTorch divides the sum\n", indent, p.kh * p.kw);
    else
      s += indent + "acc = count > 0 ? acc / (float)count : 0.0f;\n";
  }
  return s;
}

bool conv_fits(const KernelPlan& plan, const Problem& problem) {
  if (!is_conv_kind(plan.kind)) return false;
  const ConvShape& c = plan.conv;
  const auto* x = spec_of(problem, {false, plan.source});
  const auto* w = spec_of(problem, {plan.conv_weight_is_param, plan.conv_weight});
  if (!x || !w || x->dtype != DType::f32 || w->dtype != DType::f32) return false;
  if (c.groups < 1 || c.cin % c.groups || c.cout % c.groups) return false;
  if (static_cast<int64_t>(x->numel()) != c.n * c.cin * c.h * c.w) return false;
  if (static_cast<int64_t>(w->numel()) != c.cout * (c.cin / c.groups) * c.kh * c.kw) return false;  // either layout
  if (c.kh < 1 || c.kw < 1 || c.sh < 1 || c.sw < 1 || c.dh < 1 || c.dw < 1 || c.ph < 0 || c.pw < 0 || c.pw_end() < 0)
    return false;
  if (plan.kind == "conv_transpose") {  // output_padding: 0 <= extra < max(stride, dilation), no uneven padding
    const int64_t eh = c.out_h - transposed_out(c.h, c.kh, c.sh, c.ph, c.dh),
                  ew = c.out_w - transposed_out(c.w, c.kw, c.sw, c.pw, c.dw);
    if (!c.symmetric() || eh < 0 || ew < 0 || eh >= std::max(c.sh, c.dh) || ew >= std::max(c.sw, c.dw)) return false;
  } else if (c.out_h != window_out(c.h, c.kh, c.sh, c.ph, c.dh) ||
             c.out_w != window_out(c.w, c.kw, c.sw, c.pw, c.dw, c.pw_end())) {
    return false;
  }
  return c.out_h >= 1 && c.out_w >= 1 && plan.out_numel == c.n * c.cout * c.out_h * c.out_w;
}

std::string conv_window(const KernelPlan& plan, const std::string& x, const std::string& wt, const std::string& i,
                        const std::string& idx, const std::string& indent, const std::string& space) {
  const ConvShape& c = plan.conv;
  const int64_t cig = c.cin / c.groups, cog = c.cout / c.groups, ohw = c.out_h * c.out_w;
  const std::string in = indent + "  ", in2 = indent + "    ", in3 = indent + "      ";
  std::string s;
  s += fmt::format("{}const {} n = {} / {}, co = ({} / {}) % {};\n", indent, idx, i, c.cout * ohw, i, ohw, c.cout);
  s += fmt::format("{}const {} oh = ({} % {}) / {}, ow = {} % {};\n", indent, idx, i, ohw, c.out_w, i, c.out_w);
  s += fmt::format("{}const {}float* xg = {} + (n * {} + co / {} * {}) * {};  // the group's first input channel\n",
                   indent, space, x, c.cin, cog, cig, c.h * c.w);
  s += fmt::format("{}const {}float* wg = {} + co * {};\n", indent, space, wt, cig * c.kh * c.kw);
  s += indent + "float acc = 0.0f;\n";
  s += fmt::format("{}for (int ci = 0; ci < {}; ++ci) {{\n", indent, cig);
  s += fmt::format("{}for (int r = 0; r < {}; ++r) {{\n", in, c.kh);
  s += fmt::format("{}const {} ih = oh * {} - {} + r * {};\n", in2, idx, c.sh, c.ph, c.dh);
  s += fmt::format("{}if (ih < 0 || ih >= {}) continue;\n", in2, c.h);
  s += fmt::format("{}for (int q = 0; q < {}; ++q) {{\n", in2, c.kw);
  s += fmt::format("{}const {} iw = ow * {} - {} + q * {};\n", in3, idx, c.sw, c.pw, c.dw);
  s += fmt::format("{}if (iw >= 0 && iw < {}) acc += xg[ci * {} + ih * {} + iw] * wg[(ci * {} + r) * {} + q];\n", in3,
                   c.w, c.h * c.w, c.w, c.kh, c.kw);
  s += in2 + "}\n" + in + "}\n" + indent + "}\n";
  return s;
}

std::string conv_transpose_window(const KernelPlan& plan, const std::string& x, const std::string& wt,
                                  const std::string& i, const std::string& idx, const std::string& indent,
                                  const std::string& space) {
  const ConvShape& c = plan.conv;
  const int64_t cig = c.cin / c.groups, cog = c.cout / c.groups, taps = c.kh * c.kw;
  const std::string in = indent + "  ", in2 = indent + "    ", in3 = indent + "      ";
  std::string s;
  s += fmt::format("{0}const {1} ow = {2} % {3}, oh = ({2} / {3}) % {4}, co = ({2} / {5}) % {6}, n = {2} / {7};\n",
                   indent, idx, i, c.out_w, c.out_h, c.out_w * c.out_h, c.cout, c.out_w * c.out_h * c.cout);
  s += fmt::format("{}const {} g = co / {}, col = co % {};\n", indent, idx, cog, cog);
  s += fmt::format("{}const {}float* xg = {} + (n * {} + g * {}) * {};  // the group's first input channel\n", indent,
                   space, x, c.cin, cig, c.h * c.w);
  s += fmt::format(
      "{}const {}float* wg = {} + (g * {} + col) * {};  // w[g * {} + cj, col, r, q] at wg[cj * {} + r * {} + q]\n",
      indent, space, wt, cig * cog, taps, cig, cog * taps, c.kw);
  s += indent + "float acc = 0.0f;\n";
  s += fmt::format("{}for (int cj = 0; cj < {}; ++cj) {{\n", indent, cig);
  s += fmt::format("{}for (int r = 0; r < {}; ++r) {{\n", in, c.kh);
  s += fmt::format("{}const {} th = oh + {} - r * {};  // input row th / {} scatters onto oh through tap r\n", in2, idx,
                   c.ph, c.dh, c.sh);
  s += fmt::format("{}if (th < 0 || th % {} != 0 || th / {} >= {}) continue;\n", in2, c.sh, c.sh, c.h);
  s += fmt::format("{}for (int q = 0; q < {}; ++q) {{\n", in2, c.kw);
  s += fmt::format("{}const {} tw = ow + {} - q * {};\n", in3, idx, c.pw, c.dw);
  s += fmt::format(
      "{}if (tw >= 0 && tw % {} == 0 && tw / {} < {}) acc += xg[cj * {} + (th / {}) * {} + tw / {}] * wg[cj * {} + r * "
      "{} + q];\n",
      in3, c.sw, c.sw, c.w, c.h * c.w, c.sh, c.w, c.sw, cog * taps, c.kw);
  s += in2 + "}\n" + in + "}\n" + indent + "}\n";
  return s;
}

bool argmax_fits(const KernelPlan& plan, const Problem& problem) {
  if (plan.kind != "argmax" || !plan.expr.is_identity_epilogue()) return false;
  const ReduceShape& r = plan.rshape;
  const auto* x = spec_of(problem, {false, plan.source});
  return x && x->dtype == DType::f32 && problem.outputs.size() == 1 && problem.outputs[0].dtype == DType::i64 &&
         r.outer >= 1 && r.reduce >= 1 && r.inner >= 1 &&
         static_cast<int64_t>(x->numel()) == r.outer * r.reduce * r.inner && plan.out_numel == r.outer * r.inner &&
         r.reduce < (int64_t{1} << 31);
}

std::string argmax_better() {
  return "// PyTorch's argmax: the first maximum, a NaN larger than anything (the first NaN wins).\n"
         "#define MB_TAKES(v, i, bv, bi) (((v) != (v)) ? ((bv) == (bv) || (i) < (bi)) : ((bv) == (bv) && ((v) > (bv) "
         "|| ((v) == (bv) && (i) < (bi)))))\n";
}

std::string argmax_column(const KernelPlan& plan, const std::string& x, const std::string& i64,
                          const std::string& suffix, const std::string& indent) {
  const ReduceShape& r = plan.rshape;
  std::string s;
  s += fmt::format("{0}const {1} o = c / {2}, in = c % {2};\n", indent, i64, r.inner);
  s += fmt::format("{}float bv = -INFINITY;\n{}{} bi = 0x7fffffffffffffff{};\n", indent, indent, i64, suffix);
  s += fmt::format("{}for ({} j = 0; j < {}; ++j) {{\n", indent, i64, r.reduce);
  s += fmt::format("{}  const float v = {}[(o * {} + j) * {} + in];\n", indent, x, r.reduce, r.inner);
  s += fmt::format("{0}  if (MB_TAKES(v, j, bv, bi)) {{\n{0}    bv = v;\n{0}    bi = j;\n{0}  }}\n{0}}}\n", indent);
  s += indent + "out[c] = bi;\n";
  return s;
}

bool scan_fits(const KernelPlan& plan, const Problem& problem) {
  if (plan.kind != "cumsum") return false;
  const ReduceShape& r = plan.rshape;
  const auto* x = spec_of(problem, {false, plan.source});
  return x && x->dtype == DType::f32 && r.outer >= 1 && r.reduce >= 1 && r.inner >= 1 &&
         static_cast<int64_t>(x->numel()) == r.outer * r.reduce * r.inner &&
         plan.out_numel == r.outer * r.reduce * r.inner;
}

std::string scan_column(const KernelPlan& plan, const Dialect& d, const std::string& x, const std::string& c,
                        const std::string& idx, const std::string& indent) {
  const ReduceShape& r = plan.rshape;
  std::string s;
  s += fmt::format("{}const {} o = {} / {}, in = {} % {};\n", indent, idx, c, r.inner, c, r.inner);
  s += indent + "float acc = 0.0f, comp = 0.0f;  // Kahan: comp is what acc lost to rounding\n";
  s += fmt::format("{}for ({} j = 0; j < {}; ++j) {{\n", indent, idx, r.reduce);
  s += fmt::format("{}  const {} i = (o * {} + j) * {} + in;\n", indent, idx, r.reduce, r.inner);
  s += fmt::format("{}  const float y = {}[i] - comp, t = acc + y;\n", indent, x);
  s += indent + "  comp = (t - acc) - y;\n" + indent + "  acc = t;\n";
  s += fmt::format("{}  out[i] = {};\n{}}}\n", indent, render_at(plan, d, "i", "acc"), indent);
  return s;
}

std::string scan_tile_parts(const Dialect& d, const std::string& indent) {
  std::string s = indent + "float part[V];\n" + indent + "float run = 0.0f;\n";
  if (d.name == "cuda") s += "#pragma unroll\n";
  s += indent + "for (int j = 0; j < V; ++j) {\n";
  s += indent + "  run += first + j < L ? xr[first + j] : 0.0f;\n" + indent + "  part[j] = run;\n" + indent + "}\n";
  return s;
}

std::string scan_tile_store(const KernelPlan& plan, const Dialect& d, const std::string& idx,
                            const std::string& indent) {
  std::string s;
  if (d.name == "cuda") s += "#pragma unroll\n";
  s += indent + "for (int j = 0; j < V; ++j) {\n";
  s += fmt::format("{}  const {} i = row * L + first + j;\n", indent, idx);
  s += indent + "  const float acc = before + (part[j] + lo);\n";
  s += fmt::format("{}  if (first + j < L) out[i] = {};\n{}}}\n", indent, render_at(plan, d, "i", "acc"), indent);
  return s;
}

bool gather_fits(const KernelPlan& plan, const Problem& problem) {
  if (plan.kind != "gather") return false;
  const auto& shape = plan.gather_shape;
  const auto& st = plan.gather_strides;
  const auto* x = spec_of(problem, {false, plan.source});
  if (!x || x->dtype != DType::f32 || shape.empty() || st.size() != shape.size() || plan.gather_offset < 0)
    return false;
  int64_t last = plan.gather_offset;  // the largest element read
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1 || st[d] < 0) return false;
    last += (shape[d] - 1) * st[d];
  }
  return last < static_cast<int64_t>(x->numel()) && plan.out_numel == numel_of(shape);
}

std::string gather_source_offset(const KernelPlan& plan, const std::string& i, const std::string& idx,
                                 const std::string& indent) {
  const auto& shape = plan.gather_shape;
  const auto& st = plan.gather_strides;
  std::string s = fmt::format("{}{} rest = {}, src = {};\n", indent, idx, i, plan.gather_offset);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (d == 0)
      s += fmt::format("{}src += rest * {};\n", indent, st[d]);
    else
      s += fmt::format("{}src += (rest % {}) * {};\n{}rest /= {};\n", indent, shape[d], st[d], indent, shape[d]);
  }
  return s + fmt::format("{}(void)rest;\n", indent);
}

std::string gather_window(const KernelPlan& plan, const std::string& x, const std::string& i, const std::string& idx,
                          const std::string& indent) {
  return gather_source_offset(plan, i, idx, indent) + fmt::format("{}float acc = {}[src];\n", indent, x);
}

bool plan_supported(const KernelPlan& plan, const Problem& problem) {
  if (!kKinds.count(plan.kind)) return false;
  if (problem.outputs.empty() || problem.outputs[0].dtype != (plan.kind == "argmax" ? DType::i64 : DType::f32))
    return false;
  if (plan.out_numel <= 0 || plan.out_numel != numel_of(problem.outputs[0].shape)) return false;
  for (const auto& t : plan_tensors(plan)) {
    const TensorSpec* s = spec_of(problem, t);
    if (!s || s->dtype != DType::f32) return false;
  }
  for (const auto& n : plan.expr.nodes) {
    const bool leaf = n.kind == ExprNode::Kind::Input || n.kind == ExprNode::Kind::Param;
    if (leaf && (n.index.div < 1 || n.index.mod < 1)) return false;
    if (leaf) {
      const TensorSpec* s = spec_of(problem, {n.kind == ExprNode::Kind::Param, n.tensor});
      // The leaf must stay inside its tensor: indices are < mod.
      if (!s || n.index.mod > static_cast<int64_t>(s->numel())) return false;
    }
  }
  if (!plan.expr.empty()) {
    const std::string probe = render_expr(plan.expr, kOpenCL, [](const ExprNode&) { return std::string("v"); });
    if (probe.find("unknown op") != std::string::npos) return false;
  }
  if (is_row_kind(plan.kind)) {
    const TensorSpec* x = spec_of(problem, {false, plan.source});
    const ReduceShape& r = plan.rshape;
    if (!x || r.outer < 1 || r.reduce < 1 || r.inner < 1) return false;
    if (r.outer * r.reduce * r.inner != static_cast<int64_t>(x->numel())) return false;
    if (plan.kind == "reduce" && (!kReduceOps.count(plan.reduce_op) || plan.out_numel != r.outer * r.inner))
      return false;
    if (plan.kind != "reduce" && plan.out_numel != r.outer * r.reduce * r.inner) return false;
    if (plan.kind == "layernorm" && (r.inner != 1 || !(plan.eps >= 0))) return false;
  }
  if (plan.kind == "row_map") {
    const TensorSpec* x = spec_of(problem, {false, plan.source});
    const ReduceShape& r = plan.rshape;
    if (!x || r.outer < 1 || r.reduce < 1 || r.inner != 1 || !kReduceOps.count(plan.reduce_op)) return false;
    if (r.outer * r.reduce != static_cast<int64_t>(x->numel()) || plan.out_numel != r.outer * r.reduce) return false;
  }
  if (plan.kind == "pool" && !pool_fits(plan, problem)) return false;
  if (is_conv_kind(plan.kind) && !conv_fits(plan, problem)) return false;
  if (plan.kind == "gather" && !gather_fits(plan, problem)) return false;
  if (plan.kind == "cumsum" && !scan_fits(plan, problem)) return false;
  if (plan.kind == "argmax" && !argmax_fits(plan, problem)) return false;
  if (plan.kind == "matmul") {
    if (plan.batch < 1 || plan.m < 1 || plan.n < 1 || plan.k < 1) return false;
    if (plan.out_numel != plan.batch * plan.m * plan.n) return false;
    const TensorSpec* a = spec_of(problem, {plan.a_is_param, plan.a});
    const TensorSpec* b = spec_of(problem, {plan.b_is_param, plan.b});
    if (!a || !b) return false;
    if (static_cast<int64_t>(a->numel()) != (plan.a_batched ? plan.batch : 1) * plan.m * plan.k) return false;
    if (static_cast<int64_t>(b->numel()) != (plan.b_batched ? plan.batch : 1) * plan.k * plan.n) return false;
  }
  return true;
}

bool fits_int32(const KernelPlan& plan, const Problem& problem) {
  constexpr int64_t kLimit = (int64_t{1} << 31) - (int64_t{1} << 20);  // room for rounding up and vector tails
  int64_t most = plan.out_numel;
  for (const auto& t : plan_tensors(plan))
    if (const TensorSpec* s = spec_of(problem, t)) most = std::max<int64_t>(most, static_cast<int64_t>(s->numel()));
  return most < kLimit;
}

std::string leaf_index(const IndexMap& m, int64_t out_numel, const std::string& i) {
  if (m.mod == 1) return "0";
  if (m.div == 1) return m.mod >= out_numel ? i : fmt::format("({} % {})", i, m.mod);
  // i / div < ceil(out_numel / div) <= mod: no modulo needed.
  if (ceil_div(out_numel, m.div) <= m.mod) return fmt::format("({} / {})", i, m.div);
  return fmt::format("(({} / {}) % {})", i, m.div, m.mod);
}

std::string render_at(const KernelPlan& plan, const Dialect& d, const std::string& i, const std::string& acc,
                      const std::string& source_element) {
  if (plan.expr.empty()) return acc;
  return render_expr(plan.expr, d, [&](const ExprNode& n) -> std::string {
    if (n.kind == ExprNode::Kind::Acc) return acc;
    if (!source_element.empty() && n.kind == ExprNode::Kind::Input && n.tensor == plan.source &&
        n.index.identity(plan.out_numel))
      return source_element;
    const TensorRef t{n.kind == ExprNode::Kind::Param, n.tensor};
    return buffer_name(t) + "[" + leaf_index(n.index, plan.out_numel, i) + "]";
  });
}

bool expr_has_ops(const Expr& e) {
  for (const auto& n : e.nodes)
    if (n.kind == ExprNode::Kind::Unary || n.kind == ExprNode::Kind::Binary) return true;
  return false;
}

LeafAccess leaf_access(const IndexMap& m, int64_t out_numel, int width) {
  if (m.mod == 1) return LeafAccess::Broadcast;
  if (m.div == 1 && (m.mod >= out_numel || m.mod % width == 0)) return LeafAccess::Contiguous;
  if (m.div % width == 0) return LeafAccess::Broadcast;
  return LeafAccess::Gather;
}

std::string params_text(const nlohmann::json& params) { return params.dump(); }

std::string header_comment(const std::string& family, const nlohmann::json& params, const KernelPlan& plan,
                           const Problem& problem, const std::string& what) {
  auto list = [](const std::vector<TensorSpec>& v) {
    std::string s;
    for (const auto& t : v)
      s += (s.empty() ? "" : ", ") + t.name + " " + std::string(dtype_name(t.dtype)) + " [" + shape_list(t.shape) + "]";
    return s.empty() ? std::string("none") : s;
  };
  std::string s;
  s += "// Generated by mblast's builtin policy: " + what + "\n";
  s += "// family:  " + family + "\n";
  s += "// params:  " + params_text(params) + "\n";
  s += "// plan:    " + plan.summary() + "\n";
  s += "// problem: " + problem.name + "; inputs " + list(problem.inputs) + "; parameters " + list(problem.parameters) +
       "; output " + list(problem.outputs) + "\n";
  s += "// Shapes are compiled in as constants; mblast_run rejects tensors of any other shape.\n";
  return s;
}

std::string host_shape_check(const Problem& problem, const std::string& fail_fmt) {
  std::string s;
  s += "// Every tensor must be exactly as the problem declares it: the kernels have its shapes compiled in.\n";
  s += "static int mb_check_one(const mblast_tensor& t, const char* role, const char* name, int dtype, size_t esize, "
       "int ndim,\n";
  s += "                        const long long* shape) {\n";
  s += "  if (static_cast<int>(t.dtype) != dtype) return " + fail_fmt +
       "(\"%s %s: dtype %d, expected %d\", role, name, static_cast<int>(t.dtype), dtype);\n";
  s += "  if (t.ndim != ndim) return " + fail_fmt +
       "(\"%s %s: %d dims, this candidate was generated for %d\", role, name, static_cast<int>(t.ndim), ndim);\n";
  s += "  size_t n = 1;\n";
  s += "  for (int d = 0; d < ndim; ++d) {\n";
  s += "    if (t.shape[d] != shape[d])\n";
  s += "      return " + fail_fmt +
       "(\"%s %s: dim %d is %lld, this candidate was generated for %lld\", role, name, d, static_cast<long "
       "long>(t.shape[d]), shape[d]);\n";
  s += "    n *= static_cast<size_t>(shape[d]);\n";
  s += "  }\n";
  s += "  if (t.data == nullptr || t.nbytes != n * esize)\n";
  s += "    return " + fail_fmt + "(\"%s %s: buffer of %zu bytes, expected %zu\", role, name, t.nbytes, n * esize);\n";
  s += "  return 0;\n";
  s += "}\n\n";
  s += "static int mb_check_tensors(const mblast_tensor* in, int32_t n_in, const mblast_tensor* par, int32_t n_par,\n";
  s += "                            const mblast_tensor* out, int32_t n_out) {\n";
  s += fmt::format("  if (n_in != {} || n_par != {} || n_out != {})\n", problem.inputs.size(),
                   problem.parameters.size(), problem.outputs.size());
  s += fmt::format(
      "    return {}(\"expected {} inputs, {} parameters, {} outputs; got %d, %d, %d\", static_cast<int>(n_in), "
      "static_cast<int>(n_par), static_cast<int>(n_out));\n",
      fail_fmt, problem.inputs.size(), problem.parameters.size(), problem.outputs.size());
  auto each = [&](const std::vector<TensorSpec>& v, const char* arr, const char* role) {
    for (size_t i = 0; i < v.size(); ++i) {
      const auto& t = v[i];
      s += fmt::format("  {{\n    static const long long shape[] = {{{}}};\n", shape_list(t.shape));
      s += fmt::format("    if (mb_check_one({}[{}], \"{}\", \"{}\", {}, {}, {}, shape) != 0) return -1;\n  }}\n", arr,
                       i, role, c_escape(t.name), static_cast<int>(t.dtype), dtype_size(t.dtype), t.shape.size());
    }
  };
  each(problem.inputs, "in", "input");
  each(problem.parameters, "par", "parameter");
  each(problem.outputs, "out", "output");
  s += "  return 0;\n}\n";
  return s;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string undefs(const std::string& code) {
  std::istringstream in(code);
  std::string line, out;
  while (std::getline(in, line)) {
    if (!line.starts_with("#define ")) continue;
    std::string name = line.substr(8);
    name = name.substr(0, name.find_first_of(" (\t"));
    out += "#undef " + name + "\n";
  }
  return out;
}

std::vector<std::vector<size_t>> chain_combinations(const std::vector<size_t>& sizes, const std::vector<double>& costs,
                                                    size_t cap) {
  std::vector<std::vector<size_t>> out;
  if (sizes.empty() || cap == 0) return out;
  for (size_t n : sizes)
    if (n == 0) return out;
  // The penalty of one step down each stage's list. Equal costs give exactly 1 each, so the
  // order is by the sum of the indices as before costs were known.
  std::vector<double> step(sizes.size(), 1.0);
  if (costs.size() == sizes.size()) {
    const double top = *std::max_element(costs.begin(), costs.end());
    for (size_t i = 0; i < sizes.size(); ++i)
      if (costs[i] > 0 && costs[i] < top) step[i] = std::min(std::sqrt(top / costs[i]), 1e6);
  }
  // Best first: the penalty is a sum of non-negative steps, so each combination's successors
  // (one index one further) cost no less, and a queue from the all-first combination yields
  // them in order. `seen` keeps a combination from being queued twice.
  using Entry = std::pair<double, std::vector<size_t>>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  std::set<std::vector<size_t>> seen;
  queue.push({0.0, std::vector<size_t>(sizes.size(), 0)});
  seen.insert(queue.top().second);
  while (!queue.empty() && out.size() < cap) {
    auto [penalty, combo] = queue.top();
    queue.pop();
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (combo[i] + 1 >= sizes[i]) continue;
      std::vector<size_t> next = combo;
      ++next[i];
      // The penalty is recomputed from the indices (not accumulated), so equal ones compare equal.
      double p = 0;
      for (size_t j = 0; j < next.size(); ++j) p += static_cast<double>(next[j]) * step[j];
      if (seen.insert(next).second) queue.push({p, std::move(next)});
    }
    out.push_back(std::move(combo));
  }
  return out;
}

std::vector<std::vector<size_t>> aligned_combinations(const std::vector<std::vector<nlohmann::json>>& params,
                                                      size_t cap) {
  const size_t stages = params.size();
  std::vector<std::string> order;                  // parameter values in order of first appearance
  std::map<std::string, std::vector<long>> first;  // value -> per stage, its first design with it (-1: none)
  for (size_t s = 0; s < stages; ++s) {
    if (params[s].empty()) return {};
    std::set<std::string> at_start;  // what the stage's first design has already
    const nlohmann::json start = params[s][0].is_object() ? params[s][0].flatten() : nlohmann::json::object();
    for (const auto& [key, value] : start.items()) at_start.insert(key + "=" + value.dump());
    auto start_has = [&](const std::string& key) { return start.contains(key); };
    for (size_t j = 1; j < params[s].size(); ++j) {
      if (!params[s][j].is_object()) continue;
      const nlohmann::json flat = params[s][j].flatten();
      for (const auto& [key, value] : flat.items()) {
        const std::string kv = key + "=" + value.dump();
        if (at_start.count(kv) || !start_has(key)) continue;  // only other values of the first design's parameters
        auto [it, fresh] = first.try_emplace(kv, std::vector<long>(stages, -1));
        if (fresh) order.push_back(kv);
        if (it->second[s] < 0) it->second[s] = static_cast<long>(j);
      }
    }
  }
  std::vector<std::vector<size_t>> out;
  for (const auto& kv : order) {
    if (out.size() >= cap) break;
    const auto& at = first[kv];
    if (std::count_if(at.begin(), at.end(), [](long j) { return j >= 0; }) < 2) continue;
    std::vector<size_t> combo(stages, 0);
    for (size_t s = 0; s < stages; ++s) combo[s] = at[s] >= 0 ? static_cast<size_t>(at[s]) : 0;
    if (std::find(out.begin(), out.end(), combo) == out.end()) out.push_back(std::move(combo));
  }
  return out;
}

std::vector<std::vector<size_t>> with_aligned(std::vector<std::vector<size_t>> combos,
                                              const std::vector<std::vector<size_t>>& aligned, size_t cap) {
  if (combos.empty()) return combos;
  std::vector<std::vector<size_t>> out = {combos.front()};
  for (const auto& a : aligned)
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  for (size_t i = 1; i < combos.size(); ++i)
    if (std::find(out.begin(), out.end(), combos[i]) == out.end()) out.push_back(std::move(combos[i]));
  if (out.size() > cap) out.resize(cap);
  return out;
}

}  // namespace mblast::policy::gpu
