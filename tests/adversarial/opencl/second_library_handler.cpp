// second_library_handler — a correct, naive vec_add whose mblast_prepare writes a shared library
// of its own (the bytes it carries: a prebuilt library the test puts in at HELPER_LIB_BYTES) into
// /tmp and loads it; the library installs a SIGBUS handler when loaded. A handler whose code
// is outside the candidate's own library but in a file written after the worker started is the
// candidate's all the same: refused (timing_inconsistent), as signal_handler is.
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* a, __global const float* b, __global float* y, const long n) {
  const long i = (long)get_global_id(0);
  if (i < n) y[i] = a[i] + b[i];
}
)CLC";

// THE CHEAT: a library of its own, written now, with a handler in it.
static const unsigned char kLibrary[] = {@HELPER_LIB_BYTES@};

static int load_own_library() {
  char path[] = "/tmp/mblast-adv-libXXXXXX";
  const int out = mkstemp(path);
  if (out < 0) return 1;
  const bool written = write(out, kLibrary, sizeof kLibrary) == static_cast<ssize_t>(sizeof kLibrary);
  close(out);
  void* lib = written ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  unlink(path);
  return lib ? 0 : 1;
}

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {
  if (load_own_library() != 0) return 1;
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
