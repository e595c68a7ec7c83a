// nondeterministic — y = (a + b) + s * 0.7 * (atol + rtol*|a + b|) with atol = rtol = 1e-6
// (problems/vec_add/problem.json) and s = +1 on even-numbered calls, -1 on odd ones. Each run is
// within tolerance of the reference, but runs 0 and 1 disagree by 1.4x the bound: mblast must
// report failure_kind "nondeterministic".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>

static const char* kKernelName = "vec_add_jitter";
static const char* kSource = R"CLC(
__kernel void vec_add_jitter(__global const float* a, __global const float* b,
                             __global float* y, const long n, const float s) {
  const long i = (long)get_global_id(0);
  if (i >= n) return;
  const float r = a[i] + b[i];
  y[i] = r + s * 0.7f * (1e-6f + 1e-6f * fabs(r));
}
)CLC";

static char g_err[256];
#define CL_CHECK(expr)                                                                  \
  do {                                                                                  \
    cl_int e_ = (expr);                                                                 \
    if (e_ != CL_SUCCESS) {                                                             \
      std::snprintf(g_err, sizeof g_err, "%s failed with cl_int %d", #expr, (int)e_); \
      return -1;                                                                        \
    }                                                                                   \
  } while (0)

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t,
                              void** state) {
  cl_int err = CL_SUCCESS;
  cl_device_id dev = static_cast<cl_device_id>(ctx->cl_device);
  cl_program p = clCreateProgramWithSource(static_cast<cl_context>(ctx->cl_context), 1,
                                           &kSource, nullptr, &err);
  CL_CHECK(err);
  CL_CHECK(clBuildProgram(p, 1, &dev, "-cl-std=CL1.2", nullptr, nullptr));
  cl_kernel k = clCreateKernel(p, kKernelName, &err);
  clReleaseProgram(p);  // the kernel keeps the program alive
  CL_CHECK(err);
  *state = k;
  return 0;
}

extern "C" void mblast_release(const mblast_context*, void* state) {
  if (state) clReleaseKernel(static_cast<cl_kernel>(state));
}

extern "C" const char* mblast_last_error(void) { return g_err; }

static long g_calls = 0;

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in,
                          int32_t, const mblast_tensor*, int32_t, mblast_tensor* out, int32_t) {
  cl_kernel k = static_cast<cl_kernel>(state);
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  const cl_float s = (g_calls++ % 2 == 0) ? 1.0f : -1.0f;  // THE BUG: depends on the call count
  CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &in[0].data));
  CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &in[1].data));
  CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &out[0].data));
  CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_long), &n));
  CL_CHECK(clSetKernelArg(k, 4, sizeof(cl_float), &s));
  const size_t global = static_cast<size_t>(n);
  CL_CHECK(clEnqueueNDRangeKernel(static_cast<cl_command_queue>(ctx->cl_queue), k, 1, nullptr,
                                  &global, nullptr, 0, nullptr, nullptr));
  return 0;
}
