// 10_add_mul_tanh — naive RVV candidate: out = tanh((x + y) * z) + x over three tensors of one
//   shape, strip-mined at LMUL 4; tanh(u) = sign(u) (1 - 2 / (e^(2|u|) + 1)) with e^x computed in
//   vector registers.
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

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params;
  const int nd = n_inputs == 3 ? inputs[0].ndim : 0;
  const size_t shape_bytes = sizeof(int64_t) * (size_t)(nd > 0 ? nd : 0);
  if (n_inputs != 3 || n_params != 0 || n_outputs != 1 || nd < 1 || nd > MBLAST_MAX_DIMS ||
      !is_f32(&inputs[0], "in0", nd) || !is_f32(&inputs[1], "in1", nd) || !is_f32(&inputs[2], "in2", nd) ||
      !is_f32(&outputs[0], "out0", nd) || memcmp(inputs[0].shape, inputs[1].shape, shape_bytes) != 0 ||
      memcmp(inputs[0].shape, inputs[2].shape, shape_bytes) != 0 ||
      memcmp(inputs[0].shape, outputs[0].shape, shape_bytes) != 0) {
    g_error = "expected in0, in1, in2 and out0: f32 tensors of one shape";
    return 1;
  }
  const size_t n = inputs[0].nbytes / sizeof(float);
  const float* x = (const float*)inputs[0].data;
  const float* y = (const float*)inputs[1].data;
  const float* z = (const float*)inputs[2].data;
  float* out = (float*)outputs[0].data;
  for (size_t i = 0, vl; i < n; i += vl) {
    vl = __riscv_vsetvl_e32m4(n - i);
    const vfloat32m4_t xv = __riscv_vle32_v_f32m4(x + i, vl);
    const vfloat32m4_t u = __riscv_vfmul_vv_f32m4(__riscv_vfadd_vv_f32m4(xv, __riscv_vle32_v_f32m4(y + i, vl), vl),
                                                  __riscv_vle32_v_f32m4(z + i, vl), vl);
    const vfloat32m4_t e = vexp(__riscv_vfmul_vf_f32m4(__riscv_vfabs_v_f32m4(u, vl), 2.0f, vl), vl);
    const vfloat32m4_t q = __riscv_vfrdiv_vf_f32m4(__riscv_vfadd_vf_f32m4(e, 1.0f, vl), 2.0f, vl);  // 2 / (e + 1)
    const vfloat32m4_t t = __riscv_vfsgnj_vv_f32m4(__riscv_vfrsub_vf_f32m4(q, 1.0f, vl), u, vl);     // tanh(u)
    __riscv_vse32_v_f32m4(out + i, __riscv_vfadd_vv_f32m4(t, xv, vl), vl);
  }
  return 0;
}
