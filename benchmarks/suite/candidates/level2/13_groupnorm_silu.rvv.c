// 13_groupnorm_silu — naive RVV candidate: SiLU(GroupNorm(x)) on x [N, C, H, W] with affine
//   parameters, eps 1e-5: each (n, group) spans C/G contiguous channel planes; three strip-mined
//   passes at LMUL 4 (sum, squared deviations, then per channel v = (x - mean) rstd weight[c] +
//   bias[c] and y = v / (1 + e^-v)), e^x computed in vector registers.
//   The group count G is the file's constructor argument GROUPS, which no tensor carries: it is
//   looked up from the channel count (8 groups for 32 channels at the small size, 32 for 256 at
//   the full size); other channel counts are refused.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>
#include <riscv_vector.h>
#include <string.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

// True when t is a float32 tensor of `ndim` positive dims whose buffer holds exactly its elements
// (and, when the runner names it, is called `name`).
__attribute__((unused)) static int is_f32(const mblast_tensor* t, const char* name, int ndim) {
  if (t->dtype != MBLAST_F32 || t->ndim != ndim || !t->data) return 0;
  if (t->name && strcmp(t->name, name) != 0) return 0;
  size_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    if (t->shape[d] <= 0) return 0;
    n *= (size_t)t->shape[d];
  }
  return t->nbytes == n * sizeof(float);
}

// e^x in vector registers for x clamped to [-87.3, 88.3]: x = n ln2 + r with |r| <= ln2 / 2,
// e^r by its Taylor series to r^7 (truncation below 1e-8), times 2^n built in the exponent field.
static vfloat32m4_t vexp(vfloat32m4_t x, size_t vl) {
  x = __riscv_vfmin_vf_f32m4(__riscv_vfmax_vf_f32m4(x, -87.3f, vl), 88.3f, vl);
  const vint32m4_t n = __riscv_vfcvt_x_f_v_i32m4(__riscv_vfmul_vf_f32m4(x, 1.44269504088896341f, vl), vl);
  const vfloat32m4_t nf = __riscv_vfcvt_f_x_v_f32m4(n, vl);
  vfloat32m4_t r = __riscv_vfnmsac_vf_f32m4(x, 0.693359375f, nf, vl);  // x - n ln2, ln2 in two parts
  r = __riscv_vfmacc_vf_f32m4(r, 2.12194440e-4f, nf, vl);
  vfloat32m4_t p = __riscv_vfmv_v_f_f32m4(1.0f / 5040.0f, vl);  // Horner over 1/k!, k = 7 .. 0
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(1.0f / 720.0f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(1.0f / 120.0f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(1.0f / 24.0f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(1.0f / 6.0f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(0.5f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(1.0f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(1.0f, vl), vl);
  const vint32m4_t bits = __riscv_vsll_vx_i32m4(__riscv_vadd_vx_i32m4(n, 127, vl), 23, vl);
  return __riscv_vfmul_vv_f32m4(p, __riscv_vreinterpret_v_i32m4_f32m4(bits), vl);
}
#include <math.h>

#define EPS 1e-5f

static long groups_for(long channels) { return channels == 32 ? 8 : channels == 256 ? 32 : 0; }

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 2 || n_outputs != 1 || !is_f32(&inputs[0], "in0", 4) ||
      !is_f32(&params[0], "norm.weight", 1) || !is_f32(&params[1], "norm.bias", 1) ||
      !is_f32(&outputs[0], "out0", 4) || memcmp(inputs[0].shape, outputs[0].shape, 4 * sizeof(int64_t)) != 0 ||
      params[0].shape[0] != inputs[0].shape[1] || params[1].shape[0] != inputs[0].shape[1]) {
    g_error = "expected in0 [N, C, H, W], norm.weight [C], norm.bias [C] and out0 like in0 (f32)";
    return 1;
  }
  const long N = inputs[0].shape[0], C = inputs[0].shape[1], HW = inputs[0].shape[2] * inputs[0].shape[3];
  const long G = groups_for(C);
  if (G == 0) {
    g_error = "no known group count for this channel count (the suite uses 8 groups of 32, 32 of 256)";
    return 1;
  }
  const long cpg = C / G, count = cpg * HW;
  const float* weight = (const float*)params[0].data;
  const float* bias = (const float*)params[1].data;
  for (long ng = 0; ng < N * G; ++ng) {
    const float* xg = (const float*)inputs[0].data + ng * count;  // the group's channels are contiguous
    float* yg = (float*)outputs[0].data + ng * count;
    vfloat32m1_t acc = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    for (long i = 0, vl; i < count; i += vl) {
      vl = (long)__riscv_vsetvl_e32m4((size_t)(count - i));
      acc = __riscv_vfredusum_vs_f32m4_f32m1(__riscv_vle32_v_f32m4(xg + i, (size_t)vl), acc, (size_t)vl);
    }
    const float mean = __riscv_vfmv_f_s_f32m1_f32(acc) / (float)count;
    acc = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    for (long i = 0, vl; i < count; i += vl) {
      vl = (long)__riscv_vsetvl_e32m4((size_t)(count - i));
      const vfloat32m4_t d = __riscv_vfsub_vf_f32m4(__riscv_vle32_v_f32m4(xg + i, (size_t)vl), mean, (size_t)vl);
      acc = __riscv_vfredusum_vs_f32m4_f32m1(__riscv_vfmul_vv_f32m4(d, d, (size_t)vl), acc, (size_t)vl);
    }
    const float rstd = 1.0f / sqrtf(__riscv_vfmv_f_s_f32m1_f32(acc) / (float)count + EPS);
    for (long cc = 0; cc < cpg; ++cc) {
      const long c = (ng % G) * cpg + cc;
      const float* xp = xg + cc * HW;
      float* yp = yg + cc * HW;
      for (long i = 0, vl; i < HW; i += vl) {
        vl = (long)__riscv_vsetvl_e32m4((size_t)(HW - i));
        vfloat32m4_t v = __riscv_vfsub_vf_f32m4(__riscv_vle32_v_f32m4(xp + i, (size_t)vl), mean, (size_t)vl);
        v = __riscv_vfmul_vf_f32m4(__riscv_vfmul_vf_f32m4(v, rstd, (size_t)vl), weight[c], (size_t)vl);
        v = __riscv_vfadd_vf_f32m4(v, bias[c], (size_t)vl);
        const vfloat32m4_t e = vexp(__riscv_vfneg_v_f32m4(v, (size_t)vl), (size_t)vl);
        const vfloat32m4_t silu = __riscv_vfdiv_vv_f32m4(v, __riscv_vfadd_vf_f32m4(e, 1.0f, (size_t)vl), (size_t)vl);
        __riscv_vse32_v_f32m4(yp + i, silu, (size_t)vl);
      }
    }
  }
  return 0;
}
