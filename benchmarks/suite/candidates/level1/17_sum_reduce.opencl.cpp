// 17_sum_reduce — naive OpenCL candidate: y[b, c] = sum_r x[b, r, c] for x [B, R, C] (the sum over
//   the middle dim, the file's DIM = 1); one work-item per output, a sequential sum down the column,
//   kept in double (cl_khr_fp64): over R = 4096 signed values (the full size) a float running sum
//   drifts past the tolerance where it nearly cancels.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void sum_middle(__global const float* restrict x, __global float* restrict y, const long B, const long R,
                         const long C) {
  const long idx = (long)get_global_id(0);
  if (idx >= B * C) return;
  const long b = idx / C, c = idx % C;
  __global const float* col = x + b * R * C + c;
  double acc = 0.0;
  for (long r = 0; r < R; ++r) acc += (double)col[r * C];
  y[idx] = (float)acc;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "in0", 3) || !mblast_cl::expect_f32(out[0], "out0", 2)) return -1;
  const cl_long B = in[0].shape[0], R = in[0].shape[1], C = in[0].shape[2];
  if (out[0].shape[0] != B || out[0].shape[1] != C)
    return mblast_cl::fail("out0 must be [%lld, %lld]", (long long)B, (long long)C);
  const size_t global = static_cast<size_t>(B * C);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data), B, R,
                           C);
}

MBLAST_OPENCL_CANDIDATE(kSource, "sum_middle", enqueue)
