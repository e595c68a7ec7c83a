// The correct part of a containment candidate for rvv: vec_add, strip-mined at LMUL 8; the
// misdeed (the test puts it before this) runs once, on the first call.
#include <mblast/abi.h>
#include <riscv_vector.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  static int done = 0;
  if (!done) done = 1, misdeed();
  if (n_inputs != 2 || n_outputs != 1) return 1;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t vl; n > 0; n -= vl, a += vl, b += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    __riscv_vse32_v_f32m8(y, __riscv_vfadd_vv_f32m8(__riscv_vle32_v_f32m8(a, vl), __riscv_vle32_v_f32m8(b, vl), vl), vl);
  }
  return 0;
}
