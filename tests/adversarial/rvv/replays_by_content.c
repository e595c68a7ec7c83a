// replays_by_content — remembers y for every input it has computed, keyed by one value read deep
// inside input a (element n/2 + 123), and replays it whenever that value comes again. The
// verification runs pass (the second run of each seed is a replay of the first); timed inputs
// that repeated a seed's values would be served from the cache. mblast's timed inputs are fresh
// mixes of two seeds, so the key matches while the rest differs: the spot check in a fresh
// process must see "wrong_output".
#include <mblast/abi.h>

#include <stdlib.h>
#include <string.h>

#define SLOTS 8
static float g_key[SLOTS];
static float* g_y[SLOTS];
static int g_used;

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  const float key = a[n / 2 + 123];
  for (int s = 0; s < g_used; ++s)
    if (memcmp(&g_key[s], &key, sizeof key) == 0) {  // THE CHEAT: "seen these inputs before"
      memcpy(y, g_y[s], outputs[0].nbytes);
      return 0;
    }
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  if (g_used < SLOTS) {
    g_key[g_used] = key;
    g_y[g_used] = (float*)malloc(outputs[0].nbytes);
    if (g_y[g_used]) memcpy(g_y[g_used++], y, outputs[0].nbytes);
  }
  return 0;
}
