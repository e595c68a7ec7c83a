// OpenCL elementwise kernels: the whole expression in one kernel (nothing is written between
// operations), over a grid of coarsening, vector width and work-group size.
//
//   scalar  `ept` elements per work-item, strided by the number of work-items so that
//           neighbouring work-items touch neighbouring elements (coalesced on GPUs; PoCL
//           vectorises across work-items);
//   vector  `vec` consecutive elements per work-item through vloadN / vstoreN where a leaf's
//           index map keeps the lanes contiguous (a broadcast leaf is loaded once, any other is
//           gathered), the expression evaluated per lane or on floatN values at once, a
//           scalar tail.
// Work-group sizes: NULL (the implementation's choice), fixed, or chosen at preparation from
// the kernel's CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE and CL_KERNEL_WORK_GROUP_SIZE.
#include <algorithm>

#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

using gpu::LeafAccess;

int op_count(const Expr& e) {
  int n = 0;
  for (const auto& node : e.nodes) n += node.kind == ExprNode::Kind::Unary || node.kind == ExprNode::Kind::Binary;
  return n;
}

std::vector<std::string> common_actions(const KernelPlan& plan, const Problem& problem) {
  std::vector<std::string> a;
  if (op_count(plan.expr) >= 2) a.push_back("opencl.kernel-fusion");
  if (gpu::fits_int32(plan, problem)) a.push_back("opencl.32bit-index-math");
  return a;
}

std::string wg_text(int wg) { return wg == 0 ? "auto" : wg < 0 ? "kernel-info" : std::to_string(wg); }
nlohmann::json wg_param(int wg) { return wg > 0 ? nlohmann::json(wg) : nlohmann::json(wg_text(wg)); }

void set_wg(Launch& l, int wg) {
  if (wg > 0) l.local[0] = wg;
  if (wg < 0) l.local_from_kernel_info = true;
}

// ept elements per work-item, element i = g + j * items.
Design scalar_variant(const KernelPlan& plan, const Problem& problem, int ept, int wg) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const int64_t n = plan.out_numel;
  const int64_t items = gpu::ceil_div(n, ept);
  std::string k;
  k += fmt::format("#define N {}\n#define ITEMS {}\n\n", n, items);
  k += "__kernel void mb_elementwise(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} g = ({0})get_global_id(0);\n", idx);
  k += "  if (g >= ITEMS) return;\n";
  for (int j = 0; j < ept; ++j) {
    const bool guard = int64_t{j} * items + (items - 1) >= n;  // the last work-item may run past N
    k += fmt::format("  {{\n    const {} i = g + {};\n", idx,
                     int64_t{j} * items);  // a literal: j * ITEMS could overflow int
    k += std::string("    ") + (guard ? "if (i < N) " : "") + "out[i] = " + gpu::render_at(plan, kOpenCL, "i", "acc") +
         ";\n  }\n";
  }
  k += "}\n";

  Design d;
  d.family = "opencl.elementwise.scalar";
  d.params = {{"ept", ept}, {"wg", wg_param(wg)}};
  d.description =
      fmt::format("one fused kernel, {} element(s) per work-item (strided), work-group {}", ept, wg_text(wg));
  if (ept > 1) d.actions.push_back("opencl.thread-coarsening");
  d.actions.push_back("opencl.coalesced-access");  // neighbouring work-items touch neighbouring elements
  if (wg < 0) d.actions.push_back("opencl.work-group-size-from-kernel-info");
  for (auto& a : common_actions(plan, problem)) d.actions.push_back(a);
  d.kernels = k;
  Launch l;
  l.kernel = "mb_elementwise";
  l.global = {items, 1, 1};
  set_wg(l, wg);
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

// vec consecutive elements per work-item; the expression per lane (`vector_math` false) or on
// floatN values at once (OpenCL's built-ins are vectorised: on a CPU device one call covers
// every lane).
// `poly_erf`: erf (GELU) by poly_erf_source's polynomial, in every lane and the tail, instead of
// OpenCL's erf.
Design vector_variant(const KernelPlan& plan, const Problem& problem, int vec, int wg, bool vector_math,
                      bool poly_erf = false) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const int64_t n = plan.out_numel;
  const int64_t items = gpu::ceil_div(n, vec);
  const std::string vt = "float" + std::to_string(vec);
  const LaneLeaves leaves(plan, vec, poly_erf ? poly_erf_name(vector_math ? vec : 1) : "");
  Dialect scalar = kOpenCL;
  if (poly_erf) scalar.erf_function = poly_erf_name(1);

  std::string k;
  k += fmt::format("#define N {}\n#define ITEMS {}\n\n", n, items);
  if (poly_erf) k += poly_erf_source(1) + (vector_math ? poly_erf_source(vec) : "") + "\n";
  k += "__kernel void mb_elementwise(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} g = ({0})get_global_id(0);\n", idx);
  k += "  if (g >= ITEMS) return;\n";
  k += fmt::format("  const {} base = g * {};\n", idx, vec);
  const bool tail = n % vec != 0;
  if (tail) k += fmt::format("  if (base + {} <= N) {{\n", vec);
  const std::string in = tail ? "    " : "  ";
  k += leaves.loads("base", in);
  if (vector_math) {
    k += fmt::format("{}const {} r = {};\n", in, vt, leaves.vector_expr("base", "acc"));
    k += fmt::format("{}vstore{}(r, 0, out + base);\n", in, vec);
  } else {
    std::string rs;
    for (int lane = 0; lane < vec; ++lane) {
      k += fmt::format("{}const float r{} = {};\n", in, lane, leaves.lane_expr(lane, "base", "acc"));
      rs += (lane ? ", r" : "r") + std::to_string(lane);
    }
    k += fmt::format("{}vstore{}(({})({}), 0, out + base);\n", in, vec, vt, rs);
  }
  if (tail) {
    k += "  } else {\n";
    k += fmt::format("    for ({} i = base; i < N; ++i) out[i] = {};\n", idx, gpu::render_at(plan, scalar, "i", "acc"));
    k += "  }\n";
  }
  k += "}\n";

  Design d;
  d.family = "opencl.elementwise.vector";
  d.params = {{"vec", vec}, {"wg", wg_param(wg)}, {"math", vector_math ? "vector" : "lanes"}};
  if (poly_erf) d.params["erf"] = "polynomial";
  d.description = fmt::format(
      "one fused kernel, {} consecutive elements per work-item through vload{}/vstore{}, {}{}, work-group {}", vec, vec,
      vec, vector_math ? "math on float" + std::to_string(vec) + " values" : "math per lane",
      poly_erf ? ", erf by a polynomial (Abramowitz & Stegun 7.1.26, |error| <= 5.3e-7 in float32)" : "", wg_text(wg));
  d.actions = {"opencl.vector-load-store-128bit", "opencl.thread-coarsening"};
  if (poly_erf) d.actions.push_back("opencl.polynomial-erf");
  if (wg < 0) d.actions.push_back("opencl.work-group-size-from-kernel-info");
  for (auto& a : common_actions(plan, problem)) d.actions.push_back(a);
  d.kernels = k;
  Launch l;
  l.kernel = "mb_elementwise";
  l.global = {items, 1, 1};
  set_wg(l, wg);
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

}  // namespace

LaneLeaves::LaneLeaves(const KernelPlan& plan, int width, const std::string& erf_function)
    : plan_(plan), width_(width), dialect_(kOpenCL) {
  dialect_.erf_function = erf_function;
  for (const auto& node : plan.expr.nodes) {
    if (node.kind != ExprNode::Kind::Input && node.kind != ExprNode::Kind::Param) continue;
    if (find(node)) continue;
    leaves_.push_back({node.kind == ExprNode::Kind::Param, node.tensor, node.index,
                       "lf" + std::to_string(leaves_.size()), gpu::leaf_access(node.index, plan.out_numel, width)});
  }
}

const LaneLeaves::Leaf* LaneLeaves::find(const ExprNode& n) const {
  for (const auto& l : leaves_)
    if (l.is_param == (n.kind == ExprNode::Kind::Param) && l.tensor == n.tensor && l.map.div == n.index.div &&
        l.map.mod == n.index.mod)
      return &l;
  return nullptr;
}

std::string LaneLeaves::loads(const std::string& base, const std::string& indent) const {
  std::string s;
  for (const auto& l : leaves_) {
    const std::string buf = gpu::buffer_name({l.is_param, l.tensor});
    if (l.access == LeafAccess::Contiguous)
      s += fmt::format("{}const float{} {} = vload{}(0, {} + {});\n", indent, width_, l.var, width_, buf,
                       gpu::leaf_index(l.map, plan_.out_numel, base));
    else if (l.access == LeafAccess::Broadcast)
      s += fmt::format("{}const float {} = {}[{}];\n", indent, l.var, buf,
                       gpu::leaf_index(l.map, plan_.out_numel, base));
  }
  return s;
}

std::string LaneLeaves::lane_expr(int lane, const std::string& base, const std::string& acc) const {
  if (plan_.expr.empty()) return acc;
  return render_expr(plan_.expr, dialect_, [&](const ExprNode& node) -> std::string {
    if (node.kind == ExprNode::Kind::Acc) return acc;
    const Leaf* l = find(node);
    if (l->access == LeafAccess::Contiguous) return l->var + ".s" + kLane[lane];
    if (l->access == LeafAccess::Broadcast) return l->var;
    return gpu::buffer_name({l->is_param, l->tensor}) + "[" +
           gpu::leaf_index(l->map, plan_.out_numel, fmt::format("({} + {})", base, lane)) + "]";
  });
}

std::string LaneLeaves::store(const std::string& base, const std::string& acc, const std::string& indent) const {
  return loads(base, indent) +
         fmt::format("{}vstore{}({}, 0, out + {});\n", indent, width_, vector_expr(base, acc), base);
}

std::string LaneLeaves::vector_expr(const std::string& base, const std::string& acc) const {
  if (plan_.expr.empty()) return acc;
  // Built-ins take (floatN, float) but not (float, floatN): a constant first argument of max /
  // min goes second (both are symmetric).
  Expr e = plan_.expr;
  for (auto& node : e.nodes)
    if (node.kind == ExprNode::Kind::Binary && (node.op == "max" || node.op == "min") &&
        e.nodes[static_cast<size_t>(node.args[0])].kind == ExprNode::Kind::Const)
      std::swap(node.args[0], node.args[1]);
  const std::string vt = "float" + std::to_string(width_);
  return render_expr(e, dialect_, [&](const ExprNode& node) -> std::string {
    if (node.kind == ExprNode::Kind::Acc) return acc;
    const Leaf* l = find(node);
    if (l->access == LeafAccess::Contiguous) return l->var;
    if (l->access == LeafAccess::Broadcast) return "((" + vt + ")(" + l->var + "))";
    std::string g = "((" + vt + ")(";
    for (int lane = 0; lane < width_; ++lane)
      g += (lane ? ", " : "") + gpu::buffer_name({l->is_param, l->tensor}) + "[" +
           gpu::leaf_index(l->map, plan_.out_numel, fmt::format("({} + {})", base, lane)) + "]";
    return g + "))";
  });
}

std::vector<Design> elementwise_designs(const KernelPlan& plan, const Problem& problem) {
  std::vector<Design> v;
  // wg: 0 = NULL (the implementation picks), -1 = from the kernel's info, else fixed.
  for (int ept : {1, 4, 16})
    for (int wg : {0, 256}) v.push_back(scalar_variant(plan, problem, ept, wg));
  v.push_back(scalar_variant(plan, problem, 4, -1));
  for (int vec : {4, 8, 16})
    for (int wg : {0, 64, 256, -1}) v.push_back(vector_variant(plan, problem, vec, wg, false));
  // Math on floatN values, widest first, goes first on a CPU device: PoCL calls a vectorised
  // Sleef routine for the whole vector, but a scalar one per element otherwise (seed action
  // opencl.cpu-vector-math has the figures).
  //
  // GELU's erf is then still most of the time, and PyTorch's CPU GELU is faster: a polynomial erf
  // and one exp, before the built-in erf on a CPU (benchmarks/results/policy-design-figures.json,
  // opencl-polynomial-erf).
  const bool erf = uses_erf(plan.expr);
  for (bool poly : {true, false})
    for (int vec : {16, 8, 4})
      for (int wg : {0, 256})
        if (!poly || (erf && vec >= 8)) {
          v.push_back(vector_variant(plan, problem, vec, wg, true, poly));
          v.back().cpu_first = true;
        }
  return v;
}

bool uses_erf(const Expr& e) {
  return std::any_of(e.nodes.begin(), e.nodes.end(), [](const ExprNode& n) { return n.op == "gelu"; });
}

std::string poly_erf_name(int width) { return "mb_erf" + std::to_string(width); }

std::string poly_erf_source(int width) {
  const std::string t = width == 1 ? "float" : "float" + std::to_string(width);
  return fmt::format(
      "// erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7; 5.3e-7 in float32): 1 - t (a1 + t (a2 + t (a3 + t (a4 "
      "+ t a5)))) e^(-x^2),\n"
      "// t = 1 / (1 + p |x|), with the sign of x.\n"
      "static inline {0} {1}(const {0} x) {{\n"
      "  const {0} a = fabs(x);\n"
      "  const {0} t = 1.0f / (1.0f + 0.3275911f * a);\n"
      "  const {0} q = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * "
      "1.061405429f))));\n"
      "  return copysign(1.0f - q * exp(-a * a), x);\n"
      "}}\n",
      t, poly_erf_name(width));
}

}  // namespace mblast::policy::opencl
