// 13_groupnorm_silu — naive OpenCL candidate: SiLU(GroupNorm(x)) on x [N, C, H, W] with affine
//   parameters, eps 1e-5: each (n, group) spans C/G contiguous channel planes;
//   v = (x - mean) / sqrt(var + eps) * weight[c] + bias[c] with the group's biased variance, then
//   y = v sigmoid(v). One work-item per (n, group), three passes.
//   The group count G is the file's constructor argument GROUPS, which no tensor carries: it is
//   looked up from the channel count (8 groups for 32 channels at the small size, 32 for 256 at
//   the full size); other channel counts are refused.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
#define EPS 1e-5f

__kernel void groupnorm_silu(__global const float* restrict x, __global const float* restrict weight,
                             __global const float* restrict bias, __global float* restrict y, const long N,
                             const long C, const long G, const long HW) {
  const long ng = (long)get_global_id(0);
  if (ng >= N * G) return;
  const long cpg = C / G, count = cpg * HW;
  const long c0 = (ng % G) * cpg;
  __global const float* xg = x + ng * count;  // the group's channels are contiguous in NCHW
  __global float* yg = y + ng * count;
  float sum = 0.0f;
  for (long i = 0; i < count; ++i) sum += xg[i];
  const float mean = sum / (float)count;
  float sq = 0.0f;
  for (long i = 0; i < count; ++i) sq += (xg[i] - mean) * (xg[i] - mean);
  const float rstd = 1.0f / sqrt(sq / (float)count + EPS);
  for (long i = 0; i < count; ++i) {
    const long c = c0 + i / HW;
    const float v = (xg[i] - mean) * rstd * weight[c] + bias[c];
    yg[i] = v / (1.0f + exp(-v));
  }
}
)CLC";

static cl_long groups_for(cl_long channels) { return channels == 32 ? 8 : channels == 256 ? 32 : 0; }

// Checks that a tensor has the given name (the documented parameter order).
static bool expect_name(const mblast_tensor& t, const char* name) {
  if (!t.name || std::strcmp(t.name, name) == 0) return true;
  return mblast_cl::fail("expected tensor '%s' in this position, got '%s'", name, t.name), false;
}

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 2, n_out, 1)) return -1;
  if (!expect_name(par[0], "norm.weight") || !expect_name(par[1], "norm.bias")) return -1;
  if (!mblast_cl::expect_f32(in[0], "in0", 4) || !mblast_cl::expect_f32(par[0], "norm.weight", 1) ||
      !mblast_cl::expect_f32(par[1], "norm.bias", 1) || !mblast_cl::expect_f32(out[0], "out0", 4))
    return -1;
  const cl_long N = in[0].shape[0], C = in[0].shape[1], HW = in[0].shape[2] * in[0].shape[3];
  const cl_long G = groups_for(C);
  if (G == 0)
    return mblast_cl::fail("no known group count for %lld channels (the suite uses 8 of 32, 32 of 256)", (long long)C);
  if (par[0].shape[0] != C || par[1].shape[0] != C)
    return mblast_cl::fail("norm.weight and norm.bias must have %lld entries", (long long)C);
  for (int d = 0; d < 4; ++d)
    if (out[0].shape[d] != in[0].shape[d]) return mblast_cl::fail("out0 must have the shape of in0");
  const size_t global = static_cast<size_t>(N * G);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(par[0].data),
                           static_cast<cl_mem>(par[1].data), static_cast<cl_mem>(out[0].data), N, C, G, HW);
}

MBLAST_OPENCL_CANDIDATE(kSource, "groupnorm_silu", enqueue)
