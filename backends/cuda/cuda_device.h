// CUDA device for the worker. Private to backends/cuda.
#pragma once

#include <array>

#include <string>

#include "cuda_driver.h"
#include "mblast/runner/backend.h"

namespace mblast::runner::cuda {

// Whether code built for `gencode` ("sm_90a", "sm_80", "sm_100f") runs on a device of compute
// capability major.minor. Sets *why when not. Exposed for the backend's probe and for tests.
bool gencode_runs_on(const std::string& gencode, int major, int minor, std::string* why);

class CudaDevice final : public Device {
 public:
  // Opens device 0 of those visible (CUDA_VISIBLE_DEVICES applies), retains its primary context
  // (the one the CUDA runtime in candidates uses) and makes it current. Throws BackendError
  // saying why when there is no driver or device, or the target's code cannot run on it.
  explicit CudaDevice(const nlohmann::json& target);
  ~CudaDevice() override;

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
  // On the device (NVRTC kernels), bit for bit the host functions of mblast/digest.h: only the
  // 16-byte digest crosses PCIe, not every output byte.
  void mix(Buffer& dst, const Buffer& a, const Buffer& b, std::span<const std::byte> host_a,
           std::span<const std::byte> host_b, size_t elem_bytes, uint64_t key) override;
  void poison(Buffer& b, std::byte value) override;  // enqueued only
  OutputDigest digest(const Buffer& b, size_t elem_bytes, std::byte poison) override;
  // One synchronisation, one kernel per output (its digest and its guard bytes), one copy back.
  OutputsCheck check_outputs(std::span<Buffer> outs, std::span<const size_t> elem_bytes, std::byte poison) override;

 private:
  // Why the work of the last call could escape the clock, or "": the candidate left another
  // context current, reset or destroyed the primary context, or set a persisting-L2 limit.
  // `current` is the context that was current before make_current() ran.
  std::string escaped_work(CUcontext current);
  void load_digest_kernels();
  std::vector<std::array<unsigned long long, 3>> run_digests(std::span<const Buffer> bufs,
                                                             std::span<const size_t> elem_bytes, std::byte poison,
                                                             bool check_guards);
  void make_current();  // a candidate may have changed the thread's context
  void cleanup() noexcept;
  int attribute(CUdevice_attribute a) const;  // -1 when the driver does not know it
  double time_launch(CUfunction f, unsigned grid, unsigned block, void** args, int reps);
  void measure_gemm_peaks(Peaks& p, std::string& note, CUfunction fill_f32, CUfunction fill_bf16);

  const Driver& d_;
  CUdevice dev_ = 0;
  int ordinal_ = 0;
  CUcontext ctx_ = nullptr;
  bool ctx_retained_ = false;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, end_ = nullptr;
  CUdeviceptr flush_buf_ = 0;
  CUdeviceptr sentinel_ = 0;    // allocated at open: gone after a reset of the context
  bool persisting_l2_ = false;  // the device has a persisting-L2 set-aside
  CUmodule digest_mod_ = nullptr;
  CUfunction mix_fn_ = nullptr, digest_fn_ = nullptr;
  CUdeviceptr digest_out_ = 0;  // three 64-bit sums per buffer digested at once
  size_t digest_out_bytes_ = 0;
  size_t flush_bytes_ = 0;
  unsigned flush_count_ = 0;

  std::string name_;
  int cc_major_ = 0, cc_minor_ = 0;
  int sm_count_ = 0;
  size_t l2_bytes_ = 0;
  size_t memory_bytes_ = 0;
  int driver_version_ = 0;
  std::string warning_;
};

}  // namespace mblast::runner::cuda
