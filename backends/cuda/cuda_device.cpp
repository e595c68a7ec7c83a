// The CUDA device as the worker sees it: device 0 of those visible, its primary context (shared
// with the CUDA runtime that candidates use), one ordinary stream, guarded buffers, event timing
// after a device-wide synchronisation, and built-in peak kernels compiled with NVRTC.
#include "cuda_device.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace mblast::runner::cuda {

namespace {

using nlohmann::json;

constexpr size_t kGuard = 4096;  // bytes on each side; keeps the 256-byte alignment of the base
constexpr unsigned char kCanary = 0xA5;

struct Guarded {
  CUdeviceptr base = 0;
};

// Runs a clean-up when the scope ends, also by an exception.
class Defer {
 public:
  explicit Defer(std::function<void()> f) : f_(std::move(f)) {}
  ~Defer() {
    if (f_) f_();
  }
  Defer(const Defer&) = delete;
  Defer& operator=(const Defer&) = delete;

 private:
  std::function<void()> f_;
};

bool contains_ci(std::string hay, std::string needle) {
  auto lower = [](std::string& s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  };
  lower(hay);
  lower(needle);
  return hay.find(needle) != std::string::npos;
}

// "an H100", "a B200": the article as the name is spoken letter by letter.
std::string with_article(const std::string& name) {
  if (name.empty()) return name;
  const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  const bool vowel_sound = std::strchr("AEFHILMNORSX8", c) != nullptr;
  return (vowel_sound ? "an " : "a ") + name;
}

std::string target_gencode(const json& target) {
  const json arch = target.value("arch", json::object());
  if (arch.contains("gencode") && arch["gencode"].is_string()) return arch["gencode"].get<std::string>();
  if (arch.contains("sm") && arch["sm"].is_string()) return "sm_" + arch["sm"].get<std::string>();
  return "";
}

// The kernels behind measure_peaks(); compiled with NVRTC for the device's architecture.
const char* kPeakSource = R"CUDA(
extern "C" __global__ void mblast_copy(const float4* __restrict__ src, float4* __restrict__ dst,
                                       unsigned long long n) {
  const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

#define MBLAST_FMA_ITERS 2048
extern "C" __global__ void mblast_fma(float* out, float a, float b) {
  const unsigned long long id = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  float x0 = (float)(id & 1023) * 1e-4f, x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
  float x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
#pragma unroll 32
  for (int i = 0; i < MBLAST_FMA_ITERS; ++i) {
    x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
    x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
  }
  out[id] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
}

__device__ __forceinline__ unsigned mblast_scramble(unsigned x) {
  x ^= x >> 17; x *= 0xed5ad4bbu; x ^= x >> 11; x *= 0xac4c1b51u;
  x ^= x >> 15; x *= 0x31848babu; x ^= x >> 14;
  return x;
}
__device__ __forceinline__ float mblast_uniform(unsigned long long i, unsigned seed) {
  const unsigned h = mblast_scramble((unsigned)i ^ mblast_scramble(seed + 0x9e3779b9u * (unsigned)(i >> 32)));
  return (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;  // [-1, 1)
}
extern "C" __global__ void mblast_fill_f32(float* p, unsigned long long n, unsigned seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    p[i] = mblast_uniform(i, seed);
}
extern "C" __global__ void mblast_fill_bf16(unsigned short* p, unsigned long long n, unsigned seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    p[i] = (unsigned short)(__float_as_uint(mblast_uniform(i, seed)) >> 16);
}
)CUDA";
constexpr int kFmaIters = 2048;

// mblast/digest.h on the device: the same SplitMix64 terms, summed with 64-bit atomics (the sum
// is order-free, so any schedule of threads gives the host's number).
const char* kDigestSource = R"CUDA(
#define GOLDEN 0x9E3779B97F4A7C15ull
__device__ __forceinline__ unsigned long long mblast_splitmix64(unsigned long long x) {
  x += GOLDEN;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// mblast/digest.h's digest_term: word W at index I.
__device__ __forceinline__ unsigned long long mblast_digest_term(unsigned long long w, unsigned long long i) {
  unsigned long long x = (w ^ (i * GOLDEN)) * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 31);
}
// dst[e] = mix_takes_a(key, e) ? a[e] : b[e] for n elements of elem_bytes each.
extern "C" __global__ void mblast_mix(unsigned char* dst, const unsigned char* a, const unsigned char* b,
                                      unsigned long long n, unsigned long long elem_bytes, unsigned long long key) {
  for (unsigned long long e = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; e < n;
       e += (unsigned long long)gridDim.x * blockDim.x) {
    const bool take_a = (mblast_splitmix64(key ^ ((e >> 6) * GOLDEN)) >> (e & 63)) & 1ull;
    const unsigned char* src = (take_a ? a : b) + e * elem_bytes;
    unsigned char* out = dst + e * elem_bytes;
    if (elem_bytes == 4) *(unsigned*)out = *(const unsigned*)src;
    else if (elem_bytes == 2) *(unsigned short*)out = *(const unsigned short*)src;
    else if (elem_bytes == 8) *(unsigned long long*)out = *(const unsigned long long*)src;
    else for (unsigned long long k = 0; k < elem_bytes; ++k) out[k] = src[k];
  }
}
// out[0] += sum of digest_term(w_i, i) over the 32-bit words (a partial last word
// zero-padded); out[1] += elements whose every byte is `poison`; out[2] += bytes of the guards
// FRONT and BACK (GUARD bytes each, none when 0) that are not `canary`.
extern "C" __global__ void mblast_digest(const unsigned char* p, unsigned long long nbytes,
                                         unsigned long long elem_bytes, unsigned poison, unsigned long long* out,
                                         const unsigned char* front, const unsigned char* back,
                                         unsigned long long guard, unsigned canary) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  unsigned long long hash = 0, poisoned = 0;
  const unsigned long long words = (nbytes + 3) / 4;
  for (unsigned long long i = first; i < words; i += stride) {
    unsigned long long w = 0;
    if (4 * i + 4 <= nbytes) {
      w = *(const unsigned*)(p + 4 * i);
    } else {
      for (unsigned long long k = 0; 4 * i + k < nbytes; ++k) w |= (unsigned long long)p[4 * i + k] << (8 * k);
    }
    hash += mblast_digest_term(w, i);
  }
  if (elem_bytes > 0) {
    const unsigned long long n = nbytes / elem_bytes;
    for (unsigned long long e = first; e < n; e += stride) {
      unsigned long long k = 0;
      while (k < elem_bytes && p[e * elem_bytes + k] == (unsigned char)poison) ++k;
      poisoned += k == elem_bytes;
    }
  }
  unsigned long long broken = 0;
  for (unsigned long long i = first; i < guard; i += stride)
    broken += (front[i] != (unsigned char)canary) + (back[i] != (unsigned char)canary);
  for (int off = 16; off > 0; off >>= 1) {
    hash += __shfl_down_sync(0xffffffffu, hash, off);
    poisoned += __shfl_down_sync(0xffffffffu, poisoned, off);
    broken += __shfl_down_sync(0xffffffffu, broken, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(out, hash);
    atomicAdd(out + 1, poisoned);
    if (broken) atomicAdd(out + 2, broken);
  }
}
)CUDA";
constexpr int kFmaChains = 8;

std::string program_log(const Nvrtc& n, nvrtc_program prog) {
  size_t size = 0;
  if (n.GetProgramLogSize(prog, &size) != 0 || size < 2) return "";
  std::string log(size, '\0');
  if (n.GetProgramLog(prog, log.data()) != 0) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Compiles `source` (kPeakSource, kDigestSource): a cubin for sm_XY, or PTX for compute_XY (JIT by the driver) when
// this NVRTC does not know the device's architecture. Returns the image for cuModuleLoadData.
std::vector<char> compile_kernels(const Nvrtc& n, const char* source, const char* name, int major, int minor,
                                  std::string* how) {
  const std::string arch = std::to_string(major * 10 + minor);
  std::string first_log;
  for (const bool cubin : {true, false}) {
    nvrtc_program prog = nullptr;
    MBLAST_NVRTC_CHECK(n, n.CreateProgram(&prog, source, name, 0, nullptr, nullptr));
    Defer destroy([&] { n.DestroyProgram(&prog); });
    const std::string opt = "--gpu-architecture=" + std::string(cubin ? "sm_" : "compute_") + arch;
    const char* opts[] = {opt.c_str()};
    const nvrtc_result r = n.CompileProgram(prog, 1, opts);
    if (r != 0) {
      const std::string log = n.error_text(r) + (program_log(n, prog).empty() ? "" : ": " + program_log(n, prog));
      if (cubin) {
        first_log = opt + ": " + log;
        continue;
      }
      throw BackendError("NVRTC (" + n.library + ") could not compile " + name + "; " + first_log + "; " + opt + ": " +
                         log);
    }
    size_t size = 0;
    std::vector<char> image;
    if (cubin) {
      MBLAST_NVRTC_CHECK(n, n.GetCUBINSize(prog, &size));
      image.resize(size);
      MBLAST_NVRTC_CHECK(n, n.GetCUBIN(prog, image.data()));
    } else {
      MBLAST_NVRTC_CHECK(n, n.GetPTXSize(prog, &size));
      image.resize(size);
      MBLAST_NVRTC_CHECK(n, n.GetPTX(prog, image.data()));
    }
    *how = cubin ? "NVRTC cubin for sm_" + arch : "NVRTC PTX for compute_" + arch + " (driver JIT)";
    return image;
  }
  return {};  // not reached
}

}  // namespace

bool gencode_runs_on(const std::string& gencode, int major, int minor, std::string* why) {
  std::string g = gencode;
  for (const char* prefix : {"sm_", "compute_"})
    if (g.rfind(prefix, 0) == 0) g = g.substr(std::strlen(prefix));
  size_t digits = 0;
  while (digits < g.size() && std::isdigit(static_cast<unsigned char>(g[digits]))) ++digits;
  if (digits < 2) return true;  // not a form we know; let the compiler or the loader say
  const int num = std::stoi(g.substr(0, digits));
  const int want_major = num / 10, want_minor = num % 10;
  const std::string suffix = g.substr(digits);
  const std::string need = std::to_string(want_major) + "." + std::to_string(want_minor);
  const std::string have = std::to_string(major) + "." + std::to_string(minor);
  if (suffix == "a") {
    if (major == want_major && minor == want_minor) return true;
    if (why) *why = gencode + " code runs only on compute capability " + need + " exactly, the device has " + have;
    return false;
  }
  // Plain (and family-specific "f") machine code runs on the same major version, same or later minor.
  if (major == want_major && minor >= want_minor) return true;
  if (why)
    *why = gencode + " machine code runs on compute capability " + std::to_string(want_major) +
           ".x (x >= " + std::to_string(want_minor) + ") only, the device has " + have;
  return false;
}

CudaDevice::CudaDevice(const json& target) : d_(driver()) {
  try {
    const CUresult init = d_.Init(0);
    if (init != CUDA_SUCCESS) {
      const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
      throw BackendError("the NVIDIA driver found no usable GPU: cuInit failed with " + d_.error_text(init) +
                         (vis ? " (CUDA_VISIBLE_DEVICES=" + std::string(vis) + ")" : ""));
    }
    int count = 0;
    MBLAST_CU_CHECK(d_, d_.DeviceGetCount(&count));
    if (count < 1) {
      const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
      throw BackendError(std::string("the NVIDIA driver lists no GPU") +
                         (vis ? " (CUDA_VISIBLE_DEVICES=" + std::string(vis) + ")" : ""));
    }
    ordinal_ = 0;
    MBLAST_CU_CHECK(d_, d_.DeviceGet(&dev_, ordinal_));
    char name[256] = {};
    MBLAST_CU_CHECK(d_, d_.DeviceGetName(name, static_cast<int>(sizeof name) - 1, dev_));
    name_ = name;
    MBLAST_CU_CHECK(d_, d_.DeviceGetAttribute(&cc_major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_));
    MBLAST_CU_CHECK(d_, d_.DeviceGetAttribute(&cc_minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_));
    MBLAST_CU_CHECK(d_, d_.DeviceGetAttribute(&sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_));
    int l2 = 0;
    MBLAST_CU_CHECK(d_, d_.DeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev_));
    l2_bytes_ = static_cast<size_t>(std::max(l2, 0));
    MBLAST_CU_CHECK(d_, d_.DeviceTotalMem(&memory_bytes_, dev_));
    MBLAST_CU_CHECK(d_, d_.DriverGetVersion(&driver_version_));

    // The target's code must be able to run here; a different model of the same architecture
    // only earns a warning (the measurements then describe this device, not the target's).
    const std::string tname = target.value("name", std::string("?"));
    const std::string cc = std::to_string(cc_major_) + "." + std::to_string(cc_minor_);
    const std::string gencode = target_gencode(target);
    std::string why;
    if (!gencode.empty() && !gencode_runs_on(gencode, cc_major_, cc_minor_, &why))
      throw BackendError("target " + tname + " builds for " + gencode + ", which cannot run on the " + name_ +
                         " here (" + why + ")");
    const json want = target.value("device", json::object());
    const std::string want_name = want.value("name_contains", std::string());
    const std::string want_cc = want.value("compute_capability", std::string());
    if ((!want_name.empty() && !contains_ci(name_, want_name)) || (!want_cc.empty() && want_cc != cc)) {
      warning_ = "target " + tname + " describes " +
                 (want_name.empty() ? std::string("a device") : with_article(want_name)) +
                 (want_cc.empty() ? "" : " (cc " + want_cc + ")") + " but the device is " + name_ + " (cc " + cc + ")";
    }

    // The primary context is the one the CUDA runtime binds to, so candidates share it.
    MBLAST_CU_CHECK(d_, d_.DevicePrimaryCtxRetain(&ctx_, dev_));
    ctx_retained_ = true;
    MBLAST_CU_CHECK(d_, d_.CtxSetCurrent(ctx_));
    persisting_l2_ = attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE) > 0;
    if (persisting_l2_) {
      MBLAST_CU_CHECK(d_, d_.CtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0));
      MBLAST_CU_CHECK(d_, d_.CtxResetPersistingL2Cache());
    }
    // An ordinary (blocking) stream: work a candidate puts on the legacy default stream is
    // ordered with it.
    MBLAST_CU_CHECK(d_, d_.StreamCreate(&stream_, CU_STREAM_DEFAULT));
    MBLAST_CU_CHECK(d_, d_.EventCreate(&start_, CU_EVENT_DEFAULT));
    MBLAST_CU_CHECK(d_, d_.EventCreate(&end_, CU_EVENT_DEFAULT));
    MBLAST_CU_CHECK(d_, d_.MemAlloc(&sentinel_, 256));
  } catch (...) {
    cleanup();
    throw;
  }
}

CudaDevice::~CudaDevice() { cleanup(); }

void CudaDevice::cleanup() noexcept {
  // Errors are ignored here: after a sticky error every call fails, and the process ends anyway.
  if (ctx_retained_) {
    d_.CtxSetCurrent(ctx_);
    d_.CtxSynchronize();
  }
  if (start_) d_.EventDestroy(start_);
  if (end_) d_.EventDestroy(end_);
  if (stream_) d_.StreamDestroy(stream_);
  if (flush_buf_) d_.MemFree(flush_buf_);
  if (sentinel_) d_.MemFree(sentinel_);
  if (digest_out_) d_.MemFree(digest_out_);
  if (digest_mod_) d_.ModuleUnload(digest_mod_);
  sentinel_ = digest_out_ = 0;
  digest_out_bytes_ = 0;
  digest_mod_ = nullptr;
  start_ = end_ = nullptr;
  stream_ = nullptr;
  flush_buf_ = 0;
  if (ctx_retained_) d_.DevicePrimaryCtxRelease(dev_);
  ctx_retained_ = false;
  ctx_ = nullptr;
}

void CudaDevice::make_current() { MBLAST_CU_CHECK(d_, d_.CtxSetCurrent(ctx_)); }

int CudaDevice::attribute(CUdevice_attribute a) const {
  int v = 0;
  return d_.DeviceGetAttribute(&v, a, dev_) == CUDA_SUCCESS ? v : -1;
}

mblast_context CudaDevice::context() {
  mblast_context c{};
  c.abi_version = MBLAST_ABI_VERSION;
  c.backend = MBLAST_BACKEND_CUDA;
  c.cuda_stream = static_cast<void*>(stream_);
  c.cuda_device = ordinal_;
  return c;
}

json CudaDevice::describe() {
  json j = {
      {"name", name_},
      {"vendor", "NVIDIA"},
      {"compute_capability", std::to_string(cc_major_) + "." + std::to_string(cc_minor_)},
      {"sm_count", sm_count_},
      {"l2_bytes", l2_bytes_},
      {"memory_bytes", memory_bytes_},
      {"driver_version", std::to_string(driver_version_ / 1000) + "." + std::to_string((driver_version_ % 1000) / 10)},
      {"ordinal", ordinal_}};
  if (const int v = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE); v > 0) j["sm_clock_khz"] = v;
  if (const int v = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE); v > 0) j["memory_clock_khz"] = v;
  if (const int v = attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH); v > 0) j["memory_bus_bits"] = v;
  if (const char* vis = std::getenv("CUDA_VISIBLE_DEVICES")) j["cuda_visible_devices"] = vis;
  if (!warning_.empty()) j["warning"] = warning_;
  return j;
}

Buffer CudaDevice::allocate(size_t nbytes) {
  make_current();
  CUdeviceptr base = 0;
  const CUresult r = d_.MemAlloc(&base, nbytes + 2 * kGuard);
  if (r != CUDA_SUCCESS)
    throw BackendError(describe_call(d_.error_text(r) + " (allocating " + std::to_string(nbytes) + " bytes)",
                                     "cuMemAlloc", __FILE__, __LINE__));
  auto* g = new Guarded{base};
  try {
    MBLAST_CU_CHECK(d_, d_.MemsetD8Async(base, kCanary, kGuard, stream_));
    MBLAST_CU_CHECK(d_, d_.MemsetD8Async(base + kGuard + nbytes, kCanary, kGuard, stream_));
    MBLAST_CU_CHECK(d_, d_.StreamSynchronize(stream_));
  } catch (...) {
    d_.MemFree(base);
    delete g;
    throw;
  }
  return Buffer{reinterpret_cast<void*>(static_cast<uintptr_t>(base + kGuard)), nbytes, g};
}

void CudaDevice::release(Buffer& b) {
  auto* g = static_cast<Guarded*>(b.impl);
  b = Buffer{};
  if (!g) return;
  const CUdeviceptr base = g->base;
  delete g;
  make_current();
  MBLAST_CU_CHECK(d_, d_.MemFree(base));
}

void CudaDevice::upload(Buffer& b, std::span<const std::byte> host) {
  if (host.empty()) return;
  if (host.size() > b.nbytes)
    throw Error("cuda upload: " + std::to_string(host.size()) + " bytes into a buffer of " + std::to_string(b.nbytes));
  make_current();
  const auto dst = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(b.handle));
  MBLAST_CU_CHECK(d_, d_.MemcpyHtoDAsync(dst, host.data(), host.size(), stream_));
  MBLAST_CU_CHECK(d_, d_.StreamSynchronize(stream_));  // complete on return, not only staged
}

void CudaDevice::download(const Buffer& b, std::span<std::byte> host) {
  if (host.empty()) return;
  if (host.size() > b.nbytes)
    throw Error("cuda download: " + std::to_string(host.size()) + " bytes from a buffer of " +
                std::to_string(b.nbytes));
  make_current();
  const auto src = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(b.handle));
  MBLAST_CU_CHECK(d_, d_.MemcpyDtoHAsync(host.data(), src, host.size(), stream_));
  MBLAST_CU_CHECK(d_, d_.StreamSynchronize(stream_));
}

void CudaDevice::download_range(const Buffer& b, size_t offset, std::span<std::byte> host) {
  if (host.empty()) return;
  if (offset > b.nbytes || host.size() > b.nbytes - offset) throw BackendError("download_range: past the buffer's end");
  make_current();
  const auto src = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(b.handle)) + offset;
  MBLAST_CU_CHECK(d_, d_.MemcpyDtoHAsync(host.data(), src, host.size(), stream_));
  MBLAST_CU_CHECK(d_, d_.StreamSynchronize(stream_));
}

void CudaDevice::fill(Buffer& b, std::byte value) {
  if (b.nbytes == 0) return;
  make_current();
  const auto dst = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(b.handle));
  MBLAST_CU_CHECK(d_, d_.MemsetD8Async(dst, static_cast<unsigned char>(value), b.nbytes, stream_));
  // Finished before the call: a candidate working on a non-blocking stream of its own must not
  // race the poison.
  MBLAST_CU_CHECK(d_, d_.StreamSynchronize(stream_));
}

bool CudaDevice::guards_intact(const Buffer& b) {
  auto* g = static_cast<Guarded*>(b.impl);
  if (!g) return true;
  make_current();
  std::vector<unsigned char> front(kGuard), back(kGuard);
  MBLAST_CU_CHECK(d_, d_.MemcpyDtoHAsync(front.data(), g->base, kGuard, stream_));
  MBLAST_CU_CHECK(d_, d_.MemcpyDtoHAsync(back.data(), g->base + kGuard + b.nbytes, kGuard, stream_));
  MBLAST_CU_CHECK(d_, d_.StreamSynchronize(stream_));
  auto ok = [](const std::vector<unsigned char>& v) {
    return std::all_of(v.begin(), v.end(), [](unsigned char x) { return x == kCanary; });
  };
  return ok(front) && ok(back);
}

void CudaDevice::synchronize() {
  CUcontext current = nullptr;
  d_.CtxGetCurrent(&current);
  make_current();
  MBLAST_CU_CHECK(d_, d_.CtxSynchronize());
  if (const std::string why = escaped_work(current); !why.empty()) throw BackendError(why);
}

std::string CudaDevice::health() {
  CUcontext current = nullptr;
  d_.CtxGetCurrent(&current);
  CUresult r = d_.CtxSetCurrent(ctx_);
  if (r == CUDA_SUCCESS) r = d_.CtxSynchronize();  // sticky errors (illegal address, ...) land here
  if (r != CUDA_SUCCESS) return d_.error_text(r);
  return escaped_work(current);
}

std::string CudaDevice::escaped_work(CUcontext current) {
  // Work in a context of the candidate's own is not waited for by cuCtxSynchronize on ours.
  if (current != nullptr && current != ctx_)
    return "the candidate left another CUDA context current (cuCtxCreate / cuCtxSetCurrent / cuCtxPushCurrent): "
           "work in it is outside the runner's synchronisation and clock";
  // A reset frees every allocation of the primary context: the sentinel made at open is gone
  // (or belongs to a new context), and with it the runner's buffers, stream and events.
  CUcontext owner = nullptr;
  if (d_.PointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, sentinel_) != CUDA_SUCCESS || owner != ctx_)
    return "the candidate reset or destroyed the device's context (cudaDeviceReset, cuDevicePrimaryCtxReset or "
           "cuCtxDestroy): the runner's buffers, stream and events are gone, so no time or output can be trusted";
  if (persisting_l2_) {
    size_t limit = 0;
    const CUresult r = d_.CtxGetLimit(&limit, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
    if (r != CUDA_SUCCESS) return "cannot read the persisting-L2 limit: " + d_.error_text(r);
    if (limit != 0)
      return "the candidate set a persisting-L2 limit of " + std::to_string(limit) +
             " bytes (cudaLimitPersistingL2CacheSize): lines it pins would stay in L2 across the cache flush "
             "between timed calls";
  }
  return "";
}

void CudaDevice::flush_caches() {
  make_current();
  if (!flush_buf_) {
    const size_t bytes = std::max<size_t>(2 * l2_bytes_, size_t{16} << 20);
    MBLAST_CU_CHECK(d_, d_.MemAlloc(&flush_buf_, bytes));
    flush_bytes_ = bytes;
  }
  // Lines a candidate marked persisting in an earlier call would survive the memset below.
  if (persisting_l2_) MBLAST_CU_CHECK(d_, d_.CtxResetPersistingL2Cache());
  // A different byte each time, so no write can be skipped as unchanged.
  MBLAST_CU_CHECK(d_, d_.MemsetD8Async(flush_buf_, static_cast<unsigned char>(++flush_count_), flush_bytes_, stream_));
  MBLAST_CU_CHECK(d_, d_.CtxSynchronize());
}

void CudaDevice::timer_begin() {
  make_current();
  MBLAST_CU_CHECK(d_, d_.EventRecord(start_, stream_));
}

double CudaDevice::timer_end() {
  CUcontext current = nullptr;
  d_.CtxGetCurrent(&current);
  make_current();
  // Device-wide first: work the candidate put on streams of its own (the legacy and per-thread
  // default streams, host functions, graphs) counts.
  MBLAST_CU_CHECK(d_, d_.CtxSynchronize());
  if (const std::string why = escaped_work(current); !why.empty()) throw BackendError(why);
  MBLAST_CU_CHECK(d_, d_.EventRecord(end_, stream_));
  MBLAST_CU_CHECK(d_, d_.EventSynchronize(end_));
  float ms = 0;
  MBLAST_CU_CHECK(d_, d_.EventElapsedTime(&ms, start_, end_));
  return static_cast<double>(ms) * 1e-3;
}

std::string CudaDevice::timing_method() {
  return "cuda events on the runner's stream: start event before the call; after it cuCtxSynchronize "
         "(device-wide, so work on any stream counts), then the end event and cuEventSynchronize; "
         "L2 flushed before each timed call by a memset of " +
         std::to_string(std::max<size_t>(2 * l2_bytes_, size_t{16} << 20) >> 20) +
         " MiB (2x L2) after cuCtxResetPersistingL2Cache; persisting-L2 limit 0, and a call that changes it, "
         "leaves another context current or resets the context is refused";
}

double CudaDevice::time_launch(CUfunction f, unsigned grid, unsigned block, void** args, int reps) {
  double best = 1e30;
  for (int r = -1; r < reps; ++r) {  // r == -1: warm-up (module load, clocks)
    MBLAST_CU_CHECK(d_, d_.EventRecord(start_, stream_));
    MBLAST_CU_CHECK(d_, d_.LaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream_, args, nullptr));
    MBLAST_CU_CHECK(d_, d_.EventRecord(end_, stream_));
    MBLAST_CU_CHECK(d_, d_.EventSynchronize(end_));
    float ms = 0;
    MBLAST_CU_CHECK(d_, d_.EventElapsedTime(&ms, start_, end_));
    if (r >= 0) best = std::min(best, static_cast<double>(ms) * 1e-3);
  }
  return best;
}

Peaks CudaDevice::measure_peaks() {
  make_current();
  MBLAST_CU_CHECK(d_, d_.CtxSynchronize());
  const Nvrtc& n = nvrtc();
  std::string how;
  const std::vector<char> image = compile_kernels(n, kPeakSource, "mblast_peaks.cu", cc_major_, cc_minor_, &how);
  CUmodule mod = nullptr;
  MBLAST_CU_CHECK(d_, d_.ModuleLoadData(&mod, image.data()));
  std::vector<CUdeviceptr> allocations;
  Defer cleanup([&] {
    d_.CtxSynchronize();
    for (CUdeviceptr p : allocations) d_.MemFree(p);
    d_.ModuleUnload(mod);
  });
  auto alloc = [&](size_t bytes) {
    CUdeviceptr p = 0;
    MBLAST_CU_CHECK(d_, d_.MemAlloc(&p, bytes));
    allocations.push_back(p);
    return p;
  };
  CUfunction copy = nullptr, fma = nullptr, fill_f32 = nullptr, fill_bf16 = nullptr;
  MBLAST_CU_CHECK(d_, d_.ModuleGetFunction(&copy, mod, "mblast_copy"));
  MBLAST_CU_CHECK(d_, d_.ModuleGetFunction(&fma, mod, "mblast_fma"));
  MBLAST_CU_CHECK(d_, d_.ModuleGetFunction(&fill_f32, mod, "mblast_fill_f32"));
  MBLAST_CU_CHECK(d_, d_.ModuleGetFunction(&fill_bf16, mod, "mblast_fill_bf16"));
  const unsigned fill_grid = static_cast<unsigned>(std::max(sm_count_, 1) * 32);
  auto fill_random = [&](CUfunction f, CUdeviceptr p, unsigned long long count, unsigned seed) {
    void* args[] = {&p, &count, &seed};
    MBLAST_CU_CHECK(d_, d_.LaunchKernel(f, fill_grid, 1, 1, 256, 1, 1, 0, stream_, args, nullptr));
  };

  // Bandwidth: a float4 copy between two buffers of up to 1 GiB (a quarter of free memory at most).
  size_t free_b = 0, total_b = 0;
  MBLAST_CU_CHECK(d_, d_.MemGetInfo(&free_b, &total_b));
  size_t bytes = std::min<size_t>(size_t{1} << 30, free_b / 4);
  bytes -= bytes % (16 * 256);
  if (bytes < (size_t{16} << 20))
    throw BackendError("too little free device memory to measure peaks (" + std::to_string(free_b >> 20) + " MiB)");
  CUdeviceptr src = alloc(bytes), dst = alloc(bytes);
  fill_random(fill_f32, src, bytes / 4, 1u);
  unsigned long long n4 = bytes / 16;
  void* copy_args[] = {&src, &dst, &n4};
  const double t_copy = time_launch(copy, static_cast<unsigned>(n4 / 256), 256, copy_args, 10);

  // fp32: kFmaChains independent fma chains of kFmaIters per thread, 64 blocks of 256 per SM.
  const unsigned fma_grid = static_cast<unsigned>(std::max(sm_count_, 1) * 64), fma_block = 256;
  CUdeviceptr out = alloc(size_t{fma_grid} * fma_block * sizeof(float));
  float fa = 0.9999f, fb = 0.0001f;
  void* fma_args[] = {&out, &fa, &fb};
  const double t_fma = time_launch(fma, fma_grid, fma_block, fma_args, 5);

  Peaks p;
  p.bandwidth_bytes_per_s = 2.0 * static_cast<double>(bytes) / t_copy;
  p.fp32_flops_per_s = 2.0 * kFmaChains * kFmaIters * static_cast<double>(fma_grid) * fma_block / t_fma;
  // Give the copy buffers back before the GEMMs take theirs.
  MBLAST_CU_CHECK(d_, d_.CtxSynchronize());
  for (CUdeviceptr a : allocations) MBLAST_CU_CHECK(d_, d_.MemFree(a));
  allocations.clear();

  std::string gemm_note;
  measure_gemm_peaks(p, gemm_note, fill_f32, fill_bf16);
  p.method = "cuda (" + how + ", cuda events): bandwidth = float4 copy of " + std::to_string(bytes >> 20) +
             " MiB, bytes read + written, best of 10; fp32 = " + std::to_string(kFmaChains) +
             " independent fmaf chains x " + std::to_string(kFmaIters) + " per thread, " + std::to_string(fma_grid) +
             " blocks x " + std::to_string(fma_block) + ", best of 5; " + gemm_note;
  return p;
}

void CudaDevice::load_digest_kernels() {
  if (digest_mod_) return;
  std::string how;
  const std::vector<char> image =
      compile_kernels(nvrtc(), kDigestSource, "mblast_digest.cu", cc_major_, cc_minor_, &how);
  MBLAST_CU_CHECK(d_, d_.ModuleLoadData(&digest_mod_, image.data()));
  MBLAST_CU_CHECK(d_, d_.ModuleGetFunction(&mix_fn_, digest_mod_, "mblast_mix"));
  MBLAST_CU_CHECK(d_, d_.ModuleGetFunction(&digest_fn_, digest_mod_, "mblast_digest"));
}

void CudaDevice::mix(Buffer& dst, const Buffer& a, const Buffer& b, std::span<const std::byte>,
                     std::span<const std::byte>, size_t elem_bytes, uint64_t key) {
  if (elem_bytes == 0 || dst.nbytes < elem_bytes) return;
  make_current();
  load_digest_kernels();
  CUdeviceptr d = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst.handle));
  CUdeviceptr pa = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(a.handle));
  CUdeviceptr pb = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(b.handle));
  unsigned long long n = dst.nbytes / elem_bytes, eb = elem_bytes, k = key;
  void* args[] = {&d, &pa, &pb, &n, &eb, &k};
  const unsigned grid =
      static_cast<unsigned>(std::min<unsigned long long>((n + 255) / 256, std::max(sm_count_, 1) * 32ull));
  // Only enqueued: the worker synchronises once after every input is mixed and every output
  // poisoned (a synchronisation per buffer was most of a small kernel's per-call cost).
  MBLAST_CU_CHECK(d_, d_.LaunchKernel(mix_fn_, grid, 1, 1, 256, 1, 1, 0, stream_, args, nullptr));
}

void CudaDevice::poison(Buffer& b, std::byte value) {
  if (b.nbytes == 0) return;
  make_current();
  const auto dst = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(b.handle));
  MBLAST_CU_CHECK(d_, d_.MemsetD8Async(dst, static_cast<unsigned char>(value), b.nbytes, stream_));
}

// Enqueues one digest per buffer (with its guards when CHECK_GUARDS) into three 64-bit sums
// each, then copies them all back in one round trip.
std::vector<std::array<unsigned long long, 3>> CudaDevice::run_digests(std::span<const Buffer> bufs,
                                                                       std::span<const size_t> elem_bytes,
                                                                       std::byte poison, bool check_guards) {
  make_current();
  load_digest_kernels();
  const size_t bytes = 3 * sizeof(unsigned long long) * bufs.size();
  if (bytes > digest_out_bytes_) {
    if (digest_out_) MBLAST_CU_CHECK(d_, d_.MemFree(digest_out_));
    digest_out_ = 0;
    MBLAST_CU_CHECK(d_, d_.MemAlloc(&digest_out_, bytes));
    digest_out_bytes_ = bytes;
  }
  std::vector<std::array<unsigned long long, 3>> sums(bufs.size());
  if (bufs.empty()) return sums;
  MBLAST_CU_CHECK(d_, d_.MemsetD8Async(digest_out_, 0, bytes, stream_));
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Buffer& b = bufs[i];
    const auto* g = static_cast<const Guarded*>(b.impl);
    CUdeviceptr p = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(b.handle));
    CUdeviceptr out = digest_out_ + 3 * sizeof(unsigned long long) * i;
    CUdeviceptr front = g ? g->base : p, back = g ? g->base + kGuard + b.nbytes : p;
    unsigned long long nbytes = b.nbytes, eb = elem_bytes[i], guard = (check_guards && g) ? kGuard : 0;
    unsigned pz = static_cast<unsigned>(poison), canary = kCanary;
    void* args[] = {&p, &nbytes, &eb, &pz, &out, &front, &back, &guard, &canary};
    const unsigned long long words = std::max<unsigned long long>((nbytes + 3) / 4, guard);
    const unsigned grid =
        static_cast<unsigned>(std::clamp<unsigned long long>((words + 255) / 256, 1, std::max(sm_count_, 1) * 32ull));
    if (nbytes > 0 || guard > 0)
      MBLAST_CU_CHECK(d_, d_.LaunchKernel(digest_fn_, grid, 1, 1, 256, 1, 1, 0, stream_, args, nullptr));
  }
  MBLAST_CU_CHECK(d_, d_.MemcpyDtoHAsync(sums.data(), digest_out_, bytes, stream_));
  MBLAST_CU_CHECK(d_, d_.StreamSynchronize(stream_));
  return sums;
}

OutputDigest CudaDevice::digest(const Buffer& b, size_t elem_bytes, std::byte poison) {
  const auto sums = run_digests(std::span(&b, 1), std::span(&elem_bytes, 1), poison, false);
  return OutputDigest{sums[0][0], sums[0][1]};
}

Device::OutputsCheck CudaDevice::check_outputs(std::span<Buffer> outs, std::span<const size_t> elem_bytes,
                                               std::byte poison) {
  OutputsCheck c;
  c.health = health();  // synchronises the device: a sticky error of the call lands here
  if (!c.health.empty()) return c;
  const auto sums = run_digests(outs, elem_bytes, poison, true);
  for (size_t i = 0; i < sums.size(); ++i)
    if (sums[i][2] != 0) {
      c.broken_guard = static_cast<int>(i);
      return c;
    }
  for (const auto& s : sums) c.digests.push_back(OutputDigest{s[0], s[1]});
  return c;
}

void CudaDevice::measure_gemm_peaks(Peaks& p, std::string& note, CUfunction fill_f32, CUfunction fill_bf16) {
  std::string why;
  const Cublas* cb = cublas(&why);
  if (!cb) {
    note = "tf32/bf16 not measured: " + why;
    return;
  }
  const int n = 8192;
  const size_t elems = size_t{n} * n;
  size_t free_b = 0, total_b = 0;
  MBLAST_CU_CHECK(d_, d_.MemGetInfo(&free_b, &total_b));
  if (free_b < 3 * elems * sizeof(float) + (size_t{512} << 20)) {
    note = "tf32/bf16 not measured: " + std::to_string(free_b >> 20) + " MiB free is too little for 8192^3 GEMMs";
    return;
  }
  std::vector<CUdeviceptr> allocations;
  cublas_handle h = nullptr;
  Defer cleanup([&] {
    d_.CtxSynchronize();
    if (h) cb->Destroy(h);
    for (CUdeviceptr a : allocations) d_.MemFree(a);
  });
  for (int i = 0; i < 3; ++i) {
    CUdeviceptr a = 0;
    MBLAST_CU_CHECK(d_, d_.MemAlloc(&a, elems * sizeof(float)));
    allocations.push_back(a);
  }
  CUdeviceptr A = allocations[0], B = allocations[1], C = allocations[2];

  // Random operands in [-1, 1) (zeros would flatter the tensor cores' power draw).
  const unsigned fill_grid = static_cast<unsigned>(std::max(sm_count_, 1) * 32);
  auto fill = [&](CUfunction f, CUdeviceptr ptr, unsigned seed) {
    unsigned long long count = elems;
    void* args[] = {&ptr, &count, &seed};
    MBLAST_CU_CHECK(d_, d_.LaunchKernel(f, fill_grid, 1, 1, 256, 1, 1, 0, stream_, args, nullptr));
  };

  const cublas_status cs = cb->Create(&h);
  if (cs != 0) {
    h = nullptr;
    note = "tf32/bf16 not measured: cublasCreate failed: " + cb->error_text(cs);
    return;
  }
  MBLAST_CUBLAS_CHECK(*cb, cb->SetStream(h, stream_));
  const float alpha = 1.0f, beta = 0.0f;
  // Best of 5 after 2 warm-ups; flops = 2 n^3 / t. Returns 0 and notes why on a cuBLAS error.
  auto best_gemm = [&](int data_type, int compute_type, const char* label) -> double {
    double best = 1e30;
    for (int r = -2; r < 5; ++r) {
      MBLAST_CU_CHECK(d_, d_.EventRecord(start_, stream_));
      const cublas_status s = cb->GemmEx(h, kCublasOpN, kCublasOpN, n, n, n, &alpha, reinterpret_cast<const void*>(A),
                                         data_type, n, reinterpret_cast<const void*>(B), data_type, n, &beta,
                                         reinterpret_cast<void*>(C), data_type, n, compute_type, kCublasGemmDefault);
      if (s != 0) {
        note += std::string(label) + " GEMM failed: " + cb->error_text(s) + "; ";
        return 0;
      }
      MBLAST_CU_CHECK(d_, d_.EventRecord(end_, stream_));
      MBLAST_CU_CHECK(d_, d_.EventSynchronize(end_));
      float ms = 0;
      MBLAST_CU_CHECK(d_, d_.EventElapsedTime(&ms, start_, end_));
      if (r >= 0) best = std::min(best, static_cast<double>(ms) * 1e-3);
    }
    return 2.0 * static_cast<double>(n) * n * n / best;
  };
  fill(fill_f32, A, 11u);
  fill(fill_f32, B, 12u);
  p.tf32_flops_per_s = best_gemm(kCudaR32F, kCublasCompute32FFastTF32, "tf32");
  fill(fill_bf16, A, 13u);
  fill(fill_bf16, B, 14u);
  p.bf16_flops_per_s = best_gemm(kCudaR16BF, kCublasCompute32F, "bf16");
  note +=
      "tf32 = cublasGemmEx 8192^3, fp32 data with CUBLAS_COMPUTE_32F_FAST_TF32; bf16 = cublasGemmEx 8192^3, bf16 "
      "data with CUBLAS_COMPUTE_32F; random operands in [-1, 1), best of 5 after 2 warm-ups, 2*M*N*K / t (" +
      cb->library + ")";
}

}  // namespace mblast::runner::cuda
