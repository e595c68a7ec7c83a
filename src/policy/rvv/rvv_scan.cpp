// rvv candidates for the scan kind (an inclusive cumulative sum along one axis). Contiguous
// rows (inner 1): each strip of a row is loaded once and scanned in registers, log2(vl) steps of
// a slide-up by 1, 2, 4, ... (zeros shifted in) and an add, then the row's running total is
// added and the strip's total joins it (compensated: Kahan's running sum). Any other axis: VLMAX columns at
// a time, one add per step along the axis. The scalar variant is plain C for clang's
// auto-vectoriser. The epilogue is a separate pass.
#include <optional>

#include <fmt/format.h>

#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

Variant scan_variant(const KernelPlan& plan, const Problem& problem, std::optional<Lmul> lm) {
  const ReduceShape& r = plan.rshape;
  const bool rows = r.inner == 1;
  Variant v;
  v.family = !lm ? "rvv.scan.scalar" : rows ? "rvv.scan.slide-rows" : "rvv.scan.columns";
  v.extension = ".rvv.c";
  v.params = lm ? nlohmann::json{{"lmul", lm->name()}} : nlohmann::json::object();
  v.actions = {"rvv.vector-length-agnostic"};
  if (lm) {
    v.actions.push_back("rvv.strip-mining-vsetvl");
    v.actions.push_back(rows ? "rvv.slides-for-stencils" : "rvv.unit-stride-over-strided");
    v.actions.push_back(lm->m >= 2 ? "rvv.lmul-large-for-streaming" : "rvv.lmul-small-for-register-blocking");
  }
  v.description =
      !lm    ? std::string("inclusive scan in scalar C, one element at a time (left to clang's auto-vectoriser)")
      : rows ? fmt::format("inclusive scan of each row, strips of VLMAX at LMUL {} scanned in registers by slide-ups",
                           lm->name())
             : fmt::format("inclusive scan along the axis, VLMAX columns at a time at LMUL {}", lm->name());
  const Lmul l = lm.value_or(Lmul{1});
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem) +
                  epilogue_helpers(plan.expr, plan.out_numel, l);
  s += run_begin(problem);
  const std::string x = fmt::format("in{}", plan.source);
  s += fmt::format("  for (int64_t o = 0; o < {}; ++o) {{\n", r.outer);
  s += fmt::format("    const float* restrict xo = {} + o * {};\n    float* restrict yo = out + o * {};\n", x,
                   r.reduce * r.inner, r.reduce * r.inner);
  if (!lm) {
    s += fmt::format("    for (int64_t i = 0; i < {}; ++i) {{\n", r.inner);
    s += "      float acc = 0.0f, comp = 0.0f;  // Kahan\n";
    s += fmt::format("      for (int64_t j = 0; j < {}; ++j) {{\n", r.reduce);
    s += fmt::format("        const float y = xo[j * {0} + i] - comp, t = acc + y;\n", r.inner);
    s += fmt::format(
        "        comp = (t - acc) - y;\n        acc = t;\n        yo[j * {} + i] = acc;\n      }}\n    }}\n", r.inner);
  } else if (rows) {
    s += "    float carry = 0.0f, comp = 0.0f;  // the row's earlier strips, compensated (Kahan)\n";
    s += fmt::format("    for (size_t j = 0, vl; j < {}; j += vl) {{\n      vl = {}({} - j);\n", r.reduce, l.vsetvl(),
                     r.reduce);
    s += fmt::format("      {} v = {}(xo + j, vl);\n", l.f32(), l.f("vle32_v"));
    s += fmt::format("      const {} zero = {}(0.0f, vl);\n", l.f32(), l.f("vfmv_v_f"));
    s += "      for (size_t step = 1; step < vl; step <<= 1)\n";
    s += fmt::format("        v = {}(v, {}(zero, v, step, vl), vl);\n", l.f("vfadd_vv"), l.f("vslideup_vx"));
    s += fmt::format("      const float total = __riscv_vfmv_f_s_f32{}_f32({}(v, vl - 1, vl));\n", l.name(),
                     l.f("vslidedown_vx"));
    s += fmt::format("      {}(yo + j, {}(v, carry, vl), vl);\n", l.f("vse32_v"), l.f("vfadd_vf"));
    s += "      const float y = total - comp, t = carry + y;\n      comp = (t - carry) - y;\n      carry = t;\n    }\n";
  } else {
    s += fmt::format("    for (size_t i = 0, vl; i < {}; i += vl) {{\n      vl = {}({} - i);\n", r.inner, l.vsetvl(),
                     r.inner);
    s += fmt::format("      {0} acc = {1}(0.0f, vl), comp = {1}(0.0f, vl);  // Kahan, per column\n", l.f32(),
                     l.f("vfmv_v_f"));
    s += fmt::format("      for (int64_t j = 0; j < {}; ++j) {{\n", r.reduce);
    s += fmt::format("        const {} y = {}({}(xo + j * {} + i, vl), comp, vl);\n", l.f32(), l.f("vfsub_vv"),
                     l.f("vle32_v"), r.inner);
    s += fmt::format("        const {} t = {}(acc, y, vl);\n", l.f32(), l.f("vfadd_vv"));
    s += fmt::format("        comp = {0}({0}(t, acc, vl), y, vl);\n        acc = t;\n", l.f("vfsub_vv"));
    s += fmt::format("        {}(yo + j * {} + i, acc, vl);\n      }}\n    }}\n", l.f("vse32_v"), r.inner);
  }
  s += "  }\n";
  s += epilogue_pass(plan.expr, plan.out_numel, l, "  ");
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

}  // namespace

std::vector<Variant> scan_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> v;
  for (int m : {1, 2, 4}) v.push_back(scan_variant(plan, problem, Lmul{m}));
  v.push_back(scan_variant(plan, problem, std::nullopt));
  return v;
}

}  // namespace mblast::policy::rvv
