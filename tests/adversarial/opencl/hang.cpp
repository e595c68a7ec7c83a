// hang — mblast_run spins forever on the host and never returns (the volatile counter keeps the
// loop from being optimised away). mblast must kill the worker at the run timeout and report
// failure_kind "timeout".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params;
  (void)outputs, (void)n_outputs;
  volatile unsigned long spins = 0;
  for (;;) spins = spins + 1;  // THE BUG: never returns
  return 0;
}
