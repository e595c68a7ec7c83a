// stale_output — mblast_run returns 0 and writes nothing, so y keeps whatever was there before.
// A harness that reuses buffers without poisoning would see the previous (right) answer;
// mblast poisons y before every call and must report failure_kind "unwritten_output".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params;
  (void)outputs, (void)n_outputs;
  return 0;  // "success", without enqueuing anything
}
