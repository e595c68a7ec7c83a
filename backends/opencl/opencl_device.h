// OpenCL device for the worker. Private to backends/opencl.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <chrono>
#include <string>

#include "mblast/runner/backend.h"

namespace mblast::runner::opencl {

std::string cl_error_name(cl_int e);

// Checks a cl_int-returning call at the call site; throws BackendError naming the expression.
#define MBLAST_CL_CHECK(expr)                                                                   \
  do {                                                                                          \
    cl_int mblast_cl_err_ = (expr);                                                             \
    if (mblast_cl_err_ != CL_SUCCESS)                                                           \
      throw ::mblast::runner::BackendError(::mblast::describe_call(                             \
          ::mblast::runner::opencl::cl_error_name(mblast_cl_err_), #expr, __FILE__, __LINE__)); \
  } while (0)

class OpenclDevice final : public Device {
 public:
  // Picks the device that target["device"] describes (platform_contains, device_contains,
  // type cpu|gpu|any). Throws BackendError naming the platforms found when none matches.
  explicit OpenclDevice(const nlohmann::json& target);
  ~OpenclDevice() override;

  mblast_context context() override;
  nlohmann::json describe() override;
  Buffer allocate(size_t nbytes) override;
  void release(Buffer& b) override;
  void upload(Buffer& b, std::span<const std::byte> host) override;
  void download(const Buffer& b, std::span<std::byte> host) override;
  void download_range(const Buffer& b, size_t offset, std::span<std::byte> host) override;
  void fill(Buffer& b, std::byte value) override;
  bool guards_intact(const Buffer& b) override;
  void synchronize() override;
  std::string health() override;
  void flush_caches() override;
  void timer_begin() override;
  double timer_end() override;
  std::string timing_method() override;
  Peaks measure_peaks() override;
  // On the device, bit for bit the host functions of mblast/digest.h: per work-group partial
  // sums come back (a few KiB), not every output byte.
  void mix(Buffer& dst, const Buffer& a, const Buffer& b, std::span<const std::byte> host_a,
           std::span<const std::byte> host_b, size_t elem_bytes, uint64_t key) override;
  OutputDigest digest(const Buffer& b, size_t elem_bytes, std::byte poison) override;

 private:
  double time_kernel(cl_kernel k, size_t global, int reps);
  // clFinish on every queue the candidate created (opencl_queue_record.h); throws BackendError
  // saying why when their work cannot be accounted for.
  void finish_candidate_queues();
  size_t flush_bytes() const;  // the sweep's buffer
  void keep_busy();            // after an eviction: the device works, touching no memory
  // Builds one of the device's own kernels (the sweep, the busy loop); `program` keeps it.
  cl_kernel own_kernel(const char* source, const char* name, cl_program& program);

  cl_platform_id platform_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_context ctx_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::string platform_name_;
  size_t align_ = 4096;
  size_t cache_bytes_ = 0;
  cl_mem flush_buf_ = nullptr;
  cl_program flush_prog_ = nullptr;
  cl_kernel flush_kernel_ = nullptr;
  unsigned flush_count_ = 0;
  bool evict_ = false;        // flush_caches() evicts this process's memory instead of sweeping
  bool pocl_pinned_ = false;  // PoCL's CPU threads run one to a CPU (OpenclBackend::worker_environment)
  cl_program busy_prog_ = nullptr;
  cl_kernel busy_kernel_ = nullptr;
  cl_mem busy_sink_ = nullptr;
  size_t busy_global_ = 0;  // work-groups of one: four per compute unit
  cl_uint busy_iters_ = 0;
  bool digest_on_device_ = false;  // target device.digest (see the constructor)
  cl_program digest_prog_ = nullptr;
  cl_kernel mix_kernel_ = nullptr, digest_kernel_ = nullptr;
  cl_mem digest_partial_ = nullptr;  // two ulongs per work-group
  cl_event start_ = nullptr, end_ = nullptr;
  bool events_ok_ = true;
  std::chrono::steady_clock::time_point host_start_;
};

}  // namespace mblast::runner::opencl
