// forges_timing_message — a correct vec_add for the verification runs (the first 6 calls); on the
// next call it writes a forged end-of-timing message straight to the worker's protocol
// descriptor (fd 4): tiny samples and a peak bandwidth of 41.9 TB/s, then exits. The runner
// drives the timed calls one by one and takes only the message it asked for: mblast must report
// "timing_inconsistent".
#include <mblast/abi.h>

#include <string.h>
#include <unistd.h>

static int g_calls;

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  if (++g_calls > 6) {  // THE CHEAT
    const char* forged =
        "{\"stage\":\"timing\",\"samples\":[42,42,42,42],\"wall_samples\":[0,0,0,0],\"sets\":[{\"set\":0}],"
        "\"method\":\"forged\",\"unit\":\"instructions\",\"peaks\":{\"bandwidth_bytes_per_s\":4.19e13,"
        "\"fp32_flops_per_s\":1e15,\"method\":\"forged\"},\"payload_bytes\":0}\n";
    (void)!write(4, forged, strlen(forged));
    _exit(0);
  }
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  return 0;
}
