// The OpenCL Device's own checks, on any OpenCL device (PoCL here; skipped, with the reason, where there is none):
//   - mix() and digest() on the device give the host functions' results (mblast/digest.h) bit
//     for bit, for every element size and for sizes that end in a partial word;
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "mblast/digest.h"
#include "mblast/runner/backend.h"

namespace mblast::runner {
namespace {

// where: the target's device.digest ("device": the kernels even on a CPU device such as PoCL).
std::unique_ptr<Device> open_opencl(std::string* why, const char* where = "device") {
  Backend* b = find_backend("opencl");
  if (!b) {
    *why = "the opencl backend is not compiled in";
    return nullptr;
  }
  try {
    return b->open(nlohmann::json{{"name", "opencl-device-test"}, {"device", {{"type", "any"}, {"digest", where}}}});
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& x : v) x = static_cast<std::byte>(rng() & 0xFF);
  return v;
}

TEST(OpenclDevice, MixAndDigestMatchTheHost) {
  std::string why;
  auto dev = open_opencl(&why);
  if (!dev) GTEST_SKIP() << "no OpenCL device: " << why;
  const std::byte poison{0xFF};
  for (size_t elem : {1u, 2u, 4u, 8u, 12u}) {
    for (size_t count : {1u, 7u, 64u, 65u, 1000u, 262147u}) {
      SCOPED_TRACE("elem_bytes " + std::to_string(elem) + ", elements " + std::to_string(count));
      const size_t n = elem * count;
      auto ha = random_bytes(n, 1), hb = random_bytes(n, 2);
      // Some elements poisoned in a, so the poison count is not trivially zero.
      for (size_t e = 0; e < count; e += 5) std::fill_n(ha.begin() + static_cast<long>(e * elem), elem, poison);
      Buffer a = dev->allocate(n), b = dev->allocate(n), d = dev->allocate(n);
      dev->upload(a, ha);
      dev->upload(b, hb);
      for (uint64_t key : {0ull, 1ull, 0x123456789ABCDEFull}) {
        dev->mix(d, a, b, ha, hb, elem, key);
        std::vector<std::byte> want(n), got(n);
        mix_host(want, ha, hb, elem, key);
        dev->download(d, got);
        ASSERT_EQ(got, want) << "mix differs for key " << key;
        EXPECT_EQ(dev->digest(d, elem, poison), output_digest(want, elem, poison)) << "digest differs for key " << key;
      }
      // A partial last word: the digest of n - 1 bytes of the same buffer is not computable
      // through a Buffer of n, so one of odd size is digested on its own.
      Buffer odd = dev->allocate(n + 3);
      auto ho = random_bytes(n + 3, 3);
      dev->upload(odd, ho);
      EXPECT_EQ(dev->digest(odd, elem, poison), output_digest(ho, elem, poison));
      for (Buffer* x : {&a, &b, &d, &odd}) dev->release(*x);
    }
  }
}

// What the device versions cost against the host defaults, for the figures (not a check):
//   build/backends/opencl/mblast_opencl_device_tests --gtest_also_run_disabled_tests --gtest_filter='*Cost*'
TEST(OpenclDevice, DISABLED_CostAgainstTheHostDefaults) {
  std::string why;
  auto dev = open_opencl(&why);
  if (!dev) GTEST_SKIP() << "no OpenCL device: " << why;
  const size_t n = size_t{4} << 20;  // 1 Mi f32
  auto ha = random_bytes(n, 1), hb = random_bytes(n, 2);
  Buffer a = dev->allocate(n), b = dev->allocate(n), d = dev->allocate(n);
  dev->upload(a, ha);
  dev->upload(b, hb);
  auto seconds = [](auto f) {
    f();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 10;
  };
  std::vector<std::byte> scratch(n);
  const double dev_mix = seconds([&] { dev->mix(d, a, b, ha, hb, 4, 7); });
  const double host_mix = seconds([&] {
    mix_host(scratch, ha, hb, 4, 7);
    dev->upload(d, scratch);
  });
  const double dev_digest = seconds([&] { dev->digest(d, 4, std::byte{0xFF}); });
  const double host_digest = seconds([&] {
    dev->download(d, scratch);
    output_digest(scratch, 4, std::byte{0xFF});
  });
  std::printf("4 MiB: mix device %.3f ms, host %.3f ms; digest device %.3f ms, host %.3f ms\n", dev_mix * 1e3,
              host_mix * 1e3, dev_digest * 1e3, host_digest * 1e3);
  for (Buffer* x : {&a, &b, &d}) dev->release(*x);
}

}  // namespace
}  // namespace mblast::runner
