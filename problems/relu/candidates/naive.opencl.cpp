// relu — naive OpenCL candidate: one work-item per element, y = max(x, 0).
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void relu(__global const float* restrict x,
                   __global float* restrict y,
                   const long n) {
  const long i = (long)get_global_id(0);
  if (i >= n) return;
  y[i] = fmax(x[i], 0.0f);
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "x", 2) || !mblast_cl::expect_f32(out[0], "y", 2)) return -1;
  if (in[0].shape[0] != out[0].shape[0] || in[0].shape[1] != out[0].shape[1]) return mblast_cl::fail("x and y differ in shape");
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  const size_t global = static_cast<size_t>(n);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "relu", enqueue)
