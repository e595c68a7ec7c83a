// Adversarial (opencl): computes c = a @ w correctly, but on a command queue it creates itself on
// the runner's context in every call, released right after the enqueue, and returns without
// finishing it. A clock that follows only the runner's queue would see almost nothing (an
// outside tester got "CORRECT, matmul 0.5 us"): the worker must finish every queue made in the
// process before the clock stops.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void matmul(__global const float* a, __global const float* w, __global float* c, long M, long N, long K) {
  const long j = get_global_id(0), i = get_global_id(1);
  if (i >= M || j >= N) return;
  float acc = 0.0f;
  for (long k = 0; k < K; ++k) acc += a[i * K + k] * w[k * N + j];
  c[i * N + j] = acc;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t, const mblast_tensor* par,
                   int32_t, mblast_tensor* out, int32_t) {
  const cl_long M = in[0].shape[0], K = in[0].shape[1], N = par[0].shape[1];
  cl_int err = CL_SUCCESS;
  // THE TRICK: a queue of its own, not ctx->cl_queue, never finished
  cl_command_queue q = clCreateCommandQueue(static_cast<cl_context>(ctx->cl_context),
                                            static_cast<cl_device_id>(ctx->cl_device), 0, &err);
  if (err != CL_SUCCESS) return mblast_cl::fail("clCreateCommandQueue: %d", err);
  cl_mem a = static_cast<cl_mem>(in[0].data), w = static_cast<cl_mem>(par[0].data), c = static_cast<cl_mem>(out[0].data);
  clSetKernelArg(k, 0, sizeof a, &a);
  clSetKernelArg(k, 1, sizeof w, &w);
  clSetKernelArg(k, 2, sizeof c, &c);
  clSetKernelArg(k, 3, sizeof M, &M);
  clSetKernelArg(k, 4, sizeof N, &N);
  clSetKernelArg(k, 5, sizeof K, &K);
  const size_t global[2] = {static_cast<size_t>(N), static_cast<size_t>(M)};
  err = clEnqueueNDRangeKernel(q, k, 2, nullptr, global, nullptr, 0, nullptr, nullptr);
  clFlush(q);
  clReleaseCommandQueue(q);  // the work stays queued; OpenCL keeps the queue until it is done
  return err == CL_SUCCESS ? 0 : mblast_cl::fail("clEnqueueNDRangeKernel: %d", err);
}

MBLAST_OPENCL_CANDIDATE(kSource, "matmul", enqueue)
