// 10_add_mul_tanh — naive OpenCL candidate: out = tanh((x + y) * z) + x over three tensors of one
//   shape; one work-item per element.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void add_mul_tanh(__global const float* restrict x, __global const float* restrict y,
                           __global const float* restrict z, __global float* restrict out, const long n) {
  const long i = (long)get_global_id(0);
  if (i < n) out[i] = tanh((x[i] + y[i]) * z[i]) + x[i];
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 3, n_par, 0, n_out, 1)) return -1;
  const int nd = in[0].ndim;
  if (nd < 1 || nd > MBLAST_MAX_DIMS) return mblast_cl::fail("in0: expected 1 to 8 dims, got %d", nd);
  if (!mblast_cl::expect_f32(in[0], "in0", nd) || !mblast_cl::expect_f32(in[1], "in1", nd) ||
      !mblast_cl::expect_f32(in[2], "in2", nd) || !mblast_cl::expect_f32(out[0], "out0", nd))
    return -1;
  for (int d = 0; d < nd; ++d)
    if (in[1].shape[d] != in[0].shape[d] || in[2].shape[d] != in[0].shape[d] || out[0].shape[d] != in[0].shape[d])
      return mblast_cl::fail("in0, in1, in2 and out0 must have one shape (they differ in dim %d)", d);
  const cl_long n = static_cast<cl_long>(in[0].nbytes / sizeof(float));
  const size_t global = static_cast<size_t>(n);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(in[1].data),
                           static_cast<cl_mem>(in[2].data), static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "add_mul_tanh", enqueue)
