#include "output_look.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace mblast::runner {
namespace {

constexpr size_t kWindowBytes = 4096;

// Unpredictable words from the kernel (getrandom). The candidate can read every byte of the
// worker's memory, so a generator kept there would be no secret.
std::vector<uint64_t> random_words(size_t n) {
  std::vector<uint64_t> w(n);
  auto* p = reinterpret_cast<unsigned char*>(w.data());
  size_t got = 0;
  while (got < n * sizeof(uint64_t)) {
    const ssize_t r = ::getrandom(p + got, n * sizeof(uint64_t) - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw BackendError("getrandom failed: no unpredictable offset for the outputs' second look");
    }
    got += static_cast<size_t>(r);
  }
  return w;
}

}  // namespace

std::vector<OutputWindow> look_at_outputs(Device& dev, std::span<const Buffer> outs) {
  const std::vector<uint64_t> r = random_words(outs.size());
  std::vector<OutputWindow> looks(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const size_t n = std::min(kWindowBytes, outs[i].nbytes);
    if (n == 0) continue;
    looks[i].offset = static_cast<size_t>(r[i] % (outs[i].nbytes - n + 1));
    looks[i].bytes.resize(n);
    dev.download_range(outs[i], looks[i].offset, looks[i].bytes);
  }
  return looks;
}

int changed_output(Device& dev, std::span<const Buffer> outs, std::span<const OutputWindow> first) {
  std::vector<std::byte> now;
  for (size_t i = 0; i < outs.size() && i < first.size(); ++i) {
    if (first[i].bytes.empty()) continue;
    now.resize(first[i].bytes.size());
    dev.download_range(outs[i], first[i].offset, now);
    if (!std::equal(now.begin(), now.end(), first[i].bytes.begin())) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace mblast::runner
