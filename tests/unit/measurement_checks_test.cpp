// The pure parts of the timed stage's defences (docs/measurement.md): fresh inputs, output
// fingerprints, the runner's-clock audit and the speed-of-light bounds. The end-to-end cheats
// that each of them stops are in tests/adversarial/cases_timing.json.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <vector>

#include "mblast/digest.h"
#include "mblast/measure/plausibility.h"
#include "timed_loop.h"

namespace mblast {
namespace {

using nlohmann::json;
using runner::CallRecord;

std::vector<std::byte> floats(size_t n, float base) {
  std::vector<std::byte> v(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float x = base + static_cast<float>(i);
    std::memcpy(v.data() + 4 * i, &x, 4);
  }
  return v;
}

TEST(FreshInputs, EveryPartOfTheBufferMixesBothSeedsAndEveryKeyDiffers) {
  constexpr size_t n = 1 << 16;
  const auto a = floats(n, 0.0f), b = floats(n, 1e6f);
  std::vector<std::byte> x(n * 4), y(n * 4);
  mix_host(x, a, b, 4, 1234);
  mix_host(y, a, b, 4, 1235);
  // A cache keyed on any few elements, anywhere, must miss: in every block of 256 elements both
  // seeds appear, and two keys choose differently.
  for (size_t block = 0; block < n / 256; ++block) {
    size_t from_a = 0, differ = 0;
    for (size_t e = block * 256; e < (block + 1) * 256; ++e) {
      from_a += std::memcmp(x.data() + 4 * e, a.data() + 4 * e, 4) == 0;
      differ += std::memcmp(x.data() + 4 * e, y.data() + 4 * e, 4) != 0;
    }
    EXPECT_GT(from_a, 64u) << "block " << block;
    EXPECT_LT(from_a, 192u) << "block " << block;
    EXPECT_GT(differ, 64u) << "block " << block;
  }
}

TEST(OutputDigest, SeesOneChangedBitAndCountsPoison) {
  auto v = floats(1000, 3.0f);
  const OutputDigest d = output_digest(v, 4, std::byte{0xFF});
  EXPECT_EQ(d.poisoned, 0u);
  v[4 * 517 + 1] ^= std::byte{0x01};
  EXPECT_NE(output_digest(v, 4, std::byte{0xFF}).hash, d.hash);
  // Swapping two elements changes it too: each word is hashed with its place.
  auto w = floats(1000, 3.0f);
  std::swap_ranges(w.begin() + 40, w.begin() + 44, w.begin() + 80);
  EXPECT_NE(output_digest(w, 4, std::byte{0xFF}).hash, d.hash);
  std::fill(w.begin() + 400, w.begin() + 412, std::byte{0xFF});
  EXPECT_EQ(output_digest(w, 4, std::byte{0xFF}).poisoned, 3u);
  EXPECT_EQ(output_digest(w, 4, std::byte{0x7F}).poisoned, 0u);
}

// Honest calls on a GPU: the window holds the mixing, flush, call and checks, with a little to spare.
std::vector<CallRecord> honest(size_t n, double call_s) {
  std::vector<CallRecord> v;
  for (size_t i = 0; i < n; ++i) v.push_back({call_s + 0.30e-3, call_s * 0.98, call_s, 0.1e-3, 0.1e-3, 0.05e-3});
  return v;
}

const runner::CallBuffers kShape{1e6, 1e6, 1, 1};

TEST(RunnerClock, HonestCallsPass) {
  EXPECT_EQ(runner::audit_clock(honest(20, 5e-3), json(), kShape), "");
  EXPECT_EQ(runner::audit_clock(honest(20, 5e-6), json(), kShape), "");
  const json costs = {{"flush_s", 0.1e-3}, {"mix_and_poison_bytes_per_s", 1e11}, {"digest_bytes_per_s", 1e11}};
  EXPECT_EQ(runner::audit_clock(honest(20, 5e-3), costs, kShape), "");
}

TEST(RunnerClock, AFigureBelowWhatTheRunnerSawIsInconsistent) {
  // The worker says 10 us for calls the runner saw take 8 ms.
  auto v = honest(20, 8e-3);
  for (auto& r : v) r.sample = r.wall_s = 10e-6;
  EXPECT_NE(runner::audit_clock(v, json(), kShape).find("accounts for only"), std::string::npos);
  // A device time longer than the whole window.
  auto w = honest(20, 1e-3);
  w[3].sample = 5e-3;
  EXPECT_NE(runner::audit_clock(w, json(), kShape).find("runner's clock"), std::string::npos);
  // A device time far below the host's own clock around the call is honest where launches cost
  // more than the kernel, or the machine is busy (pocl-cpu under CI: 0.27 ms against 2.9 ms).
  auto x = honest(20, 8e-3);
  for (auto& r : x) r.sample = 1e-6;
  EXPECT_EQ(runner::audit_clock(x, json(), kShape), "");
  // Far below it, beyond the slack: a sample rewritten inside the worker.
  auto z = honest(20, 20e-3);
  for (auto& r : z) r.sample = 1e-6;
  EXPECT_NE(runner::audit_clock(z, json(), kShape).find("less than half"), std::string::npos);
}

TEST(RunnerClock, TimeHiddenInTheWorkAroundACallIsBoundedByTheDevicesOwnCosts) {
  // The call's 8 ms reported as flushing: consistent with the window, not with this device.
  auto v = honest(20, 8e-3);
  for (auto& r : v) {
    r.flush_s += 8e-3;
    r.window_s += 8e-3;
    r.sample = r.wall_s = 10e-6;
    r.window_s -= 8e-3 - 10e-6;
  }
  const json costs = {{"flush_s", 0.1e-3}, {"mix_and_poison_bytes_per_s", 1e11}, {"digest_bytes_per_s", 1e11}};
  EXPECT_NE(runner::audit_clock(v, costs, kShape).find("cache flushes"), std::string::npos);
  EXPECT_EQ(runner::audit_clock(v, json(), kShape), "") << "without the device's costs the flush is not bounded";
}

TEST(RunnerClock, ChecksAreBoundedByAFixedCostPerBufferAndARate) {
  // Many small outputs: their checks cost a latency each, not bytes (a busy pocl-cpu: 1 ms per
  // output to wake the device's threads). Honest, and within the bound.
  const runner::CallBuffers many{4e3, 8 * 4e3, 1, 8};
  json costs = {{"flush_s", 0.1e-3},
                {"mix_and_poison_bytes_per_s", 1e10},
                {"digest_bytes_per_s", 1e10},
                {"mix_and_poison_latency_s", 1e-3},
                {"check_latency_s", 1e-3}};
  auto v = honest(20, 1e-3);
  for (auto& r : v) {
    r.check_s = 8e-3;
    r.window_s += 8e-3;
  }
  EXPECT_EQ(runner::audit_clock(v, costs, many), "");
  costs.erase("check_latency_s");  // by the rate alone those 8 ms would be the call's time hidden
  EXPECT_NE(runner::audit_clock(v, costs, many).find("output checks"), std::string::npos);
  // The latency bounds: 40 ms of "checks" for the 8 outputs is more than 4x of it plus slack.
  costs["check_latency_s"] = 1e-3;
  for (auto& r : v) {
    r.check_s = 40e-3;
    r.window_s += 32e-3;
  }
  EXPECT_NE(runner::audit_clock(v, costs, many).find("output checks"), std::string::npos);
}

// The reported false positive: an honest call on pocl-cpu while the machine ran other sessions'
// work, its checks 8 ms (three hand-offs to the device's threads, each waiting its turn on a
// busy CPU) against 0.36 ms measured quiet.
std::vector<CallRecord> checks_taking(double check_s) {
  auto v = honest(20, 5e-3);
  for (auto& r : v) {
    r.window_s += check_s - r.check_s;
    r.check_s = check_s;
  }
  return v;
}
const json kQuietCosts = {{"flush_s", 0.1e-3},
                          {"mix_and_poison_bytes_per_s", 1e11},
                          {"digest_bytes_per_s", 1e11},
                          {"mix_and_poison_latency_s", 0},
                          {"check_latency_s", 0.36e-3}};

TEST(RunnerClock, OtherProcessesLoadWidensTheBoundOnTheWorkAroundACall) {
  EXPECT_NE(runner::audit_clock(checks_taking(8e-3), kQuietCosts, kShape, 0.0).find("output checks"), std::string::npos)
      << "a quiet machine: 8 ms of checks that cost 0.36 ms hide the call's time";
  EXPECT_EQ(runner::audit_clock(checks_taking(8e-3), kQuietCosts, kShape, 0.8), "")
      << "others using 80 % of the CPUs: the same 8 ms are their wake-ups";
  const std::string why = runner::audit_clock(checks_taking(8e-3), kQuietCosts, kShape, 0.2);
  EXPECT_NE(why.find("20 % of its CPUs"), std::string::npos) << why;
}

TEST(RunnerClock, WorkMovedIntoTheChecksIsSeenAtAnyLoad) {
  // tests/adversarial/opencl/work_in_checks.cpp: a matmul's work done when the checks first read
  // the outputs, tens of ms per call; no load of others' excuses that.
  EXPECT_NE(runner::audit_clock(checks_taking(30e-3), kQuietCosts, kShape, 1.0).find("output checks"),
            std::string::npos);
  // A load figure out of range is taken as the most it can be, never as more slack.
  EXPECT_NE(runner::audit_clock(checks_taking(30e-3), kQuietCosts, kShape, 50.0).find("output checks"),
            std::string::npos);
}

TEST(RunnerClock, AQuietMachinesSlackIsTwoMilliseconds) {
  // What a cheat can hide per call in the work around it on a quiet machine: 3x the costs and
  // 2 ms (it was 5 ms).
  const double need = 0.36e-3;
  EXPECT_EQ(runner::audit_clock(checks_taking(4 * need + 1.9e-3), kQuietCosts, kShape, 0.0), "");
  EXPECT_NE(runner::audit_clock(checks_taking(4 * need + 2.5e-3), kQuietCosts, kShape, 0.0).find("output checks"),
            std::string::npos);
}

TEST(MachineLoad, AChildsWorkIsOursNotTheMachines) {
  const runner::CpuTimes a = runner::cpu_times();
  ASSERT_TRUE(a.ok);
  const pid_t c = ::fork();
  ASSERT_GE(c, 0);
  if (c == 0) {  // 0.2 s of CPU, however long the busy machine takes to give it
    timespec t{};
    volatile double x = 0;
    do {
      for (int i = 0; i < 100000; ++i) x = x * 0.999 + 1.0;
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec == 0 && t.tv_nsec < 200'000'000);
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(c, &st, 0), c);
  const runner::CpuTimes b = runner::cpu_times();
  ASSERT_TRUE(b.ok);
  EXPECT_GE(b.ours_s - a.ours_s, 0.15) << "the reaped child's CPU time is this process's";
  const double load = runner::machine_load(a, b);
  EXPECT_GE(load, 0.0);
  EXPECT_LE(load, 1.0);
  EXPECT_EQ(runner::machine_load(b, a), 0.0) << "no time passed: no figure";
}

Problem vec_add_like() {
  Problem p;
  p.bytes = 12.0 * (1 << 20);
  p.flops = 1 << 20;
  return p;
}

TEST(SpeedOfLight, FasterThanTheBandwidthAllowsIsImplausible) {
  const json peaks = {{"bandwidth_bytes_per_s", 3e12}, {"fp32_flops_per_s", 6e13}, {"tf32_flops_per_s", 4e14}};
  const Problem p = vec_add_like();  // 12.6 MB: 4.2 us at 3 TB/s
  EXPECT_EQ(implausible_time(p, peaks, 4.5e-6), "");
  EXPECT_EQ(implausible_time(p, peaks, 1.5e-6), "") << "within the stated margin";
  EXPECT_NE(implausible_time(p, peaks, 0.1e-6).find("faster than moving"), std::string::npos);
  Problem gemm;
  gemm.bytes = 1e3;
  gemm.flops = 2e12;  // 5 ms at the tf32 peak
  EXPECT_EQ(implausible_time(gemm, peaks, 1e-3), "") << "tensor cores and fast algorithms are within the margin";
  EXPECT_NE(implausible_time(gemm, peaks, 0.1e-3).find("operations"), std::string::npos);
  EXPECT_EQ(implausible_time(p, json(), 1e-9), "") << "no peaks, no bound";
}

TEST(SpeedOfLight, TooFewInstructionsToMoveTheBytesIsImplausible) {
  const Problem p = vec_add_like();
  Target t;
  t.spec = {{"arch", {{"vlen", 256}}}};
  // 12.6 MB at VLEN 256 needs at least 49152 LMUL-8 loads and stores.
  EXPECT_EQ(implausible_count(p, t, "instructions", 60000), "");
  EXPECT_NE(implausible_count(p, t, "instructions", 42).find("cannot move"), std::string::npos);
  EXPECT_EQ(implausible_count(p, t, "cycles", 42), "");
}

}  // namespace
}  // namespace mblast
