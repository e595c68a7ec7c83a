// rvv candidates for the argmax kind (int64 indices of the first maximum along one axis, NaN
// above all as in PyTorch). Contiguous rows: each lane keeps the best value of its elements and
// their index (a strict > and a NaN only over a non-NaN, so the first one stays), VLMAX at a
// time; the lanes are merged in C (ties to the lower index) with the row's tail. The scalar
// variant, for any axis, walks each column in C.
#include <optional>

#include <fmt/format.h>

#include "../gpu_common.h"
#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

Variant argmax_variant(const KernelPlan& plan, const Problem& problem, std::optional<Lmul> lm) {
  const ReduceShape& r = plan.rshape;
  Variant v;
  v.family = lm ? "rvv.argmax.lanes" : "rvv.argmax.scalar";
  v.extension = ".rvv.c";
  v.params = lm ? nlohmann::json{{"lmul", lm->name()}} : nlohmann::json::object();
  v.actions = {"rvv.vector-length-agnostic"};
  if (lm) {
    v.actions.push_back("rvv.masking-if-conversion");
    v.actions.push_back("rvv.vid-index-generation");
    v.actions.push_back(lm->m >= 2 ? "rvv.lmul-large-for-streaming" : "rvv.lmul-small-for-register-blocking");
  }
  v.description =
      lm ? fmt::format(
               "argmax of each row, a best value and its index per lane VLMAX at a time at LMUL {}, lanes merged in C",
               lm->name())
         : std::string("argmax in scalar C, one column at a time");
  std::string s =
      file_header(v.family, v.params, plan, v.description) + shape_check(problem) + gpu::argmax_better() + "\n";
  s += "static void mb_take(float v, int64_t i, float* bv, int64_t* bi) {\n  if (MB_TAKES(v, i, *bv, *bi)) {\n    *bv "
       "= v;\n    *bi = i;\n  }\n}\n\n";
  s += run_begin(problem);
  s += "  (void)out;\n  int64_t* restrict idx = (int64_t*)outputs[0].data;\n";
  const std::string x = fmt::format("in{}", plan.source);
  if (!lm) {
    s += fmt::format("  for (int64_t c = 0; c < {}; ++c) {{\n", r.outer * r.inner);
    s += fmt::format("    const int64_t o = c / {0}, in = c % {0};\n", r.inner);
    s += "    float bv = -INFINITY;\n    int64_t bi = INT64_MAX;\n";
    s += fmt::format("    for (int64_t j = 0; j < {}; ++j) mb_take({}[(o * {} + j) * {} + in], j, &bv, &bi);\n",
                     r.reduce, x, r.reduce, r.inner);
    s += "    idx[c] = bi;\n  }\n";
  } else {
    const Lmul& l = *lm;
    const std::string ms = "_" + l.mask_suffix();
    s += fmt::format("  const size_t vlmax = {};\n", l.vsetvlmax());
    s += "  float lane_v[1024];\n  uint32_t lane_i[1024];  // VLMAX <= 1024 up to VLEN 8192 at LMUL 4\n";
    s += fmt::format("  for (int64_t row = 0; row < {}; ++row) {{\n", r.outer);
    s += fmt::format("    const float* restrict xr = {} + row * {};\n", x, r.reduce);
    s += "    float bv = -INFINITY;\n    int64_t bi = INT64_MAX;\n    size_t j = 0;\n";
    s += fmt::format("    if ({} >= vlmax) {{\n", r.reduce);
    s += fmt::format("      const {} lane = {}(vlmax);\n", l.u32(), l.u("vid_v"));
    s += fmt::format("      {} best = {}(xr, vlmax);\n      {} at = lane;\n", l.f32(), l.f("vle32_v"), l.u32());
    s += fmt::format("      for (j = vlmax; j + vlmax <= {}; j += vlmax) {{\n", r.reduce);
    s += fmt::format("        const {} v = {}(xr + j, vlmax);\n", l.f32(), l.f("vle32_v"));
    s += fmt::format("        const {} up = __riscv_vmor_mm{}({}{}(v, best, vlmax), {}{}(v, v, vlmax), vlmax);\n",
                     l.mask(), ms, l.f("vmfgt_vv"), ms, l.f("vmfne_vv"), ms);
    s += fmt::format("        const {} take = __riscv_vmandn_mm{}(up, {}{}(best, best, vlmax), vlmax);\n", l.mask(), ms,
                     l.f("vmfne_vv"), ms);
    s += fmt::format("        best = {}(best, v, take, vlmax);\n", l.f("vmerge_vvm"));
    s += fmt::format("        at = {}(at, {}(lane, (uint32_t)j, vlmax), take, vlmax);\n      }}\n", l.u("vmerge_vvm"),
                     l.u("vadd_vx"));
    s += fmt::format("      {}(lane_v, best, vlmax);\n      {}(lane_i, at, vlmax);\n", l.f("vse32_v"), l.u("vse32_v"));
    s += "      for (size_t k = 0; k < vlmax; ++k) mb_take(lane_v[k], (int64_t)lane_i[k], &bv, &bi);\n    }\n";
    s += fmt::format("    for (; j < {}; ++j) mb_take(xr[j], (int64_t)j, &bv, &bi);\n", r.reduce);
    s += "    idx[row] = bi;\n  }\n";
  }
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

}  // namespace

std::vector<Variant> argmax_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> v;
  if (plan.rshape.inner == 1)
    for (int m : {1, 4}) v.push_back(argmax_variant(plan, problem, Lmul{m}));
  v.push_back(argmax_variant(plan, problem, std::nullopt));
  return v;
}

}  // namespace mblast::policy::rvv
