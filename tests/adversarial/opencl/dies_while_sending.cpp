// dies_while_sending — computes y = a + b correctly, but its second call starts a thread that
// kills the process (SIGKILL) 5 ms later: about when the worker hashes and sends that run's
// outputs, which the runner relays to the driver as they arrive. Whatever part of them was
// relayed, mblast must report failure_kind "crashed", never judge outputs cut short. On a 2-vCPU
// VM the kill lands inside the relayed payload in about 5 of 8 runs (before or after it in the
// others, also "crashed"); a driver that checked the cut run failed those 5. The framing itself
// is tested without timing in Protocol.RelayCutShortLeavesTheFarStreamFramed.
#include <mblast/opencl_candidate.h>

#include <chrono>
#include <csignal>
#include <thread>

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

static int g_calls = 0;

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 2, n_par, 0, n_out, 1)) return -1;
  const cl_long n = out[0].shape[0];
  const size_t global = static_cast<size_t>(n);
  if (++g_calls == 2) {  // THE BUG: the process dies while this run's outputs travel
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::raise(SIGKILL);
    }).detach();
  }
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(in[1].data),
                           static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "vec_add", enqueue)
