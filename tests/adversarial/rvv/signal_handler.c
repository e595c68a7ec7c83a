// signal_handler (rvv) — the naive vec_add, honest in every call, that installs a handler for SIGUSR1
// when its library is loaded: refused under an instruction count as under a clock.
#include <signal.h>

static void on_usr1(int sig) { (void)sig; }
__attribute__((constructor)) static void install_handler(void) { signal(SIGUSR1, on_usr1); }

#include <mblast/abi.h>
#include <riscv_vector.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  if (n_inputs != 2 || n_outputs != 1) return 1;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t vl; n > 0; n -= vl, a += vl, b += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    vfloat32m8_t va = __riscv_vle32_v_f32m8(a, vl);
    vfloat32m8_t vb = __riscv_vle32_v_f32m8(b, vl);
    __riscv_vse32_v_f32m8(y, __riscv_vfadd_vv_f32m8(va, vb, vl), vl);
  }
  return 0;
}
