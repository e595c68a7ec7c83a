// Adversarial (cuda): writes through a null host pointer in mblast_run (SIGSEGV in the worker).
#include <mblast/abi.h>

extern "C" int mblast_run(const mblast_context*, void*, const mblast_tensor*, int32_t, const mblast_tensor*, int32_t,
                          mblast_tensor*, int32_t) {
  volatile int* p = nullptr;
  *p = 42;  // THE BUG
  return 0;
}
