// Vector math for generated rvv candidates: exp, expm1, log and the activations built on them,
// as static inline C functions at one LMUL (rvv_codegen.h, math_helpers).
//
// Accuracy, float32 against double libm on 64Ki points per range (wide ranges: exp over
// [-87, 88], log over [1e-44, 1e38], the activations over [-100, 100]), at LMUL 1, 4 and 8: exp,
// log, tanh, sigmoid, silu and softplus within 3 ulp, expm1 within 5; gelu within 6 ulp plus 1e-10
// absolute; gelu_tanh within 2e-6 relative, which is the float32 rounding of its argument
// amplified by e^x, as in any float32 implementation. tests/policy/rvv_variants_test.cpp
// (VectorMathIsAccurate) checks this through the real pipeline. Every polynomial is fitted by
// fit_polynomials.py.
#include <vector>

#include "gpu_common.h"
#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

std::string at_lmul(std::string text, Lmul lm) {
  const std::vector<std::pair<std::string, std::string>> tokens = {{"$F", lm.f32()},  {"$I", lm.i32()},
                                                                   {"$U", lm.u32()},  {"$B", lm.mask()},
                                                                   {"$L", lm.name()}, {"$b", lm.mask_suffix()}};
  for (const auto& [from, to] : tokens) text = gpu::replace_all(std::move(text), from, to);
  return text;
}

namespace {

const char* kPrelude = R"C(#define MB_INLINE static inline __attribute__((always_inline))
)C";

// Polynomial steps: MB_HORNER(p, r, c) = p r + c and MB_LINEAR(r, a, c) = a r + c.
// At LMUL 1 and 2 the constants are splat at VLMAX, so the compiler hoists them out of the strip
// loop and a Horner step is one vfmadd.vv. At LMUL 4 that would need more register groups than
// there are (hoisted constants get spilled, and reloading a scalable spill slot costs five
// instructions), so they are splat at the strip's vl: vfmv.v.f + vfmadd.vv, nothing held across
// iterations. At LMUL 8 even the splat's group is one too many (the exp keeps r, n and p live in
// four groups), so a step is vfmul.vv + vfadd.vf: two roundings instead of one, well inside
// the error budget (see the accuracy test).
const char* kStepsHoisted =
    R"C(#define MB_HORNER(p, r, c) __riscv_vfmadd_vv_f32$L((p), (r), __riscv_vfmv_v_f_f32$L((c), __riscv_vsetvlmax_e32$L()), vl)
#define MB_LINEAR(r, a, c) __riscv_vfmadd_vf_f32$L((r), (a), __riscv_vfmv_v_f_f32$L((c), __riscv_vsetvlmax_e32$L()), vl)
)C";
const char* kStepsPerStrip =
    R"C(#define MB_HORNER(p, r, c) __riscv_vfmadd_vv_f32$L((p), (r), __riscv_vfmv_v_f_f32$L((c), vl), vl)
#define MB_LINEAR(r, a, c) __riscv_vfmacc_vf_f32$L(__riscv_vfmv_v_f_f32$L((c), vl), (a), (r), vl)
)C";
const char* kStepsUnfused =
    R"C(#define MB_HORNER(p, r, c) __riscv_vfadd_vf_f32$L(__riscv_vfmul_vv_f32$L((p), (r), vl), (c), vl)
#define MB_LINEAR(r, a, c) __riscv_vfadd_vf_f32$L(__riscv_vfmul_vf_f32$L((r), (a), vl), (c), vl)
)C";

const char* kExpCore6 = R"C(
// e^x for x already clamped to [-87, 88.3]: x = n ln2 + r, |r| <= ln2/2, e^r = 1 + r + r^2 q(r)
// (degree 6, relative error 1.3e-8), and 2^n added to the exponent field.
MB_INLINE $F mb_exp_core($F x, size_t vl) {
  $I n = __riscv_vfcvt_x_f_v_i32$L(__riscv_vfmul_vf_f32$L(x, 1.44269504088896341f, vl), vl);
  $F nf = __riscv_vfcvt_f_x_v_f32$L(n, vl);
  $F r = __riscv_vfnmsac_vf_f32$L(x, 0.693145751953125f, nf, vl);  // ln2 = hi + lo, hi exact in 15 bits
  r = __riscv_vfnmsac_vf_f32$L(r, 1.42860676533018e-6f, nf, vl);
  $F p = MB_LINEAR(r, 0.0013882522471249104f, 0.00836651399731636f);
  p = MB_HORNER(p, r, 0.04166720062494278f);
  p = MB_HORNER(p, r, 0.1666654348373413f);
  p = MB_HORNER(p, r, 0.4999999701976776f);
  p = MB_HORNER(p, r, 1.0f);
  p = MB_HORNER(p, r, 1.0f);
  $I bits = __riscv_vmadd_vx_i32$L(n, 1 << 23, __riscv_vreinterpret_v_f32$L_i32$L(p), vl);  // n 2^23 + bits(p)
  return __riscv_vreinterpret_v_i32$L_f32$L(bits);
}
)C";

const char* kExpCore5 = R"C(
// e^x for x already clamped to [-87, 88.3]: x = n ln2 + r, |r| <= ln2/2, e^r = 1 + r + r^2 q(r)
// (degree 5, relative error 1.1e-7), and 2^n added to the exponent field.
MB_INLINE $F mb_exp_core($F x, size_t vl) {
  $I n = __riscv_vfcvt_x_f_v_i32$L(__riscv_vfmul_vf_f32$L(x, 1.44269504088896341f, vl), vl);
  $F nf = __riscv_vfcvt_f_x_v_f32$L(n, vl);
  $F r = __riscv_vfnmsac_vf_f32$L(x, 0.693145751953125f, nf, vl);
  r = __riscv_vfnmsac_vf_f32$L(r, 1.42860676533018e-6f, nf, vl);
  $F p = MB_LINEAR(r, 0.008312525227665901f, 0.041890114545822144f);
  p = MB_HORNER(p, r, 0.16667114198207855f);
  p = MB_HORNER(p, r, 0.499992311000824f);
  p = MB_HORNER(p, r, 1.0f);
  p = MB_HORNER(p, r, 1.0f);
  $I bits = __riscv_vmadd_vx_i32$L(n, 1 << 23, __riscv_vreinterpret_v_f32$L_i32$L(p), vl);  // n 2^23 + bits(p)
  return __riscv_vreinterpret_v_i32$L_f32$L(bits);
}
)C";

const char* kExp = R"C(
// e^x; clamped to [e^-87, e^88.3] (beyond, float32 underflows to subnormals or overflows).
MB_INLINE $F mb_exp($F x, size_t vl) {
  x = __riscv_vfmin_vf_f32$L(__riscv_vfmax_vf_f32$L(x, -87.0f, vl), 88.3f, vl);
  return mb_exp_core(x, vl);
}
)C";

const char* kExpNonpos = R"C(
// e^x for x <= 0 (no upper clamp needed).
MB_INLINE $F mb_exp_nonpos($F x, size_t vl) {
  return mb_exp_core(__riscv_vfmax_vf_f32$L(x, -87.0f, vl), vl);
}
)C";

const char* kExpm1 = R"C(
// e^a - 1 for a clamped to [-87, 88], without cancellation: a = n ln2 + r,
// e^a - 1 = 2^n (e^r - 1) + (2^n - 1), e^r - 1 = r + r^2 q(r) accurate relative to itself (exact
// when n = 0). One float ln2 in the reduction: its error is n 1.9e-9 relative on e^r, scaled
// by 2^n <= 1/2 for negative n and harmless against the -1 for positive n.
MB_INLINE $F mb_expm1($F a, size_t vl) {
  a = __riscv_vfmin_vf_f32$L(__riscv_vfmax_vf_f32$L(a, -87.0f, vl), 88.0f, vl);
  $I n = __riscv_vfcvt_x_f_v_i32$L(__riscv_vfmul_vf_f32$L(a, 1.44269504088896341f, vl), vl);
  $F nf = __riscv_vfcvt_f_x_v_f32$L(n, vl);
  $F r = __riscv_vfnmsac_vf_f32$L(a, 0.693147182464599609f, nf, vl);
  $F q = MB_LINEAR(r, 0.0013882522471249104f, 0.00836651399731636f);
  q = MB_HORNER(q, r, 0.04166720062494278f);
  q = MB_HORNER(q, r, 0.1666654348373413f);
  q = MB_HORNER(q, r, 0.4999999701976776f);
  $F em = __riscv_vfmadd_vv_f32$L(q, __riscv_vfmul_vv_f32$L(r, r, vl), r, vl);
  $F s = __riscv_vreinterpret_v_i32$L_f32$L(__riscv_vsll_vx_i32$L(__riscv_vadd_vx_i32$L(n, 127, vl), 23, vl));
  return __riscv_vfmadd_vv_f32$L(em, s, __riscv_vfsub_vf_f32$L(s, 1.0f, vl), vl);
}
)C";

const char* kTanh = R"C(
// tanh z = m / (m + 2), m = e^(2z) - 1: relative accuracy for every z (for z > 44 both are
// e^88 - 1 and the quotient rounds to 1). z itself is not needed after the exp.
MB_INLINE $F mb_tanh($F z, size_t vl) {
  $F m = mb_expm1(__riscv_vfadd_vv_f32$L(z, z, vl), vl);
  return __riscv_vfdiv_vv_f32$L(m, __riscv_vfadd_vf_f32$L(m, 2.0f, vl), vl);
}
)C";

const char* kSigmoid = R"C(
// 1 / (1 + e^-x)
MB_INLINE $F mb_sigmoid($F x, size_t vl) {
  $F e = mb_exp(__riscv_vfneg_v_f32$L(x, vl), vl);
  return __riscv_vfrdiv_vf_f32$L(__riscv_vfadd_vf_f32$L(e, 1.0f, vl), 1.0f, vl);
}
)C";

const char* kSilu = R"C(
// x / (1 + e^-x)
MB_INLINE $F mb_silu($F x, size_t vl) {
  $F e = mb_exp(__riscv_vfneg_v_f32$L(x, vl), vl);
  return __riscv_vfdiv_vv_f32$L(x, __riscv_vfadd_vf_f32$L(e, 1.0f, vl), vl);
}
)C";

const char* kGeluTanh = R"C(
// 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
MB_INLINE $F mb_gelu_tanh($F x, size_t vl) {
  $F q = MB_LINEAR(__riscv_vfmul_vv_f32$L(x, x, vl), -0.0713548162726f, -1.59576912160573f);
  $F e = mb_exp(__riscv_vfmul_vv_f32$L(q, x, vl), vl);
  return __riscv_vfdiv_vv_f32$L(x, __riscv_vfadd_vf_f32$L(e, 1.0f, vl), vl);
}
)C";

const char* kLog = R"C(
// log x for x > 0 (subnormals included): x = m 2^k, m in [sqrt(1/2), sqrt(2)),
// log m = s P(s^2), s = (m - 1) / (m + 1) (relative error 7e-10), plus k ln2.
MB_INLINE $F mb_log($F x, size_t vl) {
  $B tiny = __riscv_vmflt_vf_f32$L_$b(x, 1.17549435e-38f, vl);
  x = __riscv_vfmul_vf_f32$L_mu(tiny, x, x, 8388608.0f, vl);
  $I ix = __riscv_vsub_vx_i32$L(__riscv_vreinterpret_v_f32$L_i32$L(x), 0x3f3504f3, vl);
  $I k = __riscv_vsra_vx_i32$L(ix, 23, vl);
  k = __riscv_vsub_vx_i32$L_mu(tiny, k, k, 23, vl);
  $F m = __riscv_vreinterpret_v_i32$L_f32$L(__riscv_vadd_vx_i32$L(__riscv_vand_vx_i32$L(ix, 0x007fffff, vl), 0x3f3504f3, vl));
  $F f = __riscv_vfsub_vf_f32$L(m, 1.0f, vl);
  $F s = __riscv_vfdiv_vv_f32$L(f, __riscv_vfadd_vf_f32$L(f, 2.0f, vl), vl);
  $F w = __riscv_vfmul_vv_f32$L(s, s, vl);
  $F p = MB_LINEAR(w, 0.29925650358200073f, 0.39974793791770935f);
  p = MB_HORNER(p, w, 0.666668176651001f);
  p = MB_HORNER(p, w, 2.0f);
  return __riscv_vfmacc_vf_f32$L(__riscv_vfmul_vv_f32$L(s, p, vl), 0.693147182464599609f,
                                  __riscv_vfcvt_f_x_v_f32$L(k, vl), vl);
}
)C";

const char* kSoftplus = R"C(
// log(1 + e^x) = max(x, 0) + log1p(e^-|x|); log1p(y) = s P(s^2), s = y / (2 + y), y in (0, 1].
// For x > 20 this is x to the last bit (PyTorch's threshold 20 returns x there).
MB_INLINE $F mb_softplus($F x, size_t vl) {
  $F y = mb_exp_nonpos(__riscv_vfsgnj_vf_f32$L(x, -1.0f, vl), vl);
  $F s = __riscv_vfdiv_vv_f32$L(y, __riscv_vfadd_vf_f32$L(y, 2.0f, vl), vl);
  $F w = __riscv_vfmul_vv_f32$L(s, s, vl);
  $F p = MB_LINEAR(w, 0.2817833423614502f, 0.27960601449012756f);
  p = MB_HORNER(p, w, 0.40024909377098083f);
  p = MB_HORNER(p, w, 0.6666631698608398f);
  p = MB_HORNER(p, w, 2.0f);
  return __riscv_vfmacc_vv_f32$L(__riscv_vfmax_vf_f32$L(x, 0.0f, vl), s, p, vl);
}
)C";

const char* kGelu = R"C(
// x Phi(x) (GELU, erf form): h = x Phi(-|x|), Phi(-t) = e^(-t^2/2) u Q(u), u = 1 / (1 + 0.265 t)
// (relative error 1.2e-8 for t in [0, 14]); gelu = x - h for x > 0, h otherwise.
MB_INLINE $F mb_gelu($F x, size_t vl) {
  $F u = MB_LINEAR(__riscv_vfabs_v_f32$L(x, vl), 0.265f, 1.0f);
  u = __riscv_vfrdiv_vf_f32$L(u, 1.0f, vl);
  $F q = MB_LINEAR(u, 0.030820779502391815f, -0.1442282646894455f);
  q = MB_HORNER(q, u, 0.21781425178050995f);
  q = MB_HORNER(q, u, -0.11636185646057129f);
  q = MB_HORNER(q, u, 0.13795262575149536f);
  q = MB_HORNER(q, u, 0.06031329557299614f);
  q = MB_HORNER(q, u, 0.10270094126462936f);
  q = MB_HORNER(q, u, 0.10524667054414749f);
  q = MB_HORNER(q, u, 0.10574156045913696f);
  $F e = mb_exp_nonpos(__riscv_vfmul_vf_f32$L(__riscv_vfmul_vv_f32$L(x, x, vl), -0.5f, vl), vl);
  $F h = __riscv_vfmul_vv_f32$L(__riscv_vfmul_vv_f32$L(__riscv_vfmul_vv_f32$L(q, u, vl), e, vl), x, vl);
  $B pos = __riscv_vmfgt_vf_f32$L_$b(x, 0.0f, vl);
  return __riscv_vfsub_vv_f32$L_mu(pos, h, x, h, vl);
}
)C";

struct Helper {
  const char* name;
  const char* text;
  std::vector<const char*> needs;
};

// In definition order: a helper comes after everything it calls.
const std::vector<Helper>& helpers() {
  static const std::vector<Helper> h = {
      {"exp_core", nullptr, {}},
      {"exp", kExp, {"exp_core"}},
      {"exp_nonpos", kExpNonpos, {"exp_core"}},
      {"expm1", kExpm1, {}},
      {"tanh", kTanh, {"expm1"}},
      {"sigmoid", kSigmoid, {"exp"}},
      {"silu", kSilu, {"exp"}},
      {"gelu_tanh", kGeluTanh, {"exp"}},
      {"log", kLog, {}},
      {"softplus", kSoftplus, {"exp_nonpos"}},
      {"gelu", kGelu, {"exp_nonpos"}},
  };
  return h;
}

}  // namespace

std::string math_helpers(const std::set<std::string>& names, Lmul lm, int exp_degree) {
  std::set<std::string> want = names;
  // Close over dependencies (the list is in dependency order, so walk it backwards).
  const auto& all = helpers();
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (want.count(it->name))
      for (const char* d : it->needs) want.insert(d);
  std::string s = kPrelude;
  s += lm.m <= 2 ? kStepsHoisted : lm.m == 4 ? kStepsPerStrip : kStepsUnfused;
  for (const auto& h : all) {
    if (!want.count(h.name)) continue;
    if (std::string(h.name) == "exp_core")
      s += exp_degree == 5 ? kExpCore5 : kExpCore6;
    else
      s += h.text;
  }
  return at_lmul(s, lm);
}

}  // namespace mblast::policy::rvv
