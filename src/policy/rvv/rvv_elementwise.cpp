// rvv candidates for elementwise plans: out[i] = expr, strip-mined at one LMUL, optionally with
// U strips of VLMAX per iteration (one vsetvl for the main loop) before the strip-mined tail.
// Leaves that vary along the output (a per-column or per-channel tensor) are read in blocks
// where they are contiguous or constant (choose_block), so no gather is needed for them.
#include <fmt/format.h>

#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

std::string block_text(int64_t block, int64_t total, const VectorExpr& ve) {
  if (block == total) return "one block";
  std::string s = fmt::format("blocks of {}", block);
  if (ve.gathered_leaves()) s += fmt::format(", {} leaf tensor(s) gathered (vluxei32)", ve.gathered_leaves());
  return s;
}

Variant make(const KernelPlan& plan, const Problem& problem, Lmul lm, int unroll) {
  const int64_t total = plan.out_numel;
  const int64_t block = choose_block(plan.expr, total);
  VectorExpr ve(plan.expr, lm, block);

  Variant v;
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}, {"unroll", unroll}};
  std::string source;
  if (!ve.vectorised()) {
    std::string ops;
    for (const auto& o : ve.unknown_ops()) ops += (ops.empty() ? "" : ", ") + o;
    v.family = "rvv.elementwise.scalar";
    v.params = nlohmann::json::object();
    v.actions = {"rvv.vector-length-agnostic"};
    v.description = "scalar C loop (left to clang's auto-vectoriser): no vector form for " + ops;
    source = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
    source += run_begin(problem);
    source += scalar_loop(plan.expr, "0", std::to_string(total), "out", "  ");
    source += "  return 0;\n}\n";
    v.source = std::move(source);
    return v;
  }

  v.family = "rvv.elementwise.strip-mined";
  const bool heavy = !ve.helpers().empty();
  v.actions = {lm.m >= 2 ? "rvv.lmul-large-for-streaming" : "rvv.lmul-small-for-register-blocking",
               "rvv.strip-mining-vsetvl", "rvv.vector-length-agnostic"};
  if (heavy && lm.m <= 2) v.actions[0] = "rvv.lmul-small-for-register-blocking";
  if (unroll > 1) v.actions.push_back("rvv.minimise-vtype-changes");
  add_expr_actions(ve, &v.actions);
  v.description = fmt::format("one pass over {} elements at LMUL {}{}, {}{}", total, lm.name(),
                              unroll > 1 ? fmt::format(", {} strips of VLMAX per iteration", unroll) : "",
                              block_text(block, total, ve), heavy ? ", transcendentals as vector polynomials" : "");

  source = file_header(v.family, v.params, plan, v.description) + shape_check(problem);
  if (heavy) source += math_helpers(ve.helpers(), lm) + "\n";
  source += run_begin(problem);
  source += fmt::format("  const size_t vlmax = {};\n  (void)vlmax;\n", lm.vsetvlmax());
  source += fmt::format("  for (int64_t blk = 0; blk < {}; ++blk) {{\n    const int64_t base = blk * {};\n",
                        total / block, block);
  source += ve.block_setup("base", "    ");
  source += "    float* restrict o = out + base;\n    size_t j = 0;\n";
  if (unroll > 1) {
    source += fmt::format("    for (; j + {} * vlmax <= {}; j += {} * vlmax) {{\n", unroll, block, unroll);
    for (int u = 0; u < unroll; ++u) {
      const std::string ju = u == 0 ? "j" : fmt::format("(j + {} * vlmax)", u);
      source += "      {\n        const size_t vl = vlmax;\n";
      source += ve.strip("base", ju, "vl", "", "res", "        ");
      source += fmt::format("        {}(o + {}, res, vl);\n      }}\n", lm.f("vse32_v"), ju);
    }
    source += "    }\n";
  }
  source += fmt::format("    for (size_t vl; j < {}; j += vl) {{\n      vl = {}({} - j);\n", block, lm.vsetvl(), block);
  source += ve.strip("base", "j", "vl", "", "res", "      ");
  source += fmt::format("      {}(o + j, res, vl);\n    }}\n  }}\n  return 0;\n}}\n", lm.f("vse32_v"));
  v.source = std::move(source);
  return v;
}

}  // namespace

std::vector<Variant> elementwise_variants(const KernelPlan& plan, const Problem& problem) {
  VectorExpr probe(plan.expr, Lmul{1}, choose_block(plan.expr, plan.out_numel));
  if (!probe.vectorised()) return {make(plan, problem, Lmul{1}, 1)};
  // Light expressions: a few live vectors, so unrolling fits up to 16 registers of loads in
  // flight; transcendental ones keep U = 1 (their temporaries fill the register file at m4/m8).
  const bool heavy = !probe.helpers().empty();
  std::vector<std::pair<int, int>> grid;  // (lmul, unroll)
  for (int m : {1, 2, 4, 8})
    for (int u : {1, 2, 4})
      if (heavy ? (u == 1 || (u == 2 && m <= 2)) : m * u <= 16) grid.emplace_back(m, u);
  std::vector<Variant> out;
  for (auto [m, u] : grid) out.push_back(make(plan, problem, Lmul{m}, u));
  return out;
}

}  // namespace mblast::policy::rvv
