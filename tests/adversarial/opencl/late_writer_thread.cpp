// late_writer_thread — a correct vec_add for the verification runs (the first 6 calls); from then
// on mblast_run returns at once and a host thread enqueues the real work 50 ms later, after the
// clock has stopped. Each timed call's outputs are fingerprinted as soon as it returns and the
// device is synchronised: mblast must report "unwritten_output".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <chrono>
#include <thread>

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

static void enqueue(cl_command_queue q, cl_kernel k, cl_mem a, cl_mem b, cl_mem y, cl_long n) {
  clSetKernelArg(k, 0, sizeof(cl_mem), &a);
  clSetKernelArg(k, 1, sizeof(cl_mem), &b);
  clSetKernelArg(k, 2, sizeof(cl_mem), &y);
  clSetKernelArg(k, 3, sizeof(cl_long), &n);
  const size_t global = static_cast<size_t>(n);
  clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr);
}

static int g_calls = 0;

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  cl_command_queue q = static_cast<cl_command_queue>(ctx->cl_queue);
  cl_kernel k = static_cast<cl_kernel>(state);
  cl_mem a = static_cast<cl_mem>(in[0].data), b = static_cast<cl_mem>(in[1].data), y = static_cast<cl_mem>(out[0].data);
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  if (++g_calls <= 6) {
    enqueue(q, k, a, b, y, n);
    return 0;
  }
  std::thread([=] {  // THE CHEAT: the work happens after the call has returned
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    enqueue(q, k, a, b, y, n);
    clFinish(q);
  }).detach();
  return 0;
}
