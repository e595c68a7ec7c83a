// Cold caches for a CPU by eviction instead of a sweep.
//
// Before each timed call the caches must hold nothing of the call's data. A sweep (read and
// write a buffer twice the size of the largest cache) does not do that reliably: a last-level
// cache that protects reused lines from a streaming pass kept part of a pocl-cpu candidate's
// rotating buffers through a sweep of twice its 480 MiB (the candidate then ran 1.6x faster
// than with its data flushed line by line), and the sweep's cost grows with the cache, not the
// problem (80 ms before every call there, even before a 4 ms one). Eviction writes back and
// drops every cache line of this process's resident writable memory (CLFLUSHOPT acts on every
// cache level of every core): the next call reads its inputs, parameters, temporaries and
// outputs from memory. It costs what the process holds, about 2.6 ns a line.
//
// Both sides of a comparison use it where it is available: the runner's worker for an OpenCL
// CPU device, and the PyTorch baseline on the CPU through the C functions below.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

namespace mblast {

struct EvictResult {
  size_t bytes = 0;    // resident bytes whose lines were flushed
  size_t regions = 0;  // mappings visited
};

// x86-64 with CLFLUSHOPT or CLFLUSH, and /proc/self/maps readable.
bool eviction_available();

// Host memory that need not be flushed because no timed call touches it (the request payload a
// worker keeps): flushing it only costs time. Process-wide; a later call replaces it.
void skip_in_eviction(std::span<const std::byte> host);

// Flushes the lines of every resident page of every readable and writable mapping (device files
// under /dev excepted). Nothing else in the process may map or unmap memory meanwhile.
// nullopt when eviction is not available.
std::optional<EvictResult> evict_process_data();

}  // namespace mblast

// The same for a process that is not C++ (the PyTorch baseline loads libmblast_evict.so with
// ctypes).
extern "C" {
// 1 when eviction_available(), else 0.
int mblast_eviction_available(void);
// 0 after an eviction (the bytes flushed in *bytes when not null), -1 when not available.
int mblast_evict_process_data(unsigned long long* bytes);
}
