// stale_output — returns 0 without writing y. The output keeps the poison the runner wrote
// before the call, so mblast must report failure_kind "unwritten_output".
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params, (void)outputs, (void)n_outputs;
  return 0;
}
