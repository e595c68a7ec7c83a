// prepare_reads_inputs — a correct, naive vec_add whose mblast_prepare looks for the inputs: the
// safetensors key of input a of seed 0 ("in/0/a") in every open file descriptor (a shared
// payload) and in every readable mapping of its process (through /proc/self/mem). Finding it
// aborts: a prepare that can read the inputs can precompute every output. The worker runs
// mblast_prepare on the parameters alone and receives the inputs afterwards, so the candidate
// must be accepted with its real time counted ("counted_time").
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// Assembled at run time, so that the candidate's own constants hold no copy of it; the key and
// the read buffer themselves are not counted as finds.
static char g_key[16];
static size_t g_key_len;

static const char* find_key(const char* p, size_t n) {
  return n >= g_key_len ? static_cast<const char*>(memmem(p, n, g_key, g_key_len)) : nullptr;
}

static void look_for_inputs() {  // THE CHEAT (attempted)
  const char parts[][4] = {"\"in", "/0/", "a\""};
  for (const auto& part : parts) std::strcat(g_key, part);
  g_key_len = std::strlen(g_key);
  std::vector<char> buf(1 << 20);
  const unsigned long own_lo = reinterpret_cast<unsigned long>(buf.data()), own_hi = own_lo + buf.size();
  for (int fd = 0; fd < 256; ++fd) {
    const ssize_t n = ::pread(fd, buf.data(), 4096, 0);
    if (n > 0 && find_key(buf.data(), static_cast<size_t>(n))) {
      std::fprintf(stderr, "prepare_reads_inputs: the inputs are at fd %d\n", fd);
      std::abort();
    }
  }
  FILE* maps = std::fopen("/proc/self/maps", "r");
  const int mem = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (!maps || mem < 0) return;
  unsigned long lo = 0, hi = 0;
  char perms[8] = {};
  char line[512];
  while (std::fgets(line, sizeof line, maps)) {
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' || hi - lo > (512ul << 20)) continue;
    for (unsigned long at = lo; at < hi; at += buf.size() - 64) {
      if (at >= own_lo && at < own_hi) continue;
      const size_t want = std::min<unsigned long>(buf.size(), hi - at);
      const ssize_t n = ::pread(mem, buf.data(), want, static_cast<off_t>(at));
      if (n <= 0) break;
      for (const char* f = buf.data(); (f = find_key(f, static_cast<size_t>(buf.data() + n - f))) != nullptr; ++f) {
        const unsigned long where = at + static_cast<unsigned long>(f - buf.data());
        if (where == reinterpret_cast<unsigned long>(g_key) || (where >= own_lo && where < own_hi)) continue;
        std::fprintf(stderr, "prepare_reads_inputs: the inputs are mapped at %lx\n", where);
        std::abort();
      }
    }
  }
  ::close(mem);
  std::fclose(maps);
}

static const char* kSource = R"CLC(
__kernel void vec_add(__global const float* a, __global const float* b, __global float* y, const long n) {
  const long i = (long)get_global_id(0);
  if (i < n) y[i] = a[i] + b[i];
}
)CLC";

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {
  look_for_inputs();
  cl_int err = CL_SUCCESS;
  cl_device_id dev = static_cast<cl_device_id>(ctx->cl_device);
  cl_program p = clCreateProgramWithSource(static_cast<cl_context>(ctx->cl_context), 1, &kSource, nullptr, &err);
  if (err != CL_SUCCESS || clBuildProgram(p, 1, &dev, "", nullptr, nullptr) != CL_SUCCESS) return 1;
  *state = clCreateKernel(p, "vec_add", &err);
  clReleaseProgram(p);
  return err == CL_SUCCESS ? 0 : 1;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  cl_kernel k = static_cast<cl_kernel>(state);
  const cl_long n = static_cast<cl_long>(out[0].nbytes / sizeof(float));
  clSetKernelArg(k, 0, sizeof(cl_mem), &in[0].data);
  clSetKernelArg(k, 1, sizeof(cl_mem), &in[1].data);
  clSetKernelArg(k, 2, sizeof(cl_mem), &out[0].data);
  clSetKernelArg(k, 3, sizeof(cl_long), &n);
  const size_t global = static_cast<size_t>(n);
  return clEnqueueNDRangeKernel(static_cast<cl_command_queue>(ctx->cl_queue), k, 1, nullptr, &global, nullptr, 0,
                                nullptr, nullptr) == CL_SUCCESS ? 0 : 1;
}
