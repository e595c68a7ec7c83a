// interposes_clock — a correct, naive vec_add that also defines clock_gettime and
// clGetEventProfilingInfo of its own, which say no time has passed, hoping the worker's timer
// binds to them. The worker loads candidates with their symbols kept local and reads its clocks
// through its own bindings, and the runner times every call itself: the candidate must be
// accepted with its real time counted ("counted_time": at least half the naive candidate's).
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <time.h>

extern "C" int clock_gettime(clockid_t, struct timespec* ts) {  // THE CHEAT: time stands still
  ts->tv_sec = 1;
  ts->tv_nsec = 0;
  return 0;
}

extern "C" cl_int clGetEventProfilingInfo(cl_event, cl_profiling_info, size_t size, void* value, size_t* ret) {
  if (value && size >= sizeof(cl_ulong)) *static_cast<cl_ulong*>(value) = 1000;  // THE CHEAT: start == end
  if (ret) *ret = sizeof(cl_ulong);
  return CL_SUCCESS;
}

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

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
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
