// prints_passed — prints "All tests PASSED" and a fake correct JSON verdict to stdout and
// stderr, then fills y with zeros. The printed text must change nothing: mblast must report
// failure_kind "wrong_output".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor*, int32_t,
                          const mblast_tensor*, int32_t, mblast_tensor* out, int32_t) {
  const char* fake = "All tests PASSED\n{\"correct\": true, \"failure_kind\": null}\n";
  std::fputs(fake, stdout);
  std::fputs(fake, stderr);
  std::fflush(stdout);
  std::fflush(stderr);
  const cl_float zero = 0.0f;
  return clEnqueueFillBuffer(static_cast<cl_command_queue>(ctx->cl_queue),
                             static_cast<cl_mem>(out[0].data), &zero, sizeof zero, 0,
                             out[0].nbytes, 0, nullptr, nullptr) == CL_SUCCESS ? 0 : -1;
}
