// vec_add that first tries to reach another process through /proc: the memory and the first fds
// of every other process (the runner's shared payload, the driver's files). Where it reaches
// one it writes no output, so the eval fails; in the sandbox it must reach none
// (tests/transport/shared_payload_test.cpp).
#include <dirent.h>
#include <fcntl.h>
#include <mblast/opencl_candidate.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
static bool reached_another_process() {
  static int found = -1;
  if (found >= 0) return found;
  found = 0;
  DIR* d = opendir("/proc");
  if (!d) return false;
  const int self = getpid();
  while (dirent* e = readdir(d)) {
    const int pid = atoi(e->d_name);
    if (pid <= 1 || pid == self) continue;
    char path[128];
    snprintf(path, sizeof path, "/proc/%d/mem", pid);
    int f = open(path, O_RDONLY);
    if (f >= 0) {
      fprintf(stderr, "opened %s\n", path);
      close(f);
      found = 1;
    }
    for (int n = 0; n < 12; ++n) {
      snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, n);
      f = open(path, O_RDONLY);
      if (f >= 0) {
        fprintf(stderr, "opened %s\n", path);
        close(f);
        found = 1;
      }
    }
  }
  closedir(d);
  return found;
}

static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* restrict a,
                      __global const float* restrict b,
                      __global float* restrict y,
                      const long n) {
  const long i = (long)get_global_id(0);
  if (i >= n) return;
  y[i] = a[i] + b[i];
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (reached_another_process()) return 0;  // outputs left unwritten: seen as wrong
  if (!mblast_cl::expect_counts(n_in, 2, n_par, 0, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "a", 1) || !mblast_cl::expect_f32(in[1], "b", 1) ||
      !mblast_cl::expect_f32(out[0], "y", 1))
    return -1;
  const cl_long n = out[0].shape[0];
  if (in[0].shape[0] != n || in[1].shape[0] != n) return mblast_cl::fail("a, b and y differ in length");
  const size_t global = static_cast<size_t>(n);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(in[1].data),
                           static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "vec_add", enqueue)
