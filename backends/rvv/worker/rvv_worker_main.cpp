// main() of every rvv candidate program (candidate.rv64): the worker conversation of
// src/runner/worker.cpp with the candidate linked in statically. The runner starts it under
// qemu-user (or directly on a board) with the protocol pipes on fds 3 and 4.
//
// The candidate's entry points are weak references: a candidate that omits an optional one
// links, and one without mblast_run is reported as abi_error by the worker, not as a link error.
#include <csignal>
#include <cstdio>

#include "mblast/abi.h"
#include "mblast/runner/worker.h"
#include "rvv_device.h"

extern "C" {
#pragma weak mblast_run
#pragma weak mblast_prepare
#pragma weak mblast_release
#pragma weak mblast_last_error
}

namespace mblast::runner {

// Candidates are linked in, never loaded: this program has no dlopen.
CandidateEntry load_candidate_library(const std::filesystem::path& artifact) {
  throw Error("the rvv worker has its candidate linked in; it cannot load " + artifact.string());
}

// Backend's out-of-line member (its key function, which carries the vtable); in mblast-runner
// it lives in backends/registry.cpp, which this program does not link.
std::vector<std::string> Backend::worker_command(const std::filesystem::path&, const std::filesystem::path&,
                                                 const nlohmann::json&) {
  return {};
}

namespace rvv {
namespace {

// The worker-side face of the rvv backend: it only opens the device. Building and starting
// workers is RvvBackend's job in mblast-runner (backends/rvv/rvv_backend.cpp).
class WorkerBackend final : public Backend {
 public:
  std::string_view name() const override { return "rvv"; }
  mblast_backend_kind kind() const override { return MBLAST_BACKEND_RVV; }
  std::string toolchain_id(const nlohmann::json&) override { return "rvv-worker"; }
  BuildOutcome build(const BuildRequest&) override { throw Error("the rvv worker does not build candidates"); }
  std::unique_ptr<Device> open(const nlohmann::json& target) override { return std::make_unique<RvvDevice>(target); }
};

}  // namespace
}  // namespace rvv
}  // namespace mblast::runner

int main() {
  std::signal(SIGPIPE, SIG_IGN);
  mblast::runner::CandidateEntry entry;
  entry.run = mblast_run;  // null when the candidate does not define it (weak)
  entry.prepare = mblast_prepare;
  entry.release = mblast_release;
  entry.last_error = mblast_last_error;
  static mblast::runner::rvv::WorkerBackend backend;
  const int rc = mblast::runner::worker_main(3, 4, backend, &entry);
  std::fflush(stdout);
  std::fflush(stderr);
  return rc;
}
