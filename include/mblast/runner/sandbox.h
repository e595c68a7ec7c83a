// Limits, namespaces, filesystem and system-call sandbox for the process that runs candidate
// code (the worker), and the record of which of these layers were in force.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/process.h"

namespace mblast::runner {

class Backend;

// The layers, by the names used in MBLAST_SANDBOX ("no-" + name with '-' for '_'), in
// Backend::tolerates_sandbox_layer and in a result's "sandbox_layers".
//   user_ns pid_ns mount_ns net_ns ipc_ns : Linux namespaces (process.h: Isolation)
//   landlock : filesystem allow-list (and TCP, signals, abstract sockets where the ABI has them)
//   seccomp  : system calls that escape or reach other processes refused (seccomp_denied_calls)
//   memory_rlimits, process_limit, env_allowlist, scratch, capabilities
const std::vector<std::string>& sandbox_layer_names();

struct SandboxPolicy {
  size_t memory_bytes = 0;     // the limit; also enforced by the runner's resident-memory watchdog
  bool memory_rlimits = true;  // also as RLIMIT_DATA and RLIMIT_AS (off for GPU drivers)
  size_t max_file_bytes = 256u << 20;
  std::vector<std::filesystem::path> read_paths;   // readable and executable
  std::vector<std::filesystem::path> write_paths;  // readable, writable, may create files
  bool proc_write = false;
  // Landlock applied by the worker itself after it opened the device (the GPU driver's
  // initialisation fails inside a Landlock domain entered before exec) and before it loads the
  // candidate: candidate code still runs only under the allow-list. The seccomp filter goes
  // with it (seccomp_with_landlock in the worker's copy).
  bool landlock_in_worker = false;
  bool landlock = true;                // off only by MBLAST_SANDBOX=no-landlock, for diagnosing a driver
  bool seccomp = true;                 // the filter of seccomp_denied_calls(); off where unavailable or switched off
  bool seccomp_with_landlock = false;  // apply_landlock() also installs the seccomp filter
  bool env_allowlist = true;           // the worker's environment: worker_environment_allowlist() only
  int max_tasks = 512;                 // processes and threads of the worker (process_limit)
  int nproc_rlimit = 0;                // RLIMIT_NPROC where it binds (set by choose_layers)
  // (mount namespace) /tmp and /dev/shm are private tmpfs: Landlock may let the worker write them.
  bool private_tmp = false;
  // (PID namespace with its own /proc) /proc shows only the worker's processes. Without it,
  // Landlock lets the worker read only its own /proc entry and system-wide files.
  bool own_proc = false;
  std::filesystem::path scratch;           // the worker's folder, removed after the eval
  Isolation isolation;                     // what the worker is started in (choose_layers)
  std::set<std::string> switched_off;      // layers MBLAST_SANDBOX turned off
  std::map<std::string, std::string> off;  // layer -> why it is not in force (choose_layers)
  std::vector<std::string> env_kept;       // the runner's variables passed on, by name (for the record)
};

// Applies the MBLAST_SANDBOX setting of the runner's environment: "full" (default), or a comma
// list of "no-<layer>" (e.g. "no-landlock", "no-memory-rlimits", "no-seccomp", "no-pid-ns",
// "no-namespaces"), for diagnosing a driver. Throws Error on anything else. The result's
// "sandbox" text and "sandbox_layers" always say what was in force.
void apply_sandbox_setting(SandboxPolicy& p);

// Decides the layers for a worker of BACKEND on TARGET: what this machine allows
// (probe_isolation, Landlock, seccomp), minus what the backend does not tolerate and what
// MBLAST_SANDBOX switched off. Fills p.isolation, p.off and the flags above. Call after
// apply_sandbox_setting and after scratch is set.
void choose_layers(SandboxPolicy& p, const Backend& backend, const nlohmann::json& target);

// The environment the worker may inherit from the runner (names; a trailing '*' is a prefix):
// PATH, locale, and what GPU and OpenCL drivers read. Never an API key or the user's shell.
const std::vector<std::string>& worker_environment_allowlist();

// The Landlock ABI version of this kernel, or 0 when Landlock is unavailable.
int landlock_abi_version();

// Whether this kernel accepts a seccomp filter; else *why (may be null) says why not. Cached.
bool seccomp_available(std::string* why);

// The system calls the seccomp filter refuses (EPERM), by name, and the rest of what it checks.
std::vector<std::string> seccomp_denied_calls();

// One line for results: every layer, and why any is off.
std::string sandbox_description(const SandboxPolicy& p);
// The same as an object: layer -> {"on": bool, "how" or "why_off": text, ...}.
nlohmann::json sandbox_layers(const SandboxPolicy& p);

// For `mblast doctor`: which layers this machine allows a worker of this runner, and why not.
nlohmann::json sandbox_support();

// Applies rlimits, and (unless landlock_in_worker) Landlock and the seccomp filter. Called in the
// child between fork and exec, inside the namespaces; returns an error text or "".
std::string apply_sandbox(const SandboxPolicy& p);

// The part the worker applies itself after opening the device: Landlock, then the seccomp filter
// when p.seccomp_with_landlock. Also used by apply_sandbox for Landlock alone. "" or an error text.
std::string apply_landlock(const SandboxPolicy& p);
// The seccomp filter alone (all threads of the process); "" or an error text.
std::string apply_seccomp();
// The worker's part as JSON for the worker, and back.
nlohmann::json landlock_to_json(const SandboxPolicy& p);
SandboxPolicy landlock_from_json(const nlohmann::json& j);

// The default read list: system libraries, drivers, /dev, /proc, /sys — not home folders,
// not /tmp, not the problem directories.
std::vector<std::filesystem::path> default_read_paths();

}  // namespace mblast::runner
