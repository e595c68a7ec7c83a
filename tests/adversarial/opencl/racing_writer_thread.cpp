// racing_writer_thread — a correct vec_add for the verification runs (the first 6 calls) and in a
// fresh process; from then on mblast_run computes the first half of y itself and wakes a host thread
// of its own for the second half, then returns: the thread writes through the buffers' mapped host
// memory (pocl-cpu maps without a copy) while the worker stops its clock and reads the outputs from
// the front, so it stays ahead of that read. Half the work, out of the clock.
//
// With MBLAST_ADV_TIMER_SIGNAL (case timer_signal) the second half is done instead by the handler of
// a one-shot 30 us timer that mblast_run arms, installed for SIGALRM in mblast_prepare.
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <signal.h>
#include <sys/time.h>

#include <atomic>
#include <thread>

namespace {
std::atomic<int> g_go{0};
const float* g_a = nullptr;
const float* g_b = nullptr;
float* g_y = nullptr;
long g_n = 0;
int g_calls = 0;

void work(long from, long to) {
  for (long i = from; i < to; ++i) g_y[i] = g_a[i] + g_b[i];
}
void second_half() { work(g_n / 2, g_n); }

void racer() {
  int seen = 0;
  for (;;) {
    while (g_go.load(std::memory_order_acquire) == seen) {
    }
    seen = g_go.load(std::memory_order_acquire);
    second_half();
  }
}

void* map(cl_command_queue q, void* m, size_t n, cl_map_flags f) {
  cl_int err = CL_SUCCESS;
  return clEnqueueMapBuffer(q, static_cast<cl_mem>(m), CL_TRUE, f, 0, n, 0, nullptr, nullptr, &err);
}
}  // namespace

extern "C" int mblast_prepare(const mblast_context*, const mblast_tensor*, int32_t, void** state) {
  *state = nullptr;
#ifdef MBLAST_ADV_TIMER_SIGNAL
  struct sigaction sa {};
  sa.sa_handler = [](int) { second_half(); };
  sigaction(SIGALRM, &sa, nullptr);
#else
  std::thread(racer).detach();
#endif
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
    work(0, g_n);  // honest while verified (and in the fresh process of the spot check)
    return 0;
  }
  work(0, g_n / 2);
#ifdef MBLAST_ADV_TIMER_SIGNAL
  itimerval t{};
  t.it_value.tv_usec = 30;  // THE CHEAT: the second half runs in the handler, after the return
  setitimer(ITIMER_REAL, &t, nullptr);
#else
  g_go.fetch_add(1, std::memory_order_release);  // THE CHEAT: the second half goes on after the return
#endif
  return 0;
}
