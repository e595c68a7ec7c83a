// Adversarial (cuda): never returns from mblast_run. The loop is on the host, so the GPU stays
// healthy for whatever runs next; the runner must cut the worker off at its time limit.
#include <mblast/abi.h>

extern "C" int mblast_run(const mblast_context*, void*, const mblast_tensor*, int32_t, const mblast_tensor*, int32_t,
                          mblast_tensor*, int32_t) {
  volatile unsigned long long spin = 0;
  for (;;) spin = spin + 1;  // THE BUG: forever (volatile, so the compiler keeps the loop)
  return 0;
}
