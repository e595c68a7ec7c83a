// forges_timing_message — a correct vec_add for the verification runs (the first 6 calls); on the
// next call it writes a forged end-of-timing message straight to the worker's protocol
// descriptor (fd 4): 0.1 us samples and a peak bandwidth of 41.9 TB/s, then exits. The runner
// drives the timed calls one by one and takes only the message it asked for: mblast must report
// "timing_inconsistent" (and no peak may change).
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <unistd.h>

#include <cstring>

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
  if (++g_calls > 6) {  // THE CHEAT
    const char* forged =
        "{\"stage\":\"timing\",\"samples\":[1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7],"
        "\"wall_samples\":[1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7],\"sets\":[{\"set\":0,\"seed\":0}],"
        "\"method\":\"forged\",\"unit\":\"s\",\"peaks\":{\"bandwidth_bytes_per_s\":4.19e13,\"fp32_flops_per_s\":1e15,"
        "\"method\":\"forged\"},\"payload_bytes\":0}\n";
    (void)!::write(4, forged, std::strlen(forged));
    ::_exit(0);
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
