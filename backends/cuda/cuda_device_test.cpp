// The CUDA Device's own checks, on a GPU (skipped, with the reason, where there is none):
//   - mix() and digest() on the device give the host functions' results (mblast/digest.h) bit
//     for bit, for every element size and for sizes that end in a partial word; check_outputs()
//     gives the same digests and sees a write into any output's guard bytes;
//   - after a call that sets a persisting-L2 limit, leaves another context current or resets the
//     primary context, the device refuses to give a time (timer_end throws, health() says why).
#include <gtest/gtest.h>

#include <cuda.h>
#include <dlfcn.h>

#include <random>
#include <vector>

#include "mblast/digest.h"
#include "mblast/runner/backend.h"

namespace mblast::runner {
namespace {

std::unique_ptr<Device> open_cuda(std::string* why) {
  Backend* b = find_backend("cuda");
  if (!b) {
    *why = "the cuda backend is not compiled in";
    return nullptr;
  }
  try {
    return b->open(nlohmann::json{{"name", "cuda-device-test"}});
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

// A driver entry point, from the libcuda the device opened (no link-time libcuda: this test
// starts, and skips, on machines without a driver).
template <typename F>
F cu(const char* name) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return lib ? reinterpret_cast<F>(dlsym(lib, name)) : nullptr;
}

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& x : v) x = static_cast<std::byte>(rng() & 0xFF);
  return v;
}

TEST(CudaDevice, MixAndDigestMatchTheHost) {
  std::string why;
  auto dev = open_cuda(&why);
  if (!dev) GTEST_SKIP() << "no CUDA device: " << why;
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

// check_outputs(), the worker's one round trip after each timed call: the same digests as the
// host's, the poison counted after an enqueued poison(), and a write into either guard of any
// output named by the output's index.
TEST(CudaDevice, CheckOutputsDigestsAndGuards) {
  std::string why;
  auto dev = open_cuda(&why);
  if (!dev) GTEST_SKIP() << "no CUDA device: " << why;
  const std::byte poison{0x7F};
  std::vector<size_t> sizes = {4 * 1000, 2 * 77, 8 * 65537};
  std::vector<size_t> elems = {4, 2, 8};
  std::vector<Buffer> outs;
  std::vector<std::vector<std::byte>> host;
  for (size_t i = 0; i < sizes.size(); ++i) {
    outs.push_back(dev->allocate(sizes[i]));
    host.push_back(random_bytes(sizes[i], static_cast<uint32_t>(10 + i)));
    dev->upload(outs.back(), host.back());
  }
  Device::OutputsCheck c = dev->check_outputs(outs, elems, poison);
  ASSERT_TRUE(c.health.empty()) << c.health;
  ASSERT_EQ(c.broken_guard, -1);
  ASSERT_EQ(c.digests.size(), outs.size());
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(c.digests[i], output_digest(host[i], elems[i], poison)) << i;

  for (auto& b : outs) dev->poison(b, poison);
  dev->synchronize();
  c = dev->check_outputs(outs, elems, poison);
  ASSERT_EQ(c.digests.size(), outs.size());
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(c.digests[i].poisoned, sizes[i] / elems[i]) << i;

  auto memset8 = cu<decltype(&::cuMemsetD8_v2)>("cuMemsetD8_v2");
  ASSERT_NE(memset8, nullptr);
  auto at = [](const Buffer& b, long off) {
    return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(b.handle) + off);
  };
  memset8(at(outs[1], static_cast<long>(sizes[1]) + 100), 0x00, 1);  // past the end of output 1
  c = dev->check_outputs(outs, elems, poison);
  EXPECT_EQ(c.broken_guard, 1);
  memset8(at(outs[0], -1), 0x00, 1);  // just before output 0
  c = dev->check_outputs(outs, elems, poison);
  EXPECT_EQ(c.broken_guard, 0);
  for (auto& b : outs) dev->release(b);
}

// What the worker does around one timed call, with `call` in the candidate's place.
template <typename F>
std::string refusal_after(Device& dev, F call) {
  dev.timer_begin();
  call();
  try {
    dev.timer_end();
  } catch (const BackendError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaDevice, RefusesAPersistingL2Limit) {
  std::string why;
  auto dev = open_cuda(&why);
  if (!dev) GTEST_SKIP() << "no CUDA device: " << why;
  int max_persist = 0;
  cu<decltype(&::cuDeviceGetAttribute)>("cuDeviceGetAttribute")(&max_persist,
                                                                CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 0);
  if (max_persist <= 0) GTEST_SKIP() << "this GPU has no persisting L2";
  const std::string r = refusal_after(*dev, [&] {
    cu<decltype(&::cuCtxSetLimit)>("cuCtxSetLimit")(CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
                                                    static_cast<size_t>(max_persist));
  });
  EXPECT_NE(r.find("persisting-L2 limit"), std::string::npos) << r;
}

TEST(CudaDevice, RefusesAnotherCurrentContext) {
  std::string why;
  auto dev = open_cuda(&why);
  if (!dev) GTEST_SKIP() << "no CUDA device: " << why;
  CUcontext mine = nullptr;
  const std::string r = refusal_after(*dev, [&] {
    CUdevice d = 0;
    cu<decltype(&::cuDeviceGet)>("cuDeviceGet")(&d, 0);
    cu<decltype(&::cuCtxCreate_v4)>("cuCtxCreate_v4")(&mine, nullptr, 0, d);
  });
  EXPECT_NE(r.find("another CUDA context"), std::string::npos) << r;
  if (mine) cu<decltype(&::cuCtxDestroy_v2)>("cuCtxDestroy_v2")(mine);
}

TEST(CudaDevice, RefusesAResetContext) {
  std::string why;
  auto dev = open_cuda(&why);
  if (!dev) GTEST_SKIP() << "no CUDA device: " << why;
  const std::string r = refusal_after(*dev, [&] {
    CUdevice d = 0;
    cu<decltype(&::cuDeviceGet)>("cuDeviceGet")(&d, 0);
    cu<decltype(&::cuDevicePrimaryCtxReset_v2)>("cuDevicePrimaryCtxReset_v2")(d);
  });
  EXPECT_FALSE(r.empty()) << "a reset of the primary context mid-timing gave a time";
}

}  // namespace
}  // namespace mblast::runner
