// no_entry_point — compiles and links but defines no mblast_run (a typo in the name):
// failure_kind "abi_error".
#include <mblast/abi.h>

int mblast_rnu(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params, (void)outputs, (void)n_outputs;
  return 0;
}
