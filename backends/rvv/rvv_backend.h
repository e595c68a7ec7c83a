// The rvv backend, runner side: a candidate is one C file with RVV 1.0 intrinsics (or plain C,
// auto-vectorised) built by clang for riscv64 and linked statically with the worker library
// (librvv_worker.a: the worker conversation, the rvv Device and main) into one program,
// candidate.rv64. That program is the worker: under qemu-user with the instruction-count plugin
// (execution kind "qemu") or directly on a board where mblast-runner itself runs (kind
// "native"). See backends/rvv/README.md.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "mblast/runner/backend.h"

namespace mblast::runner::rvv {

class RvvBackend final : public Backend {
 public:
  std::string_view name() const override { return "rvv"; }
  mblast_backend_kind kind() const override { return MBLAST_BACKEND_RVV; }
  // Compiler version plus a hash of librvv_worker.a, so a rebuilt worker invalidates builds.
  std::string toolchain_id(const nlohmann::json& target) override;
  // candidate.c -> candidate.o (-O3, the target's -march) -> candidate.rv64 (static).
  BuildOutcome build(const BuildRequest& request) override;
  // qemu-riscv64 with the plugin for kind "qemu", the program itself for "native". Without an
  // artifact (probe, peaks) it runs a built-in probe program, built once into the cache.
  std::vector<std::string> worker_command(const std::filesystem::path& self, const std::filesystem::path& artifact,
                                          const nlohmann::json& target) override;
  std::vector<std::filesystem::path> sandbox_read_paths() const override;
  std::string unavailable_reason(const nlohmann::json& target) override;
  // qemu: samples := instructions between the region markers of each call (insn_counts.json,
  // written by the plugin at exit) and "cost" := total/vector counts; native: "cost" := cycles.
  // Refuses counts that do not carry a key this runner gave a plugin (timing_inconsistent) and
  // any worker that created a thread or process or exec'd (launch_failed: its work is uncounted).
  bool timing_needs_worker_exit() const override { return true; }  // QEMU's plugin writes its counts at exit
  void finish_timing(nlohmann::json& timing, const std::filesystem::path& worker_dir,
                     const nlohmann::json& target) override;
  // Always throws: the device exists only inside the riscv64 worker program.
  std::unique_ptr<Device> open(const nlohmann::json& target) override;

 private:
  std::filesystem::path probe_program(const nlohmann::json& target);
  // A fresh secret for one worker's plugin; remembered until a report carrying it is accepted.
  std::string issue_count_key();
  bool redeem_count_key(const std::string& key);

  std::mutex mu_;
  std::map<std::string, std::string> version_of_;    // compiler -> first line of --version
  std::map<std::string, std::string> archive_hash_;  // "path|mtime|size" -> content hash
  std::set<std::string> count_keys_;                 // issued, not yet redeemed
  std::deque<std::string> count_key_order_;          // oldest first, to bound count_keys_
};

}  // namespace mblast::runner::rvv
