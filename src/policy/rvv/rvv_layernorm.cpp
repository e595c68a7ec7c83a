// rvv candidates for layernorm plans (the last axis of [outer, reduce, 1]):
//   rvv.layernorm.two-pass: per row, a vector sum (U accumulators, one vfredusum) gives the
//       mean, a second read sums (x - mean)^2 the same way (the numerically safe variance),
//       then an output pass computes (x - mean) * rstd and the epilogue (the affine weight and
//       bias, and whatever follows) in registers.
//   rvv.layernorm.one-pass: sum and sum of squares in one read (var = E[x^2] - mean^2), then
//       the output pass: one read fewer, offered only where the tolerance leaves room for the
//       cancellation.
//   An RMSNorm plan (`rms`: no mean) gets the two-pass form with the mean 0: one read for the
//   mean square, one for the output.
#include <fmt/format.h>

#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

bool has_epilogue(const KernelPlan& plan) { return !plan.expr.empty() && !plan.expr.is_identity_epilogue(); }

std::string reduce_sum(Lmul lm, const std::string& v) {
  return fmt::format(
      "__riscv_vfmv_f_s_f32m1_f32(__riscv_vfredusum_vs_f32{}_f32m1({}, __riscv_vfmv_s_f_f32m1(0.0f, 1), vlmax))",
      lm.name(), v);
}

Variant layernorm(const KernelPlan& plan, const Problem& problem, Lmul lm, bool one_pass) {
  const auto& r = plan.rshape;
  const int u = lm.m >= 8 ? 1 : lm.m >= 4 ? 2 : 4;
  VectorExpr ve(plan.expr, lm, r.reduce);
  Variant v;
  v.family = one_pass ? "rvv.layernorm.one-pass" : "rvv.layernorm.two-pass";
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}};
  v.actions = {"rvv.vector-accumulator-then-reduce", "rvv.unordered-float-reduction", "rvv.strip-mining-vsetvl",
               lm.m >= 2 ? "rvv.lmul-large-for-streaming" : "rvv.lmul-small-for-register-blocking"};
  if (has_epilogue(plan)) add_expr_actions(ve, &v.actions);
  v.description = fmt::format("{} of {} rows of {}: {}, then (x - mean) * rstd{} in registers, at LMUL {}",
                              plan.rms ? "rmsnorm (no mean)" : "layernorm", r.outer, r.reduce,
                              plan.rms   ? "one read for the mean square"
                              : one_pass ? "sum and sum of squares in one read"
                                         : "vector sum for the mean, a second read for the variance",
                              has_epilogue(plan) ? " and the epilogue" : "", lm.name());
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  std::set<std::string> h;
  if (has_epilogue(plan) && ve.vectorised()) h.insert(ve.helpers().begin(), ve.helpers().end());
  s += math_helpers(h, lm) + "\n";
  s += run_begin(problem);
  const std::string F = lm.f32(), L = lm.name();
  s += fmt::format("  const size_t vlmax = {};\n", lm.vsetvlmax());
  s += fmt::format("  for (int64_t o = 0; o < {}; ++o) {{\n", r.outer);
  s += fmt::format(
      "    const int64_t base = o * {};\n    const float* restrict x = in{} + base;\n    float* restrict yrow = out + "
      "base;\n",
      r.reduce, plan.source);
  if (has_epilogue(plan) && ve.vectorised()) s += ve.block_setup("base", "    ");
  if (!one_pass) {
    s += "    float mean, var;\n";
    if (plan.rms) {
      s += "    mean = 0.0f;  // RMSNorm: no mean subtracted\n";
    } else {
      s += "    {\n" + accumulate_row(lm, u, "vfadd", "0.0f", "x", r.reduce, "      ");
      s += fmt::format("      mean = {} / {}.0f;\n    }}\n", reduce_sum(lm, "a0"), r.reduce);
    }
    s += fmt::format("    {{\n      {} d2 = {}(0.0f, vlmax);\n", F, lm.f("vfmv_v_f"));
    s += fmt::format("      for (size_t j = 0, vl; j < {}; j += vl) {{\n        vl = {}({} - j);\n", r.reduce,
                     lm.vsetvl(), r.reduce);
    s += fmt::format("        {} d = {}({}(x + j, vl), mean, vl);\n", F, lm.f("vfsub_vf"), lm.f("vle32_v"));
    s += fmt::format("        d2 = __riscv_vfmacc_vv_f32{}_tu(d2, d, d, vl);\n      }}\n", L);
    s += fmt::format("      var = {} / {}.0f;\n    }}\n", reduce_sum(lm, "d2"), r.reduce);
  } else {
    s += fmt::format("    {0} s1 = {1}(0.0f, vlmax), s2 = {1}(0.0f, vlmax);\n", F, lm.f("vfmv_v_f"));
    s += fmt::format("    for (size_t j = 0, vl; j < {}; j += vl) {{\n      vl = {}({} - j);\n", r.reduce, lm.vsetvl(),
                     r.reduce);
    s += fmt::format("      {} xv = {}(x + j, vl);\n", F, lm.f("vle32_v"));
    s += fmt::format("      s1 = __riscv_vfadd_vv_f32{}_tu(s1, s1, xv, vl);\n", L);
    s += fmt::format("      s2 = __riscv_vfmacc_vv_f32{}_tu(s2, xv, xv, vl);\n    }}\n", L);
    s += fmt::format("    const float mean = {} / {}.0f;\n", reduce_sum(lm, "s1"), r.reduce);
    s += fmt::format("    float var = {} / {}.0f - mean * mean;\n    if (var < 0.0f) var = 0.0f;\n",
                     reduce_sum(lm, "s2"), r.reduce);
  }
  s += fmt::format("    const float rstd = 1.0f / sqrtf(var + {:.9g}f);\n", plan.eps);
  s += fmt::format("    for (size_t jj = 0, vl; jj < {}; jj += vl) {{\n      vl = {}({} - jj);\n", r.reduce,
                   lm.vsetvl(), r.reduce);
  s += fmt::format("      {} acc = {}({}({}(x + jj, vl), mean, vl), rstd, vl);\n", F, lm.f("vfmul_vf"),
                   lm.f("vfsub_vf"), lm.f("vle32_v"));
  if (!has_epilogue(plan) || !ve.vectorised())
    s += fmt::format("      {}(yrow + jj, acc, vl);\n", lm.f("vse32_v"));
  else
    s += ve.strip("base", "jj", "vl", "acc", "res", "      ") +
         fmt::format("      {}(yrow + jj, res, vl);\n", lm.f("vse32_v"));
  s += "    }\n  }\n";
  if (has_epilogue(plan) && !ve.vectorised())
    s += "  // epilogue in scalar C: no vector form for some op\n" +
         scalar_loop(plan.expr, "0", std::to_string(plan.out_numel), "out", "  ");
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

}  // namespace

std::vector<Variant> layernorm_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> out;
  if (plan.rshape.inner != 1) return out;
  const Tolerance tol = problem.tolerance_for(DType::f32);
  for (int m : {1, 2, 4, 8}) out.push_back(layernorm(plan, problem, Lmul{m}, false));
  // RMSNorm has no mean, so the two-pass form already reads x once for its statistics.
  if (!plan.rms && tol.rtol >= 1e-4 && tol.atol >= 1e-5)
    for (int m : {2, 8}) out.push_back(layernorm(plan, problem, Lmul{m}, true));
  return out;
}

}  // namespace mblast::policy::rvv
