// Limits and filesystem sandbox for the process that runs candidate code.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mblast::runner {

struct SandboxPolicy {
  size_t memory_bytes = 0;    // the limit; also enforced by the runner's resident-memory watchdog
  bool memory_rlimits = true;  // also as RLIMIT_DATA and RLIMIT_AS (off for GPU drivers)
  size_t max_file_bytes = 256u << 20;
  std::vector<std::filesystem::path> read_paths;   // readable and executable
  std::vector<std::filesystem::path> write_paths;  // readable, writable, may create files
  bool proc_write = false;
  // Landlock applied by the worker itself after it opened the device (the GPU driver's
  // initialisation fails inside a Landlock domain entered before exec) and before it loads the
  // candidate: candidate code still runs only under the allow-list.
  bool landlock_in_worker = false;  // all of /proc writable (a GPU driver that needs it), not only /proc/self
  bool landlock = true;  // off only by MBLAST_SANDBOX=no-landlock, for diagnosing a driver
};

// Applies the MBLAST_SANDBOX setting of the runner's environment: "full" (default),
// "no-landlock" (rlimits and the memory watchdog only), "no-memory-rlimits". Throws Error on
// any other value. The result's "sandbox" text always says what was in force.
void apply_sandbox_setting(SandboxPolicy& p);

// The Landlock ABI version of this kernel, or 0 when Landlock is unavailable.
int landlock_abi_version();

// One line for results: what the sandbox enforces here.
std::string sandbox_description(const SandboxPolicy& p);

// Applies rlimits and, where the kernel has it, a Landlock ruleset that allows only the given
// paths. Called in the child between fork and exec; returns an error text or "".
std::string apply_sandbox(const SandboxPolicy& p);

// The Landlock part alone (what apply_sandbox does after the rlimits); "" or an error text.
std::string apply_landlock(const SandboxPolicy& p);
// The Landlock part as JSON for the worker, and back.
nlohmann::json landlock_to_json(const SandboxPolicy& p);
SandboxPolicy landlock_from_json(const nlohmann::json& j);

// The default read list: system libraries, drivers, /dev, /proc, /sys — not home folders,
// not /tmp, not the problem directories.
std::vector<std::filesystem::path> default_read_paths();

}  // namespace mblast::runner
