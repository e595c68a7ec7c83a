// Adversarial (cuda): "ReLU" as a copy of x. Right on the [0, 1) seed, wrong on the signed ones.
#include <mblast/abi.h>

#include <cuda_runtime.h>

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  // THE BUG: negative inputs are passed through
  return cudaMemcpyAsync(out[0].data, in[0].data, out[0].nbytes, cudaMemcpyDeviceToDevice,
                         static_cast<cudaStream_t>(ctx->cuda_stream)) == cudaSuccess ? 0 : 1;
}
