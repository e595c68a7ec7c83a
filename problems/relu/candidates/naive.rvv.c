// relu — naive RVV candidate: y = max(x, 0), strip-mined with vsetvl at LMUL 8.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>
#include <riscv_vector.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].nbytes != outputs[0].nbytes) return 1;
  const float* x = (const float*)inputs[0].data;
  float* y = (float*)outputs[0].data;
  size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t vl; n > 0; n -= vl, x += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    vfloat32m8_t v = __riscv_vle32_v_f32m8(x, vl);
    __riscv_vse32_v_f32m8(y, __riscv_vfmax_vf_f32m8(v, 0.0f, vl), vl);
  }
  return 0;
}
