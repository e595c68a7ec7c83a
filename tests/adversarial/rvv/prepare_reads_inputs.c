// prepare_reads_inputs — a correct vec_add whose mblast_prepare looks for the inputs: the
// safetensors key of input a of seed 0 ("in/0/a") at the start of every open file descriptor (a
// shared payload). Finding it aborts: a prepare that can read the inputs can precompute every
// output. The worker runs mblast_prepare on the parameters alone and receives the inputs
// afterwards, so the candidate must be accepted with its real count ("counted_time").
#define _GNU_SOURCE
#include <mblast/abi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params, int32_t n_params, void** state) {
  (void)ctx, (void)params, (void)n_params, (void)state;
  static char buf[4096];
  static const char key[] = "\"in/0/a\"";
  for (int fd = 0; fd < 256; ++fd) {  // THE CHEAT (attempted)
    const ssize_t n = pread(fd, buf, sizeof buf, 0);
    if (n > 0 && memmem(buf, (size_t)n, key, sizeof key - 1)) {
      fprintf(stderr, "prepare_reads_inputs: the inputs are at fd %d\n", fd);
      abort();
    }
  }
  return 0;
}

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  return 0;
}
