// conv2d — naive OpenCL candidate: direct convolution, one work-item per output
//   element (n, k, p, q); NCHW input, KCRS weight, stride 1, zero padding 1, plus bias.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

static const char* kSource = R"CLC(
#define STRIDE 1
#define PAD 1

__kernel void conv2d(__global const float* restrict x,       // [N, C, H, W]
                     __global const float* restrict weight,  // [K, C, R, S]
                     __global const float* restrict bias,    // [K]
                     __global float* restrict y,             // [N, K, P, Q]
                     const int N, const int C, const int H, const int W,
                     const int K, const int R, const int S,
                     const int P, const int Q) {
  const long idx = (long)get_global_id(0);
  const long total = (long)N * K * P * Q;
  if (idx >= total) return;
  const int q = (int)(idx % Q);
  const int p = (int)((idx / Q) % P);
  const int k = (int)((idx / ((long)Q * P)) % K);
  const int n = (int)(idx / ((long)Q * P * K));
  float acc = bias[k];
  for (int c = 0; c < C; ++c) {
    for (int r = 0; r < R; ++r) {
      const int h = p * STRIDE - PAD + r;
      if (h < 0 || h >= H) continue;
      for (int s = 0; s < S; ++s) {
        const int w = q * STRIDE - PAD + s;
        if (w < 0 || w >= W) continue;
        acc += x[(((long)n * C + c) * H + h) * W + w] *
               weight[(((long)k * C + c) * R + r) * S + s];
      }
    }
  }
  y[idx] = acc;
}
)CLC";

static const char* kKernelName = "conv2d";

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
  if (n_inputs != 1 || n_params != 2 || n_outputs != 1)
    FAIL("expected 1 input, 2 parameters, 1 output; got %d, %d, %d", (int)n_inputs,
         (int)n_params, (int)n_outputs);
  if (!check_tensor(inputs[0], "x", 4) || !check_tensor(params[0], "weight", 4) ||
      !check_tensor(params[1], "bias", 1) || !check_tensor(outputs[0], "y", 4))
    return -1;
  const int64_t N = inputs[0].shape[0], C = inputs[0].shape[1];
  const int64_t H = inputs[0].shape[2], W = inputs[0].shape[3];
  const int64_t K = params[0].shape[0], R = params[0].shape[2], S = params[0].shape[3];
  const int64_t P = H + 2 * 1 - R + 1, Q = W + 2 * 1 - S + 1;  // stride 1, padding 1
  if (params[0].shape[1] != C) FAIL("weight has %lld input channels, x has %lld",
                                    (long long)params[0].shape[1], (long long)C);
  if (params[1].shape[0] != K) FAIL("bias has %lld entries, weight has %lld filters",
                                    (long long)params[1].shape[0], (long long)K);
  if (P <= 0 || Q <= 0 || outputs[0].shape[0] != N || outputs[0].shape[1] != K ||
      outputs[0].shape[2] != P || outputs[0].shape[3] != Q)
    FAIL("y must be [%lld, %lld, %lld, %lld]", (long long)N, (long long)K, (long long)P,
         (long long)Q);
  const int64_t dims[9] = {N, C, H, W, K, R, S, P, Q};
  cl_int args[9];
  for (int d = 0; d < 9; ++d) {
    if (dims[d] > 0x7fffffff) FAIL("dimension %d too large for this kernel", d);
    args[d] = static_cast<cl_int>(dims[d]);
  }
  cl_command_queue queue = static_cast<cl_command_queue>(ctx->cl_queue);
  CL_CHECK(clSetKernelArg(s->kernel, 0, sizeof(cl_mem), &inputs[0].data));
  CL_CHECK(clSetKernelArg(s->kernel, 1, sizeof(cl_mem), &params[0].data));
  CL_CHECK(clSetKernelArg(s->kernel, 2, sizeof(cl_mem), &params[1].data));
  CL_CHECK(clSetKernelArg(s->kernel, 3, sizeof(cl_mem), &outputs[0].data));
  for (cl_uint d = 0; d < 9; ++d)
    CL_CHECK(clSetKernelArg(s->kernel, 4 + d, sizeof(cl_int), &args[d]));
  const size_t global = static_cast<size_t>(N * K * P * Q);
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
