// forges_call_done — a correct vec_add on every call; from the 7th call on (after the 6
// verification runs) it first writes a forged "call_done" for the call it guesses it is in
// (every output fingerprinted as written) to the worker's protocol descriptor (fd 4), then works
// as usual. The runner takes one answer per call, in order: the worker's own answer then comes
// out of order, and mblast must report "timing_inconsistent".
#include <mblast/abi.h>

#include <stdio.h>
#include <unistd.h>

static int g_calls;

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  if (++g_calls > 6) {  // THE CHEAT: answer for the worker before doing the work
    char forged[256];
    const int len = snprintf(forged, sizeof forged,
                             "{\"stage\":\"call_done\",\"i\":%d,\"sample\":42,\"wall\":0,\"mix_s\":0,\"flush_s\":0,"
                             "\"check_s\":0,\"outputs\":[{\"hash\":0,\"poisoned\":0}],\"payload_bytes\":0}\n",
                             g_calls - 7);
    (void)!write(4, forged, (size_t)len);
  }
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  return 0;
}
