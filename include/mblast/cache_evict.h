// Cold caches for a CPU by eviction instead of a sweep.
//
// Before each timed call the caches must hold nothing of the call's data. A sweep (read and
// write a buffer twice the size of the largest cache) does that at a cost that grows with the
// cache, not the problem (on a VM that reports a huge L3, far more than a small call), and what
// it leaves behind (its own dirty lines, a thrashed TLB) slows the call after it
// (benchmarks/results/measurement-design-figures.json, eviction-instead-of-sweep). Eviction
// writes back and drops every cache line of this process's resident data memory (CLFLUSHOPT acts
// on every cache level of every core): the next call reads its inputs, parameters, temporaries
// and outputs from memory. It costs what the process holds, a few ns a line.
//
// Both sides of a comparison use it where it is available: the runner's worker for an OpenCL
// CPU device, and the PyTorch baseline on the CPU through the C functions below. Each then keeps
// its own threads computing for kBusyAfterEviction seconds, touching no memory (OpenclDevice::keep_busy, the
// baseline's _Timer.flush), so the call starts on a CPU that was just working, as after a sweep.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

namespace mblast {

// Seconds of arithmetic on the device's (or PyTorch's) threads after each eviction. Eviction
// alone left pocl's threads idle while the host walked memory, and the next kernel ran slower
// than after a sweep: the woken threads shared one CPU, which the runner now prevents by pinning
// them (OpenclBackend::worker_environment). Pinned, a short busy phase still matters: without
// one the spread within an eval doubled, and a long one slowed PyTorch's next op, which inflated
// every speedup (benchmarks/results/measurement-design-figures.json, busy-phase-after-eviction).
inline constexpr double kBusyAfterEviction = 0.005;

struct EvictResult {
  size_t bytes = 0;    // resident bytes whose lines were flushed
  size_t regions = 0;  // mappings visited
};

// x86-64 with CLFLUSHOPT or CLFLUSH, and /proc/self/maps readable.
bool eviction_available();

// The rule both sides apply when the target leaves the choice open (device.cache_flush "auto"):
// evict where available and a sweep would move more than 256 MiB (twice `cache_bytes`);
// otherwise sweep, which on a cache of tens of MiB costs a few ms, less than the eviction's
// busy time, and is what every figure before 2026-12-05 used.
bool prefer_eviction(size_t cache_bytes);

// Host memory that need not be flushed because no timed call touches it (the request payload a
// worker keeps): flushing it only costs time. Process-wide; a later call replaces it.
void skip_in_eviction(std::span<const std::byte> host);

// Flushes the lines of every resident page of every readable mapping that is writable or
// anonymous (device files under /dev and the kernel's [vvar]/[vdso] excepted; files mapped
// read-only, such as code, are not data). Nothing else in the process may map or unmap memory
// meanwhile.
// nullopt when eviction is not available.
std::optional<EvictResult> evict_process_data();

}  // namespace mblast

// The same for a process that is not C++ (the PyTorch baseline loads libmblast_evict.so with
// ctypes).
extern "C" {
// 1 when eviction_available(), else 0.
int mblast_eviction_available(void);
// 1 when prefer_eviction(cache_bytes), else 0.
int mblast_prefer_eviction(unsigned long long cache_bytes);
// 0 after an eviction (the bytes flushed in *bytes when not null), -1 when not available.
int mblast_evict_process_data(unsigned long long* bytes);
// kBusyAfterEviction.
double mblast_busy_after_eviction(void);
}
