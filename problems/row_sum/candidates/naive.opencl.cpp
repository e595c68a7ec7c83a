// row_sum — naive OpenCL candidate: one work-item per row, sequential float sum
//   y[r] = sum_j x[r, j].
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

static const char* kSource = R"CLC(
__kernel void row_sum(__global const float* restrict x,
                      __global float* restrict y,
                      const long rows,
                      const long cols) {
  const long r = (long)get_global_id(0);
  if (r >= rows) return;
  __global const float* row = x + r * cols;
  float acc = 0.0f;
  for (long j = 0; j < cols; ++j) acc += row[j];
  y[r] = acc;
}
)CLC";

static const char* kKernelName = "row_sum";

static char g_err[8192];

static void set_error(const char* what, cl_int err, int line) {
  std::snprintf(g_err, sizeof g_err, "%s failed with cl_int %d (naive.opencl.cpp:%d)", what,
                static_cast<int>(err), line);
}

#define CL_CHECK(expr)                           \
  do {                                           \
    cl_int cl_check_err_ = (expr);               \
    if (cl_check_err_ != CL_SUCCESS) {           \
      set_error(#expr, cl_check_err_, __LINE__); \
      return -1;                                 \
    }                                            \
  } while (0)

#define FAIL(...)                                   \
  do {                                              \
    std::snprintf(g_err, sizeof g_err, __VA_ARGS__); \
    return -1;                                      \
  } while (0)

struct State {
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
};

static void destroy(State* s) {
  if (!s) return;
  if (s->kernel) clReleaseKernel(s->kernel);
  if (s->program) clReleaseProgram(s->program);
  delete s;
}

static void append_build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) !=
          CL_SUCCESS ||
      size < 2)
    return;
  char* log = static_cast<char*>(std::malloc(size));
  if (!log) return;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log, nullptr) ==
      CL_SUCCESS) {
    size_t used = std::strlen(g_err);
    std::snprintf(g_err + used, sizeof g_err - used, "; build log: %s", log);
  }
  std::free(log);
}

static int build(const mblast_context* ctx, State** out) {
  *out = nullptr;
  if (!ctx || ctx->backend != MBLAST_BACKEND_OPENCL || !ctx->cl_context || !ctx->cl_device ||
      !ctx->cl_queue)
    FAIL("mblast_context has no OpenCL context, device or queue");
  cl_context context = static_cast<cl_context>(ctx->cl_context);
  cl_device_id device = static_cast<cl_device_id>(ctx->cl_device);
  State* s = new State();
  cl_int err = CL_SUCCESS;
  s->program = clCreateProgramWithSource(context, 1, &kSource, nullptr, &err);
  if (err != CL_SUCCESS) {
    set_error("clCreateProgramWithSource", err, __LINE__);
    destroy(s);
    return -1;
  }
  err = clBuildProgram(s->program, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    set_error("clBuildProgram", err, __LINE__);
    append_build_log(s->program, device);
    destroy(s);
    return -1;
  }
  s->kernel = clCreateKernel(s->program, kKernelName, &err);
  if (err != CL_SUCCESS) {
    set_error("clCreateKernel", err, __LINE__);
    destroy(s);
    return -1;
  }
  *out = s;
  return 0;
}

// Checks one tensor's dtype, rank and byte size; returns false with g_err set on mismatch.
static bool check_tensor(const mblast_tensor& t, const char* what, int ndim) {
  if (t.dtype != MBLAST_F32) {
    std::snprintf(g_err, sizeof g_err, "%s: expected dtype f32", what);
    return false;
  }
  if (t.ndim != ndim) {
    std::snprintf(g_err, sizeof g_err, "%s: expected %d dims, got %d", what, ndim,
                  static_cast<int>(t.ndim));
    return false;
  }
  size_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    if (t.shape[d] <= 0) {
      std::snprintf(g_err, sizeof g_err, "%s: dim %d is not positive", what, d);
      return false;
    }
    n *= static_cast<size_t>(t.shape[d]);
  }
  if (t.nbytes != n * sizeof(float) || t.data == nullptr) {
    std::snprintf(g_err, sizeof g_err, "%s: buffer holds %zu bytes, shape needs %zu", what,
                  t.nbytes, n * sizeof(float));
    return false;
  }
  return true;
}

static int enqueue(const mblast_context* ctx, State* s, const mblast_tensor* inputs,
                   int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                   mblast_tensor* outputs, int32_t n_outputs) {
  (void)params;
  if (n_inputs != 1 || n_params != 0 || n_outputs != 1)
    FAIL("expected 1 input, 0 parameters, 1 output; got %d, %d, %d", (int)n_inputs,
         (int)n_params, (int)n_outputs);
  if (!check_tensor(inputs[0], "x", 2) || !check_tensor(outputs[0], "y", 1)) return -1;
  const cl_long rows = inputs[0].shape[0];
  const cl_long cols = inputs[0].shape[1];
  if (outputs[0].shape[0] != rows) FAIL("y has %lld entries, x has %lld rows",
                                        (long long)outputs[0].shape[0], (long long)rows);
  cl_command_queue queue = static_cast<cl_command_queue>(ctx->cl_queue);
  CL_CHECK(clSetKernelArg(s->kernel, 0, sizeof(cl_mem), &inputs[0].data));
  CL_CHECK(clSetKernelArg(s->kernel, 1, sizeof(cl_mem), &outputs[0].data));
  CL_CHECK(clSetKernelArg(s->kernel, 2, sizeof(cl_long), &rows));
  CL_CHECK(clSetKernelArg(s->kernel, 3, sizeof(cl_long), &cols));
  const size_t global = static_cast<size_t>(rows);
  CL_CHECK(clEnqueueNDRangeKernel(queue, s->kernel, 1, nullptr, &global, nullptr, 0, nullptr,
                                  nullptr));
  return 0;
}

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params,
                              int32_t n_params, void** state) {
  (void)params;
  (void)n_params;
  State* s = nullptr;
  if (build(ctx, &s) != 0) return -1;
  *state = s;
  return 0;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  if (state)
    return enqueue(ctx, static_cast<State*>(state), inputs, n_inputs, params, n_params,
                   outputs, n_outputs);
  // Called without mblast_prepare: build a transient program. Releasing the kernel after the
  // enqueue is fine; OpenCL keeps what the queued command needs alive.
  State* s = nullptr;
  if (build(ctx, &s) != 0) return -1;
  int rc = enqueue(ctx, s, inputs, n_inputs, params, n_params, outputs, n_outputs);
  destroy(s);
  return rc;
}

extern "C" void mblast_release(const mblast_context* ctx, void* state) {
  (void)ctx;
  destroy(static_cast<State*>(state));
}

extern "C" const char* mblast_last_error(void) { return g_err; }
