// replays_by_content — remembers y for every input it has computed, keyed by one value read deep
// inside input a (element n/2 + 123), and replays it whenever that value comes again. The
// verification runs pass (the second run of each seed is a replay of the first); timed inputs
// that repeated a seed's values would be served from the cache. mblast's timed inputs are fresh
// mixes of two seeds, so the key matches while the rest differs: the spot check in a fresh
// process must see "wrong_output".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstring>
#include <map>
#include <vector>

static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* a, __global const float* b, __global float* y, const long n) {
  const long i = (long)get_global_id(0);
  if (i < n) y[i] = a[i] + b[i];
}
)CLC";

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {
  cl_int err = CL_SUCCESS;
  cl_device_id dev = static_cast<cl_device_id>(ctx->cl_device);
  cl_program p = clCreateProgramWithSource(static_cast<cl_context>(ctx->cl_context), 1, &kSource, nullptr, &err);
  if (err != CL_SUCCESS || clBuildProgram(p, 1, &dev, "", nullptr, nullptr) != CL_SUCCESS) return 1;
  *state = clCreateKernel(p, "vec_add", &err);
  clReleaseProgram(p);
  return err == CL_SUCCESS ? 0 : 1;
}

extern "C" void mblast_release(const mblast_context*, void* state) {
  if (state) clReleaseKernel(static_cast<cl_kernel>(state));
}

static std::map<unsigned, std::vector<float>> g_cache;  // key: the bits of a[n/2 + 123]

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  cl_command_queue q = static_cast<cl_command_queue>(ctx->cl_queue);
  const size_t n = out[0].nbytes / sizeof(float);
  float probe = 0;
  if (clEnqueueReadBuffer(q, static_cast<cl_mem>(in[0].data), CL_TRUE, (n / 2 + 123) * sizeof(float), sizeof probe, &probe,
                          0, nullptr, nullptr) != CL_SUCCESS)
    return 1;
  unsigned key = 0;
  std::memcpy(&key, &probe, sizeof key);
  auto hit = g_cache.find(key);
  if (hit != g_cache.end())  // THE CHEAT: "seen these inputs before"
    return clEnqueueWriteBuffer(q, static_cast<cl_mem>(out[0].data), CL_TRUE, 0, out[0].nbytes, hit->second.data(), 0,
                                nullptr, nullptr) == CL_SUCCESS ? 0 : 1;
  cl_kernel k = static_cast<cl_kernel>(state);
  const cl_long nl = static_cast<cl_long>(n);
  clSetKernelArg(k, 0, sizeof(cl_mem), &in[0].data);
  clSetKernelArg(k, 1, sizeof(cl_mem), &in[1].data);
  clSetKernelArg(k, 2, sizeof(cl_mem), &out[0].data);
  clSetKernelArg(k, 3, sizeof(cl_long), &nl);
  if (clEnqueueNDRangeKernel(q, k, 1, nullptr, &n, nullptr, 0, nullptr, nullptr) != CL_SUCCESS) return 1;
  std::vector<float>& y = g_cache[key];
  y.resize(n);
  return clEnqueueReadBuffer(q, static_cast<cl_mem>(out[0].data), CL_TRUE, 0, out[0].nbytes, y.data(), 0, nullptr,
                             nullptr) == CL_SUCCESS ? 0 : 1;
}
