// identity_relu (problem relu) — copies x to y instead of computing max(x, 0). Right on seed 0
// (x in [0, 1)), wrong on the signed seeds 1 and 2: mblast must report "wrong_output".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t,
                          const mblast_tensor*, int32_t, mblast_tensor* out, int32_t) {
  if (in[0].nbytes != out[0].nbytes) return -1;
  return clEnqueueCopyBuffer(static_cast<cl_command_queue>(ctx->cl_queue),
                             static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data),
                             0, 0, out[0].nbytes, 0, nullptr, nullptr) == CL_SUCCESS ? 0 : -1;
}
