// Adversarial (opencl): goes for the recording itself. Every OpenCL object starts with a pointer
// to its vendor's dispatch table; the candidate overwrites that table's clCreateCommandQueue
// entry with a function of its own (as code that wanted to put back an unrecorded entry point
// would), makes its queue through it and never finishes it. A changed table must be seen and the
// candidate refused (launch_failed with the reason), never timed.
#include <mblast/opencl_candidate.h>

#include <CL/cl_icd.h>

static const char* kSource = R"CLC(
__kernel void matmul(__global const float* a, __global const float* w, __global float* c, long M, long N, long K) {
  const long j = get_global_id(0), i = get_global_id(1);
  if (i >= M || j >= N) return;
  float acc = 0.0f;
  for (long k = 0; k < K; ++k) acc += a[i * K + k] * w[k * N + j];
  c[i * N + j] = acc;
}
)CLC";

using Create = cl_command_queue(CL_API_CALL*)(cl_context, cl_device_id, cl_command_queue_properties, cl_int*);
static Create g_before = nullptr;

static cl_command_queue CL_API_CALL my_create(cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int* e) {
  return g_before(c, d, p, e);
}

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t, const mblast_tensor* par,
                   int32_t, mblast_tensor* out, int32_t) {
  const cl_long M = in[0].shape[0], K = in[0].shape[1], N = par[0].shape[1];
  cl_int err = CL_SUCCESS;
  static cl_command_queue q = nullptr;
  if (!q) {
    // THE TRICK: rewrite the vendor's dispatch table under the ICD loader
    cl_icd_dispatch* table = *static_cast<cl_icd_dispatch**>(ctx->cl_context);
    g_before = table->clCreateCommandQueue;
    table->clCreateCommandQueue = &my_create;
    q = clCreateCommandQueue(static_cast<cl_context>(ctx->cl_context), static_cast<cl_device_id>(ctx->cl_device), 0, &err);
    if (err != CL_SUCCESS) return mblast_cl::fail("clCreateCommandQueue: %d", err);
  }
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
  return err == CL_SUCCESS ? 0 : mblast_cl::fail("clEnqueueNDRangeKernel: %d", err);
}

MBLAST_OPENCL_CANDIDATE(kSource, "matmul", enqueue)
