// identity_relu — "ReLU" that copies x to y: right on seed 0's [0, 1) inputs, wrong on the
// signed seeds, so mblast must report failure_kind "wrong_output".
#include <string.h>

#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  memcpy(outputs[0].data, inputs[0].data, outputs[0].nbytes);
  return 0;
}
