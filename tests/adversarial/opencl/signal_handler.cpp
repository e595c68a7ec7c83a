// signal_handler — the naive vec_add, honest in every call, that installs a handler for SIGUSR1 when
// its library is loaded. A handler of the candidate's could do the call's work wherever its signal
// comes (in the checks after the call, outside the clock); it is refused whatever the costs allow.
#include <signal.h>

static void on_usr1(int) {}
__attribute__((constructor)) static void install_handler() { signal(SIGUSR1, on_usr1); }

#include <mblast/opencl_candidate.h>

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
  if (!mblast_cl::expect_counts(n_in, 2, n_par, 0, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "a", 1) || !mblast_cl::expect_f32(in[1], "b", 1) || !mblast_cl::expect_f32(out[0], "y", 1))
    return -1;
  const cl_long n = out[0].shape[0];
  if (in[0].shape[0] != n || in[1].shape[0] != n) return mblast_cl::fail("a, b and y differ in length");
  const size_t global = static_cast<size_t>(n);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(in[1].data),
                           static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "vec_add", enqueue)
