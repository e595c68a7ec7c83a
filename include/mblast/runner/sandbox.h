// Limits and filesystem sandbox for the process that runs candidate code.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mblast::runner {

struct SandboxPolicy {
  size_t memory_bytes = 0;           // RLIMIT_DATA (and RLIMIT_AS when allowed); 0: none
  bool limit_address_space = true;
  size_t max_file_bytes = 256u << 20;
  std::vector<std::filesystem::path> read_paths;   // readable and executable
  std::vector<std::filesystem::path> write_paths;  // readable, writable, may create files
};

// The Landlock ABI version of this kernel, or 0 when Landlock is unavailable.
int landlock_abi_version();

// One line for results: what the sandbox enforces here.
std::string sandbox_description(const SandboxPolicy& p);

// Applies rlimits and, where the kernel has it, a Landlock ruleset that allows only the given
// paths. Called in the child between fork and exec; returns an error text or "".
std::string apply_sandbox(const SandboxPolicy& p);

// The default read list: system libraries, drivers, /dev, /proc, /sys — not home folders,
// not /tmp, not the problem directories.
std::vector<std::filesystem::path> default_read_paths();

}  // namespace mblast::runner
