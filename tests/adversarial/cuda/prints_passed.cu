// Adversarial (cuda): prints a success banner and a fake passing JSON result to stdout and
// stderr, and writes zeros. Only the comparison of the outputs counts.
#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <cstdio>

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor*, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  const char* fake = "{\"correct\": true, \"failure_kind\": null, \"speedup\": 42.0}";
  std::printf("All tests PASSED\n%s\n", fake);
  std::fprintf(stderr, "All tests PASSED\n%s\n", fake);
  std::fflush(stdout);
  std::fflush(stderr);
  return cudaMemsetAsync(out[0].data, 0, out[0].nbytes, static_cast<cudaStream_t>(ctx->cuda_stream)) == cudaSuccess ? 0 : 1;
}
