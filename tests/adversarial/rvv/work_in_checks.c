// work_in_checks (rvv) — a matmul that computes a quarter of c's rows in the call and leaves the
// rest to its SIGSEGV handler: it makes the pages of the other rows (and the guard bytes after
// them) inaccessible and returns. The worker's first read of those pages after the call (the
// guard check, then the fingerprint) faults, and the handler computes the missing rows, lifts the
// protection and lets the read go on. Every output is right when it is read, but under QEMU only
// the call's instructions are counted: the handler's run outside the count. A handler of the
// candidate's must be refused ("timing_inconsistent").
#define _GNU_SOURCE
#include <mblast/abi.h>
#include <riscv_vector.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

// The share of worker processes (in percent) that cheat; the others compute all of c in the call
// and install no handler. intermittent_work_in_checks (cases_timing.json) sets 50.
#ifndef MBLAST_ADV_CHEAT_PERCENT
#define MBLAST_ADV_CHEAT_PERCENT 100
#endif
static int g_cheat = 1;

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

static void rows(const float* a, const float* w, float* c, size_t N, size_t K, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    for (size_t j = 0, vl; j < N; j += vl) {
      vl = __riscv_vsetvl_e32m4(N - j);
      vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vl);
      for (size_t k = 0; k < K; ++k)
        acc = __riscv_vfmacc_vf_f32m4(acc, a[i * K + k], __riscv_vle32_v_f32m4(w + k * N + j, vl), vl);
      __riscv_vse32_v_f32m4(c + i * N + j, acc, vl);
    }
}

static struct {
  const float *a, *w;
  float* c;
  size_t N, K, first, last;
  uintptr_t lo, hi;
  volatile sig_atomic_t pending;
} g_job;
static struct sigaction g_previous;

static void on_fault(int sig, siginfo_t* info, void* uc) {
  (void)sig, (void)uc;
  const uintptr_t addr = (uintptr_t)info->si_addr;
  if (!g_job.pending || addr < g_job.lo || addr >= g_job.hi) {  // not ours: crash as before
    sigaction(SIGSEGV, &g_previous, NULL);
    return;
  }
  mprotect((void*)g_job.lo, g_job.hi - g_job.lo, PROT_READ | PROT_WRITE);
  rows(g_job.a, g_job.w, g_job.c, g_job.N, g_job.K, g_job.first, g_job.last);  // THE CHEAT: uncounted
  g_job.pending = 0;
}

int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params, int32_t n_params, void** state) {
  (void)ctx, (void)params, (void)n_params, (void)state;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  g_cheat = (now.tv_nsec / 1000) % 100 < MBLAST_ADV_CHEAT_PERCENT;
  if (!g_cheat) return 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGSEGV, &sa, &g_previous) == 0 ? 0 : 1;
}

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)n_params, (void)n_outputs;
  const size_t M = (size_t)inputs[0].shape[0], K = (size_t)inputs[0].shape[1], N = (size_t)params[0].shape[1];
  const float* a = (const float*)inputs[0].data;
  const float* w = (const float*)params[0].data;
  float* c = (float*)outputs[0].data;
  // Protected: from the first page boundary past a quarter of c to the page holding the first
  // guard byte after it. The call computes the rows wholly below that boundary.
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)c;
  const uintptr_t lo = (base + M * N * sizeof(float) / 4 + page - 1) & ~(page - 1);
  const uintptr_t hi = (base + M * N * sizeof(float) + 1 + page - 1) & ~(page - 1);
  const size_t first = (lo - base) / (N * sizeof(float));
  if (first >= M) return g_error = "too small to split", 1;
  rows(a, w, c, N, K, 0, g_cheat ? first : M);
  if (!g_cheat) return 0;
  g_job.a = a, g_job.w = w, g_job.c = c, g_job.N = N, g_job.K = K, g_job.first = first, g_job.last = M;
  g_job.lo = lo, g_job.hi = hi, g_job.pending = 1;
  if (mprotect((void*)lo, hi - lo, PROT_NONE) != 0) return g_error = "mprotect failed", 1;
  return 0;
}
