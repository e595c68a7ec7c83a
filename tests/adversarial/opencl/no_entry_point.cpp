// no_entry_point — a correct vec_add that compiles and links, but its entry point is misspelled
// `mblast_runn`, so the shared object defines no mblast_run. mblast must report failure_kind
// "abi_error".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* a, __global const float* b, __global float* y,
                      const long n) {
  const long i = (long)get_global_id(0);
  if (i >= n) return;
  y[i] = a[i] + b[i];
}
)CLC";

// THE BUG: the name. (Built per call for brevity: no mblast_prepare either.)
extern "C" int mblast_runn(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t,
                           const mblast_tensor*, int32_t, mblast_tensor* out, int32_t) {
  cl_int err = CL_SUCCESS;
  cl_device_id dev = static_cast<cl_device_id>(ctx->cl_device);
  cl_program p = clCreateProgramWithSource(static_cast<cl_context>(ctx->cl_context), 1,
                                           &kSource, nullptr, &err);
  if (err != CL_SUCCESS) return -1;
  cl_kernel k = nullptr;
  if (clBuildProgram(p, 1, &dev, "-cl-std=CL1.2", nullptr, nullptr) == CL_SUCCESS)
    k = clCreateKernel(p, "vec_add", &err);
  clReleaseProgram(p);
  if (!k) return -1;
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  const size_t global = static_cast<size_t>(n);
  err = clSetKernelArg(k, 0, sizeof(cl_mem), &in[0].data);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof(cl_mem), &in[1].data);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 2, sizeof(cl_mem), &out[0].data);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 3, sizeof(cl_long), &n);
  if (err == CL_SUCCESS)
    err = clEnqueueNDRangeKernel(static_cast<cl_command_queue>(ctx->cl_queue), k, 1, nullptr,
                                 &global, nullptr, 0, nullptr, nullptr);
  clReleaseKernel(k);  // the queued command keeps what it needs alive
  return err == CL_SUCCESS ? 0 : -1;
}
