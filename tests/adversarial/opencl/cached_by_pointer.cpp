// cached_by_pointer — computes y = a + b on its first call, keeps a private copy of the result
// and the (a, b) cl_mem handles, and replays the copy whenever it sees the same handles again.
// Right for seed 0 (runs 0 and 1), wrong once seed 1 is uploaded into the same buffers: mblast
// must report failure_kind "wrong_output".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>

static const char* kKernelName = "vec_add";
static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* a, __global const float* b, __global float* y,
                      const long n) {
  const long i = (long)get_global_id(0);
  if (i >= n) return;
  y[i] = a[i] + b[i];
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

// Enqueues the correct y = a + b over all of y.
static int enqueue_vec_add(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in,
                           mblast_tensor* out) {
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &in[0].data));
  CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &in[1].data));
  CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &out[0].data));
  CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_long), &n));
  const size_t global = static_cast<size_t>(n);
  CL_CHECK(clEnqueueNDRangeKernel(static_cast<cl_command_queue>(ctx->cl_queue), k, 1, nullptr,
                                  &global, nullptr, 0, nullptr, nullptr));
  return 0;
}

static cl_mem g_seen_a = nullptr, g_seen_b = nullptr;  // handles of the first call's inputs
static cl_mem g_saved = nullptr;                       // our copy of the first call's result

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in,
                          int32_t, const mblast_tensor*, int32_t, mblast_tensor* out, int32_t) {
  cl_command_queue q = static_cast<cl_command_queue>(ctx->cl_queue);
  cl_mem a = static_cast<cl_mem>(in[0].data), b = static_cast<cl_mem>(in[1].data);
  cl_mem y = static_cast<cl_mem>(out[0].data);
  if (g_saved && a == g_seen_a && b == g_seen_b) {  // THE BUG: same handles => same data?
    CL_CHECK(clEnqueueCopyBuffer(q, g_saved, y, 0, 0, out[0].nbytes, 0, nullptr, nullptr));
    return 0;
  }
  if (enqueue_vec_add(ctx, static_cast<cl_kernel>(state), in, out) != 0) return -1;
  if (!g_saved) {
    cl_int err = CL_SUCCESS;
    g_saved = clCreateBuffer(static_cast<cl_context>(ctx->cl_context), CL_MEM_READ_WRITE,
                             out[0].nbytes, nullptr, &err);
    CL_CHECK(err);
    CL_CHECK(clEnqueueCopyBuffer(q, y, g_saved, 0, 0, out[0].nbytes, 0, nullptr, nullptr));
    g_seen_a = a;
    g_seen_b = b;
  }
  return 0;
}
