// crash — mblast_run writes through a null pointer on the host, so the worker dies with SIGSEGV.
// mblast must survive it and report failure_kind "crashed".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params;
  (void)outputs, (void)n_outputs;
  volatile int* p = nullptr;
  *p = 1;  // THE BUG: SIGSEGV
  return 0;
}
