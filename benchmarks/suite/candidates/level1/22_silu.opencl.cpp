// 22_silu — naive OpenCL candidate: SiLU y = x sigmoid(x) = x / (1 + e^-x), one work-item per
//   element, any shape.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void silu(__global const float* restrict x, __global float* restrict y, const long n) {
  const long i = (long)get_global_id(0);
  if (i >= n) return;
  const float v = x[i];
  y[i] = v / (1.0f + exp(-v));
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
  const int nd = in[0].ndim;
  if (nd < 1 || nd > MBLAST_MAX_DIMS) return mblast_cl::fail("in0: expected 1 to 8 dims, got %d", nd);
  if (!mblast_cl::expect_f32(in[0], "in0", nd) || !mblast_cl::expect_f32(out[0], "out0", nd)) return -1;
  for (int d = 0; d < nd; ++d)
    if (out[0].shape[d] != in[0].shape[d]) return mblast_cl::fail("out0 differs from in0 in dim %d", d);
  const cl_long n = static_cast<cl_long>(in[0].nbytes / sizeof(float));
  const size_t global = static_cast<size_t>(n);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "silu", enqueue)
