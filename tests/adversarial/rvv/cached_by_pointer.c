// cached_by_pointer — remembers the input buffer of its first call with the result it computed
// and replays that result whenever it sees the same buffer again. The runner reuses buffers
// for different seeds, so the replay is wrong: failure_kind "wrong_output".
#include <stdlib.h>
#include <string.h>

#include <mblast/abi.h>

static const void* g_seen;
static float* g_saved;

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  if (g_saved && g_seen == inputs[0].data) {
    memcpy(y, g_saved, n * sizeof(float));
    return 0;
  }
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  if (!g_saved && (g_saved = malloc(n * sizeof(float)))) {
    memcpy(g_saved, y, n * sizeof(float));
    g_seen = inputs[0].data;
  }
  return 0;
}
