// degrades_once_verified — a correct vec_add for the verification runs (the first 6 calls); from
// then on it computes only the even elements and copies each to its odd neighbour: every element
// is written (no poison left), half the work is done, and the values are wrong. Only a check of
// the timed calls' values sees it: mblast's spot check, in a fresh process, must report
// "wrong_output".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* a, __global const float* b, __global float* y, const long n) {
  const long i = (long)get_global_id(0);
  if (i < n) y[i] = a[i] + b[i];
}
__kernel void vec_add_half(__global const float* a, __global const float* b, __global float* y, const long n) {
  const long i = 2 * (long)get_global_id(0);
  if (i >= n) return;
  const float v = a[i] + b[i];
  y[i] = v;
  if (i + 1 < n) y[i + 1] = v;
}
)CLC";

struct State {
  cl_kernel full, half;
};

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {
  cl_int err = CL_SUCCESS;
  cl_device_id dev = static_cast<cl_device_id>(ctx->cl_device);
  cl_program p = clCreateProgramWithSource(static_cast<cl_context>(ctx->cl_context), 1, &kSource, nullptr, &err);
  if (err != CL_SUCCESS || clBuildProgram(p, 1, &dev, "", nullptr, nullptr) != CL_SUCCESS) return 1;
  State* s = new State{clCreateKernel(p, "vec_add", &err), clCreateKernel(p, "vec_add_half", &err)};
  clReleaseProgram(p);
  *state = s;
  return err == CL_SUCCESS ? 0 : 1;
}

extern "C" void mblast_release(const mblast_context*, void* state) {
  State* s = static_cast<State*>(state);
  clReleaseKernel(s->full);
  clReleaseKernel(s->half);
  delete s;
}

static int g_calls = 0;

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  State* s = static_cast<State*>(state);
  const bool cheat = ++g_calls > 6;  // THE CHEAT: verified by now
  cl_kernel k = cheat ? s->half : s->full;
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  clSetKernelArg(k, 0, sizeof(cl_mem), &in[0].data);
  clSetKernelArg(k, 1, sizeof(cl_mem), &in[1].data);
  clSetKernelArg(k, 2, sizeof(cl_mem), &out[0].data);
  clSetKernelArg(k, 3, sizeof(cl_long), &n);
  const size_t global = static_cast<size_t>(cheat ? (n + 1) / 2 : n);
  return clEnqueueNDRangeKernel(static_cast<cl_command_queue>(ctx->cl_queue), k, 1, nullptr, &global, nullptr, 0,
                                nullptr, nullptr) == CL_SUCCESS ? 0 : 1;
}
