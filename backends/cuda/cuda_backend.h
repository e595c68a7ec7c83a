#pragma once

#include "mblast/runner/backend.h"

namespace mblast::runner::cuda {

// The cuda backend: a candidate is one .cu file (host code plus kernels, CUDA runtime API)
// built by nvcc into a shared object for the target's architecture. libcuda, NVRTC and cuBLAS
// are opened at run time, so a runner without a driver reports the targets unavailable.
class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  mblast_backend_kind kind() const override { return MBLAST_BACKEND_CUDA; }
  std::string toolchain_id(const nlohmann::json& target) override;
  BuildOutcome build(const BuildRequest& request) override;
  // The driver reserves address space far beyond what a process uses.
  bool allows_memory_rlimits(const nlohmann::json&) const override { return false; }
  bool driver_writes_proc(const nlohmann::json&) const override { return true; }
  std::vector<std::filesystem::path> sandbox_read_paths() const override;
  // No driver library (checked by dlopen alone, no device is opened) or no nvcc.
  std::string unavailable_reason(const nlohmann::json& target) override;
  nlohmann::json environment() override;
  std::unique_ptr<Device> open(const nlohmann::json& target) override;
};

}  // namespace mblast::runner::cuda
