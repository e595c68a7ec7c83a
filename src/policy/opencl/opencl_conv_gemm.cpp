// conv plans as matrix products through CLBlast, the way CPU and GPU libraries do most
// convolutions: for every (sample, group) b, out[b] (cout/g x out_h*out_w) = W[g] (cout/g x K)
// times col[b] (K x out_h*out_w), K = cin/g * kh * kw, where col (im2col) holds, for each
// weight tap, the input values that tap meets at every output position (zero where the window
// hangs over the padding). One kernel writes col into a temporary, one strided-batched SGEMM
// does every product, and the epilogue (bias, batch norm, activations) runs in place. A
// pointwise conv (1x1, stride 1, no padding) needs no col: its input already is one.
//
// The batched GEMM needs one stride per operand, which holds when there is one group (W shared:
// stride 0) or one sample (W's groups one after another); other grouped convs keep the direct
// kernels. col costs K x out_h*out_w floats per (sample, group), capped below.
#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

constexpr int64_t kMaxColFloats = int64_t{1} << 28;  // 1 GiB of im2col

bool pointwise(const ConvShape& c) {
  return c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.ph == 0 && c.pw == 0 && c.pw_end() == 0;
}

}  // namespace

std::vector<Design> conv_gemm_designs(const KernelPlan& plan, const Problem& problem) {
  const ConvShape& c = plan.conv;
  if (c.groups != 1 && c.n != 1) return {};
  const int64_t cig = c.cin / c.groups, cog = c.cout / c.groups, kg = cig * c.kh * c.kw, ohw = c.out_h * c.out_w;
  const int64_t batches = c.n * c.groups, col_floats = batches * kg * ohw;
  const bool direct_b = pointwise(c);
  if (!direct_b && col_floats > kMaxColFloats) return {};
  const std::string x = gpu::buffer_name({false, plan.source});
  const std::string w = gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight});
  const bool wide = std::max(col_floats, plan.out_numel) >= (int64_t{1} << 31) - (int64_t{1} << 20);
  const std::string idx = wide ? "long" : index_type(plan, problem);

  Design d;
  d.family = "opencl.conv.gemm";
  d.params = {{"im2col", !direct_b}};
  d.description = std::string(direct_b ? "pointwise convolution as" : "im2col into a temporary, then") +
                  " CLBlast's tuned SGEMM (" +
                  (batches > 1 ? fmt::format("{} products, strided-batched", batches) : std::string("one product")) +
                  ")" + (gpu::expr_has_ops(plan.expr) ? ", then the epilogue in place" : "");
  d.actions = {"opencl.local-memory-tiling", "opencl.register-blocking"};
  std::string b_operand = x;
  if (!direct_b) {
    std::string k;
    k += fmt::format("#define COL_TOTAL {}\n\n", col_floats);
    k += "// col[b][t][p]: tap t = (ci, r, q) of (sample, group) b at output position p = (oh, ow).\n";
    k += "__kernel void mb_im2col(__global float* restrict col, __global const float* restrict x) {\n";
    k += fmt::format("  const {0} i = ({0})get_global_id(0);\n", idx);
    k += "  if (i >= COL_TOTAL) return;\n";
    k += fmt::format("  const {0} p = i % {1}, t = (i / {1}) % {2}, b = i / ({1} * {2});\n", idx, ohw, kg);
    k += fmt::format("  const {0} n = b / {1}, g = b % {1};\n", idx, c.groups);
    k += fmt::format("  const {0} ci = t / {1}, r = (t / {2}) % {3}, q = t % {2};\n", idx, c.kh * c.kw, c.kw, c.kh);
    k += fmt::format("  const {0} ih = (p / {1}) * {2} - {3} + r * {4};\n", idx, c.out_w, c.sh, c.ph, c.dh);
    k += fmt::format("  const {0} iw = (p % {1}) * {2} - {3} + q * {4};\n", idx, c.out_w, c.sw, c.pw, c.dw);
    k += fmt::format("  const bool inside = ih >= 0 && ih < {} && iw >= 0 && iw < {};\n", c.h, c.w);
    k += fmt::format("  col[i] = inside ? x[((n * {} + g * {} + ci) * {} + ih) * {} + iw] : 0.0f;\n}}\n", c.cin, cig,
                     c.h, c.w);
    d.kernels = k;
    d.temps = {col_floats};
    Launch l;
    l.kernel = "mb_im2col";
    l.global = {col_floats, 1, 1};
    l.args = {"tmp0", x};
    d.launches.push_back(l);
    b_operand = "tmp0";
  }
  ClblastGemm g;
  g.m = cog;
  g.n = ohw;
  g.k = kg;
  g.lda = kg;
  g.ldb = ohw;
  g.ldc = ohw;
  if (batches > 1) {
    g.batch = batches;
    g.stride_a = c.groups > 1 ? cog * kg : 0;  // one sample: the groups' weights in turn; one group: shared
    g.stride_b = kg * ohw;
    g.stride_c = cog * ohw;
  }
  Launch gemm;
  gemm.gemm = g;
  gemm.args = {"out", w, b_operand};
  d.launches.push_back(gemm);
  add_inplace_epilogue(d, plan, idx);
  return {d};
}

}  // namespace mblast::policy::opencl
