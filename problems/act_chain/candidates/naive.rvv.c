// act_chain — naive RVV candidate: y = tanh(leaky_relu(x, 0.1) * scale[col]) + 0.5 * x, row by
// row, strip-mined over the columns at LMUL 4. tanh(z) = sign(z) (1 - 2 / (e^(2|z|) + 1)) with
// e^x computed in vector registers (range reduction by ln 2 plus a degree-6 polynomial).
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
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 1 || n_outputs != 1 || inputs[0].ndim != 2 ||
      params[0].shape[0] != inputs[0].shape[1] || inputs[0].nbytes != outputs[0].nbytes) {
    g_error = "expected x [rows, cols], scale [cols] and y [rows, cols]";
    return 1;
  }
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  const float* scale = (const float*)params[0].data;
  for (size_t i = 0; i < rows; ++i) {
    const float* x = (const float*)inputs[0].data + i * cols;
    float* y = (float*)outputs[0].data + i * cols;
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      vfloat32m4_t v = __riscv_vle32_v_f32m4(x + j, vl);
      vbool8_t positive = __riscv_vmfgt_vf_f32m4_b8(v, 0.0f, vl);
      vfloat32m4_t z = __riscv_vmerge_vvm_f32m4(__riscv_vfmul_vf_f32m4(v, 0.1f, vl), v, positive, vl);
      z = __riscv_vfmul_vv_f32m4(z, __riscv_vle32_v_f32m4(scale + j, vl), vl);
      vfloat32m4_t e = vexp(__riscv_vfmul_vf_f32m4(__riscv_vfabs_v_f32m4(z, vl), 2.0f, vl), vl);
      vfloat32m4_t q = __riscv_vfrdiv_vf_f32m4(__riscv_vfadd_vf_f32m4(e, 1.0f, vl), 2.0f, vl);  // 2/(e+1)
      vfloat32m4_t t = __riscv_vfsgnj_vv_f32m4(__riscv_vfrsub_vf_f32m4(q, 1.0f, vl), z, vl);    // tanh(z)
      __riscv_vse32_v_f32m4(y + j, __riscv_vfmacc_vf_f32m4(t, 0.5f, v, vl), vl);
    }
  }
  return 0;
}
