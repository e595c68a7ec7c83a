// The worker: the only code that calls a candidate. It runs in a process of its own, started
// by mblast-runner with limits and a sandbox (or, for rvv, a riscv64 program under QEMU built
// from the same sources). It reads one request from `in_fd` and writes stage messages to
// `out_fd`; its stdout and stderr are the candidate's log.
//
// It never receives expected outputs: verification happens in the driver.
#pragma once

#include <filesystem>

#include "mblast/abi.h"
#include "mblast/runner/backend.h"

namespace mblast::runner {

struct CandidateEntry {
  decltype(&mblast_run) run = nullptr;
  decltype(&mblast_prepare) prepare = nullptr;
  decltype(&mblast_release) release = nullptr;
  decltype(&mblast_last_error) last_error = nullptr;
};

// Loads a candidate shared object (RTLD_NOW). Throws Error with the dlopen/dlsym reason.
CandidateEntry load_candidate_library(const std::filesystem::path& artifact);

// Runs one worker conversation. `linked` is the candidate when it is linked into this program
// (rvv); otherwise the request's "artifact" is loaded. Returns the process exit code.
int worker_main(int in_fd, int out_fd, Backend& backend, const CandidateEntry* linked);

// Called by the worker after it opened the device and before it loads the candidate, with the
// request's "worker_landlock" (see SandboxPolicy::landlock_in_worker); returns "" or an error.
// The host runner sets it to apply Landlock; a worker without it refuses such requests.
using AfterOpenHook = std::string (*)(const nlohmann::json& landlock);
void set_after_open_hook(AfterOpenHook hook);

}  // namespace mblast::runner
