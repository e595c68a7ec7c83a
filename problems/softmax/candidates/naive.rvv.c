// softmax — naive RVV candidate, over the last dim of x [rows, cols]: three passes per row
// (max; exp(x - max) stored and summed; divide by the sum), strip-mined at LMUL 4, with exp
// computed in vector registers (range reduction by ln 2 plus a degree-6 polynomial).
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>
#include <riscv_vector.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

// e^x for x in [-87.3, 88.3] (clamped), about 1 ulp: x = n ln2 + r, |r| <= ln2 / 2,
// e^r by a polynomial, times 2^n built in the exponent field.
static vfloat32m4_t vexp(vfloat32m4_t x, size_t vl) {
  x = __riscv_vfmin_vf_f32m4(__riscv_vfmax_vf_f32m4(x, -87.3f, vl), 88.3f, vl);
  vint32m4_t n = __riscv_vfcvt_x_f_v_i32m4(__riscv_vfmul_vf_f32m4(x, 1.44269504088896341f, vl), vl);
  vfloat32m4_t nf = __riscv_vfcvt_f_x_v_f32m4(n, vl);
  vfloat32m4_t r = __riscv_vfnmsac_vf_f32m4(x, 0.693359375f, nf, vl);  // ln 2 in two parts
  r = __riscv_vfmacc_vf_f32m4(r, 2.12194440e-4f, nf, vl);
  vfloat32m4_t p = __riscv_vfmv_v_f_f32m4(1.9875691500e-4f, vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(1.3981999507e-3f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(8.3334519073e-3f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(4.1665795894e-2f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(1.6666665459e-1f, vl), vl);
  p = __riscv_vfmadd_vv_f32m4(p, r, __riscv_vfmv_v_f_f32m4(5.0000001201e-1f, vl), vl);
  vfloat32m4_t r2 = __riscv_vfmul_vv_f32m4(r, r, vl);
  p = __riscv_vfmadd_vv_f32m4(p, r2, __riscv_vfadd_vf_f32m4(r, 1.0f, vl), vl);  // p r^2 + r + 1
  vint32m4_t bits = __riscv_vsll_vx_i32m4(__riscv_vadd_vx_i32m4(n, 127, vl), 23, vl);
  return __riscv_vfmul_vv_f32m4(p, __riscv_vreinterpret_v_i32m4_f32m4(bits), vl);
}

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 2 || inputs[0].nbytes != outputs[0].nbytes) {
    g_error = "expected x [rows, cols] and y of the same shape";
    return 1;
  }
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  for (size_t i = 0; i < rows; ++i) {
    const float* x = (const float*)inputs[0].data + i * cols;
    float* y = (float*)outputs[0].data + i * cols;
    vfloat32m1_t acc = __riscv_vfmv_s_f_f32m1(-__builtin_inff(), 1);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      acc = __riscv_vfredmax_vs_f32m4_f32m1(__riscv_vle32_v_f32m4(x + j, vl), acc, vl);
    }
    const float max = __riscv_vfmv_f_s_f32m1_f32(acc);
    acc = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      vfloat32m4_t e = vexp(__riscv_vfsub_vf_f32m4(__riscv_vle32_v_f32m4(x + j, vl), max, vl), vl);
      __riscv_vse32_v_f32m4(y + j, e, vl);
      acc = __riscv_vfredusum_vs_f32m4_f32m1(e, acc, vl);
    }
    const float sum = __riscv_vfmv_f_s_f32m1_f32(acc);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      __riscv_vse32_v_f32m4(y + j, __riscv_vfdiv_vf_f32m4(__riscv_vle32_v_f32m4(y + j, vl), sum, vl), vl);
    }
  }
  return 0;
}
