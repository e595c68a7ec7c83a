// mblast-runner's request loop. See include/mblast/protocol.h for the conversation.
#pragma once

#include <filesystem>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "mblast/protocol.h"
#include "mblast/runner/backend.h"

namespace mblast::runner {

class RunnerService {
 public:
  // self: this executable (started again with --worker); cache_dir: builds, peaks, work
  // folders; include_dir: where mblast/abi.h is, for candidate builds.
  RunnerService(std::filesystem::path self, std::filesystem::path cache_dir, std::filesystem::path include_dir);

  // Serves requests until end of input or "shutdown". Returns the process exit code.
  int serve(int in_fd, int out_fd);

  const std::filesystem::path& self() const { return self_; }
  const std::filesystem::path& cache_dir() const { return cache_dir_; }

 private:
  static bool can_read_shared_payload(const nlohmann::json& probe, std::string* why);
  Backend* backend_for(const nlohmann::json& target, std::string* why);
  void simple(const std::string& op, const nlohmann::json& req, int out_fd);
  void eval(const protocol::Message& req, protocol::MessageReader& driver, int out_fd);
  nlohmann::json build(Backend& b, const nlohmann::json& target, const nlohmann::json& cand,
                       const nlohmann::json& limits, std::filesystem::path* artifact);
  std::filesystem::path peaks_path(const std::string& target, const nlohmann::json& device) const;
  std::optional<nlohmann::json> cached_peaks(const std::string& target, const nlohmann::json& device) const;
  void store_peaks(const std::string& target, const nlohmann::json& msg);

  std::filesystem::path self_, cache_dir_, include_dir_;
  std::map<std::string, std::string> toolchain_ids_;  // asked once per runner session
};

}  // namespace mblast::runner
