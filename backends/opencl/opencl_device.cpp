// The OpenCL device as the worker sees it: one platform/device chosen by the target, one
// in-order queue with profiling, guarded buffers, marker-event timing.
#include "opencl_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

#include "mblast/cache_evict.h"
#include "opencl_queue_record.h"

namespace mblast::runner::opencl {

namespace {

constexpr std::byte kCanary{0xA5};

std::string info_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS) return "";
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS) return "";
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <typename T>
T info_value(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

bool contains_ci(std::string hay, std::string needle) {
  std::transform(hay.begin(), hay.end(), hay.begin(), ::tolower);
  std::transform(needle.begin(), needle.end(), needle.begin(), ::tolower);
  return hay.find(needle) != std::string::npos;
}

struct Guarded {
  cl_mem parent = nullptr;
  size_t guard = 0;
};

const char* kPeakKernels = R"CLC(
__kernel void mblast_copy(__global const float4* src, __global float4* dst) {
  size_t i = get_global_id(0);
  dst[i] = src[i];
}
// 64-byte elements: what a CPU device needs to move whole cache lines per work-item.
__kernel void mblast_copy16(__global const float16* src, __global float16* dst) {
  size_t i = get_global_id(0);
  dst[i] = src[i];
}
__kernel void mblast_fma(__global float* out, float a, float b) {
  float x0 = get_global_id(0) * 1e-7f, x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f;
  float x4 = x0 + 4.f, x5 = x0 + 5.f, x6 = x0 + 6.f, x7 = x0 + 7.f;
  for (int i = 0; i < 1024; ++i) {
    x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);
    x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);
  }
  out[get_global_id(0)] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
// The same work in explicit 16-wide vectors: CPU devices (PoCL) do not vectorise the scalar
// form across work-items, and reach their SIMD peak only this way (10x on this machine).
__kernel void mblast_fma16(__global float* out, float a, float b) {
  float16 x0 = (float16)(get_global_id(0) * 1e-7f), x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f;
  float16 x4 = x0 + 4.f, x5 = x0 + 5.f, x6 = x0 + 6.f, x7 = x0 + 7.f;
  for (int i = 0; i < 1024; ++i) {
    x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);
    x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);
  }
  const float16 s = (x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7);
  const float8 h = s.lo + s.hi;
  const float4 q = h.lo + h.hi;
  out[get_global_id(0)] = q.x + q.y + q.z + q.w;
}
)CLC";

// mblast/digest.h in OpenCL C. Bytes are assembled little-endian, as the host reads them.
const char* kDigestKernels = R"CLC(
#define GOLDEN 0x9E3779B97F4A7C15UL
ulong mblast_splitmix64(ulong x) {
  x += GOLDEN;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9UL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBUL;
  return x ^ (x >> 31);
}
ulong mblast_digest_term(ulong w, ulong i) {
  ulong x = (w ^ (i * GOLDEN)) * 0xBF58476D1CE4E5B9UL;
  return x ^ (x >> 31);
}
__kernel void mblast_mix(__global uchar* dst, __global const uchar* a, __global const uchar* b, ulong n, ulong eb,
                         ulong key) {
  for (ulong e = get_global_id(0); e < n; e += get_global_size(0)) {
    const bool take_a = ((mblast_splitmix64(key ^ ((e >> 6) * GOLDEN)) >> (e & 63)) & 1UL) != 0;
    __global const uchar* src = (take_a ? a : b) + e * eb;
    __global uchar* out = dst + e * eb;
    for (ulong k = 0; k < eb; ++k) out[k] = src[k];
  }
}
// partial[2 g] and partial[2 g + 1]: work-group g's part of the hash and of the poison count.
__kernel void mblast_digest(__global const uchar* p, ulong nbytes, ulong eb, uint poison, __global ulong* partial,
                            __local ulong* scratch) {
  ulong hash = 0, poisoned = 0;
  const ulong words = (nbytes + 3) / 4;
  for (ulong i = get_global_id(0); i < words; i += get_global_size(0)) {
    ulong w = 0;
    for (ulong k = 0; k < 4 && 4 * i + k < nbytes; ++k) w |= (ulong)p[4 * i + k] << (8 * k);
    hash += mblast_digest_term(w, i);
  }
  if (eb > 0) {
    const ulong n = nbytes / eb;
    for (ulong e = get_global_id(0); e < n; e += get_global_size(0)) {
      ulong k = 0;
      while (k < eb && p[e * eb + k] == (uchar)poison) ++k;
      poisoned += k == eb;
    }
  }
  const size_t lid = get_local_id(0), size = get_local_size(0);
  scratch[2 * lid] = hash;
  scratch[2 * lid + 1] = poisoned;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = size / 2; s > 0; s >>= 1) {
    if (lid < s) {
      scratch[2 * lid] += scratch[2 * (lid + s)];
      scratch[2 * lid + 1] += scratch[2 * (lid + s) + 1];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    partial[2 * get_group_id(0)] = scratch[0];
    partial[2 * get_group_id(0) + 1] = scratch[1];
  }
}
)CLC";
constexpr size_t kDigestLocal = 64;    // work-items per group (a power of two: the tree reduction)
constexpr size_t kDigestGroups = 256;  // at most; their partial sums are added on the host

}  // namespace

// One case per error name, many to a line.
// clang-format off
std::string cl_error_name(cl_int e) {
  switch (e) {
#define C(x) case x: return #x;
    C(CL_SUCCESS) C(CL_DEVICE_NOT_FOUND) C(CL_DEVICE_NOT_AVAILABLE) C(CL_COMPILER_NOT_AVAILABLE)
    C(CL_MEM_OBJECT_ALLOCATION_FAILURE) C(CL_OUT_OF_RESOURCES) C(CL_OUT_OF_HOST_MEMORY)
    C(CL_PROFILING_INFO_NOT_AVAILABLE) C(CL_BUILD_PROGRAM_FAILURE) C(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    C(CL_INVALID_VALUE) C(CL_INVALID_DEVICE) C(CL_INVALID_CONTEXT) C(CL_INVALID_COMMAND_QUEUE)
    C(CL_INVALID_MEM_OBJECT) C(CL_INVALID_PROGRAM) C(CL_INVALID_KERNEL) C(CL_INVALID_ARG_INDEX)
    C(CL_INVALID_ARG_VALUE) C(CL_INVALID_ARG_SIZE) C(CL_INVALID_KERNEL_ARGS) C(CL_INVALID_WORK_DIMENSION)
    C(CL_INVALID_WORK_GROUP_SIZE) C(CL_INVALID_GLOBAL_WORK_SIZE) C(CL_INVALID_EVENT) C(CL_INVALID_OPERATION)
    C(CL_INVALID_BUFFER_SIZE)
#undef C
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "cl_int " + std::to_string(e);
  }
}
// clang-format on

OpenclDevice::OpenclDevice(const nlohmann::json& target) {
  const auto& sel = target.value("device", nlohmann::json::object());
  const std::string want_platform = sel.value("platform_contains", "");
  const std::string want_device = sel.value("device_contains", "");
  const std::string want_type = sel.value("type", "any");

  cl_uint np = 0;
  cl_int e = clGetPlatformIDs(0, nullptr, &np);
  if (e != CL_SUCCESS || np == 0)
    throw BackendError("no OpenCL platform found (the ICD loader lists none" +
                       std::string(e == CL_SUCCESS ? "" : ": " + cl_error_name(e)) +
                       "; check /etc/OpenCL/vendors or OCL_ICD_VENDORS)");
  std::vector<cl_platform_id> plats(np);
  MBLAST_CL_CHECK(clGetPlatformIDs(np, plats.data(), nullptr));
  std::string seen;
  for (cl_platform_id p : plats) {
    const std::string pname = platform_string(p, CL_PLATFORM_NAME);
    seen += (seen.empty() ? "" : ", ") + pname;
    if (!want_platform.empty() && !contains_ci(pname, want_platform)) continue;
    cl_device_type type = CL_DEVICE_TYPE_ALL;
    if (want_type == "cpu")
      type = CL_DEVICE_TYPE_CPU;
    else if (want_type == "gpu")
      type = CL_DEVICE_TYPE_GPU;
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, type, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devs(nd);
    MBLAST_CL_CHECK(clGetDeviceIDs(p, type, nd, devs.data(), nullptr));
    for (cl_device_id d : devs) {
      if (!want_device.empty() && !contains_ci(info_string(d, CL_DEVICE_NAME), want_device)) continue;
      platform_ = p;
      device_ = d;
      platform_name_ = pname;
      break;
    }
    if (device_) break;
  }
  if (!device_)
    throw BackendError("no OpenCL device matches platform '" + want_platform + "' type '" + want_type +
                       "' (platforms found: " + (seen.empty() ? "none" : seen) + ")");
  cl_int err = CL_SUCCESS;
  ctx_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) throw BackendError("clCreateContext failed: " + cl_error_name(err));
  queue_ = clCreateCommandQueue(ctx_, device_, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) throw BackendError("clCreateCommandQueue failed: " + cl_error_name(err));
  align_ = std::max<size_t>(info_value<cl_uint>(device_, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8, 4096);
  cache_bytes_ = info_value<cl_ulong>(device_, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE);
  // A CPU device computes in this process, on this process's memory: its caches can be made
  // cold by evicting that memory (mblast/cache_evict.h), as the PyTorch baseline on the same CPU
  // then does. The target's device.cache_flush: auto (prefer_eviction's rule on the device's
  // cache size), evict (where available) or sweep (the kernel below; a GPU device always sweeps).
  const std::string flush = sel.value("cache_flush", "auto");
  if (flush != "auto" && flush != "evict" && flush != "sweep")
    throw BackendError("the target's device.cache_flush is '" + flush + "'; it must be auto, evict or sweep");
  const bool cpu = info_value<cl_device_type>(device_, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU;
  evict_ = cpu && (flush == "evict" ? eviction_available() : flush == "auto" && prefer_eviction(cache_bytes_));
  // device.digest: where mix() and digest() run. auto: the device's kernels on a GPU, the host
  // defaults on a CPU device (there the host is the device, and PoCL ran the byte-wise kernels
  // 1.5-2x slower than the host on 4 MiB: opencl_device_test's Cost); device or host: always.
  const std::string where = sel.value("digest", "auto");
  if (where != "auto" && where != "device" && where != "host")
    throw BackendError("the target's device.digest is '" + where + "'; it must be auto, device or host");
  digest_on_device_ = where == "device" || (where == "auto" && !cpu);
  const char* pin = std::getenv("POCL_AFFINITY");  // read by PoCL when it started its threads
  pocl_pinned_ = cpu && contains_ci(platform_name_, "Portable Computing Language") && pin && std::string(pin) == "1";
  // From here on every queue made in this process is recorded, the candidate's included (it is
  // loaded after the device is open): timer_end() finishes them before it stops the clock.
  record_queues_of_all_platforms();
}

void OpenclDevice::finish_candidate_queues() {
  const std::string why = finish_recorded_queues(queue_);
  if (!why.empty()) throw BackendError(why);
}

OpenclDevice::~OpenclDevice() {
  for (cl_event ev : {start_, end_})
    if (ev) clReleaseEvent(ev);
  if (flush_buf_) clReleaseMemObject(flush_buf_);
  if (flush_kernel_) clReleaseKernel(flush_kernel_);
  if (flush_prog_) clReleaseProgram(flush_prog_);
  if (busy_sink_) clReleaseMemObject(busy_sink_);
  if (busy_kernel_) clReleaseKernel(busy_kernel_);
  if (busy_prog_) clReleaseProgram(busy_prog_);
  if (digest_partial_) clReleaseMemObject(digest_partial_);
  if (mix_kernel_) clReleaseKernel(mix_kernel_);
  if (digest_kernel_) clReleaseKernel(digest_kernel_);
  if (digest_prog_) clReleaseProgram(digest_prog_);
  if (queue_) clReleaseCommandQueue(queue_);
  if (ctx_) clReleaseContext(ctx_);
}

mblast_context OpenclDevice::context() {
  mblast_context c{};
  c.abi_version = MBLAST_ABI_VERSION;
  c.backend = MBLAST_BACKEND_OPENCL;
  c.cl_context = ctx_;
  c.cl_device = device_;
  c.cl_queue = queue_;
  return c;
}

nlohmann::json OpenclDevice::describe() {
  return {{"platform", platform_name_},
          {"platform_version", platform_string(platform_, CL_PLATFORM_VERSION)},
          {"name", info_string(device_, CL_DEVICE_NAME)},
          {"vendor", info_string(device_, CL_DEVICE_VENDOR)},
          {"driver_version", info_string(device_, CL_DRIVER_VERSION)},
          {"opencl_version", info_string(device_, CL_DEVICE_VERSION)},
          {"compute_units", info_value<cl_uint>(device_, CL_DEVICE_MAX_COMPUTE_UNITS)},
          {"preferred_vector_width_float", info_value<cl_uint>(device_, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT)},
          {"native_vector_width_float", info_value<cl_uint>(device_, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT)},
          {"global_mem_bytes", info_value<cl_ulong>(device_, CL_DEVICE_GLOBAL_MEM_SIZE)},
          {"cache_bytes", cache_bytes_}};
}

Buffer OpenclDevice::allocate(size_t nbytes) {
  const size_t n = std::max<size_t>(nbytes, 1);
  auto* g = new Guarded;
  g->guard = align_;
  cl_int err = CL_SUCCESS;
  g->parent = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, n + 2 * g->guard, nullptr, &err);
  if (err != CL_SUCCESS) {
    delete g;
    throw BackendError("clCreateBuffer(" + std::to_string(n) + " bytes) failed: " + cl_error_name(err));
  }
  cl_buffer_region region{g->guard, n};
  cl_mem sub = clCreateSubBuffer(g->parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  if (err != CL_SUCCESS) {
    clReleaseMemObject(g->parent);
    delete g;
    throw BackendError("clCreateSubBuffer failed: " + cl_error_name(err));
  }
  Buffer b{sub, nbytes, g};
  const cl_uchar canary = static_cast<cl_uchar>(kCanary);
  MBLAST_CL_CHECK(clEnqueueFillBuffer(queue_, g->parent, &canary, 1, 0, g->guard, 0, nullptr, nullptr));
  MBLAST_CL_CHECK(clEnqueueFillBuffer(queue_, g->parent, &canary, 1, g->guard + n, g->guard, 0, nullptr, nullptr));
  return b;
}

void OpenclDevice::release(Buffer& b) {
  auto* g = static_cast<Guarded*>(b.impl);
  if (b.handle) clReleaseMemObject(static_cast<cl_mem>(b.handle));
  if (g) {
    clReleaseMemObject(g->parent);
    delete g;
  }
  b = Buffer{};
}

void OpenclDevice::upload(Buffer& b, std::span<const std::byte> host) {
  if (host.empty()) return;
  MBLAST_CL_CHECK(clEnqueueWriteBuffer(queue_, static_cast<cl_mem>(b.handle), CL_TRUE, 0, host.size(), host.data(), 0,
                                       nullptr, nullptr));
}

void OpenclDevice::download(const Buffer& b, std::span<std::byte> host) {
  if (host.empty()) return;
  MBLAST_CL_CHECK(clEnqueueReadBuffer(queue_, static_cast<cl_mem>(b.handle), CL_TRUE, 0, host.size(), host.data(), 0,
                                      nullptr, nullptr));
}

void OpenclDevice::fill(Buffer& b, std::byte value) {
  if (b.nbytes == 0) return;
  const cl_uchar v = static_cast<cl_uchar>(value);
  MBLAST_CL_CHECK(clEnqueueFillBuffer(queue_, static_cast<cl_mem>(b.handle), &v, 1, 0, b.nbytes, 0, nullptr, nullptr));
}

void OpenclDevice::download_range(const Buffer& b, size_t offset, std::span<std::byte> host) {
  if (host.empty()) return;
  if (offset > b.nbytes || host.size() > b.nbytes - offset) throw BackendError("download_range: past the buffer's end");
  MBLAST_CL_CHECK(clEnqueueReadBuffer(queue_, static_cast<cl_mem>(b.handle), CL_TRUE, offset, host.size(), host.data(),
                                      0, nullptr, nullptr));
}

bool OpenclDevice::guards_intact(const Buffer& b) {
  auto* g = static_cast<Guarded*>(b.impl);
  const size_t n = std::max<size_t>(b.nbytes, 1);
  std::vector<std::byte> front(g->guard), back(g->guard);
  MBLAST_CL_CHECK(clEnqueueReadBuffer(queue_, g->parent, CL_TRUE, 0, g->guard, front.data(), 0, nullptr, nullptr));
  MBLAST_CL_CHECK(
      clEnqueueReadBuffer(queue_, g->parent, CL_TRUE, g->guard + n, g->guard, back.data(), 0, nullptr, nullptr));
  auto ok = [](const std::vector<std::byte>& v) {
    return std::all_of(v.begin(), v.end(), [](std::byte x) { return x == kCanary; });
  };
  return ok(front) && ok(back);
}

void OpenclDevice::synchronize() {
  finish_candidate_queues();
  MBLAST_CL_CHECK(clFinish(queue_));
}

std::string OpenclDevice::health() { return ""; }

void OpenclDevice::flush_caches() {
  if (evict_) {
    MBLAST_CL_CHECK(clFinish(queue_));  // nothing of the device's threads runs while memory is walked
    if (evict_process_data()) {
      keep_busy();
      return;
    }
    evict_ = false;  // /proc/self/maps became unreadable: sweep from now on
  }
  // Read and write twice the device's global-memory cache so no timed call starts warm. A
  // kernel, not clEnqueueFillBuffer: a CPU device fills with memset, whose non-temporal stores
  // for large sizes bypass the cache and evict nothing (small problems then ran from the cache,
  // faster than memory allows).
  const size_t bytes = flush_bytes();
  cl_int err = CL_SUCCESS;
  if (!flush_buf_) {
    flush_buf_ = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    if (err != CL_SUCCESS) throw BackendError("cache-flush buffer: " + cl_error_name(err));
    const cl_uchar zero = 0;
    MBLAST_CL_CHECK(clEnqueueFillBuffer(queue_, flush_buf_, &zero, 1, 0, bytes, 0, nullptr, nullptr));
    static const char* kFlush =
        "__kernel void mblast_flush(__global uint16* p, uint v) { size_t i = get_global_id(0); p[i] = p[i] * v + 1u; "
        "}\n";
    flush_kernel_ = own_kernel(kFlush, "mblast_flush", flush_prog_);
    MBLAST_CL_CHECK(clSetKernelArg(flush_kernel_, 0, sizeof(cl_mem), &flush_buf_));
  }
  const cl_uint v = ++flush_count_;
  MBLAST_CL_CHECK(clSetKernelArg(flush_kernel_, 1, sizeof v, &v));
  const size_t items = bytes / 64;
  MBLAST_CL_CHECK(clEnqueueNDRangeKernel(queue_, flush_kernel_, 1, nullptr, &items, nullptr, 0, nullptr, nullptr));
  MBLAST_CL_CHECK(clFinish(queue_));
}

cl_kernel OpenclDevice::own_kernel(const char* source, const char* name, cl_program& program) {
  cl_int err = CL_SUCCESS;
  program = clCreateProgramWithSource(ctx_, 1, &source, nullptr, &err);
  MBLAST_CL_CHECK(err);
  MBLAST_CL_CHECK(clBuildProgram(program, 1, &device_, "", nullptr, nullptr));
  cl_kernel k = clCreateKernel(program, name, &err);
  MBLAST_CL_CHECK(err);
  return k;
}

void OpenclDevice::keep_busy() {
  // Arithmetic only, on every compute unit, for kBusyAfterEviction seconds: the timed call then
  // starts on a device that was just working, as after a sweep (and as in a pipeline of
  // kernels), not on threads that idled while the host walked memory (mblast/cache_evict.h).
  cl_int err = CL_SUCCESS;
  if (!busy_kernel_) {
    static const char* kBusy =
        "__kernel void mblast_busy(__global float* sink, uint n) {\n"
        "  float x = (float)get_global_id(0);\n"
        "  for (uint i = 0; i < n; ++i) x = x * 0.999f + 1.0f;\n"
        "  if (x == -1.0f) sink[0] = x;\n"
        "}\n";
    busy_kernel_ = own_kernel(kBusy, "mblast_busy", busy_prog_);
    busy_global_ = 4 * std::max<cl_uint>(info_value<cl_uint>(device_, CL_DEVICE_MAX_COMPUTE_UNITS), 1);
    busy_sink_ = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, sizeof(float), nullptr, &err);
    MBLAST_CL_CHECK(err);
    MBLAST_CL_CHECK(clSetKernelArg(busy_kernel_, 0, sizeof(cl_mem), &busy_sink_));
  }
  const size_t local = 1;
  auto run = [&](cl_uint n) {
    MBLAST_CL_CHECK(clSetKernelArg(busy_kernel_, 1, sizeof n, &n));
    const auto t0 = std::chrono::steady_clock::now();
    MBLAST_CL_CHECK(
        clEnqueueNDRangeKernel(queue_, busy_kernel_, 1, nullptr, &busy_global_, &local, 0, nullptr, nullptr));
    MBLAST_CL_CHECK(clFinish(queue_));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  if (busy_iters_ == 0) {  // calibrated once: iterations for kBusyAfterEviction (the first launch also compiles)
    const cl_uint probe = 100000;
    run(probe);
    const double t = std::max(run(probe), 1e-6);
    busy_iters_ = static_cast<cl_uint>(std::clamp(probe * kBusyAfterEviction / t, 1000.0, 1e9));
  }
  run(busy_iters_);
}

size_t OpenclDevice::flush_bytes() const { return (std::max<size_t>(2 * cache_bytes_, 8u << 20) + 63) & ~size_t{63}; }

void OpenclDevice::timer_begin() {
  if (start_) clReleaseEvent(start_);
  start_ = nullptr;
  finish_candidate_queues();  // nothing of an earlier call runs into this one
  MBLAST_CL_CHECK(clFinish(queue_));
  host_start_ = std::chrono::steady_clock::now();
  MBLAST_CL_CHECK(clEnqueueMarkerWithWaitList(queue_, 0, nullptr, &start_));
}

double OpenclDevice::timer_end() {
  if (end_) clReleaseEvent(end_);
  end_ = nullptr;
  // Work the candidate left on queues of its own (on this context or one it made) is part of the
  // call: finished first, so the end marker below is enqueued only after it completed.
  finish_candidate_queues();
  MBLAST_CL_CHECK(clEnqueueMarkerWithWaitList(queue_, 0, nullptr, &end_));
  MBLAST_CL_CHECK(clFinish(queue_));
  const double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start_).count();
  cl_ulong t0 = 0, t1 = 0;
  if (clGetEventProfilingInfo(start_, CL_PROFILING_COMMAND_END, sizeof t0, &t0, nullptr) != CL_SUCCESS ||
      clGetEventProfilingInfo(end_, CL_PROFILING_COMMAND_END, sizeof t1, &t1, nullptr) != CL_SUCCESS || t1 <= t0) {
    events_ok_ = false;
    return host;
  }
  return static_cast<double>(t1 - t0) * 1e-9;
}

std::string OpenclDevice::timing_method() {
  const std::string clock = events_ok_
                                ? "opencl marker-event profiling (start marker end -> end marker end, after clFinish)"
                                : "host wall clock around the call and clFinish (marker profiling unavailable)";
  const std::string cold =
      evict_
          ? "every cache line of the process's resident data memory flushed (CLFLUSHOPT), "
            "then " +
                std::to_string(static_cast<int>(kBusyAfterEviction * 1000)) + " ms of arithmetic on every compute unit"
          : "a kernel reading and writing " + std::to_string(flush_bytes() >> 20) + " MiB (2x the device's cache)";
  return clock +
         "; every command queue created in the worker finished before the clock stops; caches cold before each timed "
         "call: " +
         cold + (pocl_pinned_ ? "; PoCL's threads pinned one to a CPU (POCL_AFFINITY=1)" : "");
}

void OpenclDevice::mix(Buffer& dst, const Buffer& a, const Buffer& b, std::span<const std::byte> host_a,
                       std::span<const std::byte> host_b, size_t elem_bytes, uint64_t key) {
  if (!digest_on_device_) return Device::mix(dst, a, b, host_a, host_b, elem_bytes, key);
  if (elem_bytes == 0 || dst.nbytes < elem_bytes) return;
  if (!mix_kernel_) {
    mix_kernel_ = own_kernel(kDigestKernels, "mblast_mix", digest_prog_);
  }
  cl_mem d = static_cast<cl_mem>(dst.handle), pa = static_cast<cl_mem>(a.handle), pb = static_cast<cl_mem>(b.handle);
  const cl_ulong n = dst.nbytes / elem_bytes, eb = elem_bytes, k = key;
  MBLAST_CL_CHECK(clSetKernelArg(mix_kernel_, 0, sizeof d, &d));
  MBLAST_CL_CHECK(clSetKernelArg(mix_kernel_, 1, sizeof pa, &pa));
  MBLAST_CL_CHECK(clSetKernelArg(mix_kernel_, 2, sizeof pb, &pb));
  MBLAST_CL_CHECK(clSetKernelArg(mix_kernel_, 3, sizeof n, &n));
  MBLAST_CL_CHECK(clSetKernelArg(mix_kernel_, 4, sizeof eb, &eb));
  MBLAST_CL_CHECK(clSetKernelArg(mix_kernel_, 5, sizeof k, &k));
  const size_t global = std::min<size_t>((n + kDigestLocal - 1) / kDigestLocal, kDigestGroups * 16) * kDigestLocal;
  MBLAST_CL_CHECK(clEnqueueNDRangeKernel(queue_, mix_kernel_, 1, nullptr, &global, &kDigestLocal, 0, nullptr, nullptr));
  MBLAST_CL_CHECK(clFinish(queue_));  // in place before the call, as an upload is
}

OutputDigest OpenclDevice::digest(const Buffer& b, size_t elem_bytes, std::byte poison) {
  if (!digest_on_device_) return Device::digest(b, elem_bytes, poison);
  OutputDigest out;
  if (b.nbytes == 0) return out;
  cl_int err = CL_SUCCESS;
  if (!digest_kernel_) {
    if (!digest_prog_) {
      mix_kernel_ = own_kernel(kDigestKernels, "mblast_mix", digest_prog_);
    }
    digest_kernel_ = clCreateKernel(digest_prog_, "mblast_digest", &err);
    MBLAST_CL_CHECK(err);
    digest_partial_ = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, 2 * kDigestGroups * sizeof(cl_ulong), nullptr, &err);
    MBLAST_CL_CHECK(err);
  }
  cl_mem p = static_cast<cl_mem>(b.handle);
  const cl_ulong nbytes = b.nbytes, eb = elem_bytes;
  const cl_uint pz = static_cast<cl_uint>(poison);
  const size_t words = (b.nbytes + 3) / 4;
  const size_t groups = std::clamp<size_t>((words + kDigestLocal - 1) / kDigestLocal, 1, kDigestGroups);
  const size_t global = groups * kDigestLocal;
  MBLAST_CL_CHECK(clSetKernelArg(digest_kernel_, 0, sizeof p, &p));
  MBLAST_CL_CHECK(clSetKernelArg(digest_kernel_, 1, sizeof nbytes, &nbytes));
  MBLAST_CL_CHECK(clSetKernelArg(digest_kernel_, 2, sizeof eb, &eb));
  MBLAST_CL_CHECK(clSetKernelArg(digest_kernel_, 3, sizeof pz, &pz));
  MBLAST_CL_CHECK(clSetKernelArg(digest_kernel_, 4, sizeof digest_partial_, &digest_partial_));
  MBLAST_CL_CHECK(clSetKernelArg(digest_kernel_, 5, 2 * kDigestLocal * sizeof(cl_ulong), nullptr));
  MBLAST_CL_CHECK(
      clEnqueueNDRangeKernel(queue_, digest_kernel_, 1, nullptr, &global, &kDigestLocal, 0, nullptr, nullptr));
  std::vector<cl_ulong> partial(2 * groups);
  MBLAST_CL_CHECK(clEnqueueReadBuffer(queue_, digest_partial_, CL_TRUE, 0, partial.size() * sizeof(cl_ulong),
                                      partial.data(), 0, nullptr, nullptr));
  for (size_t g = 0; g < groups; ++g) {  // mod 2^64, as on the host: the order does not matter
    out.hash += partial[2 * g];
    out.poisoned += partial[2 * g + 1];
  }
  return out;
}

double OpenclDevice::time_kernel(cl_kernel k, size_t global, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    cl_event ev = nullptr;
    MBLAST_CL_CHECK(clEnqueueNDRangeKernel(queue_, k, 1, nullptr, &global, nullptr, 0, nullptr, &ev));
    MBLAST_CL_CHECK(clFinish(queue_));
    cl_ulong a = 0, b = 0;
    MBLAST_CL_CHECK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, nullptr));
    MBLAST_CL_CHECK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, nullptr));
    clReleaseEvent(ev);
    best = std::min(best, static_cast<double>(b - a) * 1e-9);
  }
  return best;
}

Peaks OpenclDevice::measure_peaks() {
  cl_int err = CL_SUCCESS;
  const char* src = kPeakKernels;
  cl_program prog = clCreateProgramWithSource(ctx_, 1, &src, nullptr, &err);
  MBLAST_CL_CHECK(err);
  MBLAST_CL_CHECK(clBuildProgram(prog, 1, &device_, "", nullptr, nullptr));
  // The best of `reps` runs of kernel `name` over `global` work-items with these arguments.
  auto best_of = [&](const char* name, std::initializer_list<std::pair<size_t, const void*>> args, size_t global,
                     int reps) {
    cl_kernel k = clCreateKernel(prog, name, &err);
    MBLAST_CL_CHECK(err);
    cl_uint i = 0;
    for (const auto& [size, value] : args) MBLAST_CL_CHECK(clSetKernelArg(k, i++, size, value));
    const double t = time_kernel(k, global, reps);
    clReleaseKernel(k);
    return t;
  };

  const cl_ulong max_alloc = info_value<cl_ulong>(device_, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  const size_t bytes =
      static_cast<size_t>(std::min<cl_ulong>(max_alloc / 2, std::max<cl_ulong>(8 * cache_bytes_, 256u << 20))) &
      ~size_t{63};
  cl_mem a = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
  MBLAST_CL_CHECK(err);
  cl_mem b = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
  MBLAST_CL_CHECK(err);
  const cl_uchar z = 1;
  MBLAST_CL_CHECK(clEnqueueFillBuffer(queue_, a, &z, 1, 0, bytes, 0, nullptr, nullptr));
  // float4 suits GPUs; CPU devices need whole 64-byte lines per work-item.
  const double t_copy = std::min(best_of("mblast_copy", {{sizeof a, &a}, {sizeof b, &b}}, bytes / 16, 6),
                                 best_of("mblast_copy16", {{sizeof a, &a}, {sizeof b, &b}}, bytes / 64, 6));

  const cl_uint cus = info_value<cl_uint>(device_, CL_DEVICE_MAX_COMPUTE_UNITS);
  const size_t items = std::max<size_t>(cus, 1) * 16384;
  cl_mem out = clCreateBuffer(ctx_, CL_MEM_WRITE_ONLY, items * sizeof(float), nullptr, &err);
  MBLAST_CL_CHECK(err);
  const float fa = 0.999f, fb = 0.001f;
  // Each form does 8 x 1024 (scalar) or 8 x 16 x 1024 (float16) FMAs per work-item; the peak is
  // the faster of the two, whichever way this device reaches it. The float16 runs are short:
  // the best of many resists a busy neighbour.
  const double scalar = 2.0 * 8 * 1024 * static_cast<double>(items) /
                        best_of("mblast_fma", {{sizeof out, &out}, {sizeof fa, &fa}, {sizeof fb, &fb}}, items, 4);
  const double vector = 2.0 * 128 * 1024 * static_cast<double>(items) /
                        best_of("mblast_fma16", {{sizeof out, &out}, {sizeof fa, &fa}, {sizeof fb, &fb}}, items, 12);

  clReleaseMemObject(a);
  clReleaseMemObject(b);
  clReleaseMemObject(out);
  clReleaseProgram(prog);
  Peaks p;
  p.bandwidth_bytes_per_s = 2.0 * static_cast<double>(bytes) / t_copy;
  p.fp32_flops_per_s = std::max(scalar, vector);
  p.method = "opencl: float4 or float16 copy of " + std::to_string(bytes >> 20) +
             " MiB (read+write bytes), the faster; fma x 1024 as 8 scalar or 8 float16 independent chains, the faster; "
             "best of several";
  return p;
}

}  // namespace mblast::runner::opencl
