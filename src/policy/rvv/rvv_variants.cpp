// Generators of rvv candidates for the builtin policy (include/mblast/policy/variants.h): the
// dispatch by plan kind and the parts every generated candidate shares (header, shape checks,
// tensor pointers, a separate epilogue pass).
#include <numeric>

#include <fmt/format.h>

#include "../gpu_common.h"
#include "rvv/rvv_codegen.h"

namespace mblast::policy {

namespace rvv {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return "[" + t + "]";
}

std::string check_one(const TensorSpec& t, const std::string& array, size_t index, const std::string& what) {
  std::string dims;
  for (size_t i = 0; i < t.shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (dims.empty()) dims = "0";
  return fmt::format(
      "  {{\n    static const int64_t s[] = {{{}}};\n"
      "    if (!mb_shape_is(&{}[{}], {}, {}, s)) {{\n      g_error = \"{} {}: expected {} {}\";\n      return 0;\n    "
      "}}\n  }}\n",
      dims, array, index, static_cast<int>(t.dtype), t.shape.size(), what, t.name, dtype_name(t.dtype),
      shape_text(t.shape));
}

std::string check_params_body(const Problem& p) {
  std::string s =
      fmt::format("  if (n_params != {}) {{\n    g_error = \"expected {} parameter(s)\";\n    return 0;\n  }}\n",
                  p.parameters.size(), p.parameters.size());
  for (size_t i = 0; i < p.parameters.size(); ++i) s += check_one(p.parameters[i], "params", i, "parameter");
  return s;
}

// The plan names tensors that exist, with the element counts its kind implies; every tensor
// it reads, and the output, is f32 (others, unread, are only shape-checked).
bool plan_fits(const KernelPlan& plan, const Problem& problem) {
  if (problem.outputs.size() != 1 || problem.outputs[0].dtype != (plan.kind == "argmax" ? DType::i64 : DType::f32))
    return false;
  auto f32 = [&](bool param, int i) {
    const auto& list = param ? problem.parameters : problem.inputs;
    return i >= 0 && i < static_cast<int>(list.size()) && list[i].dtype == DType::f32;
  };
  for (const auto& n : plan.expr.nodes)
    if ((n.kind == ExprNode::Kind::Input || n.kind == ExprNode::Kind::Param) &&
        !f32(n.kind == ExprNode::Kind::Param, n.tensor))
      return false;
  if ((is_row_kind(plan.kind) || plan.kind == "row_map" || plan.kind == "pool" || is_conv_kind(plan.kind) ||
       plan.kind == "gather" || plan.kind == "cumsum" || plan.kind == "argmax") &&
      !f32(false, plan.source))
    return false;
  if (plan.kind == "matmul" && (!f32(plan.a_is_param, plan.a) || !f32(plan.b_is_param, plan.b))) return false;
  const int64_t numel = static_cast<int64_t>(problem.outputs[0].numel());
  if (plan.out_numel != numel || numel <= 0 || numel >= (int64_t{1} << 31)) return false;
  for (const auto& n : plan.expr.nodes) {
    if (n.kind == ExprNode::Kind::Input && (n.tensor < 0 || n.tensor >= static_cast<int>(problem.inputs.size())))
      return false;
    if (n.kind == ExprNode::Kind::Param && (n.tensor < 0 || n.tensor >= static_cast<int>(problem.parameters.size())))
      return false;
    if ((n.kind == ExprNode::Kind::Input || n.kind == ExprNode::Kind::Param) && (n.index.div < 1 || n.index.mod < 1))
      return false;
  }
  auto tensor_numel = [&](bool param, int i) -> int64_t {
    const auto& list = param ? problem.parameters : problem.inputs;
    if (i < 0 || i >= static_cast<int>(list.size())) return -1;
    return static_cast<int64_t>(list[i].numel());
  };
  if (plan.kind == "elementwise") return !plan.expr.empty();
  if (plan.kind == "pool") return gpu::pool_fits(plan, problem);
  if (is_conv_kind(plan.kind)) return gpu::conv_fits(plan, problem);
  if (plan.kind == "gather") return gpu::gather_fits(plan, problem);
  if (plan.kind == "cumsum") return gpu::scan_fits(plan, problem);
  if (plan.kind == "argmax") return gpu::argmax_fits(plan, problem);
  const bool reduce_op_known =
      plan.reduce_op == "sum" || plan.reduce_op == "mean" || plan.reduce_op == "max" || plan.reduce_op == "min";
  if (plan.kind == "row_map") {
    const auto& r = plan.rshape;
    return r.inner == 1 && r.outer >= 1 && r.reduce >= 1 && tensor_numel(false, plan.source) == r.outer * r.reduce &&
           numel == r.outer * r.reduce && reduce_op_known;
  }
  if (is_row_kind(plan.kind)) {
    const auto& r = plan.rshape;
    if (plan.kind == "layernorm" && r.inner != 1) return false;
    if (r.outer < 1 || r.reduce < 1 || r.inner < 1) return false;
    if (tensor_numel(false, plan.source) != r.outer * r.reduce * r.inner) return false;
    if (plan.kind == "reduce") return numel == r.outer * r.inner && reduce_op_known;
    return numel == r.outer * r.reduce * r.inner;
  }
  if (plan.kind == "matmul") {
    if (plan.batch < 1 || plan.m < 1 || plan.n < 1 || plan.k < 1) return false;
    if (tensor_numel(plan.a_is_param, plan.a) != (plan.a_batched ? plan.batch : 1) * plan.m * plan.k) return false;
    if (tensor_numel(plan.b_is_param, plan.b) != (plan.b_batched ? plan.batch : 1) * plan.k * plan.n) return false;
    return numel == plan.batch * plan.m * plan.n;
  }
  return false;
}

}  // namespace

std::string file_header(const std::string& family, const nlohmann::json& params, const KernelPlan& plan,
                        const std::string& description) {
  return fmt::format(
      "// Generated by mblast's builtin policy (src/policy/rvv).\n"
      "// family: {}  params: {}\n"
      "// plan: {}\n"
      "// {}\n"
      "// The problem's shapes are compiled in; mblast_run rejects any other (mblast_last_error).\n"
      "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n#include <mblast/abi.h>\n#include "
      "<riscv_vector.h>\n\n"
      "static const char* g_error = \"\";\n"
      "const char* mblast_last_error(void) {{ return g_error; }}\n\n",
      family, params.dump(), plan.summary(), description);
}

std::string shape_check(const Problem& p, bool with_params_check) {
  std::string s =
      "static int mb_shape_is(const mblast_tensor* t, int dtype, int32_t ndim, const int64_t* shape) {\n"
      "  if ((int)t->dtype != dtype || t->ndim != ndim) return 0;\n"
      "  for (int32_t d = 0; d < ndim; ++d)\n    if (t->shape[d] != shape[d]) return 0;\n"
      "  return 1;\n}\n\n";
  if (with_params_check)
    s += "static int mb_check_params(const mblast_tensor* params, int32_t n_params) {\n" + check_params_body(p) +
         "  return 1;\n}\n\n";
  s += "static int mb_check_tensors(const mblast_tensor* inputs, int32_t n_inputs, const mblast_tensor* params, "
       "int32_t n_params,\n"
       "                            const mblast_tensor* outputs, int32_t n_outputs) {\n";
  s += fmt::format(
      "  if (n_inputs != {} || n_outputs != 1) {{\n    g_error = \"expected {} input(s) and 1 output\";\n    return "
      "0;\n  }}\n",
      p.inputs.size(), p.inputs.size());
  for (size_t i = 0; i < p.inputs.size(); ++i) s += check_one(p.inputs[i], "inputs", i, "input");
  s += check_params_body(p);
  s += check_one(p.outputs[0], "outputs", 0, "output");
  s += "  return 1;\n}\n\n";
  return s;
}

std::string tensor_pointers(const Problem& p, const std::string& indent) {
  std::string s;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    s += fmt::format("{}const float* restrict in{} = (const float*)inputs[{}].data;\n", indent, i, i);
  for (size_t i = 0; i < p.parameters.size(); ++i)
    s += fmt::format("{}const float* restrict pr{} = (const float*)params[{}].data;\n", indent, i, i);
  s += indent + "float* restrict out = (float*)outputs[0].data;\n";
  // Not every variant reads every tensor.
  for (size_t i = 0; i < p.inputs.size(); ++i) s += fmt::format("{}(void)in{};\n", indent, i);
  for (size_t i = 0; i < p.parameters.size(); ++i) s += fmt::format("{}(void)pr{};\n", indent, i);
  return s;
}

std::string epilogue_pass(const Expr& e, int64_t total, Lmul lm, const std::string& indent) {
  if (e.empty() || e.is_identity_epilogue()) return "";
  const int64_t block = choose_block(e, total);
  VectorExpr ve(e, lm, block);
  if (!ve.vectorised())
    return indent + "// epilogue in scalar C: no vector form for some op\n" +
           scalar_loop(e, "0", std::to_string(total), "out", indent);
  const std::string in = indent + "    ";
  std::string s = indent + "// epilogue over the whole output: out[i] = f(out[i])\n";
  s += fmt::format("{}for (int64_t blk = 0; blk < {}; ++blk) {{\n{}  const int64_t base = blk * {};\n", indent,
                   total / block, indent, block);
  s += ve.block_setup("base", indent + "  ");
  s += fmt::format("{}  for (size_t j = 0, vl; j < {}; j += vl) {{\n{}vl = {}({} - j);\n", indent, block, in,
                   lm.vsetvl(), block);
  s += fmt::format("{}{} acc = {}(out + base + j, vl);\n", in, lm.f32(), lm.f("vle32_v"));
  s += ve.strip("base", "j", "vl", "acc", "res", in);
  s += fmt::format("{}{}(out + base + j, res, vl);\n{}  }}\n{}}}\n", in, lm.f("vse32_v"), indent, indent);
  return s;
}

std::string epilogue_helpers(const Expr& e, int64_t total, Lmul lm) {
  if (e.empty() || e.is_identity_epilogue()) return "";
  VectorExpr ve(e, lm, choose_block(e, total));
  return ve.helpers().empty() ? "" : math_helpers(ve.helpers(), lm) + "\n";
}

std::string run_begin(const Problem& problem) {
  return "int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,\n"
         "               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {\n"
         "  (void)ctx, (void)state;\n"
         "  if (!mb_check_tensors(inputs, n_inputs, params, n_params, outputs, n_outputs)) return 1;\n" +
         tensor_pointers(problem, "  ");
}

std::string accumulate_row(Lmul lm, int u, const std::string& op, const std::string& init, const std::string& ptr,
                           int64_t len, const std::string& indent) {
  const std::string in = indent + "  ", fn = lm.f(op + "_vv"), load = lm.f("vle32_v");
  auto at = [&](int i) { return i ? fmt::format("p + {} * vlmax", i) : std::string("p"); };
  std::string s;
  for (int i = 0; i < u; ++i) s += fmt::format("{}{} a{};\n", indent, lm.f32(), i);
  s += fmt::format("{}const float* restrict p = {};\n{}size_t left = {};\n", indent, ptr, indent, len);
  s += fmt::format("{}if (left >= {} * vlmax) {{\n", indent, u);
  for (int i = 0; i < u; ++i) s += fmt::format("{}a{} = {}({}, vlmax);\n", in, i, load, at(i));
  s += fmt::format("{}p += {} * vlmax;\n{}left -= {} * vlmax;\n{}}} else {{\n", in, u, in, u, indent);
  for (int i = 0; i < u; ++i) s += fmt::format("{}a{} = {}({}, vlmax);\n", in, i, lm.f("vfmv_v_f"), init);
  s += indent + "}\n";
  s += fmt::format("{}for (; left >= {} * vlmax; left -= {} * vlmax, p += {} * vlmax) {{\n", indent, u, u, u);
  for (int i = 0; i < u; ++i) s += fmt::format("{}a{} = {}(a{}, {}({}, vlmax), vlmax);\n", in, i, fn, i, load, at(i));
  s += indent + "}\n";
  s += fmt::format("{}for (size_t vl; left > 0; left -= vl, p += vl) {{\n{}vl = {}(left);\n", indent, in, lm.vsetvl());
  s += fmt::format("{}a0 = __riscv_{}_vv_f32{}_tu(a0, a0, {}(p, vl), vl);\n{}}}\n", in, op, lm.name(), load, indent);
  for (int step = 1; step < u; step *= 2)
    for (int i = 0; i + step < u; i += 2 * step)
      s += fmt::format("{}a{} = {}(a{}, a{}, vlmax);\n", indent, i, fn, i, i + step);
  return s;
}

std::vector<Variant> variants_for(const KernelPlan& plan, const Problem& problem) {
  // Ops that neither the vector renderer nor render_expr (the scalar fallback) cover: nothing to offer.
  if (!plan_fits(plan, problem) || (!has_vector_form(plan.expr) && !renderable(plan.expr))) return {};
  if (plan.kind == "elementwise") return elementwise_variants(plan, problem);
  if (plan.kind == "reduce") return reduce_variants(plan, problem);
  if (plan.kind == "row_map") return row_map_variants(plan, problem);
  if (plan.kind == "softmax" || plan.kind == "log_softmax") return softmax_variants(plan, problem);
  if (plan.kind == "layernorm") return layernorm_variants(plan, problem);
  if (plan.kind == "matmul") return matmul_variants(plan, problem);
  if (plan.kind == "pool") return pool_variants(plan, problem);
  if (is_conv_kind(plan.kind)) return conv_variants(plan, problem);  // conv and conv_transpose
  if (plan.kind == "gather") return gather_variants(plan, problem);
  if (plan.kind == "cumsum") return scan_variants(plan, problem);
  if (plan.kind == "argmax") return argmax_variants(plan, problem);
  return {};
}

}  // namespace rvv

std::vector<Variant> rvv_variants(const KernelPlan& plan, const Problem& problem, const Target& target) {
  (void)target;  // every candidate is VLEN-agnostic: one set of variants serves every rvv target
  return plan.kind == "chain" ? rvv::chain_variants(plan, problem) : rvv::variants_for(plan, problem);
}

}  // namespace mblast::policy
