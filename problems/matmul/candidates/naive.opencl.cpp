// matmul — naive OpenCL candidate: one work-item per output element, plain dot
//   product over K: c[i, j] = sum_k a[i, k] * w[k, j].
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void matmul(__global const float* restrict a,   // [M, K]
                     __global const float* restrict w,   // [K, N]
                     __global float* restrict c,         // [M, N]
                     const long M,
                     const long N,
                     const long K) {
  const long j = (long)get_global_id(0);
  const long i = (long)get_global_id(1);
  if (i >= M || j >= N) return;
  float acc = 0.0f;
  for (long k = 0; k < K; ++k) acc += a[i * K + k] * w[k * N + j];
  c[i * N + j] = acc;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 1, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "a", 2) || !mblast_cl::expect_f32(par[0], "w", 2) || !mblast_cl::expect_f32(out[0], "c", 2))
    return -1;
  const cl_long M = in[0].shape[0], K = in[0].shape[1], N = par[0].shape[1];
  if (par[0].shape[0] != K) return mblast_cl::fail("a is [%lld, %lld] but w has %lld rows", (long long)M, (long long)K, (long long)par[0].shape[0]);
  if (out[0].shape[0] != M || out[0].shape[1] != N) return mblast_cl::fail("c must be [%lld, %lld]", (long long)M, (long long)N);
  const size_t global[2] = {static_cast<size_t>(N), static_cast<size_t>(M)};
  return mblast_cl::launch(ctx, k, 2, global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(par[0].data),
                           static_cast<cl_mem>(out[0].data), M, N, K);
}

MBLAST_OPENCL_CANDIDATE(kSource, "matmul", enqueue)
