// conv2d — compiler baseline for rvv: plain C, no intrinsics, built like every rvv candidate
// (clang -O3 for the target's -march, no fast-math). Direct NCHW convolution, stride 1, zero
// padding (R-1)/2, written with the output row innermost (the clipped range of q per tap), so
// the inner loop is an axpy clang can vectorise without reassociating sums.
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 2 || n_outputs != 1 || inputs[0].ndim != 4 || params[0].ndim != 4) return 1;
  const long N = inputs[0].shape[0], C = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  const long K = params[0].shape[0], R = params[0].shape[2], S = params[0].shape[3];
  const long pr = (R - 1) / 2, ps = (S - 1) / 2;
  if (params[0].shape[1] != C || params[1].shape[0] != K || outputs[0].shape[0] != N || outputs[0].shape[1] != K ||
      outputs[0].shape[2] != H || outputs[0].shape[3] != W)
    return 1;
  const float* restrict x = (const float*)inputs[0].data;
  const float* restrict weight = (const float*)params[0].data;
  const float* restrict bias = (const float*)params[1].data;
  float* restrict y = (float*)outputs[0].data;
  for (long n = 0; n < N; ++n)
    for (long k = 0; k < K; ++k)
      for (long p = 0; p < H; ++p) {
        float* restrict out = y + ((n * K + k) * H + p) * W;
        for (long q = 0; q < W; ++q) out[q] = bias[k];
        for (long c = 0; c < C; ++c)
          for (long r = 0; r < R; ++r) {
            const long h = p + r - pr;
            if (h < 0 || h >= H) continue;
            const float* restrict row = x + ((n * C + c) * H + h) * W;
            for (long s = 0; s < S; ++s) {
              const float wv = weight[((k * C + c) * R + r) * S + s];
              const long d = s - ps;  // out[q] += wv * row[q + d] where 0 <= q + d < W
              const long q0 = d < 0 ? -d : 0, q1 = d > 0 ? W - d : W;
              for (long q = q0; q < q1; ++q) out[q] += wv * row[q + d];
            }
          }
      }
  return 0;
}
