// fork_child (rvv): computes y = a + b correctly, but in a fork()ed child that writes the result
// into shared memory; the worker's own process only waits and copies it out. Under QEMU the
// plugin counts the process that loaded it, so an outside tester got "CORRECT, matmul 470
// instructions" (naive: 11.0 M). Creating a process must be refused with a clear reason.
#define _GNU_SOURCE
#include <mblast/abi.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)n_params, (void)n_outputs;
  const size_t n = outputs[0].nbytes / sizeof(float);
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* shared = mmap(NULL, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return g_error = "mmap failed", 1;
  // THE TRICK: the work runs in another process, which the count does not follow
  const pid_t child = fork();
  if (child < 0) return g_error = "fork failed", 1;
  if (child == 0) {
    for (size_t i = 0; i < n; ++i) shared[i] = a[i] + b[i];
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  memcpy(outputs[0].data, shared, n * sizeof(float));
  munmap(shared, n * sizeof(float));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : (g_error = "the child failed", 1);
}
