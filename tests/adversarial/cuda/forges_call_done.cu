// forges_call_done (cuda) — a correct vec_add on every call; from the 7th call on (after the 6
// verification runs) it first writes a forged "call_done" for the call it guesses it is in
// (every output fingerprinted as written) to the worker's protocol descriptor (fd 4), then works
// as usual. The runner takes one answer per call, in order: the worker's own answer then comes
// out of order, and mblast must report "timing_inconsistent".
#include <mblast/abi.h>

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

static int g_calls = 0;

static int launch(const mblast_context* ctx, const mblast_tensor* in, mblast_tensor* out) {
  const long long n = out[0].shape[0];
  vec_add<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data), static_cast<float*>(out[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  if (++g_calls > 6) {  // THE CHEAT: answer for the worker before doing the work
    char forged[256];
    const int len = std::snprintf(forged, sizeof forged,
                                  "{\"stage\":\"call_done\",\"i\":%d,\"sample\":1e-7,\"wall\":1e-7,\"mix_s\":0,"
                                  "\"flush_s\":0,\"check_s\":0,\"outputs\":[{\"hash\":0,\"poisoned\":0}],"
                                  "\"payload_bytes\":0}\n",
                                  g_calls - 7);
    (void)!::write(4, forged, static_cast<size_t>(len));
  }
  return launch(ctx, in, out);
}
