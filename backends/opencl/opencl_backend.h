#pragma once

#include "mblast/runner/backend.h"

namespace mblast::runner::opencl {

class OpenclBackend final : public Backend {
 public:
  // NVIDIA's OpenCL sits on the same driver as CUDA, which writes under /proc and maps large
  // private ranges at initialisation (as cuInit, it finds no device under the rlimits).
  bool driver_writes_proc(const nlohmann::json& target) const override { return nvidia_platform(target); }
  bool allows_memory_rlimits(const nlohmann::json& target) const override { return !nvidia_platform(target); }
  std::string_view name() const override { return "opencl"; }
  mblast_backend_kind kind() const override { return MBLAST_BACKEND_OPENCL; }
  std::string toolchain_id(const nlohmann::json& target) override;
  BuildOutcome build(const BuildRequest& request) override;
  nlohmann::json environment() override;
  // An ICD folder or files named by OCL_ICD_VENDORS / OCL_ICD_FILENAMES (e.g. a folder in /tmp
  // holding nvidia.icd) and the libraries they name by absolute path, when outside the defaults.
  std::vector<std::filesystem::path> sandbox_read_paths() const override;
  // POCL_AFFINITY=1 where PoCL's CPU driver can pin its threads (pocl_can_pin_threads).
  std::map<std::string, std::string> worker_environment(const nlohmann::json& target) const override;
  std::unique_ptr<Device> open(const nlohmann::json& target) override;

 private:
  static bool nvidia_platform(const nlohmann::json& target) {
    auto d = target.value("device", nlohmann::json::object());
    return d.value("platform_contains", std::string()).find("NVIDIA") != std::string::npos;
  }
};

}  // namespace mblast::runner::opencl
