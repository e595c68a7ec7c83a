// build_error — host code with a C++ syntax error (a missing ';' and an unclosed brace), so the
// candidate never compiles. mblast must report failure_kind "build_failed" with the compiler log.
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params;
  (void)outputs, (void)n_outputs;
  int status = 0   // THE BUG: missing ';'
  if (status == 0 {
    return 0;
  }
  return -1;
}
