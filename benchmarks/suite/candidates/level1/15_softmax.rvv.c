// 15_softmax — naive RVV candidate: softmax over the last dim of x [rows, cols], row by row, three
//   strip-mined passes at LMUL 4 (max; e^(x - max) stored and summed; scale by 1 / sum), e^x
//   computed in vector registers.
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
  if (n_inputs != 1 || n_params != 0 || n_outputs != 1 || !is_f32(&inputs[0], "in0", 2) ||
      !is_f32(&outputs[0], "out0", 2) || outputs[0].shape[0] != inputs[0].shape[0] ||
      outputs[0].shape[1] != inputs[0].shape[1]) {
    g_error = "expected in0 [rows, cols] and out0 of the same shape (f32)";
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
      const vfloat32m4_t e = vexp(__riscv_vfsub_vf_f32m4(__riscv_vle32_v_f32m4(x + j, vl), max, vl), vl);
      __riscv_vse32_v_f32m4(y + j, e, vl);
      acc = __riscv_vfredusum_vs_f32m4_f32m1(e, acc, vl);
    }
    const float inv = 1.0f / __riscv_vfmv_f_s_f32m1_f32(acc);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      __riscv_vse32_v_f32m4(y + j, __riscv_vfmul_vf_f32m4(__riscv_vle32_v_f32m4(y + j, vl), inv, vl), vl);
    }
  }
  return 0;
}
