// rvv candidates for matmul plans: rvv.matmul.outer-product, a register-blocked micro-kernel.
//
// For a block of `mr` rows of A and one vector of VLMAX columns of B (a "panel"), `mr`
// accumulators stay in registers over the whole K loop; each k loads one B vector and does
// `mr` vfmacc.vf with scalar A elements. A (row-major) is packed per row block as [k][mr] so
// its `mr` scalars are adjacent (one pointer); A stored transposed is already in that order.
// B stored transposed ([n, k], nn.Linear's weight) is packed into [panel][k][VLMAX] — once in
// mblast_prepare when it is a parameter, per call when it is an input. The epilogue is applied
// to each accumulator in registers before its store. Register budget: (mr + 1) LMUL <= 32.
#include <algorithm>

#include <fmt/format.h>

#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

// The K loop is unrolled by 4 when a second B vector fits beside the accumulators; with every
// register group taken, the scheduler hoists the next B load and the allocator spills.
int k_unroll(int mr, Lmul lm, int64_t k) {
  if ((mr + 2) * lm.m > 32) return 1;
  return static_cast<int>(std::min<int64_t>(4, k));
}

std::string tensor(bool param, int index) { return (param ? "pr" : "in") + std::to_string(index); }

struct Shape {
  int64_t batch, m, n, k;
  int64_t a_batch_stride, b_batch_stride;  // elements; 0 when the operand is shared by every batch
  int64_t b_batches;                       // matrices of B to pack
};

// One row block of `mr` rows starting at m0 (in scope: b, m0, A, Bm, C, nr, vlmax).
std::string row_block(const KernelPlan& plan, const Shape& sh, int mr, Lmul lm, const VectorExpr& ve,
                      bool epilogue_in_registers, const std::string& in) {
  std::string s;
  const std::string F = lm.f32();
  if (!plan.a_transposed) {
    s += fmt::format("{}for (int r = 0; r < {}; ++r) {{  // pack A rows m0.. as [k][{}]\n", in, mr, mr);
    s += fmt::format("{}  const float* restrict src = A + (m0 + r) * {};\n", in, sh.k);
    s += fmt::format("{}  for (size_t k = 0, vl; k < {}; k += vl) {{\n{}    vl = {}({} - k);\n", in, sh.k, in,
                     lm.vsetvl(), sh.k);
    s += fmt::format("{}    {}(mb_apack + k * {} + r, {}, {}(src + k, vl), vl);\n{}  }}\n{}}}\n", in, lm.f("vsse32_v"),
                     mr, mr * 4, lm.f("vle32_v"), in, in);
  }
  s += fmt::format("{}for (size_t j = 0, p = 0; j < {}; j += nr, ++p) {{\n", in, sh.n);
  const std::string in2 = in + "  ";
  s += fmt::format("{}const size_t vl = {}({} - j < nr ? {} - j : nr);\n", in2, lm.vsetvl(), sh.n, sh.n);
  s += fmt::format("{}const float* restrict ap = {};\n", in2, plan.a_transposed ? "A + m0" : "mb_apack");
  s += fmt::format("{}const float* restrict bp = {};\n", in2,
                   plan.b_transposed ? fmt::format("Bm + p * {} * nr", sh.k) : "Bm + j");
  s += fmt::format("{}(void)p;\n", in2);
  for (int r = 0; r < mr; ++r) s += fmt::format("{}{} c{} = {}(0.0f, vl);\n", in2, F, r, lm.f("vfmv_v_f"));
  // The K loop, unrolled (loop overhead is most of what is left once mr vfmacc share one B
  // load), then the remainder.
  const std::string astride = std::to_string(plan.a_transposed ? sh.m : mr);
  const std::string bstride = plan.b_transposed ? "nr" : std::to_string(sh.n);
  auto k_step = [&](int u, const std::string& ind) {
    std::string t = fmt::format("{}{{\n{}  const {} bv = {}(bp{}, vl);\n", ind, ind, F, lm.f("vle32_v"),
                                u ? fmt::format(" + {} * {}", u, bstride) : "");
    for (int r = 0; r < mr; ++r)
      t += fmt::format("{}  c{} = {}(c{}, ap[{}{}], bv, vl);\n", ind, r, lm.f("vfmacc_vf"), r,
                       u ? fmt::format("{} * {} + ", u, astride) : "", r);
    return t + ind + "}\n";
  };
  const int ku = k_unroll(mr, lm, sh.k);
  s += fmt::format("{}int64_t k = 0;\n{}for (; k + {} <= {}; k += {}) {{\n", in2, in2, ku, sh.k, ku);
  for (int u = 0; u < ku; ++u) s += k_step(u, in2 + "  ");
  s += fmt::format("{}  ap += {} * {};\n{}  bp += {} * {};\n{}}}\n", in2, ku, astride, in2, ku, bstride, in2);
  if (sh.k % ku) {
    s += fmt::format("{}for (; k < {}; ++k) {{\n", in2, sh.k);
    s += k_step(0, in2 + "  ");
    s += fmt::format("{}  ap += {};\n{}  bp += {};\n{}}}\n", in2, astride, in2, bstride, in2);
  }
  for (int r = 0; r < mr; ++r) {
    s += in2 + "{\n";
    const std::string in3 = in2 + "  ";
    const std::string dst = fmt::format("C + (m0 + {}) * {} + j", r, sh.n);
    if (epilogue_in_registers) {
      s += fmt::format("{}const int64_t base = (b * {} + m0 + {}) * {};\n", in3, sh.m, r, sh.n);
      s += ve.block_setup("base", in3);
      s += fmt::format("{}const {} acc = c{};\n", in3, F, r);
      s += ve.strip("base", "j", "vl", "acc", "res", in3);
      s += fmt::format("{}{}({}, res, vl);\n", in3, lm.f("vse32_v"), dst);
    } else {
      s += fmt::format("{}{}({}, c{}, vl);\n", in3, lm.f("vse32_v"), dst, r);
    }
    s += in2 + "}\n";
  }
  s += in + "}\n";
  return s;
}

Variant outer_product(const KernelPlan& plan, const Problem& problem, int mr, Lmul lm) {
  Shape sh{plan.batch,
           plan.m,
           plan.n,
           plan.k,
           plan.a_batched ? plan.m * plan.k : 0,
           plan.b_batched ? plan.k * plan.n : 0,
           plan.b_batched ? plan.batch : 1};
  mr = static_cast<int>(std::min<int64_t>(mr, sh.m));
  const bool has_epi = !plan.expr.empty() && !plan.expr.is_identity_epilogue();
  VectorExpr ve(plan.expr, lm, sh.n);
  const bool epi_regs = has_epi && ve.vectorised();
  const bool prepack = plan.b_transposed && plan.b_is_param;
  const bool pack_per_call = plan.b_transposed && !plan.b_is_param;

  Variant v;
  v.family = "rvv.matmul.outer-product";
  v.extension = ".rvv.c";
  v.params = {{"mr", mr}, {"lmul", lm.name()}, {"k_unroll", k_unroll(mr, lm, sh.k)}};
  v.actions = {"rvv.matmul-outer-product-microkernel", "rvv.fused-multiply-add", "rvv.scalar-operand-forms"};
  if (lm.m <= 2) v.actions.push_back("rvv.lmul-small-for-register-blocking");
  if (prepack) v.actions.push_back("rvv.prepack-weights");
  if (!plan.b_transposed) v.actions.push_back("rvv.unit-stride-over-strided");
  if (has_epi) add_expr_actions(ve, &v.actions);
  v.description = fmt::format(
      "outer-product micro-kernel: {} rows of A x one LMUL-{} vector of B columns, {} accumulators in registers over K "
      "= {} "
      "(unrolled by {}); {}; {}{}",
      mr, lm.name(), mr, sh.k, k_unroll(mr, lm, sh.k),
      plan.a_transposed ? "A^T read in place" : "A packed per row block as [k][mr]",
      prepack         ? "B^T packed into VLMAX-wide panels in mblast_prepare"
      : pack_per_call ? "B^T packed into panels per call"
                      : "B rows streamed",
      has_epi ? (epi_regs ? ", epilogue in registers" : ", epilogue in scalar C after") : "");

  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem, prepack);
  if (epi_regs && !ve.helpers().empty()) s += math_helpers(ve.helpers(), lm) + "\n";
  if (!plan.a_transposed)
    s += fmt::format("static float mb_apack[{}];  // one row block of A as [k][mr]\n\n", mr * sh.k);
  const std::string a_ptr = tensor(plan.a_is_param, plan.a), b_ptr = tensor(plan.b_is_param, plan.b);
  if (plan.b_transposed) {
    s += "// B^T [n, k] -> [batch][panel][k][nr]: nr = VLMAX columns per panel (the last one partial).\n";
    s += "static void mb_pack_b(const float* restrict bt, float* restrict dst, size_t nr) {\n";
    s += fmt::format("  const size_t panels = ({} + nr - 1) / nr;\n", sh.n);
    s += fmt::format("  for (int64_t b = 0; b < {}; ++b)\n", sh.b_batches);
    s += fmt::format("    for (size_t j = 0, p = 0; j < {}; j += nr, ++p) {{\n", sh.n);
    s += fmt::format("      const size_t vl = {}({} - j < nr ? {} - j : nr);\n", lm.vsetvl(), sh.n, sh.n);
    s += fmt::format("      const float* restrict src = bt + b * {} + j * {};\n", sh.n * sh.k, sh.k);
    s += fmt::format("      float* restrict d = dst + (b * panels + p) * {} * nr;\n", sh.k);
    s += fmt::format("      for (int64_t k = 0; k < {}; ++k) {}(d + k * nr, {}(src + k, {}, vl), vl);\n", sh.k,
                     lm.f("vse32_v"), lm.f("vlse32_v"), sh.k * 4);
    s += "    }\n}\n\n";
    s += fmt::format(
        "static size_t mb_packed_floats(size_t nr) {{ return (size_t){} * (({} + nr - 1) / nr) * {} * nr; }}\n\n",
        sh.b_batches, sh.n, sh.k);
  }
  if (prepack) {
    s += "typedef struct mb_state {\n  float* b;  // packed B^T\n  size_t nr;\n} mb_state;\n\n";
    s +=
        "int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params, int32_t n_params, void** state) {\n"
        "  (void)ctx;\n  if (!mb_check_params(params, n_params)) return 1;\n";
    s += fmt::format("  const size_t nr = {};\n", lm.vsetvlmax());
    s += "  mb_state* s = (mb_state*)malloc(sizeof *s);\n"
         "  if (!s) {\n    g_error = \"out of memory\";\n    return 1;\n  }\n"
         "  s->nr = nr;\n  s->b = (float*)malloc(mb_packed_floats(nr) * sizeof(float));\n"
         "  if (!s->b) {\n    free(s);\n    g_error = \"out of memory\";\n    return 1;\n  }\n";
    s += fmt::format("  mb_pack_b((const float*)params[{}].data, s->b, nr);\n  *state = s;\n  return 0;\n}}\n\n",
                     plan.b);
    s += "void mblast_release(const mblast_context* ctx, void* state) {\n  (void)ctx;\n  mb_state* s = "
         "(mb_state*)state;\n"
         "  if (s) free(s->b);\n  free(s);\n}\n\n";
  }
  s += run_begin(problem);
  s += fmt::format("  const size_t nr = {};\n", lm.vsetvlmax());
  std::string b_base = b_ptr;
  if (prepack) {
    s += "  const mb_state* st = (const mb_state*)state;\n"
         "  if (!st || st->nr != nr) {\n    g_error = \"mblast_prepare did not run\";\n    return 1;\n  }\n";
    b_base = "st->b";
  } else if (pack_per_call) {
    s += "  float* packed = (float*)malloc(mb_packed_floats(nr) * sizeof(float));\n"
         "  if (!packed) {\n    g_error = \"out of memory\";\n    return 1;\n  }\n";
    s += fmt::format("  mb_pack_b({}, packed, nr);\n", b_ptr);
    b_base = "packed";
  }
  const std::string b_step =
      plan.b_transposed ? (plan.b_batched ? fmt::format("b * (({} + nr - 1) / nr) * {} * nr", sh.n, sh.k) : "0")
                        : (plan.b_batched ? fmt::format("b * {}", sh.b_batch_stride) : "0");
  s += fmt::format("  for (int64_t b = 0; b < {}; ++b) {{\n", sh.batch);
  s += fmt::format("    const float* restrict A = {} + {};\n", a_ptr,
                   plan.a_batched ? fmt::format("b * {}", sh.a_batch_stride) : "0");
  s += fmt::format("    const float* restrict Bm = {} + {};\n", b_base, b_step);
  s += fmt::format("    float* restrict C = out + b * {};\n    (void)A, (void)Bm;\n", sh.m * sh.n);
  s += fmt::format("    for (int64_t m0 = 0; m0 + {} <= {}; m0 += {}) {{\n", mr, sh.m, mr);
  s += row_block(plan, sh, mr, lm, ve, epi_regs, "      ");
  s += "    }\n";
  if (const int tail = static_cast<int>(sh.m % mr)) {
    s += fmt::format("    {{  // the last {} row(s)\n      const int64_t m0 = {};\n", tail, sh.m - tail);
    s += row_block(plan, sh, tail, lm, ve, epi_regs, "      ");
    s += "    }\n";
  }
  s += "  }\n";
  if (pack_per_call) s += "  free(packed);\n";
  if (has_epi && !epi_regs)
    s += "  // epilogue in scalar C: no vector form for some op\n" +
         scalar_loop(plan.expr, "0", std::to_string(plan.out_numel), "out", "  ");
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

}  // namespace

std::vector<Variant> matmul_variants(const KernelPlan& plan, const Problem& problem) {
  // (mr, LMUL) with (mr + 1) LMUL <= 32 vector registers: accumulators plus the B vector.
  static const std::vector<std::pair<int, int>> grid = {{4, 1}, {6, 1}, {8, 1}, {4, 2}, {6, 2}, {8, 2},
                                                        {4, 4}, {6, 4}, {7, 4}, {2, 8}, {3, 8}};
  std::vector<Variant> out;
  std::set<std::pair<int, int>> seen;
  for (auto [mr, m] : grid) {
    const int eff = static_cast<int>(std::min<int64_t>(mr, plan.m));
    if (!seen.insert({eff, m}).second) continue;
    out.push_back(outer_product(plan, problem, eff, Lmul{m}));
  }
  return out;
}

}  // namespace mblast::policy::rvv
