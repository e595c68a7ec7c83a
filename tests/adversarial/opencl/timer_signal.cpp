// timer_signal — a correct vec_add for the verification runs (the first 6 calls); from then on
// mblast_run arms a one-shot timer and returns at once; the timer's SIGALRM handler (installed in
// mblast_prepare) computes y = a + b through the buffers' mapped host memory, after the clock has
// stopped, hoping to finish before the worker's checks read the outputs.
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <signal.h>
#include <sys/time.h>

#ifndef TIMER_US
#define TIMER_US 30
#endif

namespace {
const float* g_a = nullptr;
const float* g_b = nullptr;
float* g_y = nullptr;
long g_n = 0;
int g_calls = 0;

void work() {
  for (long i = 0; i < g_n; ++i) g_y[i] = g_a[i] + g_b[i];
}
void on_alarm(int) { work(); }

void* map(cl_command_queue q, void* m, size_t n, cl_map_flags f) {
  cl_int err = CL_SUCCESS;
  return clEnqueueMapBuffer(q, static_cast<cl_mem>(m), CL_TRUE, f, 0, n, 0, nullptr, nullptr, &err);
}
}  // namespace

extern "C" int mblast_prepare(const mblast_context*, const mblast_tensor*, int32_t, void** state) {
  *state = nullptr;
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, nullptr);
  return 0;
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  cl_command_queue q = static_cast<cl_command_queue>(ctx->cl_queue);
  g_a = static_cast<const float*>(map(q, in[0].data, in[0].nbytes, CL_MAP_READ));
  g_b = static_cast<const float*>(map(q, in[1].data, in[1].nbytes, CL_MAP_READ));
  g_y = static_cast<float*>(map(q, out[0].data, out[0].nbytes, CL_MAP_WRITE));
  g_n = static_cast<long>(out[0].nbytes / sizeof(float));
  if (!g_a || !g_b || !g_y) return 1;
  if (++g_calls <= 6) {
    work();
    return 0;
  }
  itimerval t{};
  t.it_value.tv_usec = TIMER_US;  // THE CHEAT: the work runs in the handler, after the return
  setitimer(ITIMER_REAL, &t, nullptr);
  return 0;
}
