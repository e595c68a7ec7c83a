// Adversarial (cuda): returns 0 without writing the output. A harness that does not poison the
// output before each call would pass whatever an earlier candidate left there.
#include <mblast/abi.h>

extern "C" int mblast_run(const mblast_context*, void*, const mblast_tensor*, int32_t, const mblast_tensor*, int32_t,
                          mblast_tensor*, int32_t) {
  return 0;  // THE BUG: nothing is computed, nothing is written
}
