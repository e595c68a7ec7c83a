// 14_matmul_bias_clamp — naive OpenCL candidate: out = clamp(A @ B + bias, -8, 8) for A [M, K],
//   B [K, N], bias [N] (the bounds are the file's constructor arguments, the same at both sizes);
//   one work-item per output element, its dot product over K read straight from global memory.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
#define CLAMP_MIN -8.0f
#define CLAMP_MAX 8.0f

__kernel void matmul_bias_clamp(__global const float* restrict a, __global const float* restrict b,
                                __global const float* restrict bias, __global float* restrict c, const long M,
                                const long K, const long N) {
  const long idx = (long)get_global_id(0);
  if (idx >= M * N) return;
  const long i = idx / N, j = idx % N;
  float acc = 0.0f;
  for (long k = 0; k < K; ++k) acc += a[i * K + k] * b[k * N + j];
  c[idx] = fmin(fmax(acc + bias[j], CLAMP_MIN), CLAMP_MAX);
}
)CLC";

// Checks that a tensor has the given name (the documented parameter order).
static bool expect_name(const mblast_tensor& t, const char* name) {
  if (!t.name || std::strcmp(t.name, name) == 0) return true;
  return mblast_cl::fail("expected tensor '%s' in this position, got '%s'", name, t.name), false;
}

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (!mblast_cl::expect_counts(n_in, 2, n_par, 1, n_out, 1)) return -1;
  if (!expect_name(par[0], "bias")) return -1;
  if (!mblast_cl::expect_f32(in[0], "in0", 2) || !mblast_cl::expect_f32(in[1], "in1", 2) ||
      !mblast_cl::expect_f32(par[0], "bias", 1) || !mblast_cl::expect_f32(out[0], "out0", 2))
    return -1;
  const cl_long M = in[0].shape[0], K = in[0].shape[1], N = in[1].shape[1];
  if (in[1].shape[0] != K)
    return mblast_cl::fail("in1 has %lld rows, in0 has %lld columns", (long long)in[1].shape[0], (long long)K);
  if (par[0].shape[0] != N) return mblast_cl::fail("bias must have %lld entries", (long long)N);
  if (out[0].shape[0] != M || out[0].shape[1] != N)
    return mblast_cl::fail("out0 must be [%lld, %lld]", (long long)M, (long long)N);
  const size_t global = static_cast<size_t>(M * N);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(in[1].data),
                           static_cast<cl_mem>(par[0].data), static_cast<cl_mem>(out[0].data), M, K, N);
}

MBLAST_OPENCL_CANDIDATE(kSource, "matmul_bias_clamp", enqueue)
