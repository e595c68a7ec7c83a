// partial_output — a correct RVV vec_add over only the first half of y; the second half keeps
// the poison, so mblast must report failure_kind "unwritten_output".
#include <mblast/abi.h>
#include <riscv_vector.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  size_t n = outputs[0].nbytes / sizeof(float) / 2;
  for (size_t vl; n > 0; n -= vl, a += vl, b += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    __riscv_vse32_v_f32m8(y, __riscv_vfadd_vv_f32m8(__riscv_vle32_v_f32m8(a, vl), __riscv_vle32_v_f32m8(b, vl), vl), vl);
  }
  return 0;
}
