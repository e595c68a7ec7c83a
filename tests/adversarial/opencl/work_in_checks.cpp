// work_in_checks — a matmul that does a quarter of its work in the call and the rest in the checks
// that follow it, outside the clock. On a CPU device a buffer's storage is host memory (a mapping
// gives its address, and stays valid after the unmap), so in mblast_run it launches the kernel for
// the first quarter of c, then makes the pages of the other three quarters (and the guard bytes
// after them) inaccessible and returns. The runner's first read of those pages after the clock has
// stopped (the guard check, then the fingerprint) faults; the candidate's SIGSEGV handler computes
// the missing elements on the host, lifts the protection and lets the read go on. Every output is
// right when it is read, in every call, verification and spot checks included; only the time
// spent in the checks shows the work. On a first eval on a machine no per-call check costs are
// cached: the runner must measure them again and report "timing_inconsistent".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

// The share of worker processes (in percent) that cheat; the others compute all of c in the call.
// intermittent_work_in_checks (cases_timing.json) sets 50: a cheat that hides its work only in
// some evals, against the second measurement that a refused timing gets.
#ifndef MBLAST_ADV_CHEAT_PERCENT
#define MBLAST_ADV_CHEAT_PERCENT 100
#endif
static bool g_cheat = true;

static const char* kSource = R"CLC(
__kernel void matmul_part(__global const float* a, __global const float* w, __global float* c, const long N,
                          const long K, const long count) {
  const long e = (long)get_global_id(0);
  if (e >= count) return;
  const long i = e / N, j = e % N;
  float acc = 0.0f;
  for (long k = 0; k < K; ++k) acc += a[i * K + k] * w[k * N + j];
  c[e] = acc;
}
)CLC";

// The work left for the handler: elements [first, total) of c, in pages [lo, hi).
struct Deferred {
  const float* a = nullptr;
  const float* w = nullptr;
  float* c = nullptr;
  long N = 0, K = 0, first = 0, total = 0;
  uintptr_t lo = 0, hi = 0;
  volatile sig_atomic_t pending = 0;
};
static Deferred g_job;
static struct sigaction g_previous;

static void on_fault(int sig, siginfo_t* info, void* uc) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (!g_job.pending || addr < g_job.lo || addr >= g_job.hi) {  // not ours: crash as before
    sigaction(SIGSEGV, &g_previous, nullptr);
    (void)sig;
    (void)uc;
    return;
  }
  mprotect(reinterpret_cast<void*>(g_job.lo), g_job.hi - g_job.lo, PROT_READ | PROT_WRITE);
  // THE CHEAT: the call's work, after the clock. Row by row, each element summed over k in order,
  // as the kernel does.
  const long N = g_job.N, K = g_job.K;
  for (long i = g_job.first / N; i * N < g_job.total; ++i) {
    float* row = g_job.c + i * N;
    const long j0 = i * N < g_job.first ? g_job.first - i * N : 0;
    for (long j = j0; j < N; ++j) row[j] = 0.0f;
    for (long k = 0; k < K; ++k) {
      const float x = g_job.a[i * K + k];
      const float* wk = g_job.w + k * N;
      for (long j = j0; j < N; ++j) row[j] += x * wk[j];
    }
  }
  g_job.pending = 0;
}

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {
  cl_int err = CL_SUCCESS;
  cl_device_id dev = static_cast<cl_device_id>(ctx->cl_device);
  cl_program p = clCreateProgramWithSource(static_cast<cl_context>(ctx->cl_context), 1, &kSource, nullptr, &err);
  if (err != CL_SUCCESS || clBuildProgram(p, 1, &dev, "", nullptr, nullptr) != CL_SUCCESS) return 1;
  *state = clCreateKernel(p, "matmul_part", &err);
  clReleaseProgram(p);
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  g_cheat = (now.tv_nsec / 1000) % 100 < MBLAST_ADV_CHEAT_PERCENT;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (g_cheat) sigaction(SIGSEGV, &sa, &g_previous);  // an honest process installs none
  return err == CL_SUCCESS ? 0 : 1;
}

extern "C" void mblast_release(const mblast_context*, void* state) {
  if (state) clReleaseKernel(static_cast<cl_kernel>(state));
}

// The storage behind a buffer, on a device whose buffers live in host memory.
static void* storage(cl_command_queue q, cl_mem m, size_t nbytes) {
  cl_int err = CL_SUCCESS;
  void* p = clEnqueueMapBuffer(q, m, CL_TRUE, CL_MAP_READ, 0, nbytes, 0, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return nullptr;
  clEnqueueUnmapMemObject(q, m, p, 0, nullptr, nullptr);
  return p;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t,
                          const mblast_tensor* par, int32_t, mblast_tensor* out, int32_t) {
  cl_command_queue q = static_cast<cl_command_queue>(ctx->cl_queue);
  cl_kernel kern = static_cast<cl_kernel>(state);
  cl_mem a = static_cast<cl_mem>(in[0].data), w = static_cast<cl_mem>(par[0].data);
  cl_mem c = static_cast<cl_mem>(out[0].data);
  const cl_long M = in[0].shape[0], K = in[0].shape[1], N = par[0].shape[1], total = M * N;
  auto* pa = static_cast<const float*>(storage(q, a, in[0].nbytes));
  auto* pw = static_cast<const float*>(storage(q, w, par[0].nbytes));
  auto* pc = static_cast<float*>(storage(q, c, out[0].nbytes));
  if (!pa || !pw || !pc) return 1;
  clFinish(q);  // the unmaps done before the pages are protected
  // The call computes up to the first page boundary past a quarter of c; the rest is deferred.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto base = reinterpret_cast<uintptr_t>(pc);
  const uintptr_t split = (base + static_cast<uintptr_t>(total) * sizeof(float) / 4 + page - 1) & ~(page - 1);
  // Up to the page holding the first guard byte after c: the runner's guard check reads it first.
  const uintptr_t end = (base + static_cast<uintptr_t>(total) * sizeof(float) + 1 + page - 1) & ~(page - 1);
  const cl_long first = static_cast<cl_long>((split - base) / 4);
  if (first >= total) return 1;
  clSetKernelArg(kern, 0, sizeof(cl_mem), &a);
  clSetKernelArg(kern, 1, sizeof(cl_mem), &w);
  clSetKernelArg(kern, 2, sizeof(cl_mem), &c);
  clSetKernelArg(kern, 3, sizeof(cl_long), &N);
  clSetKernelArg(kern, 4, sizeof(cl_long), &K);
  const cl_long count = g_cheat ? first : total;  // an honest process does all of c in the call
  clSetKernelArg(kern, 5, sizeof(cl_long), &count);
  const size_t global = static_cast<size_t>(count);
  if (clEnqueueNDRangeKernel(q, kern, 1, nullptr, &global, nullptr, 0, nullptr, nullptr) != CL_SUCCESS) return 1;
  if (!g_cheat) return 0;
  g_job.a = pa;
  g_job.w = pw;
  g_job.c = pc;
  g_job.N = N;
  g_job.K = K;
  g_job.first = first;
  g_job.total = total;
  g_job.lo = split;
  g_job.hi = end;
  g_job.pending = 1;
  return mprotect(reinterpret_cast<void*>(split), end - split, PROT_NONE) == 0 ? 0 : 1;
}
