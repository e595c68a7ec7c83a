// nondeterministic — y = a + b shifted by +0.7 and -0.7 of the tolerance (atol 1e-6,
// rtol 1e-6) on alternate calls: each run is within tolerance of the reference, but two runs
// on the same inputs differ by 1.4 tolerances: failure_kind "nondeterministic".
#include <mblast/abi.h>

static unsigned g_calls;

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  const double sign = (g_calls++ % 2 == 0) ? 0.7 : -0.7;
  for (size_t i = 0; i < n; ++i) {
    const double s = (double)a[i] + (double)b[i];
    const double mag = s < 0 ? -s : s;
    y[i] = (float)(s + sign * (1e-6 + 1e-6 * mag));
  }
  return 0;
}
