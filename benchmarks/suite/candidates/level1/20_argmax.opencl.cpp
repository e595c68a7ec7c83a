// 20_argmax — naive OpenCL candidate: y[r] = index of the largest x[r, j] (the first one on ties, as
//   torch.argmax) for x [rows, cols] f32, y [rows] int64; one work-item per row, a sequential scan.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void argmax_rows(__global const float* restrict x, __global long* restrict y, const long rows,
                          const long cols) {
  const long r = (long)get_global_id(0);
  if (r >= rows) return;
  __global const float* xr = x + r * cols;
  long best = 0;
  for (long j = 1; j < cols; ++j)
    if (xr[j] > xr[best]) best = j;
  y[r] = best;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "in0", 2)) return -1;
  const cl_long rows = in[0].shape[0], cols = in[0].shape[1];
  if (out[0].dtype != MBLAST_I64 || out[0].ndim != 1 || out[0].shape[0] != rows ||
      out[0].nbytes != static_cast<size_t>(rows) * sizeof(cl_long) || !out[0].data)
    return mblast_cl::fail("out0 must be an int64 tensor of %lld entries", (long long)rows);
  const size_t global = static_cast<size_t>(rows);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data), rows,
                           cols);
}

MBLAST_OPENCL_CANDIDATE(kSource, "argmax_rows", enqueue)
