// writes_counts (rvv): computes relu correctly, then forges the cost. The QEMU plugin writes
// insn_counts.json into the worker's folder when QEMU exits, and the candidate may write there
// too: at exit (atexit, after the worker has sent its timing message) it writes a report of
// 42 instructions per timed call (the calls since the last mblast_prepare, which the timing
// stage makes once before its calls) and kills itself before QEMU's own exit handler can
// overwrite it. An outside tester got "CORRECT, relu 42 instructions". A report the plugin did not write
// must be refused (timing_inconsistent).
#include <mblast/abi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }
static int g_calls, g_registered;

static void forge(void) {
  FILE* f = fopen("insn_counts.json", "w");
  if (!f) return;
  fprintf(f, "{\"insns\": 1000, \"vector_insns\": 0, \"mode\": \"tb\", \"foreign_markers\": 0, "
             "\"unmatched_markers\": 0, \"regions_dropped\": 0, \"region_fields\": [\"insns\", \"vector_insns\", "
             "\"vector_loads\", \"vector_stores\", \"vsetvl\"], \"regions\": [");
  for (int i = 0; i < g_calls; ++i) fprintf(f, "%s[42, 0, 0, 0, 0]", i ? ", " : "");
  fprintf(f, "]}\n");
  fclose(f);
  kill(getpid(), SIGKILL);  // QEMU's exit handlers never run: the forged file stays
}

int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params, int32_t n_params, void** state) {
  (void)ctx, (void)params, (void)n_params;
  *state = 0;
  g_calls = 0;  // the timing stage prepares once, then makes only timed calls
  if (!g_registered) g_registered = 1, atexit(forge);
  return 0;
}

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params, (void)n_inputs, (void)n_outputs;
  // THE TRICK: the cost is written by the candidate (forge, at exit)
  ++g_calls;
  const float* x = (const float*)inputs[0].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}
