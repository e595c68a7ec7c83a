// launch_error — its one "API call" (an allocation far beyond the address space) fails, and it
// returns non-zero with a reason in mblast_last_error: failure_kind "launch_failed".
#include <stdint.h>
#include <stdlib.h>

#include <mblast/abi.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

static void* volatile g_scratch;  // volatile: the compiler may not drop the allocation

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params, (void)outputs, (void)n_outputs;
  g_scratch = malloc(SIZE_MAX / 2);
  if (!g_scratch) {
    g_error = "malloc of the scratch buffer failed";
    return -1;
  }
  free(g_scratch);
  return 0;
}
