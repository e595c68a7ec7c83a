// replays_by_content (cuda) — remembers y for every input it has computed, keyed by one value
// read deep inside input a (element n/2 + 123), and replays it whenever that value comes again.
// The verification runs pass (the second run of each seed is a replay of the first). mblast's
// timed inputs are fresh mixes of two seeds, so the key matches while the rest differs: the spot
// check in a fresh process must see "wrong_output".
#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <cstring>
#include <map>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

static std::map<unsigned, float*> g_cache;  // key: the bits of a[n/2 + 123]; value: a device copy of y

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  cudaStream_t s = static_cast<cudaStream_t>(ctx->cuda_stream);
  const long long n = out[0].shape[0];
  float probe = 0;
  if (cudaMemcpy(&probe, static_cast<const float*>(in[0].data) + n / 2 + 123, sizeof probe, cudaMemcpyDeviceToHost) !=
      cudaSuccess)
    return 1;
  unsigned key = 0;
  std::memcpy(&key, &probe, sizeof key);
  auto hit = g_cache.find(key);
  if (hit != g_cache.end())  // THE CHEAT: "seen these inputs before"
    return cudaMemcpyAsync(out[0].data, hit->second, out[0].nbytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess ? 0 : 1;
  vec_add<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(static_cast<const float*>(in[0].data),
                                                                 static_cast<const float*>(in[1].data),
                                                                 static_cast<float*>(out[0].data), n);
  float* copy = nullptr;
  if (cudaMalloc(&copy, out[0].nbytes) != cudaSuccess) return 1;
  g_cache[key] = copy;
  return cudaMemcpyAsync(copy, out[0].data, out[0].nbytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess ? 0 : 1;
}
