// rvv candidates for softmax / log_softmax plans along the middle axis of [outer, reduce, inner]:
//   inner == 1  rvv.softmax.three-pass: running vector max (one vfredmax), e^(x - max) stored
//               and summed in a vector (one vfredusum), then a scaling pass that applies the
//               epilogue in registers; exp as a degree-5 or -6 polynomial.
//               rvv.softmax.online: max and rescaled sum in one pass (two exps per element),
//               then the output pass: two reads of x instead of three passes over memory.
//   inner > 1   rvv.softmax.inner-vectorised: lanes along inner (unit stride), the three
//               passes per strip over the reduced axis.
#include <fmt/format.h>

#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

bool has_epilogue(const KernelPlan& plan) { return !plan.expr.empty() && !plan.expr.is_identity_epilogue(); }

// The final pass's per-strip statements: `acc` (the softmax value) through the epilogue, stored.
std::string finish_strip(const VectorExpr& ve, const KernelPlan& plan, Lmul lm, const std::string& base,
                         const std::string& j, const std::string& dst, const std::string& indent) {
  if (!has_epilogue(plan) || !ve.vectorised()) return fmt::format("{}{}({}, acc, vl);\n", indent, lm.f("vse32_v"), dst);
  return ve.strip(base, j, "vl", "acc", "res", indent) +
         fmt::format("{}{}({}, res, vl);\n", indent, lm.f("vse32_v"), dst);
}

std::string scalar_epilogue_after(const VectorExpr& ve, const KernelPlan& plan) {
  if (!has_epilogue(plan) || ve.vectorised()) return "";
  return "  // epilogue in scalar C: no vector form for some op\n" +
         scalar_loop(plan.expr, "0", std::to_string(plan.out_numel), "out", "  ");
}

std::string helpers_for(const VectorExpr& ve, const KernelPlan& plan, Lmul lm, int exp_degree, bool need_log) {
  std::set<std::string> h = {"exp_nonpos"};
  if (need_log) h.insert("log");
  if (has_epilogue(plan) && ve.vectorised()) h.insert(ve.helpers().begin(), ve.helpers().end());
  return math_helpers(h, lm, exp_degree) + "\n";
}

Variant three_pass(const KernelPlan& plan, const Problem& problem, Lmul lm, int degree) {
  const auto& r = plan.rshape;
  const bool log = plan.kind == "log_softmax";
  const int u = lm.m >= 8 ? 1 : lm.m >= 4 ? 2 : 4;  // max-pass accumulators: 2 U LMUL <= 16 registers
  VectorExpr ve(plan.expr, lm, r.reduce);
  Variant v;
  v.family = "rvv.softmax.three-pass";
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}, {"exp_degree", degree}};
  v.actions = {"rvv.exp-polynomial",
               "rvv.running-max-then-reduce",
               "rvv.vector-accumulator-then-reduce",
               "rvv.unordered-float-reduction",
               lm.m >= 2 ? "rvv.lmul-large-for-streaming" : "rvv.lmul-small-for-register-blocking",
               "rvv.strip-mining-vsetvl"};
  if (has_epilogue(plan)) add_expr_actions(ve, &v.actions);
  const std::string summed = lm.m == 8 ? "summed per strip (vfredusum)" : "summed in a vector";
  v.description =
      fmt::format("{} of {} rows of {}: running vector max, e^(x - max) {}{}, then a {} at LMUL {}, exp degree {}",
                  plan.kind, r.outer, r.reduce, log ? "" : "stored and ", summed,
                  log ? "x - max - log(sum) pass" : "scaling pass by 1/sum", lm.name(), degree);
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  s += helpers_for(ve, plan, lm, degree, false);
  s += run_begin(problem);
  const std::string F = lm.f32(), L = lm.name();
  s += fmt::format("  const size_t vlmax = {};\n", lm.vsetvlmax());
  s += fmt::format("  for (int64_t o = 0; o < {}; ++o) {{\n", r.outer);
  s += fmt::format(
      "    const int64_t base = o * {};\n    const float* restrict x = in{} + base;\n    float* restrict yrow = out + "
      "base;\n",
      r.reduce, plan.source);
  if (has_epilogue(plan) && ve.vectorised()) s += ve.block_setup("base", "    ");
  // Pass 1: max.
  s += accumulate_row(lm, u, "vfmax", "(-INFINITY)", "x", r.reduce, "    ");
  s += fmt::format(
      "    const float mx = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32{}_f32m1(a0, "
      "__riscv_vfmv_s_f_f32m1(-INFINITY, 1), vlmax));\n",
      L);
  // Pass 2: e^(x - max), summed (and stored for softmax). At LMUL 8 a vector sum would take one
  // of the four register groups the exp needs, so each strip is reduced into one m1 register.
  const bool per_strip = lm.m == 8;
  if (per_strip)
    s += "    vfloat32m1_t sum = __riscv_vfmv_s_f_f32m1(0.0f, 1);\n";
  else
    s += fmt::format("    {} sum = {}(0.0f, vlmax);\n", F, lm.f("vfmv_v_f"));
  s += fmt::format("    for (size_t jj = 0, vl; jj < {}; jj += vl) {{\n      vl = {}({} - jj);\n", r.reduce,
                   lm.vsetvl(), r.reduce);
  s += fmt::format("      {} e = mb_exp_nonpos({}({}(x + jj, vl), mx, vl), vl);\n", F, lm.f("vfsub_vf"),
                   lm.f("vle32_v"));
  if (!log) s += fmt::format("      {}(yrow + jj, e, vl);\n", lm.f("vse32_v"));
  if (per_strip)
    s += fmt::format("      sum = __riscv_vfredusum_vs_f32{}_f32m1(e, sum, vl);\n    }}\n", L);
  else
    s += fmt::format("      sum = __riscv_vfadd_vv_f32{}_tu(sum, sum, e, vl);\n    }}\n", L);
  if (per_strip)
    s += "    const float total = __riscv_vfmv_f_s_f32m1_f32(sum);\n";
  else
    s += fmt::format(
        "    const float total = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32{}_f32m1(sum, "
        "__riscv_vfmv_s_f_f32m1(0.0f, 1), vlmax));\n",
        L);
  // Pass 3: normalise (+ epilogue).
  if (log)
    s += "    const float shift = mx + logf(total);\n";
  else
    s += "    const float inv = 1.0f / total;\n";
  s += fmt::format("    for (size_t jj = 0, vl; jj < {}; jj += vl) {{\n      vl = {}({} - jj);\n", r.reduce,
                   lm.vsetvl(), r.reduce);
  if (log)
    s += fmt::format("      {} acc = {}({}(x + jj, vl), shift, vl);\n", F, lm.f("vfsub_vf"), lm.f("vle32_v"));
  else
    s += fmt::format("      {} acc = {}({}(yrow + jj, vl), inv, vl);\n", F, lm.f("vfmul_vf"), lm.f("vle32_v"));
  s += finish_strip(ve, plan, lm, "base", "jj", "yrow + jj", "      ");
  s += "    }\n  }\n" + scalar_epilogue_after(ve, plan) + "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

Variant online(const KernelPlan& plan, const Problem& problem, Lmul lm) {
  const auto& r = plan.rshape;
  const bool log = plan.kind == "log_softmax";
  VectorExpr ve(plan.expr, lm, r.reduce);
  Variant v;
  v.family = "rvv.softmax.online";
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}};
  v.actions = {"rvv.online-softmax", "rvv.exp-polynomial", "rvv.vector-accumulator-then-reduce",
               "rvv.strip-mining-vsetvl"};
  if (has_epilogue(plan)) add_expr_actions(ve, &v.actions);
  v.description = fmt::format(
      "{} of {} rows of {}: per-lane running max and rescaled sum in one read (two exps per element), "
      "then one output pass, at LMUL {}",
      plan.kind, r.outer, r.reduce, lm.name());
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  s += helpers_for(ve, plan, lm, 6, false);
  s += run_begin(problem);
  const std::string F = lm.f32(), L = lm.name();
  s += fmt::format("  const size_t vlmax = {};\n", lm.vsetvlmax());
  s += fmt::format("  for (int64_t o = 0; o < {}; ++o) {{\n", r.outer);
  s += fmt::format(
      "    const int64_t base = o * {};\n    const float* restrict x = in{} + base;\n    float* restrict yrow = out + "
      "base;\n",
      r.reduce, plan.source);
  if (has_epilogue(plan) && ve.vectorised()) s += ve.block_setup("base", "    ");
  // Lanes never reached keep m = -FLT_MAX and s = 0, which contribute nothing below.
  s += fmt::format("    {} m = {}(-3.40282347e+38f, vlmax);\n    {} sum = {}(0.0f, vlmax);\n", F, lm.f("vfmv_v_f"), F,
                   lm.f("vfmv_v_f"));
  s += fmt::format("    for (size_t j = 0, vl; j < {}; j += vl) {{\n      vl = {}({} - j);\n", r.reduce, lm.vsetvl(),
                   r.reduce);
  s += fmt::format("      {} xv = {}(x + j, vl);\n", F, lm.f("vle32_v"));
  s += fmt::format("      {} mn = {}(m, xv, vl);\n", F, lm.f("vfmax_vv"));
  s += fmt::format("      {} scale = mb_exp_nonpos({}(m, mn, vl), vl);\n", F, lm.f("vfsub_vv"));
  s += fmt::format("      {} e = mb_exp_nonpos({}(xv, mn, vl), vl);\n", F, lm.f("vfsub_vv"));
  s += fmt::format("      sum = __riscv_vfmadd_vv_f32{}_tu(sum, scale, e, vl);\n", L);
  s += fmt::format("      m = __riscv_vfmax_vv_f32{}_tu(m, m, xv, vl);\n    }}\n", L);
  s += fmt::format(
      "    const float mx = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredmax_vs_f32{}_f32m1(m, "
      "__riscv_vfmv_s_f_f32m1(-INFINITY, 1), vlmax));\n",
      L);
  s += "    float total;\n    {\n      const size_t vl = vlmax;\n";
  s += fmt::format("      {} scaled = {}(sum, mb_exp_nonpos({}(m, mx, vl), vl), vl);\n", F, lm.f("vfmul_vv"),
                   lm.f("vfsub_vf"));
  s += fmt::format(
      "      total = __riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32{}_f32m1(scaled, __riscv_vfmv_s_f_f32m1(0.0f, "
      "1), vl));\n    }}\n",
      L);
  if (log)
    s += "    const float shift = mx + logf(total);\n";
  else
    s += "    const float inv = 1.0f / total;\n";
  s += fmt::format("    for (size_t jj = 0, vl; jj < {}; jj += vl) {{\n      vl = {}({} - jj);\n", r.reduce,
                   lm.vsetvl(), r.reduce);
  if (log)
    s += fmt::format("      {} acc = {}({}(x + jj, vl), shift, vl);\n", F, lm.f("vfsub_vf"), lm.f("vle32_v"));
  else
    s += fmt::format("      {} acc = {}(mb_exp_nonpos({}({}(x + jj, vl), mx, vl), vl), inv, vl);\n", F,
                     lm.f("vfmul_vf"), lm.f("vfsub_vf"), lm.f("vle32_v"));
  s += finish_strip(ve, plan, lm, "base", "jj", "yrow + jj", "      ");
  s += "    }\n  }\n" + scalar_epilogue_after(ve, plan) + "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

Variant inner_vectorised(const KernelPlan& plan, const Problem& problem, Lmul lm) {
  const auto& r = plan.rshape;
  const bool log = plan.kind == "log_softmax";
  VectorExpr ve(plan.expr, lm, r.inner);
  Variant v;
  v.family = "rvv.softmax.inner-vectorised";
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}};
  v.actions = {"rvv.unit-stride-over-strided", "rvv.exp-polynomial", "rvv.strip-mining-vsetvl"};
  if (has_epilogue(plan)) add_expr_actions(ve, &v.actions);
  v.description = fmt::format(
      "{} over an axis of {} with lanes along the inner {} (unit stride), three passes per strip, at LMUL {}",
      plan.kind, r.reduce, r.inner, lm.name());
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  s += helpers_for(ve, plan, lm, 6, log);
  s += run_begin(problem);
  const std::string F = lm.f32();
  const int64_t stride = r.inner;
  s += fmt::format("  for (int64_t o = 0; o < {}; ++o) {{\n", r.outer);
  s += fmt::format("    for (size_t j = 0, vl; j < {}; j += vl) {{\n      vl = {}({} - j);\n", r.inner, lm.vsetvl(),
                   r.inner);
  s += fmt::format("      const float* restrict x = in{} + o * {} + j;\n      float* restrict y = out + o * {} + j;\n",
                   plan.source, r.reduce * r.inner, r.reduce * r.inner);
  s += fmt::format("      {} mx = {}(x, vl);\n", F, lm.f("vle32_v"));
  s += fmt::format("      for (int64_t k = 1; k < {}; ++k) mx = {}(mx, {}(x + k * {}, vl), vl);\n", r.reduce,
                   lm.f("vfmax_vv"), lm.f("vle32_v"), stride);
  s += fmt::format("      {} sum = {}(0.0f, vl);\n", F, lm.f("vfmv_v_f"));
  s += fmt::format("      for (int64_t k = 0; k < {}; ++k) {{\n", r.reduce);
  s += fmt::format("        {} e = mb_exp_nonpos({}({}(x + k * {}, vl), mx, vl), vl);\n", F, lm.f("vfsub_vv"),
                   lm.f("vle32_v"), stride);
  if (!log) s += fmt::format("        {}(y + k * {}, e, vl);\n", lm.f("vse32_v"), stride);
  s += fmt::format("        sum = {}(sum, e, vl);\n      }}\n", lm.f("vfadd_vv"));
  if (log)
    s += fmt::format("      {} shift = {}(mx, mb_log(sum, vl), vl);\n", F, lm.f("vfadd_vv"));
  else
    s += fmt::format("      {} inv = {}(sum, 1.0f, vl);\n", F, lm.f("vfrdiv_vf"));
  s += fmt::format("      for (int64_t k = 0; k < {}; ++k) {{\n", r.reduce);
  s += fmt::format("        const int64_t base = (o * {} + k) * {};\n", r.reduce, r.inner);
  if (has_epilogue(plan) && ve.vectorised()) s += ve.block_setup("base", "        ");
  if (log)
    s += fmt::format("        {} acc = {}({}(x + k * {}, vl), shift, vl);\n", F, lm.f("vfsub_vv"), lm.f("vle32_v"),
                     stride);
  else
    s += fmt::format("        {} acc = {}({}(y + k * {}, vl), inv, vl);\n", F, lm.f("vfmul_vv"), lm.f("vle32_v"),
                     stride);
  s += finish_strip(ve, plan, lm, "base", "j", fmt::format("y + k * {}", stride), "        ");
  s += "      }\n    }\n  }\n" + scalar_epilogue_after(ve, plan) + "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

}  // namespace

std::vector<Variant> softmax_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> out;
  if (plan.rshape.inner > 1) {
    for (int m : {1, 2, 4, 8}) out.push_back(inner_vectorised(plan, problem, Lmul{m}));
    return out;
  }
  // A degree-5 exp (relative error 1.1e-7) only where the tolerance leaves room for it.
  const Tolerance tol = problem.tolerance_for(DType::f32);
  const bool loose = tol.rtol >= 1e-5 && tol.atol >= 1e-7;
  for (int m : {1, 2, 4, 8}) {
    out.push_back(three_pass(plan, problem, Lmul{m}, 6));
    if (loose) out.push_back(three_pass(plan, problem, Lmul{m}, 5));
  }
  for (int m : {2, 4}) out.push_back(online(plan, problem, Lmul{m}));
  return out;
}

}  // namespace mblast::policy::rvv
