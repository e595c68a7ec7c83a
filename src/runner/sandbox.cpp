#include "mblast/runner/sandbox.h"

#include "mblast/error.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

// Debian 12's kernel headers predate Landlock ABI 3; the values are fixed by the kernel ABI.
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

namespace mblast::runner {

namespace {
constexpr __u64 kReadAccess = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr __u64 kV1All = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
                         LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                         LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                         LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                         LANDLOCK_ACCESS_FS_MAKE_SYM;

bool add_rule(int ruleset, const char* path, __u64 access) {
  int fd = ::open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;  // a path that does not exist here needs no rule
  landlock_path_beneath_attr pb{};
  pb.allowed_access = access;
  pb.parent_fd = fd;
  long r = ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
  ::close(fd);
  return r == 0;
}
}  // namespace

int landlock_abi_version() {
  long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v > 0 ? static_cast<int>(v) : 0;
}

std::string sandbox_description(const SandboxPolicy& p) {
  std::string s = "memory " + std::to_string(p.memory_bytes >> 20) + " MiB (resident-set watchdog" +
                  (p.memory_rlimits ? std::string(", RLIMIT_DATA and RLIMIT_AS") : std::string(" only: the driver maps large ranges")) +
                  "); rlimits: file size, no core";
  const int ll = p.landlock ? landlock_abi_version() : 0;
  if (!p.landlock) return s + "; landlock OFF (MBLAST_SANDBOX=no-landlock): filesystem not restricted";
  s += ll ? "; landlock abi " + std::to_string(ll) + ": filesystem limited to system and driver paths" + std::string(p.proc_write ? " (/proc writable for the GPU driver)" : "") + std::string(p.landlock_in_worker ? ", applied by the worker after opening the device, before loading the candidate" : "")
          : "; landlock unavailable on this kernel: filesystem not restricted";
  return s;
}

void apply_sandbox_setting(SandboxPolicy& p) {
  const char* v = std::getenv("MBLAST_SANDBOX");
  const std::string mode = v && *v ? v : "full";
  if (mode == "full") return;
  if (mode == "no-landlock") p.landlock = false;
  else if (mode == "no-memory-rlimits") p.memory_rlimits = false;
  else throw Error("MBLAST_SANDBOX=" + mode + ": expected full, no-landlock or no-memory-rlimits");
}

std::vector<std::filesystem::path> default_read_paths() {
  return {"/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/bin", "/usr/sbin", "/usr/local",
          "/usr/include", "/usr/share/pocl", "/usr/riscv64-linux-gnu", "/lib", "/lib64", "/bin", "/sbin",
          "/etc", "/proc", "/sys", "/dev", "/opt", "/run"};
}

std::string apply_sandbox(const SandboxPolicy& p) {
  auto set = [](int res, rlim_t v) {
    rlimit rl{v, v};
    ::setrlimit(res, &rl);
  };
  set(RLIMIT_CORE, 0);
  if (p.max_file_bytes) set(RLIMIT_FSIZE, p.max_file_bytes);
  if (p.memory_bytes && p.memory_rlimits) {
    set(RLIMIT_DATA, p.memory_bytes);
    set(RLIMIT_AS, p.memory_bytes + (2ull << 30));
  }
  if (p.landlock_in_worker) return "";
  return apply_landlock(p);
}

nlohmann::json landlock_to_json(const SandboxPolicy& p) {
  nlohmann::json j = {{"read", nlohmann::json::array()}, {"write", nlohmann::json::array()}, {"proc_write", p.proc_write}};
  for (const auto& r : p.read_paths) j["read"].push_back(r.string());
  for (const auto& w : p.write_paths) j["write"].push_back(w.string());
  return j;
}

SandboxPolicy landlock_from_json(const nlohmann::json& j) {
  SandboxPolicy p;
  for (const auto& r : j.at("read")) p.read_paths.emplace_back(r.get<std::string>());
  for (const auto& w : j.at("write")) p.write_paths.emplace_back(w.get<std::string>());
  p.proc_write = j.value("proc_write", false);
  return p;
}

std::string apply_landlock(const SandboxPolicy& p) {
  const int abi = p.landlock ? landlock_abi_version() : 0;
  if (abi == 0) return "";
  __u64 handled = kV1All;
  if (abi >= 2) handled |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  int rs = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (rs < 0) return std::string("sandbox: landlock_create_ruleset failed: ") + std::strerror(errno);
  for (const auto& r : p.read_paths)
    if (!add_rule(rs, r.c_str(), kReadAccess)) return "sandbox: cannot add read rule for " + r.string();
  for (const auto& w : p.write_paths)
    if (!add_rule(rs, w.c_str(), handled)) return "sandbox: cannot add write rule for " + w.string();
  // Device nodes (GPU drivers) must be writable; creating files under /dev is not needed.
  add_rule(rs, "/dev", kReadAccess | LANDLOCK_ACCESS_FS_WRITE_FILE | (abi >= 3 ? LANDLOCK_ACCESS_FS_TRUNCATE : 0));
  add_rule(rs, "/dev/shm", handled);
  // The process's own /proc entry stays writable: GPU drivers name their threads by writing
  // /proc/self/task/<tid>/comm (cuInit fails with CUDA_ERROR_OPERATING_SYSTEM otherwise).
  // /proc/self resolves here, in the child, to /proc/<pid> of the process that will exec.
  add_rule(rs, p.proc_write ? "/proc" : "/proc/self", kReadAccess | LANDLOCK_ACCESS_FS_WRITE_FILE);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "sandbox: PR_SET_NO_NEW_PRIVS failed";
  if (::syscall(SYS_landlock_restrict_self, rs, 0) != 0)
    return std::string("sandbox: landlock_restrict_self failed: ") + std::strerror(errno);
  ::close(rs);
  return "";
}

}  // namespace mblast::runner
