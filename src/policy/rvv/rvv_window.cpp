// rvv candidates for the window kinds, 2-D pooling and direct convolution: for each plane (or
// output channel) and output row, the output columns whose whole window lies inside the input
// horizontally are computed VLMAX at a time, one strided load (vlse32; unit-stride for stride 1)
// per window tap, rows outside the input skipped for the whole strip; the few border columns,
// and every column in the scalar variants, walk their window in C (gpu::pool_window /
// gpu::conv_window). Max keeps NaN as PyTorch does; avg divides the sum by the window size (or by
// the taps inside, without count_include_pad); a conv tap is one vfmacc by the scalar weight.
// A transposed convolution scatters instead: per output row, each input row that lands on it
// through a tap row adds, tap column by tap column, its whole row (VLMAX at a time, unit-stride)
// times the scalar weight into the output columns iw * sw + q * dw - pw (a strided
// load-accumulate-store, unit-stride for stride 1); its scalar variant gathers per output
// (gpu::conv_transpose_window). The epilogue (a conv's bias included) is a separate pass.
#include <optional>

#include <fmt/format.h>

#include "../gpu_common.h"
#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

// static float mb_pool_one(const float* x, int64_t i): output element i (scalar C).
std::string pool_one(const KernelPlan& plan) {
  std::string s = "static float mb_pool_one(const float* restrict x, int64_t i) {\n";
  s += gpu::pool_window(plan, "x", "i", "int64_t", "  ");
  s += "  (void)plane;\n  return acc;\n}\n\n";
  return s;
}

// Output columns [lo, hi) whose window reads only columns inside the input for every tap.
std::pair<int64_t, int64_t> interior_columns(int64_t out_w, int64_t w, int64_t pw, int64_t sw, int64_t kw, int64_t dw) {
  const int64_t lo = std::min<int64_t>(out_w, gpu::ceil_div(pw, sw));
  const int64_t last = w - 1 + pw - (kw - 1) * dw;  // the largest ow * sw that stays inside
  return {lo, std::max<int64_t>(lo, last < 0 ? 0 : std::min<int64_t>(out_w, last / sw + 1))};
}

std::string conv_one(const KernelPlan& plan);
std::string weight_name(const KernelPlan& plan);

// Every output through mb_pool_one / mb_conv_one: the scalar variant of each window kind.
Variant scalar_variant(const KernelPlan& plan, const Problem& problem) {
  const bool conv = is_conv_kind(plan.kind);
  Variant v;
  v.family = "rvv." + plan.kind + ".scalar";
  v.extension = ".rvv.c";
  v.params = nlohmann::json::object();
  v.actions = {"rvv.vector-length-agnostic"};
  v.description = fmt::format("{} in scalar C, one output at a time (left to clang's auto-vectoriser)",
                              plan.kind == "conv"             ? std::string("direct convolution")
                              : plan.kind == "conv_transpose" ? std::string("transposed convolution as a gather")
                                                              : plan.pool_op + " pooling");
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem) +
                  epilogue_helpers(plan.expr, plan.out_numel, Lmul{1}) + (conv ? conv_one(plan) : pool_one(plan));
  s += run_begin(problem);
  s += fmt::format("  for (int64_t i = 0; i < {}; ++i) out[i] = {}(in{}{}, i);\n", plan.out_numel,
                   conv ? "mb_conv_one" : "mb_pool_one", plan.source, conv ? ", " + weight_name(plan) : std::string());
  s += epilogue_pass(plan.expr, plan.out_numel, Lmul{1}, "  ");
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

Variant vector_variant(const KernelPlan& plan, const Problem& problem, Lmul lm) {
  const PoolShape& p = plan.pool;
  const bool is_max = plan.pool_op == "max";
  const auto [lo, hi] = interior_columns(p.out_w, p.w, p.pw, p.sw, p.kw, p.dw);

  Variant v;
  v.family = "rvv.pool.strided-strips";
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}};
  v.actions = {"rvv.strip-mining-vsetvl", "rvv.vector-length-agnostic",
               p.sw == 1 ? "rvv.unit-stride-over-strided" : "rvv.strided-load-for-columns",
               lm.m >= 2 ? "rvv.lmul-large-for-streaming" : "rvv.lmul-small-for-register-blocking"};
  v.description = fmt::format(
      "{} pooling, output columns {}..{} of each row VLMAX at a time at LMUL {} ({} load per tap), "
      "the {} border column(s) in scalar C",
      plan.pool_op, lo, hi, lm.name(), p.sw == 1 ? "a unit-stride" : "a strided", p.out_w - (hi - lo));
  const std::string mask = lm.mask(), ms = "_" + lm.mask_suffix();
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem) +
                  epilogue_helpers(plan.expr, plan.out_numel, lm) + pool_one(plan);
  s += run_begin(problem);
  s += fmt::format("  for (int64_t plane = 0; plane < {}; ++plane) {{\n", p.planes);
  s += fmt::format("    const float* restrict xp = in{} + plane * {};\n", plan.source, p.h * p.w);
  s += fmt::format("    for (int64_t oh = 0; oh < {}; ++oh) {{\n", p.out_h);
  s += fmt::format("      float* restrict orow = out + (plane * {} + oh) * {};\n", p.out_h, p.out_w);
  s += fmt::format("      const int64_t first = (plane * {} + oh) * {};\n", p.out_h, p.out_w);
  s += fmt::format("      for (int64_t ow = 0; ow < {}; ++ow) orow[ow] = mb_pool_one(in{}, first + ow);\n", lo,
                   plan.source);
  s += fmt::format("      for (int64_t ow = {}; ow < {}; ++ow) orow[ow] = mb_pool_one(in{}, first + ow);\n", hi,
                   p.out_w, plan.source);
  if (hi > lo) {
    s += "      int rows = 0;\n";
    s += fmt::format("      for (size_t j = {}, vl; j < {}; j += vl) {{\n", lo, hi);
    s += fmt::format("        vl = {}({} - j);\n", lm.vsetvl(), hi);
    s += fmt::format("        {} acc = {}({}, vl);\n", lm.f32(), lm.f("vfmv_v_f"), is_max ? "-INFINITY" : "0.0f");
    if (is_max) s += fmt::format("        {} nan = __riscv_vmclr_m{}(vl);\n", mask, ms);
    s += "        rows = 0;\n";
    s += fmt::format("        for (int r = 0; r < {}; ++r) {{\n", p.kh);
    s += fmt::format("          const int64_t ih = oh * {} - {} + r * {};\n", p.sh, p.ph, p.dh);
    s += fmt::format("          if (ih < 0 || ih >= {}) continue;\n", p.h);
    s += "          ++rows;\n";
    s += fmt::format("          for (int c = 0; c < {}; ++c) {{\n", p.kw);
    s += fmt::format("            const float* restrict src = xp + ih * {} + (int64_t)j * {} - {} + c * {};\n", p.w,
                     p.sw, p.pw, p.dw);
    if (p.sw == 1)
      s += fmt::format("            const {} x = {}(src, vl);\n", lm.f32(), lm.f("vle32_v"));
    else
      s += fmt::format("            const {} x = {}(src, {} * sizeof(float), vl);\n", lm.f32(), lm.f("vlse32_v"), p.sw);
    if (is_max) {
      s += fmt::format("            nan = __riscv_vmor_mm{}(nan, {}{}(x, x, vl), vl);\n", ms, lm.f("vmfne_vv"), ms);
      s += fmt::format("            acc = {}(acc, x, vl);\n", lm.f("vfmax_vv"));
    } else {
      s += fmt::format("            acc = {}(acc, x, vl);\n", lm.f("vfadd_vv"));
    }
    s += "          }\n        }\n";
    if (is_max)
      s += fmt::format("        acc = {}(acc, NAN, nan, vl);  // NaN propagates, as in PyTorch\n", lm.f("vfmerge_vfm"));
    else if (p.count_include_pad)
      s += fmt::format("        acc = {}(acc, {}.0f, vl);\n", lm.f("vfdiv_vf"), p.kh * p.kw);
    else
      s += fmt::format("        acc = {}(acc, (float)(rows * {}), vl);\n", lm.f("vfdiv_vf"), p.kw);
    s += fmt::format("        {}(orow + j, acc, vl);\n      }}\n      (void)rows;\n", lm.f("vse32_v"));
  }
  s += "    }\n  }\n";
  s += epilogue_pass(plan.expr, plan.out_numel, lm, "  ");
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

// static float mb_conv_one(const float* x, const float* w, int64_t i): output element i (scalar C)
// of a conv or conv_transpose plan.
std::string conv_one(const KernelPlan& plan) {
  std::string s = "static float mb_conv_one(const float* restrict x, const float* restrict wt, int64_t i) {\n";
  if (plan.kind == "conv_transpose") {
    s += gpu::conv_transpose_window(plan, "x", "wt", "i", "int64_t", "  ");
    return s + "  return acc;\n}\n\n";
  }
  s += gpu::conv_window(plan, "x", "wt", "i", "int64_t", "  ");
  s += "  (void)n;\n  return acc;\n}\n\n";
  return s;
}

std::string weight_name(const KernelPlan& plan) {
  return fmt::format("{}{}", plan.conv_weight_is_param ? "pr" : "in", plan.conv_weight);
}

// The family, parameters and actions of a vector convolution variant (direct or transposed):
// strips of VLMAX columns, a vfmacc by the scalar weight per tap, unit-stride or strided along the row.
Variant conv_vector_base(const std::string& family, const ConvShape& c, Lmul lm) {
  Variant v;
  v.family = family;
  v.extension = ".rvv.c";
  v.params = {{"lmul", lm.name()}};
  v.actions = {"rvv.strip-mining-vsetvl",
               "rvv.vector-length-agnostic",
               "rvv.scalar-operand-forms",
               "rvv.fused-multiply-add",
               c.sw == 1 ? "rvv.unit-stride-over-strided" : "rvv.strided-load-for-columns",
               lm.m >= 2 ? "rvv.lmul-large-for-streaming" : "rvv.lmul-small-for-register-blocking"};
  return v;
}

Variant conv_vector_variant(const KernelPlan& plan, const Problem& problem, Lmul lm) {
  const ConvShape& c = plan.conv;
  const auto [lo, hi] = interior_columns(c.out_w, c.w, c.pw, c.sw, c.kw, c.dw);
  const int64_t cig = c.cin / c.groups, cog = c.cout / c.groups;
  Variant v = conv_vector_base("rvv.conv.strided-strips", c, lm);
  v.description = fmt::format(
      "direct convolution, output columns {}..{} of each row VLMAX at a time at LMUL {} (a {} load and a "
      "vfmacc by the scalar weight per tap), the {} border column(s) in scalar C",
      lo, hi, lm.name(), c.sw == 1 ? "unit-stride" : "strided", c.out_w - (hi - lo));
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem) +
                  epilogue_helpers(plan.expr, plan.out_numel, lm) + conv_one(plan);
  s += run_begin(problem);
  const std::string wname = weight_name(plan);
  s += fmt::format("  for (int64_t n = 0; n < {}; ++n)\n  for (int64_t co = 0; co < {}; ++co) {{\n", c.n, c.cout);
  s += fmt::format("    const float* restrict xg = in{} + (n * {} + co / {} * {}) * {};\n", plan.source, c.cin, cog,
                   cig, c.h * c.w);
  s += fmt::format("    const float* restrict wg = {} + co * {};\n", wname, cig * c.kh * c.kw);
  s += fmt::format("    for (int64_t oh = 0; oh < {}; ++oh) {{\n", c.out_h);
  s += fmt::format("      const int64_t first = ((n * {} + co) * {} + oh) * {};\n", c.cout, c.out_h, c.out_w);
  s += "      float* restrict orow = out + first;\n";
  s += fmt::format("      for (int64_t ow = 0; ow < {}; ++ow) orow[ow] = mb_conv_one(in{}, {}, first + ow);\n", lo,
                   plan.source, wname);
  s += fmt::format("      for (int64_t ow = {}; ow < {}; ++ow) orow[ow] = mb_conv_one(in{}, {}, first + ow);\n", hi,
                   c.out_w, plan.source, wname);
  if (hi > lo) {
    s += fmt::format("      for (size_t j = {}, vl; j < {}; j += vl) {{\n", lo, hi);
    s += fmt::format("        vl = {}({} - j);\n", lm.vsetvl(), hi);
    s += fmt::format("        {} acc = {}(0.0f, vl);\n", lm.f32(), lm.f("vfmv_v_f"));
    s += fmt::format("        for (int ci = 0; ci < {}; ++ci)\n", cig);
    s += fmt::format("        for (int r = 0; r < {}; ++r) {{\n", c.kh);
    s += fmt::format("          const int64_t ih = oh * {} - {} + r * {};\n", c.sh, c.ph, c.dh);
    s += fmt::format("          if (ih < 0 || ih >= {}) continue;\n", c.h);
    s += fmt::format("          for (int q = 0; q < {}; ++q) {{\n", c.kw);
    s +=
        fmt::format("            const float* restrict src = xg + ci * {} + ih * {} + (int64_t)j * {} - {} + q * {};\n",
                    c.h * c.w, c.w, c.sw, c.pw, c.dw);
    if (c.sw == 1)
      s += fmt::format("            const {} x = {}(src, vl);\n", lm.f32(), lm.f("vle32_v"));
    else
      s += fmt::format("            const {} x = {}(src, {} * sizeof(float), vl);\n", lm.f32(), lm.f("vlse32_v"), c.sw);
    s += fmt::format("            acc = {}(acc, wg[(ci * {} + r) * {} + q], x, vl);\n", lm.f("vfmacc_vf"), c.kh, c.kw);
    s += "          }\n        }\n";
    s += fmt::format("        {}(orow + j, acc, vl);\n      }}\n", lm.f("vse32_v"));
  }
  s += "    }\n  }\n";
  s += epilogue_pass(plan.expr, plan.out_numel, lm, "  ");
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

// conv_transpose by scatter: output row (n, co, oh) zeroed, then for each of the group's input
// channels, each tap row r that lands an input row ih on oh (oh + ph - r * dh = ih * sh) and each
// tap column q, the input columns iw whose target ow = iw * sw + q * dw - pw lies in the row get
// x[ih, iw] * w[ci, co, r, q] added, VLMAX columns at a time.
Variant conv_transpose_vector_variant(const KernelPlan& plan, const Problem& problem, Lmul lm) {
  const ConvShape& c = plan.conv;
  const int64_t cig = c.cin / c.groups, cog = c.cout / c.groups, taps = c.kh * c.kw;
  Variant v = conv_vector_base("rvv.conv_transpose.scatter-rows", c, lm);
  v.description = fmt::format(
      "transposed convolution by scatter: each input row adds into the output row it lands on, VLMAX columns a "
      "tap at LMUL {} (a unit-stride load of the input, a {} accumulate into the output)",
      lm.name(), c.sw == 1 ? "unit-stride" : "strided");
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem) +
                  epilogue_helpers(plan.expr, plan.out_numel, lm);
  s += run_begin(problem);
  const std::string wname = weight_name(plan);
  s += fmt::format("  for (int64_t n = 0; n < {}; ++n)\n  for (int64_t co = 0; co < {}; ++co) {{\n", c.n, c.cout);
  s += fmt::format("    const int64_t g = co / {}, col = co % {};\n", cog, cog);
  s += fmt::format("    const float* restrict xg = in{} + (n * {} + g * {}) * {};\n", plan.source, c.cin, cig,
                   c.h * c.w);
  s += fmt::format(
      "    const float* restrict wg = {} + (g * {} + col) * {};  // w[g * {} + cj, col, r, q] at wg[cj * {} + r * {} + "
      "q]\n",
      wname, cig * cog, taps, cig, cog * taps, c.kw);
  s += fmt::format("    for (int64_t oh = 0; oh < {}; ++oh) {{\n", c.out_h);
  s += fmt::format("      float* restrict orow = out + ((n * {} + co) * {} + oh) * {};\n", c.cout, c.out_h, c.out_w);
  s += fmt::format("      for (size_t j = 0, vl; j < {}; j += vl) {{\n", c.out_w);
  s += fmt::format("        vl = {}({} - j);\n        {}(orow + j, {}(0.0f, vl), vl);\n      }}\n", lm.vsetvl(),
                   c.out_w, lm.f("vse32_v"), lm.f("vfmv_v_f"));
  s += fmt::format("      for (int cj = 0; cj < {}; ++cj)\n", cig);
  s += fmt::format("      for (int r = 0; r < {}; ++r) {{\n", c.kh);
  s += fmt::format("        const int64_t th = oh + {} - r * {};\n", c.ph, c.dh);
  s += fmt::format("        if (th < 0 || th % {} != 0 || th / {} >= {}) continue;\n", c.sh, c.sh, c.h);
  s += fmt::format("        const float* restrict xrow = xg + cj * {} + th / {} * {};\n", c.h * c.w, c.sh, c.w);
  s += fmt::format("        for (int q = 0; q < {}; ++q) {{\n", c.kw);
  s += fmt::format("          const int64_t off = (int64_t)q * {} - {};  // input column iw lands on iw * {} + off\n",
                   c.dw, c.pw, c.sw);
  s += fmt::format("          const int64_t lo = off >= 0 ? 0 : (-off + {0} - 1) / {0};\n", c.sw);
  s += fmt::format(
      "          const int64_t hi = off > {0} ? 0 : ({0} - off) / {1} + 1 < {2} ? ({0} - off) / {1} + 1 : {2};\n",
      c.out_w - 1, c.sw, c.w);
  s += fmt::format("          const float wv = wg[cj * {} + r * {} + q];\n", cog * taps, c.kw);
  s += "          for (size_t j = lo, vl; (int64_t)j < hi; j += vl) {\n";
  s += fmt::format("            vl = {}(hi - j);\n", lm.vsetvl());
  s += fmt::format("            float* dst = orow + (int64_t)j * {} + off;\n", c.sw);
  s += fmt::format("            const {} x = {}(xrow + j, vl);\n", lm.f32(), lm.f("vle32_v"));
  if (c.sw == 1) {
    s += fmt::format("            {}(dst, {}({}(dst, vl), wv, x, vl), vl);\n", lm.f("vse32_v"), lm.f("vfmacc_vf"),
                     lm.f("vle32_v"));
  } else {
    s += fmt::format("            {}(dst, {} * sizeof(float), {}({}(dst, {} * sizeof(float), vl), wv, x, vl), vl);\n",
                     lm.f("vsse32_v"), c.sw, lm.f("vfmacc_vf"), lm.f("vlse32_v"), c.sw);
  }
  s += "          }\n        }\n      }\n    }\n  }\n";
  s += epilogue_pass(plan.expr, plan.out_numel, lm, "  ");
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

// A gather (a permute or slice made dense): one output row (the innermost dim) at a time, its
// source offset from the row's coordinates, the row copied VLMAX at a time by a strided load
// (unit-stride where the innermost stride is 1); the scalar variant copies element by element.
Variant gather_variant(const KernelPlan& plan, const Problem& problem, std::optional<Lmul> lm) {
  const auto& shape = plan.gather_shape;
  const auto& st = plan.gather_strides;
  const int64_t inner = shape.back(), step = st.back(), rows = plan.out_numel / inner;
  Variant v;
  v.family = lm ? "rvv.gather.strided-rows" : "rvv.gather.scalar";
  v.extension = ".rvv.c";
  v.params = lm ? nlohmann::json{{"lmul", lm->name()}} : nlohmann::json::object();
  v.actions = {"rvv.vector-length-agnostic"};
  if (lm) {
    v.actions.push_back("rvv.strip-mining-vsetvl");
    v.actions.push_back(step == 1 ? "rvv.unit-stride-over-strided" : "rvv.strided-load-for-columns");
  }
  v.description = lm ? fmt::format("strided copy, rows of {} copied VLMAX at a time at LMUL {} ({} load)", inner,
                                   lm->name(), step == 1 ? "a unit-stride" : "a strided")
                     : std::string("strided copy in scalar C, one element at a time");
  const Lmul l = lm.value_or(Lmul{1});
  std::string s = file_header(v.family, v.params, plan, v.description) + shape_check(problem) +
                  epilogue_helpers(plan.expr, plan.out_numel, l);
  s += run_begin(problem);
  const std::string x = fmt::format("in{}", plan.source);
  if (!lm) {
    s += fmt::format("  for (int64_t i = 0; i < {}; ++i) {{\n", plan.out_numel);
    s += gpu::gather_window(plan, x, "i", "int64_t", "    ");
    s += "    out[i] = acc;\n  }\n";
  } else {
    KernelPlan rows_plan = plan;  // the row's first element: the gather over all dims but the last
    rows_plan.gather_shape.pop_back();
    rows_plan.gather_strides.pop_back();
    s += fmt::format("  for (int64_t row = 0; row < {}; ++row) {{\n", rows);
    s += gpu::gather_source_offset(rows_plan, "row", "int64_t", "    ");  // one row: src = the offset
    s +=
        fmt::format("    const float* restrict from = {} + src;\n    float* restrict to = out + row * {};\n", x, inner);
    s += fmt::format("    for (size_t j = 0, vl; j < {}; j += vl) {{\n      vl = {}({} - j);\n", inner, l.vsetvl(),
                     inner);
    if (step == 1)
      s += fmt::format("      {}(to + j, {}(from + j, vl), vl);\n", l.f("vse32_v"), l.f("vle32_v"));
    else
      s += fmt::format("      {}(to + j, {}(from + (int64_t)j * {}, {} * sizeof(float), vl), vl);\n", l.f("vse32_v"),
                       l.f("vlse32_v"), step, step);
    s += "    }\n  }\n";
  }
  s += epilogue_pass(plan.expr, plan.out_numel, l, "  ");
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

}  // namespace

std::vector<Variant> gather_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> v;
  for (int m : {1, 4}) v.push_back(gather_variant(plan, problem, Lmul{m}));
  v.push_back(gather_variant(plan, problem, std::nullopt));
  return v;
}

std::vector<Variant> pool_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> v;
  for (int m : {1, 2, 4}) v.push_back(vector_variant(plan, problem, Lmul{m}));
  v.push_back(scalar_variant(plan, problem));
  return v;
}

std::vector<Variant> conv_variants(const KernelPlan& plan, const Problem& problem) {
  std::vector<Variant> v;
  for (int m : {1, 2, 4})
    v.push_back(plan.kind == "conv_transpose" ? conv_transpose_vector_variant(plan, problem, Lmul{m})
                                              : conv_vector_variant(plan, problem, Lmul{m}));
  v.push_back(scalar_variant(plan, problem));
  return v;
}

}  // namespace mblast::policy::rvv
