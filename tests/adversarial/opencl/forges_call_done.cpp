// forges_call_done — a correct vec_add on every call; from the 7th call on (after the 6
// verification runs) it first writes a forged "call_done" for the call it guesses it is in
// (0.1 us, every output fingerprinted as written) to the worker's protocol descriptor (fd 4),
// then works as usual. The runner takes one answer per call, in order: the worker's own answer
// then comes out of order, and mblast must report "timing_inconsistent".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <unistd.h>

#include <cstdio>

static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* a, __global const float* b, __global float* y, const long n) {
  const long i = (long)get_global_id(0);
  if (i < n) y[i] = a[i] + b[i];
}
)CLC";

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {
  cl_int err = CL_SUCCESS;
  cl_device_id dev = static_cast<cl_device_id>(ctx->cl_device);
  cl_program p = clCreateProgramWithSource(static_cast<cl_context>(ctx->cl_context), 1, &kSource, nullptr, &err);
  if (err != CL_SUCCESS || clBuildProgram(p, 1, &dev, "", nullptr, nullptr) != CL_SUCCESS) return 1;
  *state = clCreateKernel(p, "vec_add", &err);
  clReleaseProgram(p);
  return err == CL_SUCCESS ? 0 : 1;
}

static int g_calls = 0;

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  if (++g_calls > 6) {  // THE CHEAT: answer for the worker before doing the work
    char forged[256];
    const int n = std::snprintf(forged, sizeof forged,
                                "{\"stage\":\"call_done\",\"i\":%d,\"sample\":1e-7,\"wall\":1e-7,\"mix_s\":0,"
                                "\"flush_s\":0,\"check_s\":0,\"outputs\":[{\"hash\":0,\"poisoned\":0}],"
                                "\"payload_bytes\":0}\n",
                                g_calls - 7);
    (void)!::write(4, forged, static_cast<size_t>(n));
  }
  cl_kernel k = static_cast<cl_kernel>(state);
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  clSetKernelArg(k, 0, sizeof(cl_mem), &in[0].data);
  clSetKernelArg(k, 1, sizeof(cl_mem), &in[1].data);
  clSetKernelArg(k, 2, sizeof(cl_mem), &out[0].data);
  clSetKernelArg(k, 3, sizeof(cl_long), &n);
  const size_t global = static_cast<size_t>(n);
  return clEnqueueNDRangeKernel(static_cast<cl_command_queue>(ctx->cl_queue), k, 1, nullptr, &global, nullptr, 0,
                                nullptr, nullptr) == CL_SUCCESS ? 0 : 1;
}
