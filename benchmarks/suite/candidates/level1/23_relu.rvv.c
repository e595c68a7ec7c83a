// 23_relu — naive RVV candidate: y = max(x, 0) over a tensor of any shape, strip-mined at LMUL 8.
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

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params;
  if (n_inputs != 1 || n_params != 0 || n_outputs != 1 || inputs[0].ndim < 1 || inputs[0].ndim > MBLAST_MAX_DIMS ||
      !is_f32(&inputs[0], "in0", inputs[0].ndim) || !is_f32(&outputs[0], "out0", inputs[0].ndim) ||
      memcmp(inputs[0].shape, outputs[0].shape, sizeof(int64_t) * (size_t)inputs[0].ndim) != 0) {
    g_error = "expected in0 (f32, any shape) and out0 of the same shape";
    return 1;
  }
  const size_t n = inputs[0].nbytes / sizeof(float);
  const float* x = (const float*)inputs[0].data;
  float* y = (float*)outputs[0].data;
  for (size_t i = 0, vl; i < n; i += vl) {
    vl = __riscv_vsetvl_e32m8(n - i);
    __riscv_vse32_v_f32m8(y + i, __riscv_vfmax_vf_f32m8(__riscv_vle32_v_f32m8(x + i, vl), 0.0f, vl), vl);
  }
  return 0;
}
