// The rvv Device (see rvv_device.h). Built for riscv64 only.
#include "rvv_device.h"

#include <unistd.h>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

#include "region_markers.h"

// The two marker functions: one instruction and a return each, so every region opens and
// closes at one address that the runner finds in the program's symbol table.
__asm__(
    ".text\n"
    ".p2align 2\n"
    ".globl mblast_rvv_region_begin\n"
    ".type mblast_rvv_region_begin, @function\n"
    "mblast_rvv_region_begin:\n"
    "  " MBLAST_REGION_BEGIN_ASM
    "\n"
    "  ret\n"
    ".size mblast_rvv_region_begin, . - mblast_rvv_region_begin\n"
    ".p2align 2\n"
    ".globl mblast_rvv_region_end\n"
    ".type mblast_rvv_region_end, @function\n"
    "mblast_rvv_region_end:\n"
    "  " MBLAST_REGION_END_ASM
    "\n"
    "  ret\n"
    ".size mblast_rvv_region_end, . - mblast_rvv_region_end\n");

namespace mblast::runner::rvv {

namespace {

using nlohmann::json;

constexpr size_t kGuard = 4096;  // bytes on each side; a multiple of 64 keeps the data aligned
constexpr std::byte kCanary{0xA5};

struct Block {
  std::byte* base = nullptr;  // kGuard | nbytes | kGuard
  size_t nbytes = 0;
};

sigjmp_buf g_probe_jmp;
void on_probe_sigill(int) { siglongjmp(g_probe_jmp, 1); }

// Runs fn() with SIGILL caught; false when it trapped.
template <class F>
bool try_instruction(F fn) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = on_probe_sigill;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGILL, &sa, &old);
  bool ok = false;
  if (sigsetjmp(g_probe_jmp, 1) == 0) {
    fn();
    ok = true;
  }
  sigaction(SIGILL, &old, nullptr);
  return ok;
}

inline uint64_t read_cycles() {
  uint64_t c;
  __asm__ volatile("rdcycle %0" : "=r"(c));
  return c;
}

double wall_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string cpuinfo_field(const char* key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

}  // namespace

HartInfo probe_hart() {
  HartInfo h;
  uint64_t vlenb = 0;
  // csrr vlenb is illegal without V; the assembler needs V enabled for the CSR name.
  h.has_vector = try_instruction([&] {
    __asm__ volatile(".option push\n.option arch, +v\ncsrr %0, vlenb\n.option pop" : "=r"(vlenb));
  });
  h.vlen_bits = h.has_vector ? static_cast<int>(vlenb * 8) : 0;
  uint64_t c = 0;
  h.cycles_readable = try_instruction([&] { c = read_cycles(); });
  if (!h.cycles_readable) h.cycles_note = "rdcycle traps in user mode here (e.g. Linux perf_user_access = 0)";
  (void)c;
  return h;
}

RvvDevice::RvvDevice(const json& target) : target_(target) {
  const json exec = target.value("execution", json::object());
  qemu_ = exec.value("kind", "qemu") != "native";
  hart_ = probe_hart();
  const json arch = target.value("arch", json::object());
  const int want = arch.value("vlen", 0);
  if (!hart_.has_vector)
    throw BackendError("this hart has no V extension (csrr vlenb traps)" +
                       std::string(qemu_ ? ": qemu was started without v=true" : ""));
  if (want > 0 && want != hart_.vlen_bits)
    throw BackendError("the target declares VLEN " + std::to_string(want) + " but the hart has VLEN " +
                       std::to_string(hart_.vlen_bits));
  if (!qemu_) flush_buf_.resize(32u << 20);
}

RvvDevice::~RvvDevice() {
  if (timed_) write_cycles_file();
}

mblast_context RvvDevice::context() {
  mblast_context c{};
  c.abi_version = MBLAST_ABI_VERSION;
  c.backend = MBLAST_BACKEND_RVV;
  c.rvv_vlen = hart_.vlen_bits;
  return c;
}

json RvvDevice::describe() {
  const json arch = target_.value("arch", json::object());
  json d = {{"vendor", "RISC-V"},
            {"vlen_bits", hart_.vlen_bits},
            {"march", arch.value("march", "")},
            {"execution", qemu_ ? "qemu" : "native"}};
  if (qemu_) {
    d["name"] = "qemu-riscv64 rv64 V 1.0, VLEN " + std::to_string(hart_.vlen_bits);
    d["timing"] = "dynamic instruction counts (QEMU TCG plugin)";
  } else {
    std::string model = cpuinfo_field("uarch");
    if (model.empty()) model = cpuinfo_field("model name");
    if (model.empty()) model = "riscv64 hart";
    d["name"] = model + ", VLEN " + std::to_string(hart_.vlen_bits);
    d["isa"] = cpuinfo_field("isa");
    d["cycles_readable"] = hart_.cycles_readable;
    d["cpus"] = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  }
  return d;
}

Buffer RvvDevice::allocate(size_t nbytes) {
  void* p = nullptr;
  if (::posix_memalign(&p, 64, nbytes + 2 * kGuard) != 0 || !p)
    throw BackendError("cannot allocate " + std::to_string(nbytes) + " bytes of host memory");
  auto* blk = new Block{static_cast<std::byte*>(p), nbytes};
  std::memset(blk->base, static_cast<int>(kCanary), kGuard);
  std::memset(blk->base + kGuard + nbytes, static_cast<int>(kCanary), kGuard);
  Buffer b;
  b.handle = blk->base + kGuard;
  b.nbytes = nbytes;
  b.impl = blk;
  return b;
}

void RvvDevice::release(Buffer& b) {
  auto* blk = static_cast<Block*>(b.impl);
  if (blk) {
    std::free(blk->base);
    delete blk;
  }
  b = Buffer{};
}

void RvvDevice::upload(Buffer& b, std::span<const std::byte> host) {
  if (host.size() != b.nbytes) throw BackendError("upload: size mismatch");
  std::memcpy(b.handle, host.data(), host.size());
}

void RvvDevice::download(const Buffer& b, std::span<std::byte> host) {
  if (host.size() != b.nbytes) throw BackendError("download: size mismatch");
  std::memcpy(host.data(), b.handle, host.size());
}

void RvvDevice::download_range(const Buffer& b, size_t offset, std::span<std::byte> host) {
  if (offset > b.nbytes || host.size() > b.nbytes - offset) throw BackendError("download_range: past the buffer's end");
  std::memcpy(host.data(), static_cast<const std::byte*>(b.handle) + offset, host.size());
}

void RvvDevice::fill(Buffer& b, std::byte value) { std::memset(b.handle, static_cast<int>(value), b.nbytes); }

bool RvvDevice::guards_intact(const Buffer& b) {
  const auto* blk = static_cast<const Block*>(b.impl);
  const std::byte* tail = blk->base + kGuard + blk->nbytes;
  for (size_t i = 0; i < kGuard; ++i)
    if (blk->base[i] != kCanary || tail[i] != kCanary) return false;
  return true;
}

void RvvDevice::flush_caches() {
  // Under QEMU there is no cache model: nothing to flush (and the count must not include it).
  if (qemu_) return;
  volatile std::byte* p = flush_buf_.data();
  for (size_t i = 0; i < flush_buf_.size(); i += 64) p[i] = static_cast<std::byte>(static_cast<unsigned>(p[i]) + 1u);
}

void RvvDevice::timer_begin() {
  if (qemu_) {
    mblast_rvv_region_begin();
    return;
  }
  timed_ = true;
  if (hart_.cycles_readable) c0_ = read_cycles();
  t0_ = wall_s();
}

double RvvDevice::timer_end() {
  if (qemu_) {
    mblast_rvv_region_end();
    return 1.0;  // placeholder; the runner puts the region's instruction count here
  }
  const double t = wall_s() - t0_;
  if (hart_.cycles_readable) cycles_.push_back(read_cycles() - c0_);
  return t;
}

std::string RvvDevice::timing_method() {
  if (qemu_) return "qemu-user TCG plugin: dynamic instructions between region markers around each call";
  return std::string("clock_gettime(CLOCK_MONOTONIC) around each call") +
         (hart_.cycles_readable ? "; rdcycle deltas in cost" : "; " + hart_.cycles_note);
}

Peaks RvvDevice::measure_peaks() {
  Peaks p;
  if (qemu_) {
    p.method = "qemu: instruction counts, no speed-of-light model";
    return p;
  }
  p.bandwidth_bytes_per_s = rvv_copy_bandwidth();
  p.fp32_flops_per_s = rvv_fma_flops();
  p.method =
      "one hart: copy loop over 64 MiB (bytes read + written) and an FMA loop on registers "
      "(RVV where the worker was built with the intrinsics)";
  return p;
}

void RvvDevice::write_cycles_file() {
  json j = {{"cycles", cycles_}};
  if (!hart_.cycles_readable) j["note"] = hart_.cycles_note;
  const std::string tmp = "rvv_cycles.json.tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    const std::string s = j.dump();
    std::fwrite(s.data(), 1, s.size(), f);
    if (std::fclose(f) == 0) std::rename(tmp.c_str(), "rvv_cycles.json");
  }
}

}  // namespace mblast::runner::rvv
