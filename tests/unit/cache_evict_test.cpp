// Cold caches by eviction (mblast/cache_evict.h): what is flushed, what is skipped, and that an
// evicted buffer is read from memory again.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "mblast/cache_evict.h"

namespace mblast {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

TEST(CacheEvict, FlushesResidentMemoryButNotTheSkippedRange) {
  if (!eviction_available()) GTEST_SKIP() << "eviction is not available here (x86-64 with CLFLUSH and /proc/self/maps)";
  const size_t n = size_t{64} << 20;
  void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  std::memset(m, 1, n);  // resident
  const auto all = evict_process_data();
  ASSERT_TRUE(all.has_value());
  EXPECT_GE(all->bytes, n);
  EXPECT_GT(all->regions, 0u);
  skip_in_eviction({static_cast<const std::byte*>(m), n});
  const auto less = evict_process_data();
  skip_in_eviction({});
  ASSERT_TRUE(less.has_value());
  EXPECT_GE(all->bytes, less->bytes + n - (size_t{4} << 20)) << "the skipped 64 MiB were flushed anyway";
  // Data made read-only after it was written is still data (a candidate cannot hide a table of
  // results from the flush with mprotect).
  ASSERT_EQ(::mprotect(m, n, PROT_READ), 0);
  const auto read_only = evict_process_data();
  ASSERT_TRUE(read_only.has_value());
  EXPECT_GE(read_only->bytes, n);
  EXPECT_GE(read_only->bytes + (size_t{4} << 20), all->bytes) << "the read-only 64 MiB were not flushed";
  // Pages never touched are not resident: nothing to flush there.
  void* untouched = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(untouched, MAP_FAILED);
  const auto with_untouched = evict_process_data();
  ASSERT_TRUE(with_untouched.has_value());
  EXPECT_LT(with_untouched->bytes, all->bytes + (size_t{16} << 20));
  ::munmap(untouched, n);
  ::munmap(m, n);
}

// A buffer that fits the cache reads much faster warm than after eviction: the eviction reached
// the caches. The reads chase a random cycle through the buffer's cache lines, so that no
// prefetcher hides memory's latency (a sequential sum of 256 KiB ran as fast from memory as from
// L2 on one CI VM: 9.8 against 8.9 us). The fastest of many reads each way, so another process's
// noise does not decide it.
TEST(CacheEvict, AnEvictedBufferIsReadFromMemory) {
  if (!eviction_available()) GTEST_SKIP() << "eviction is not available here (x86-64 with CLFLUSH and /proc/self/maps)";
  constexpr size_t kLine = 64 / sizeof(uint64_t);  // words in a cache line
  const size_t lines = (size_t{256} << 10) / 64;   // 256 KiB: inside any L2
  std::vector<uint64_t> buf(lines * kLine, 0);
  // Line order[i] points to line order[i + 1]: one cycle through every line, in a fixed random order.
  std::vector<size_t> order(lines);
  for (size_t i = 0; i < lines; ++i) order[i] = i;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (size_t i = lines - 1; i > 0; --i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    std::swap(order[i], order[state % (i + 1)]);
  }
  for (size_t i = 0; i < lines; ++i) buf[order[i] * kLine] = order[(i + 1) % lines] * kLine;
  auto chase = [&]() {
    uint64_t at = order[0] * kLine;
    for (size_t i = 0; i < lines; ++i) at = buf[at];
    return at;
  };
  volatile uint64_t sink = 0;
  double warm = 1e30, cold = 1e30;
  for (int r = 0; r < 30; ++r) {
    sink = sink + chase();
    double t0 = now_s();
    sink = sink + chase();
    warm = std::min(warm, now_s() - t0);
    ASSERT_TRUE(evict_process_data().has_value());
    t0 = now_s();
    sink = sink + chase();
    cold = std::min(cold, now_s() - t0);
  }
  EXPECT_GT(cold, 1.5 * warm) << "warm " << warm * 1e6 << " us, after eviction " << cold * 1e6 << " us";
}

}  // namespace
}  // namespace mblast
