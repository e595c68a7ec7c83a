// The runner-side backend interface. One implementation per folder under backends/, registered
// in backends/registry.cpp. The driver never sees this header: it talks to the runner only
// through the protocol (protocol.h).
//
// A Backend lives in two processes:
//   - in mblast-runner (trusted): build() lowers a candidate source into an artifact, and
//     worker_command() says how to start the worker that will run it;
//   - in the worker (untrusted code runs here): open() gives a Device on which the worker
//     allocates, uploads, runs the candidate through the ABI, synchronises and times.
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/abi.h"
#include "mblast/digest.h"
#include "mblast/error.h"

namespace mblast::runner {

// A failure of the device or its API (vendor error codes are turned into this at the call
// site, with expression, file and line). Reported as launch_failed or runner_error.
class BackendError : public Error {
 public:
  using Error::Error;
};

// Device memory for one tensor, with guard bytes on both sides that the Device checks.
struct Buffer {
  void* handle = nullptr;  // what goes into mblast_tensor::data
  size_t nbytes = 0;
  void* impl = nullptr;  // backend bookkeeping
};

struct Peaks {
  double bandwidth_bytes_per_s = 0;  // achieved by a copy kernel (bytes read + written)
  double fp32_flops_per_s = 0;       // achieved by an FMA-bound kernel
  double tf32_flops_per_s = 0;       // matrix units, where the device has them (0: not measured)
  double bf16_flops_per_s = 0;
  std::string method;  // how they were measured
};
nlohmann::json to_json(const Peaks& p);

class Device {
 public:
  virtual ~Device() = default;
  virtual mblast_context context() = 0;
  virtual nlohmann::json describe() = 0;  // name, vendor, driver, memory, ...

  // Memory. allocate() writes the guards; guards_intact() checks them after a run.
  virtual Buffer allocate(size_t nbytes) = 0;
  virtual void release(Buffer& b) = 0;
  virtual void upload(Buffer& b, std::span<const std::byte> host) = 0;
  virtual void download(const Buffer& b, std::span<std::byte> host) = 0;
  // Bytes [offset, offset + host.size()) of B, complete on return. The default downloads all of B.
  virtual void download_range(const Buffer& b, size_t offset, std::span<std::byte> host) {
    if (offset > b.nbytes || host.size() > b.nbytes - offset)
      throw BackendError("download_range: past the buffer's end");
    scratch_.resize(b.nbytes);
    download(b, scratch_);
    std::copy_n(scratch_.begin() + static_cast<std::ptrdiff_t>(offset), host.size(), host.begin());
  }
  virtual void fill(Buffer& b, std::byte value) = 0;
  virtual bool guards_intact(const Buffer& b) = 0;

  // Waits until all work on the device (not only the candidate's queue) has finished.
  virtual void synchronize() = 0;
  // Empty text when the device is healthy; else why (a sticky error, a lost context).
  virtual std::string health() = 0;

  // Timing: begin() before the candidate call; end() synchronises the device, then returns the
  // elapsed seconds by the backend's clock (events). flush_caches() runs between timed calls.
  virtual void flush_caches() = 0;
  virtual void timer_begin() = 0;
  virtual double timer_end() = 0;
  virtual std::string timing_method() = 0;
  // The unit of timer_end()'s result: "s" (seconds), or "instructions" where the cost is a
  // deterministic count (rvv under QEMU).
  virtual std::string timing_unit() { return "s"; }

  virtual Peaks measure_peaks() = 0;

  // Fresh inputs for one timed call (mblast/digest.h): dst's element e is a's where
  // mix_takes_a(key, e), else b's. host_a and host_b hold the bytes of a and b. The default
  // mixes on the host and uploads; a backend may mix on the device instead (same result), and
  // may only enqueue it: the result is in place after the next synchronize().
  virtual void mix(Buffer& dst, const Buffer& a, const Buffer& b, std::span<const std::byte> host_a,
                   std::span<const std::byte> host_b, size_t elem_bytes, uint64_t key) {
    (void)a;
    (void)b;
    scratch_.resize(dst.nbytes);
    mix_host(scratch_, host_a, host_b, elem_bytes, key);
    upload(dst, scratch_);
  }
  // Poisons an output before a timed call. The default fills at once; a backend may only
  // enqueue the fill: it is done after the next synchronize(), before the call.
  virtual void poison(Buffer& b, std::byte value) { fill(b, value); }
  // The outputs' fingerprint right after a call, outside the clock (mblast/digest.h). The
  // default downloads and computes on the host; a device implementation must match it.
  virtual OutputDigest digest(const Buffer& b, size_t elem_bytes, std::byte poison) {
    scratch_.resize(b.nbytes);
    download(b, scratch_);
    return output_digest(scratch_, elem_bytes, poison);
  }
  // Everything checked right after a timed call, outside the clock: the device's health, the
  // guard bytes of each output and its fingerprint. The default asks each in turn; a GPU
  // backend does it in one round trip (the per-call cost is what limits how many calls fit in
  // an eval's timing budget).
  struct OutputsCheck {
    std::string health;                 // health()'s text: "" when healthy
    int broken_guard = -1;              // the first output whose guard bytes changed, or -1
    std::vector<OutputDigest> digests;  // one per output, when healthy and guards intact
  };
  virtual OutputsCheck check_outputs(std::span<Buffer> outs, std::span<const size_t> elem_bytes, std::byte poison) {
    OutputsCheck c;
    c.health = health();
    if (!c.health.empty()) return c;
    for (size_t i = 0; i < outs.size(); ++i)
      if (!guards_intact(outs[i])) {
        c.broken_guard = static_cast<int>(i);
        return c;
      }
    for (size_t i = 0; i < outs.size(); ++i) c.digests.push_back(digest(outs[i], elem_bytes[i], poison));
    return c;
  }

 private:
  std::vector<std::byte> scratch_;  // the defaults' host copy
};

struct BuildRequest {
  std::string source;
  std::string filename;  // the candidate's file name, for messages (e.g. "naive.opencl.cpp")
  nlohmann::json target;
  std::filesystem::path out_dir;      // an empty folder for this build's files
  std::filesystem::path include_dir;  // holds mblast/abi.h
  double timeout_s = 120;
};

struct BuildOutcome {
  bool ok = false;
  std::filesystem::path artifact;
  std::string command;  // the compiler command line, for the log
  std::string log;      // compiler output
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual mblast_backend_kind kind() const = 0;
  // Text that identifies the toolchain (compiler and version); part of the build cache key.
  virtual std::string toolchain_id(const nlohmann::json& target) = 0;
  virtual BuildOutcome build(const BuildRequest& request) = 0;
  // The worker's command line: by default the runner itself with --worker; a backend whose
  // candidates run as their own programs (rvv under QEMU) overrides it.
  virtual std::vector<std::string> worker_command(const std::filesystem::path& self,
                                                  const std::filesystem::path& artifact, const nlohmann::json& target);
  // Whether the worker's memory may be limited by rlimits (RLIMIT_DATA, RLIMIT_AS). GPU drivers
  // map large private ranges at initialisation (cuInit fails under a few GiB of RLIMIT_DATA), so
  // such backends, and NVIDIA's OpenCL on the same driver, rely on the runner's resident-memory
  // watchdog alone.
  virtual bool allows_memory_rlimits(const nlohmann::json& /*target*/) const { return true; }
  // Whether the target's driver must write under /proc (NVIDIA's: cuInit fails with
  // CUDA_ERROR_OPERATING_SYSTEM when only /proc/self is writable; tests/gpu/cuda_sandbox_probe.cpp
  // shows it). The runner then also makes itself non-dumpable so the worker cannot write its memory.
  virtual bool driver_writes_proc(const nlohmann::json& /*target*/) const { return false; }
  // Environment variables the runner adds to the worker's for this target (driver settings that
  // must be in place before the driver starts; the runner decides, as the sandboxed worker may
  // not read /sys). A variable already in the runner's environment is the user's and stands.
  virtual std::map<std::string, std::string> worker_environment(const nlohmann::json& /*target*/) const { return {}; }
  // Whether this target's driver works under a sandbox layer of the worker (sandbox.h:
  // sandbox_layer_names(): "user_ns", "pid_ns", "mount_ns", "net_ns", "ipc_ns", "landlock",
  // "seccomp", ...). A layer it does not tolerate is left off, and results say so.
  virtual bool tolerates_sandbox_layer(std::string_view /*layer*/, const nlohmann::json& /*target*/) const {
    return true;
  }
  // Extra paths the sandboxed worker may read (driver files) and write (driver caches).
  virtual std::vector<std::filesystem::path> sandbox_read_paths() const { return {}; }
  // (optional) Why this host cannot run the target at all (a missing compiler or emulator), or
  // "" when it may. Checked before building or starting a worker; reported as unavailable.
  virtual std::string unavailable_reason(const nlohmann::json& target) { return ""; }
  // (optional) Called in the runner once the worker has sent its timing message and exited,
  // while its working folder still exists: a backend whose costs are known only after the
  // worker ends (rvv under QEMU: counts the plugin writes at exit) fills in or replaces the
  // samples and "cost" here, or turns the message into a failure.
  // Whether finish_timing() reads what the worker leaves when it exits (the runner then waits
  // for the exit first; otherwise the worker is torn down beside the next request).
  virtual bool timing_needs_worker_exit() const { return false; }
  virtual void finish_timing(nlohmann::json& timing, const std::filesystem::path& worker_dir,
                             const nlohmann::json& target) {}

  // In the runner, for `mblast doctor`: versions of the drivers, toolchains and libraries this
  // backend would use, and what is missing. Must not open a device (that is the worker's job).
  virtual nlohmann::json environment() { return nlohmann::json::object(); }

  // In the worker: opens the device the target names, or throws BackendError saying why not.
  virtual std::unique_ptr<Device> open(const nlohmann::json& target) = 0;
};

// backends/registry.cpp: every backend compiled into this binary.
std::vector<Backend*> all_backends();
Backend* find_backend(std::string_view name);  // nullptr when not compiled in

}  // namespace mblast::runner
