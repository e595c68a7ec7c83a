// 11_layernorm — naive OpenCL candidate: LayerNorm over the last dim of x [rows, cols], eps 1e-5
//   (the file's constant), y = (x - mean) / sqrt(var + eps) * weight + bias with the biased
//   variance; one work-item per row, three passes (mean, variance, normalise).
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
#define EPS 1e-5f

__kernel void layernorm_rows(__global const float* restrict x, __global const float* restrict weight,
                             __global const float* restrict bias, __global float* restrict y,
                             const long rows, const long cols) {
  const long r = (long)get_global_id(0);
  if (r >= rows) return;
  __global const float* xr = x + r * cols;
  __global float* yr = y + r * cols;
  float sum = 0.0f;
  for (long j = 0; j < cols; ++j) sum += xr[j];
  const float mean = sum / (float)cols;
  float sq = 0.0f;
  for (long j = 0; j < cols; ++j) sq += (xr[j] - mean) * (xr[j] - mean);
  const float rstd = 1.0f / sqrt(sq / (float)cols + EPS);
  for (long j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * weight[j] + bias[j];
}
)CLC";

// Checks that a tensor has the given name (the documented parameter order).
static bool expect_name(const mblast_tensor& t, const char* name) {
  if (!t.name || std::strcmp(t.name, name) == 0) return true;
  return mblast_cl::fail("expected tensor '%s' in this position, got '%s'", name, t.name), false;
}

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 2, n_out, 1)) return -1;
  if (!expect_name(par[0], "norm.weight") || !expect_name(par[1], "norm.bias")) return -1;
  if (!mblast_cl::expect_f32(in[0], "in0", 2) || !mblast_cl::expect_f32(par[0], "norm.weight", 1) ||
      !mblast_cl::expect_f32(par[1], "norm.bias", 1) || !mblast_cl::expect_f32(out[0], "out0", 2))
    return -1;
  const cl_long rows = in[0].shape[0], cols = in[0].shape[1];
  if (par[0].shape[0] != cols || par[1].shape[0] != cols)
    return mblast_cl::fail("norm.weight and norm.bias must have %lld entries", (long long)cols);
  if (out[0].shape[0] != rows || out[0].shape[1] != cols) return mblast_cl::fail("out0 must have the shape of in0");
  const size_t global = static_cast<size_t>(rows);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(par[0].data),
                           static_cast<cl_mem>(par[1].data), static_cast<cl_mem>(out[0].data), rows, cols);
}

MBLAST_OPENCL_CANDIDATE(kSource, "layernorm_rows", enqueue)
