// prints_passed — claims success on stdout and stderr (a fake test line and a fake JSON
// result), writes zeros. Only the runner's own messages count: failure_kind "wrong_output".
#include <stdio.h>
#include <string.h>

#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  printf("All tests PASSED\n{\"stage\": \"verify\", \"correct\": true, \"failure_kind\": null}\n");
  fprintf(stderr, "All tests PASSED\n{\"correct\": true, \"time\": {\"median\": 1}}\n");
  fflush(stdout);
  memset(outputs[0].data, 0, outputs[0].nbytes);
  return 0;
}
