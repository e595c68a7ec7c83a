/*
 * Optional helpers for OpenCL candidates (header-only). A candidate that includes this stays
 * one source file: it writes its OpenCL C kernel and an `enqueue` function, and
 * MBLAST_OPENCL_CANDIDATE(...) defines the ABI entry points of include/mblast/abi.h around them:
 * mblast_prepare builds the program once per parameter set, mblast_run calls enqueue on the
 * runner's queue (never clFinish: the runner synchronises), mblast_release frees the program,
 * mblast_last_error returns the last failure (with the OpenCL build log when the build failed).
 *
 *   static const char* kSource = R"CLC( __kernel void f(...) { ... } )CLC";
 *   static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
 *                      const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
 *     if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
 *     ...
 *     return mblast_cl::launch(ctx, k, 1, &global, in[0].data, out[0].data, n);
 *   }
 *   MBLAST_OPENCL_CANDIDATE(kSource, "f", enqueue)
 */
#ifndef MBLAST_OPENCL_CANDIDATE_H
#define MBLAST_OPENCL_CANDIDATE_H

#include <mblast/abi.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace mblast_cl {

inline char* error_text() {
  static char text[8192];
  return text;
}

// Records a printf-style reason and returns -1 (the ABI's failure value).
inline int fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(error_text(), 8192, fmt, ap);
  va_end(ap);
  return -1;
}

inline bool expect_counts(int32_t n_in, int32_t want_in, int32_t n_par, int32_t want_par, int32_t n_out,
                          int32_t want_out) {
  if (n_in == want_in && n_par == want_par && n_out == want_out) return true;
  fail("expected %d inputs, %d parameters, %d outputs; got %d, %d, %d", want_in, want_par, want_out, n_in, n_par,
       n_out);
  return false;
}

// A float32 tensor of `ndim` positive dimensions whose buffer holds exactly its elements.
inline bool expect_f32(const mblast_tensor& t, const char* what, int ndim) {
  if (t.dtype != MBLAST_F32) return fail("%s: expected dtype f32", what), false;
  if (t.ndim != ndim) return fail("%s: expected %d dims, got %d", what, ndim, static_cast<int>(t.ndim)), false;
  size_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    if (t.shape[d] <= 0) return fail("%s: dim %d is not positive", what, d), false;
    n *= static_cast<size_t>(t.shape[d]);
  }
  if (t.data == nullptr || t.nbytes != n * sizeof(float))
    return fail("%s: buffer holds %zu bytes, shape needs %zu", what, t.nbytes, n * sizeof(float)), false;
  return true;
}

struct Program {
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
};

inline void release(Program* p) {
  if (!p) return;
  if (p->kernel) clReleaseKernel(p->kernel);
  if (p->program) clReleaseProgram(p->program);
  delete p;
}

// Builds `source` for the context's device and creates the kernel `name`.
inline int build(const mblast_context* ctx, const char* source, const char* name, Program** out) {
  *out = nullptr;
  if (!ctx || ctx->backend != MBLAST_BACKEND_OPENCL || !ctx->cl_context || !ctx->cl_device || !ctx->cl_queue)
    return fail("mblast_context has no OpenCL context, device or queue");
  cl_context context = static_cast<cl_context>(ctx->cl_context);
  cl_device_id device = static_cast<cl_device_id>(ctx->cl_device);
  Program* p = new Program();
  cl_int err = CL_SUCCESS;
  p->program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
  if (err != CL_SUCCESS) return release(p), fail("clCreateProgramWithSource failed with cl_int %d", err);
  err = clBuildProgram(p->program, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    char log[6000] = "";
    clGetProgramBuildInfo(p->program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, nullptr);
    release(p);
    return fail("clBuildProgram failed with cl_int %d; build log: %s", err, log);
  }
  p->kernel = clCreateKernel(p->program, name, &err);
  if (err != CL_SUCCESS) return release(p), fail("clCreateKernel(%s) failed with cl_int %d", name, err);
  *out = p;
  return 0;
}

// Sets the kernel's arguments in order (each by value: cl_mem handles, scalars) and enqueues
// it over `global` on the runner's queue.
template <typename... Args>
int launch(const mblast_context* ctx, cl_kernel k, cl_uint dims, const size_t* global, const Args&... args) {
  cl_uint index = 0;
  cl_int err = CL_SUCCESS;
  ((err = err == CL_SUCCESS ? clSetKernelArg(k, index++, sizeof(Args), &args) : err), ...);
  if (err != CL_SUCCESS) return fail("clSetKernelArg(%u) failed with cl_int %d", index - 1, err);
  err = clEnqueueNDRangeKernel(static_cast<cl_command_queue>(ctx->cl_queue), k, dims, nullptr, global, nullptr, 0,
                               nullptr, nullptr);
  return err == CL_SUCCESS ? 0 : fail("clEnqueueNDRangeKernel failed with cl_int %d", err);
}

}  // namespace mblast_cl

// Defines the four ABI entry points around a kernel source, its name and an enqueue function
// int ENQUEUE(const mblast_context*, cl_kernel, const mblast_tensor*, int32_t,
//             const mblast_tensor*, int32_t, mblast_tensor*, int32_t).
#define MBLAST_OPENCL_CANDIDATE(SOURCE, NAME, ENQUEUE)                                                     \
  extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {  \
    mblast_cl::Program* p = nullptr;                                                                       \
    const int rc = mblast_cl::build(ctx, SOURCE, NAME, &p);                                                \
    *state = p;                                                                                            \
    return rc;                                                                                             \
  }                                                                                                        \
  extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in, \
                            const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {  \
    mblast_cl::Program* p = static_cast<mblast_cl::Program*>(state);                                       \
    if (p) return ENQUEUE(ctx, p->kernel, in, n_in, par, n_par, out, n_out);                               \
    /* Called without mblast_prepare: a transient program (OpenCL keeps what the queue needs). */          \
    if (mblast_cl::build(ctx, SOURCE, NAME, &p) != 0) return -1;                                           \
    const int rc = ENQUEUE(ctx, p->kernel, in, n_in, par, n_par, out, n_out);                              \
    mblast_cl::release(p);                                                                                 \
    return rc;                                                                                             \
  }                                                                                                        \
  extern "C" void mblast_release(const mblast_context*, void* state) {                                     \
    mblast_cl::release(static_cast<mblast_cl::Program*>(state));                                           \
  }                                                                                                        \
  extern "C" const char* mblast_last_error(void) { return mblast_cl::error_text(); }

#endif /* MBLAST_OPENCL_CANDIDATE_H */
