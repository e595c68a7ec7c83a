// 28_cumsum — naive OpenCL candidate: inclusive prefix sum along the last dim of x [rows, cols]
//   (the file's DIM = -1); one work-item per row, a sequential scan. The running sum is kept in
//   double (cl_khr_fp64): a float running sum over thousands of signed terms drifts by more than
//   the tolerance where the prefix passes near zero.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void cumsum_rows(__global const float* restrict x, __global float* restrict y, const long rows,
                          const long cols) {
  const long r = (long)get_global_id(0);
  if (r >= rows) return;
  __global const float* xr = x + r * cols;
  __global float* yr = y + r * cols;
  double acc = 0.0;
  for (long j = 0; j < cols; ++j) {
    acc += (double)xr[j];
    yr[j] = (float)acc;
  }
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "in0", 2) || !mblast_cl::expect_f32(out[0], "out0", 2)) return -1;
  const cl_long rows = in[0].shape[0], cols = in[0].shape[1];
  if (out[0].shape[0] != rows || out[0].shape[1] != cols) return mblast_cl::fail("out0 must have the shape of in0");
  const size_t global = static_cast<size_t>(rows);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data), rows,
                           cols);
}

MBLAST_OPENCL_CANDIDATE(kSource, "cumsum_rows", enqueue)
