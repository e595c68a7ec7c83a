// The correct part of a containment candidate for opencl: vec_add, one work-item per element;
// the misdeed (the test puts it before this) runs once, on the first call.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* a, __global const float* b, __global float* y, const long n) {
  const long i = (long)get_global_id(0);
  if (i < n) y[i] = a[i] + b[i];
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t, const mblast_tensor*, int32_t,
                   mblast_tensor* out, int32_t) {
  static bool done = false;
  if (!done) done = true, misdeed();
  const cl_long n = out[0].shape[0];
  const size_t global = static_cast<size_t>(n);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(in[1].data),
                           static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "vec_add", enqueue)
