// racing_writer_thread — a correct vec_add for the verification runs (the first 6 calls) and in a fresh
// process; from then on mblast_run hands the work to a host thread of its own and returns at once.
// The thread writes y = a + b through the buffers' mapped host memory (pocl-cpu maps without a
// copy) while the worker stops its clock and starts reading the outputs, racing ahead of the read.
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <atomic>
#include <thread>

namespace {
std::atomic<int> g_go{0};
const float* g_a = nullptr;
const float* g_b = nullptr;
float* g_y = nullptr;
long g_n = 0;
int g_calls = 0;
#ifndef RACING_FROM_END
#define RACING_FROM_END 0
#endif

void work() {
  if (RACING_FROM_END)
    for (long i = g_n - 1; i >= 0; --i) g_y[i] = g_a[i] + g_b[i];
  else
    for (long i = 0; i < g_n; ++i) g_y[i] = g_a[i] + g_b[i];
}

void racer() {
  int seen = 0;
  for (;;) {
    while (g_go.load(std::memory_order_acquire) == seen) {
    }
    seen = g_go.load(std::memory_order_acquire);
    work();
  }
}

void* map(cl_command_queue q, void* m, size_t n, cl_map_flags f) {
  cl_int err = CL_SUCCESS;
  return clEnqueueMapBuffer(q, static_cast<cl_mem>(m), CL_TRUE, f, 0, n, 0, nullptr, nullptr, &err);
}
}  // namespace

extern "C" int mblast_prepare(const mblast_context*, const mblast_tensor*, int32_t, void** state) {
  *state = nullptr;
  std::thread(racer).detach();
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
    work();  // honest while verified (and in the fresh process of the spot check)
    return 0;
  }
  g_go.fetch_add(1, std::memory_order_release);  // THE CHEAT: the work goes on after the return
  return 0;
}
