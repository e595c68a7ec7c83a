// rvv candidates for reduce plans (sum | mean | max | min over the middle axis of
// [outer, reduce, inner], then the epilogue):
//   inner == 1  rvv.reduce.row-accumulators: each row streamed into U vector accumulators
//               (VLMAX strips, one vsetvl), a tail-undisturbed strip-mined tail, one
//               vfredusum / vfredmax per row at the end; the epilogue is a vector pass after.
//   inner == 1, short rows  rvv.reduce.rows-in-lanes: one row per lane, strided loads.
//   inner > 1   rvv.reduce.inner-vectorised: lanes along inner (unit stride), U accumulators
//               over the reduced axis (compensated sums when it is long), the epilogue applied
//               in registers before the store.
// and for row_map plans (x / x.sum(-1, keepdim) and the like):
//   rvv.row-map.row-accumulators: each row's statistic as row-accumulators takes it, then one
//               strip-mined pass over the row (read again, from the cache) through the
//               expression, its Acc the statistic splatted: one kernel where the chain has two.
#include <algorithm>

#include <fmt/format.h>

#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

struct Op {
  std::string vv, red, init;  // vfadd / vfredusum / 0.0f
};

Op op_for(const std::string& reduce_op) {
  if (reduce_op == "max") return {"vfmax", "vfredmax", "(-INFINITY)"};
  if (reduce_op == "min") return {"vfmin", "vfredmin", "INFINITY"};
  return {"vfadd", "vfredusum", "0.0f"};
}

// Folds accumulators a0..a{u-1} into a0 pairwise.
std::string combine(int u, const std::string& fn, const std::string& vl, const std::string& indent) {
  std::string s;
  for (int step = 1; step < u; step *= 2)
    for (int i = 0; i + step < u; i += 2 * step)
      s += fmt::format("{}a{} = {}(a{}, a{}, {});\n", indent, i, fn, i, i + step, vl);
  return s;
}

std::vector<std::string> reduce_actions(const std::string& reduce_op) {
  if (reduce_op == "max" || reduce_op == "min") return {"rvv.running-max-then-reduce"};
  return {"rvv.vector-accumulator-then-reduce", "rvv.unordered-float-reduction", "rvv.fp-reassociation-beats-autovec"};
}

// A design that takes each row's statistic in U accumulators at `lm`: its family, params and
// actions.
Variant row_design(const std::string& family, const KernelPlan& plan, Lmul lm, int u) {
  Variant v;
  v.family = family;
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}, {"accumulators", u}};
  v.actions = reduce_actions(plan.reduce_op);
  if (lm.m >= 2) v.actions.push_back("rvv.lmul-large-for-streaming");
  v.actions.insert(v.actions.end(), {"rvv.strip-mining-vsetvl", "rvv.minimise-vtype-changes"});
  return v;
}

// Statements that leave the `op` of row x (a const float* in scope, as is vlmax) in `const float r`.
std::string row_statistic(const KernelPlan& plan, Lmul lm, int u, const std::string& indent) {
  const Op op = op_for(plan.reduce_op);
  return accumulate_row(lm, u, op.vv, op.init, "x", plan.rshape.reduce, indent) +
         fmt::format(
             "{}const float r = __riscv_vfmv_f_s_f32m1_f32(__riscv_{}_vs_f32{}_f32m1(a0, __riscv_vfmv_s_f_f32m1({}, "
             "1), vlmax));\n",
             indent, op.red, lm.name(), op.init);
}

Variant row_accumulators(const KernelPlan& plan, const Problem& problem, Lmul lm, int u) {
  const auto& r = plan.rshape;
  const Op op = op_for(plan.reduce_op);
  Variant v = row_design("rvv.reduce.row-accumulators", plan, lm, u);
  const std::string epi = epilogue_pass(plan.expr, plan.out_numel, lm, "  ");
  v.description =
      fmt::format("{} of {} rows of {} into {} vector accumulator(s) at LMUL {}, one {} per row{}", plan.reduce_op,
                  r.outer, r.reduce, u, lm.name(), op.red, epi.empty() ? "" : ", then a vector epilogue pass");
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  if (!epi.empty()) {
    s += epilogue_helpers(plan.expr, plan.out_numel, lm);
    add_expr_actions(VectorExpr(plan.expr, lm, choose_block(plan.expr, plan.out_numel)), &v.actions);
  }
  s += run_begin(problem);
  s += fmt::format("  const size_t vlmax = {};\n", lm.vsetvlmax());
  s += fmt::format("  for (int64_t o = 0; o < {}; ++o) {{\n    const float* restrict x = in{} + o * {};\n", r.outer,
                   plan.source, r.reduce);
  s += row_statistic(plan, lm, u, "    ");
  s += fmt::format("    out[o] = {};\n  }}\n", plan.reduce_op == "mean" ? fmt::format("r / {}.0f", r.reduce) : "r");
  s += epi + "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

// The epilogue applied to `acc` in registers for output elements [base + j, base + j + vl) of a
// block of `block`, then stored; or stored as is when the epilogue has no vector form (the
// scalar pass runs after everything).
std::string store_with_epilogue(const VectorExpr& ve, const KernelPlan& plan, Lmul lm, const std::string& base,
                                const std::string& j, const std::string& dst, const std::string& indent) {
  if (!ve.vectorised() || plan.expr.empty() || plan.expr.is_identity_epilogue())
    return fmt::format("{}{}({}, acc, vl);\n", indent, lm.f("vse32_v"), dst);
  return ve.strip(base, j, "vl", "acc", "res", indent) +
         fmt::format("{}{}({}, res, vl);\n", indent, lm.f("vse32_v"), dst);
}

std::string scalar_epilogue_after(const VectorExpr& ve, const KernelPlan& plan) {
  if (ve.vectorised() || plan.expr.empty() || plan.expr.is_identity_epilogue()) return "";
  return "  // epilogue in scalar C: no vector form for some op\n" +
         scalar_loop(plan.expr, "0", std::to_string(plan.out_numel), "out", "  ");
}

// Sums whose lanes each walk a long axis are compensated: a plain running sum over 4096 rows
// misses a pairwise (PyTorch-like) sum by ~2e-4, beyond a float64-calibrated tolerance. Short
// axes keep the cheaper plain sum (the error grows about linearly with the length).
constexpr int64_t kCompensateFrom = 512;
bool compensate(const KernelPlan& plan) {
  return plan.reduce_op != "max" && plan.reduce_op != "min" && plan.rshape.reduce >= kCompensateFrom;
}

Variant inner_vectorised(const KernelPlan& plan, const Problem& problem, Lmul lm, int u) {
  const auto& r = plan.rshape;
  const Op op = op_for(plan.reduce_op);
  u = static_cast<int>(std::min<int64_t>(u, r.reduce));
  const bool compensated = compensate(plan);
  VectorExpr ve(plan.expr, lm, r.inner);
  Variant v;
  v.family = "rvv.reduce.inner-vectorised";
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}, {"accumulators", u}};
  v.actions = {"rvv.unit-stride-over-strided", "rvv.strip-mining-vsetvl", "rvv.vector-length-agnostic"};
  if (u > 1) v.actions.push_back("rvv.vector-accumulator-then-reduce");
  add_expr_actions(ve, &v.actions);
  v.description = fmt::format(
      "{} over axis of {} with lanes along the inner {} (unit stride) at LMUL {}, {} {}accumulator(s), epilogue in "
      "registers",
      plan.reduce_op, r.reduce, r.inner, lm.name(), u, compensated ? "compensated (Kahan) " : "");
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  if (!ve.helpers().empty() && ve.vectorised()) s += math_helpers(ve.helpers(), lm) + "\n";
  s += run_begin(problem);
  const std::string fn = lm.f(op.vv + "_vv");
  s += fmt::format("  for (int64_t o = 0; o < {}; ++o) {{\n    const int64_t base = o * {};\n", r.outer, r.inner);
  if (ve.vectorised()) s += ve.block_setup("base", "    ");
  s += fmt::format("    for (size_t j = 0, vl; j < {}; j += vl) {{\n      vl = {}({} - j);\n", r.inner, lm.vsetvl(),
                   r.inner);
  s += fmt::format("      const float* restrict x = in{} + o * {} + j;\n", plan.source, r.reduce * r.inner);
  // Adds the vector at `ptr` into accumulator i; compensated (Kahan, c{i} holds what the last
  // rounding dropped) for long sums.
  auto add_into = [&](int i, const std::string& ptr, const std::string& in) {
    const std::string load = fmt::format("{}({}, vl)", lm.f("vle32_v"), ptr);
    if (!compensated) return fmt::format("{}a{} = {}(a{}, {}, vl);\n", in, i, fn, i, load);
    return fmt::format(
        "{0}{{\n{0}  const {1} y = {2}({3}, c{4}, vl), t = {5}(a{4}, y, vl);\n"
        "{0}  c{4} = {2}({2}(t, a{4}, vl), y, vl);\n{0}  a{4} = t;\n{0}}}\n",
        in, lm.f32(), lm.f("vfsub_vv"), load, i, fn);
  };
  for (int i = 0; i < u; ++i) {
    s += fmt::format("      {} a{} = {}(x + {}, vl);\n", lm.f32(), i, lm.f("vle32_v"), int64_t{i} * r.inner);
    if (compensated) s += fmt::format("      {} c{} = {}(0.0f, vl);\n", lm.f32(), i, lm.f("vfmv_v_f"));
  }
  s += fmt::format("      int64_t k = {};\n      for (; k + {} <= {}; k += {}) {{\n", u, u, r.reduce, u);
  for (int i = 0; i < u; ++i) s += add_into(i, fmt::format("x + (k + {}) * {}", i, r.inner), "        ");
  s += fmt::format("      }}\n      for (; k < {}; ++k) {{\n", r.reduce);
  s += add_into(0, fmt::format("x + k * {}", r.inner), "        ") + "      }\n";
  s += combine(u, fn, "vl", "      ");
  if (plan.reduce_op == "mean")
    s += fmt::format("      {} acc = {}(a0, {}, vl);\n", lm.f32(), lm.f("vfmul_vf"),
                     c_float(1.0 / static_cast<double>(r.reduce)));
  else
    s += fmt::format("      {} acc = a0;\n", lm.f32());
  s += store_with_epilogue(ve, plan, lm, "base", "j", "out + base + j", "      ");
  s += "    }\n  }\n" + scalar_epilogue_after(ve, plan) + "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

Variant rows_in_lanes(const KernelPlan& plan, const Problem& problem, Lmul lm) {
  const auto& r = plan.rshape;
  const Op op = op_for(plan.reduce_op);
  VectorExpr ve(plan.expr, lm, r.outer);
  Variant v;
  v.family = "rvv.reduce.rows-in-lanes";
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}};
  v.actions = {"rvv.strided-load-for-columns", "rvv.strip-mining-vsetvl", "rvv.vector-length-agnostic"};
  add_expr_actions(ve, &v.actions);
  v.description = fmt::format(
      "{} of {} short rows of {}: one row per lane, strided loads (vlse32) at LMUL {}, epilogue in registers",
      plan.reduce_op, r.outer, r.reduce, lm.name());
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  if (!ve.helpers().empty() && ve.vectorised()) s += math_helpers(ve.helpers(), lm) + "\n";
  s += run_begin(problem);
  const std::string fn = lm.f(op.vv + "_vv");
  s += "  const int64_t base = 0;\n";
  if (ve.vectorised()) s += ve.block_setup("base", "  ");
  s += fmt::format("  for (size_t j = 0, vl; j < {}; j += vl) {{\n    vl = {}({} - j);\n", r.outer, lm.vsetvl(),
                   r.outer);
  s += fmt::format("    const float* restrict x = in{} + j * {};\n", plan.source, r.reduce);
  s += fmt::format("    {} a0 = {}(x, {}, vl);\n", lm.f32(), lm.f("vlse32_v"), r.reduce * 4);
  s += fmt::format("    for (int64_t k = 1; k < {}; ++k) a0 = {}(a0, {}(x + k, {}, vl), vl);\n", r.reduce, fn,
                   lm.f("vlse32_v"), r.reduce * 4);
  if (plan.reduce_op == "mean")
    s += fmt::format("    {} acc = {}(a0, {}, vl);\n", lm.f32(), lm.f("vfmul_vf"),
                     c_float(1.0 / static_cast<double>(r.reduce)));
  else
    s += fmt::format("    {} acc = a0;\n", lm.f32());
  s += store_with_epilogue(ve, plan, lm, "base", "j", "out + j", "    ");
  s += "  }\n" + scalar_epilogue_after(ve, plan) + "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

Variant row_map_accumulators(const KernelPlan& plan, const Problem& problem, Lmul lm, int u) {
  const auto& r = plan.rshape;
  const Op op = op_for(plan.reduce_op);
  VectorExpr ve(plan.expr, lm, r.reduce);  // a block is a row: per-row leaves are scalars in it
  Variant v = row_design("rvv.row-map.row-accumulators", plan, lm, u);
  add_expr_actions(ve, &v.actions);
  v.description = fmt::format(
      "{} of each of {} rows of {} into {} vector accumulator(s) at LMUL {}, one {} per row, then the row "
      "again through the expression in registers",
      plan.reduce_op, r.outer, r.reduce, u, lm.name(), op.red);
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  s += math_helpers(ve.helpers(), lm) + "\n";
  s += run_begin(problem);
  s += fmt::format("  const size_t vlmax = {};\n", lm.vsetvlmax());
  s += fmt::format("  for (int64_t o = 0; o < {}; ++o) {{\n", r.outer);
  s += fmt::format(
      "    const int64_t base = o * {};\n    const float* restrict x = in{} + base;\n    float* restrict yrow = out + "
      "base;\n",
      r.reduce, plan.source);
  s += row_statistic(plan, lm, u, "    ");
  s += fmt::format("    const float stat = {};\n", plan.reduce_op == "mean" ? fmt::format("r / {}.0f", r.reduce) : "r");
  s += ve.block_setup("base", "    ");
  s += fmt::format("    const {} acc = {}(stat, vlmax);  // every strip reads its first vl lanes\n", lm.f32(),
                   lm.f("vfmv_v_f"));
  s += fmt::format("    for (size_t jj = 0, vl; jj < {}; jj += vl) {{\n      vl = {}({} - jj);\n", r.reduce,
                   lm.vsetvl(), r.reduce);
  s += ve.strip("base", "jj", "vl", "acc", "res", "      ") +
       fmt::format("      {}(yrow + jj, res, vl);\n    }}\n  }}\n", lm.f("vse32_v"));
  v.source = s + "  return 0;\n}\n";
  return v;
}

}  // namespace

std::vector<Variant> row_map_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> out;
  // Every op must have a vector form: the pass applies the expression in registers.
  if (plan.rshape.inner != 1 || !VectorExpr(plan.expr, Lmul{1}, plan.rshape.reduce).vectorised()) return out;
  for (int m : {1, 2, 4, 8})
    for (int u : {1, 2, 4})
      if (2 * u * m <= 32) out.push_back(row_map_accumulators(plan, problem, Lmul{m}, u));
  return out;
}

std::vector<Variant> reduce_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> out;
  const auto& r = plan.rshape;
  if (r.inner == 1) {
    // U accumulators plus U loads in flight: (2 U) LMUL <= 32 registers.
    for (int m : {1, 2, 4, 8})
      for (int u : {1, 2, 4})
        if (2 * u * m <= 32) out.push_back(row_accumulators(plan, problem, Lmul{m}, u));
    if (r.reduce <= 64)
      for (int m : {1, 2, 4, 8}) out.push_back(rows_in_lanes(plan, problem, Lmul{m}));
  } else {
    for (int m : {1, 2, 4, 8})
      for (int u : {1, 2, 4})
        // Register groups live at once, at most 32 registers: the accumulators and one load, or
        // with compensation the accumulators, their compensations and a Kahan step's y and t.
        if ((compensate(plan) ? 2 * u + 2 : u + 1) * m <= 32 && u <= r.reduce)
          out.push_back(inner_vectorised(plan, problem, Lmul{m}, u));
  }
  return out;
}

}  // namespace mblast::policy::rvv
