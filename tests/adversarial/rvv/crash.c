// crash — writes through a null pointer: the guest gets SIGSEGV and qemu-user dies with it,
// failure_kind "crashed".
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  float* volatile p = 0;
  *p = 1.0f;
  ((float*)outputs[0].data)[0] = *p;
  return 0;
}
