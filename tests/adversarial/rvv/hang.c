// hang — never returns from mblast_run: failure_kind "timeout" (the runner kills qemu).
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params, (void)outputs, (void)n_outputs;
  volatile int spin = 1;
  while (spin) {
  }
  return 0;
}
