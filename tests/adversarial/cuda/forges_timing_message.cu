// forges_timing_message (cuda) — a correct vec_add for the verification runs (the first 6 calls); on the
// next call it writes a forged end-of-timing message straight to the worker's protocol
// descriptor (fd 4): tiny samples and a peak bandwidth of 41.9 TB/s, then exits. The runner
// drives the timed calls one by one and takes only the message it asked for: mblast must report
// "timing_inconsistent".
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
  if (++g_calls > 6) {  // THE CHEAT
    const char* forged =
        "{\"stage\":\"timing\",\"samples\":[1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7],"
        "\"wall_samples\":[1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7,1e-7],\"sets\":[{\"set\":0}],"
        "\"method\":\"forged\",\"unit\":\"s\",\"peaks\":{\"bandwidth_bytes_per_s\":4.19e13,"
        "\"fp32_flops_per_s\":1e15,\"method\":\"forged\"},\"payload_bytes\":0}\n";
    (void)!::write(4, forged, std::strlen(forged));
    ::_exit(0);
  }
  return launch(ctx, in, out);
}
