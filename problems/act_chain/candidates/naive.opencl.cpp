// act_chain — naive OpenCL candidate: one work-item per element,
//   y = tanh(leaky_relu(x, 0.1) * scale[col]) + 0.5 * x.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void act_chain(__global const float* restrict x,
                        __global const float* restrict scale,
                        __global float* restrict y,
                        const long n,
                        const long cols) {
  const long i = (long)get_global_id(0);
  if (i >= n) return;
  const float v = x[i];
  const float lrelu = v > 0.0f ? v : 0.1f * v;
  y[i] = tanh(lrelu * scale[i % cols]) + 0.5f * v;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 1, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "x", 2) || !mblast_cl::expect_f32(par[0], "scale", 1) || !mblast_cl::expect_f32(out[0], "y", 2))
    return -1;
  const cl_long cols = in[0].shape[1];
  if (par[0].shape[0] != cols) return mblast_cl::fail("scale has %lld entries, x has %lld columns", (long long)par[0].shape[0], (long long)cols);
  if (in[0].shape[0] != out[0].shape[0] || out[0].shape[1] != cols) return mblast_cl::fail("x and y differ in shape");
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  const size_t global = static_cast<size_t>(n);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(par[0].data),
                           static_cast<cl_mem>(out[0].data), n, cols);
}

MBLAST_OPENCL_CANDIDATE(kSource, "act_chain", enqueue)
