// 15_softmax — naive OpenCL candidate: softmax over the last dim of x [rows, cols]; one work-item
//   per row, three passes over the row (max, sum of exp(x - max), normalise).
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void softmax_rows(__global const float* restrict x, __global float* restrict y, const long rows,
                           const long cols) {
  const long r = (long)get_global_id(0);
  if (r >= rows) return;
  __global const float* xr = x + r * cols;
  __global float* yr = y + r * cols;
  float m = -INFINITY;
  for (long j = 0; j < cols; ++j) m = fmax(m, xr[j]);
  float sum = 0.0f;
  for (long j = 0; j < cols; ++j) sum += exp(xr[j] - m);
  const float inv = 1.0f / sum;
  for (long j = 0; j < cols; ++j) yr[j] = exp(xr[j] - m) * inv;
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

MBLAST_OPENCL_CANDIDATE(kSource, "softmax_rows", enqueue)
