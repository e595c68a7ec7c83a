#include "mblast/cache_evict.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace mblast {

namespace {

struct Range {
  uintptr_t begin = 0, end = 0;
};
Range g_skip;

#if defined(__x86_64__)
constexpr size_t kLine = 64;

bool has_clflushopt() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23));
}

bool has_clflush() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (d & (1u << 19));
}

__attribute__((target("clflushopt"))) void flush_lines_opt(uintptr_t begin, uintptr_t end) {
  for (uintptr_t p = begin; p < end; p += kLine) _mm_clflushopt(reinterpret_cast<void*>(p));
}

void flush_lines(uintptr_t begin, uintptr_t end) {
  for (uintptr_t p = begin; p < end; p += kLine) _mm_clflush(reinterpret_cast<void*>(p));
}

// The mappings a call's data can live in, from /proc/self/maps: every readable one that is
// writable or anonymous (memory made read-only after it was written is data too), less device
// files and the kernel's [vvar]/[vdso]/[vsyscall]. Files mapped read-only (code, constants) are
// left alone: they are not a call's data.
std::vector<Range> data_mappings() {
  std::vector<Range> out;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long b = 0, e = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &b, &e, perms, &path_at) < 3) continue;
    const char* path = path_at > 0 ? line + path_at : "";
    const bool anonymous = path[0] == '\0' || path[0] == '\n' || (path[0] == '[' && std::strncmp(path, "[v", 2) != 0);
    if (perms[0] != 'r' || (perms[1] != 'w' && !anonymous)) continue;
    if (std::strncmp(path, "/dev/", 5) == 0 || std::strncmp(path, "[v", 2) == 0)
      continue;  // device memory, kernel pages
    out.push_back({b, e});
  }
  std::fclose(f);
  return out;
}
#endif

}  // namespace

bool eviction_available() {
#if defined(__x86_64__)
  static const bool ok = (has_clflushopt() || has_clflush()) && ::access("/proc/self/maps", R_OK) == 0;
  return ok;
#else
  return false;
#endif
}

bool prefer_eviction(size_t cache_bytes) { return 2 * cache_bytes > (size_t{256} << 20) && eviction_available(); }

void skip_in_eviction(std::span<const std::byte> host) {
  const auto b = reinterpret_cast<uintptr_t>(host.data());
  g_skip = {b, b + host.size()};
}

std::optional<EvictResult> evict_process_data() {
#if defined(__x86_64__)
  if (!eviction_available()) return std::nullopt;
  static const bool opt = has_clflushopt();
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::vector<Range> maps = data_mappings();
  if (maps.empty()) return std::nullopt;
  EvictResult r;
  constexpr size_t kChunkPages = 16384;
  std::vector<unsigned char> resident(kChunkPages);
  auto flush_range = [&](uintptr_t b, uintptr_t e) {
    if (b >= e) return;
    (opt ? flush_lines_opt : flush_lines)(b, e);
    r.bytes += e - b;
  };
  // A run of resident pages, less the skipped range.
  auto flush = [&](uintptr_t b, uintptr_t e) {
    if (g_skip.begin < g_skip.end && b < g_skip.end && g_skip.begin < e) {
      flush_range(b, std::max(b, g_skip.begin - g_skip.begin % kLine));
      flush_range(std::min(e, g_skip.end - g_skip.end % kLine), e);
      return;
    }
    flush_range(b, e);
  };
  for (const Range& m : maps) {
    ++r.regions;
    for (uintptr_t at = m.begin; at < m.end;) {
      const size_t pages = std::min<size_t>(kChunkPages, (m.end - at) / page);
      if (::mincore(reinterpret_cast<void*>(at), pages * page, resident.data()) != 0) break;  // unmapped since
      // Runs of resident pages, flushed a run at a time.
      for (size_t i = 0; i < pages;) {
        if (!(resident[i] & 1)) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < pages && (resident[j] & 1)) ++j;
        flush(at + i * page, at + j * page);
        i = j;
      }
      at += pages * page;
    }
  }
  if (opt) _mm_sfence();
  return r;
#else
  return std::nullopt;
#endif
}

}  // namespace mblast

extern "C" int mblast_eviction_available(void) { return mblast::eviction_available() ? 1 : 0; }

extern "C" int mblast_prefer_eviction(unsigned long long cache_bytes) {
  return mblast::prefer_eviction(static_cast<size_t>(cache_bytes)) ? 1 : 0;
}

extern "C" int mblast_evict_process_data(unsigned long long* bytes) {
  const auto r = mblast::evict_process_data();
  if (!r) return -1;
  if (bytes) *bytes = r->bytes;
  return 0;
}

extern "C" double mblast_busy_after_eviction(void) { return mblast::kBusyAfterEviction; }
