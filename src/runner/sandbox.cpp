#include "mblast/runner/sandbox.h"

#include "mblast/error.h"
#include "mblast/runner/backend.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>

extern char** environ;

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
// ABI 4 (Linux 6.7): TCP bind and connect; ABI 6 (Linux 6.12): scopes. Fixed by the kernel ABI;
// the ruleset attribute grew with them, so it is declared here in full.
constexpr __u64 kNetBindTcp = 1ULL << 0, kNetConnectTcp = 1ULL << 1;
constexpr __u64 kScopeAbstractUnixSocket = 1ULL << 0, kScopeSignal = 1ULL << 1;
struct RulesetAttr {
  __u64 handled_access_fs = 0, handled_access_net = 0, scoped = 0;
};

bool add_rule(int ruleset, const char* path, __u64 access) {
  int fd = ::open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;  // a path that does not exist here needs no rule
  // A rule on a file may grant only the rights that apply to files (else EINVAL).
  struct stat st {};
  if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
    access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
              LANDLOCK_ACCESS_FS_TRUNCATE;
  landlock_path_beneath_attr pb{};
  pb.allowed_access = access;
  pb.parent_fd = fd;
  long r = ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
  ::close(fd);
  return r == 0;
}

bool has(const std::set<std::string>& s, const std::string& k) { return s.count(k) > 0; }

// ---- seccomp ----
#if defined(__x86_64__)
constexpr __u32 kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr __u32 kAuditArch = AUDIT_ARCH_AARCH64;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr __u32 kAuditArch = AUDIT_ARCH_RISCV64;
#else
constexpr __u32 kAuditArch = 0;  // no filter on this architecture
#endif

struct Denied {
  long nr;
  const char* name;
};
// Refused with EPERM, each for a reason:
//  - reaching other processes' memory or fds: ptrace, process_vm_*, pidfd_getfd, kcmp;
//  - leaving or reshaping the sandbox: mount and the new mount API, pivot_root, chroot,
//    unshare, setns (namespace flags of clone are checked below);
//  - the kernel itself: kexec, modules, bpf, keyrings, perf events, userfaultfd (a common
//    exploit aid), io_uring (its operations bypass this filter), reboot, swap, acct, quotas, syslog,
//    open_by_handle_at (opens files past any mount or Landlock rule);
//  - the clocks the runner times with: settimeofday, clock_settime, clock_adjtime, adjtimex.
#define MBLAST_DENY(n) \
  { SYS_##n, #n }
const std::vector<Denied>& denied() {
  static const std::vector<Denied> v = {
      MBLAST_DENY(ptrace),
      MBLAST_DENY(process_vm_readv),
      MBLAST_DENY(process_vm_writev),
#ifdef SYS_pidfd_getfd
      MBLAST_DENY(pidfd_getfd),
#endif
      MBLAST_DENY(kcmp),
      MBLAST_DENY(mount),
      MBLAST_DENY(umount2),
      MBLAST_DENY(pivot_root),
      MBLAST_DENY(chroot),
      MBLAST_DENY(unshare),
      MBLAST_DENY(setns),
#ifdef SYS_fsopen
      MBLAST_DENY(fsopen),
      MBLAST_DENY(fsconfig),
      MBLAST_DENY(fsmount),
      MBLAST_DENY(fspick),
      MBLAST_DENY(move_mount),
      MBLAST_DENY(open_tree),
#endif
#ifdef SYS_mount_setattr
      MBLAST_DENY(mount_setattr),
#endif
      MBLAST_DENY(kexec_load),
#ifdef SYS_kexec_file_load
      MBLAST_DENY(kexec_file_load),
#endif
      MBLAST_DENY(init_module),
      MBLAST_DENY(finit_module),
      MBLAST_DENY(delete_module),
      MBLAST_DENY(bpf),
      MBLAST_DENY(keyctl),
      MBLAST_DENY(add_key),
      MBLAST_DENY(request_key),
      MBLAST_DENY(perf_event_open),
      MBLAST_DENY(userfaultfd),
#ifdef SYS_io_uring_setup
      MBLAST_DENY(io_uring_setup),
      MBLAST_DENY(io_uring_enter),
      MBLAST_DENY(io_uring_register),
#endif
      MBLAST_DENY(reboot),
      MBLAST_DENY(swapon),
      MBLAST_DENY(swapoff),
      MBLAST_DENY(acct),
      MBLAST_DENY(quotactl),
      MBLAST_DENY(syslog),
      MBLAST_DENY(open_by_handle_at),
      MBLAST_DENY(name_to_handle_at),
#ifdef SYS_settimeofday
      MBLAST_DENY(settimeofday),
#endif
      MBLAST_DENY(clock_settime),
      MBLAST_DENY(clock_adjtime),
      MBLAST_DENY(adjtimex),
  };
  return v;
}
#undef MBLAST_DENY

constexpr __u32 kNamespaceCloneFlags =
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;

std::vector<sock_filter> seccomp_program() {
  std::vector<sock_filter> f;
  auto stmt = [&](__u16 code, __u32 k) { f.push_back(BPF_STMT(code, k)); };
  auto jump = [&](__u16 code, __u32 k, __u8 jt, __u8 jf) { f.push_back(BPF_JUMP(code, k, jt, jf)); };
  const __u32 kEperm = SECCOMP_RET_ERRNO | EPERM, kEnosys = SECCOMP_RET_ERRNO | ENOSYS;
  // Another architecture's calling convention (x86-64's int 0x80, x32) would bypass the numbers below.
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);  // __X32_SYSCALL_BIT
  stmt(BPF_RET | BPF_K, kEperm);
#endif
  for (const auto& d : denied()) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<__u32>(d.nr), 0, 1);
    stmt(BPF_RET | BPF_K, kEperm);
  }
  // clone3 passes its flags in memory a filter cannot read: ENOSYS makes glibc fall back to clone.
#ifdef SYS_clone3
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1);
  stmt(BPF_RET | BPF_K, kEnosys);
#endif
  // clone with a namespace flag: a way out of the namespaces, or into new ones.
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));  // the flags' low 32 bits (little-endian)
  jump(BPF_JMP | BPF_JSET | BPF_K, kNamespaceCloneFlags, 0, 1);
  stmt(BPF_RET | BPF_K, kEperm);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  // Internet and raw packet sockets: no network even where no network namespace could be made.
#ifdef SYS_socket
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 5);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
  jump(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 2, 0);
  jump(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 1, 0);
  jump(BPF_JMP | BPF_JEQ | BPF_K, AF_PACKET, 0, 1);
  stmt(BPF_RET | BPF_K, kEperm);
#endif
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  return f;
}

std::string install_seccomp(unsigned flags) {
  if (kAuditArch == 0) return "seccomp: no filter for this architecture";
  std::vector<sock_filter> prog = seccomp_program();
  sock_fprog fp{static_cast<unsigned short>(prog.size()), prog.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "sandbox: PR_SET_NO_NEW_PRIVS failed";
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fp) != 0)
    return std::string("sandbox: seccomp filter refused: ") + std::strerror(errno);
  return "";
}
}  // namespace

const std::vector<std::string>& sandbox_layer_names() {
  static const std::vector<std::string> v = {"user_ns",       "pid_ns",        "mount_ns", "net_ns",
                                             "ipc_ns",        "landlock",      "seccomp",  "memory_rlimits",
                                             "process_limit", "env_allowlist", "scratch",  "capabilities"};
  return v;
}

const std::vector<std::string>& worker_environment_allowlist() {
  // GLIBC_TUNABLES carries the huge-page setting the runner gives its children (process.h);
  // LD_LIBRARY_PATH finds drivers and toolkits installed off the default paths.
  static const std::vector<std::string> v = {"PATH",     "LANG",           "LANGUAGE",        "LC_*",
                                             "TZ",       "GLIBC_TUNABLES", "LD_LIBRARY_PATH", "CUDA_*",
                                             "NVIDIA_*", "OCL_ICD_*",      "OPENCL_*",        "POCL_*"};
  return v;
}

int landlock_abi_version() {
  long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v > 0 ? static_cast<int>(v) : 0;
}

bool seccomp_available(std::string* why) {
  static std::once_flag once;
  static std::string reason;
  std::call_once(once, [] {
    if (kAuditArch == 0) {
      reason = "no seccomp filter is written for this architecture";
      return;
    }
    // Installed in a throwaway child: a filter cannot be taken off again.
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      reason = "pipe failed";
      return;
    }
    const pid_t c = ::fork();
    if (c == 0) {
      const std::string err = install_seccomp(0);
      (void)!::write(p[1], err.data(), err.size());
      ::_exit(0);
    }
    ::close(p[1]);
    char buf[256];
    ssize_t n;
    std::string got;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    ::close(p[0]);
    int st = 0;
    if (c > 0) ::waitpid(c, &st, 0);
    reason = c < 0 ? "fork failed" : got;
  });
  if (why) *why = reason;
  return reason.empty();
}

std::vector<std::string> seccomp_denied_calls() {
  std::vector<std::string> v;
  for (const auto& d : denied()) v.push_back(d.name);
  v.push_back("clone with namespace flags");
  v.push_back("clone3 (ENOSYS: glibc falls back to clone)");
  v.push_back("socket AF_INET, AF_INET6, AF_PACKET");
  return v;
}

void apply_sandbox_setting(SandboxPolicy& p) {
  const char* v = std::getenv("MBLAST_SANDBOX");
  const std::string mode = v && *v ? v : "full";
  if (mode == "full") return;
  size_t start = 0;
  while (start <= mode.size()) {
    size_t end = mode.find(',', start);
    if (end == std::string::npos) end = mode.size();
    std::string item = mode.substr(start, end - start);
    start = end + 1;
    if (item.empty() || item == "full") continue;
    std::string layer = item.rfind("no-", 0) == 0 ? item.substr(3) : "";
    for (auto& ch : layer) ch = ch == '-' ? '_' : ch;
    const auto& names = sandbox_layer_names();
    if (layer == "namespaces") {
      for (const char* n : {"user_ns", "pid_ns", "mount_ns", "net_ns", "ipc_ns"}) p.switched_off.insert(n);
    } else if (std::find(names.begin(), names.end(), layer) != names.end()) {
      p.switched_off.insert(layer);
    } else {
      throw Error(
          "MBLAST_SANDBOX=" + mode + ": expected full, or a comma list of no-namespaces or no-<layer> for layers " +
          "user-ns, pid-ns, mount-ns, net-ns, ipc-ns, landlock, seccomp, memory-rlimits, process-limit, env-allowlist, "
          "scratch, capabilities");
    }
  }
  if (has(p.switched_off, "landlock")) p.landlock = false;
  if (has(p.switched_off, "memory_rlimits")) p.memory_rlimits = false;
  if (has(p.switched_off, "seccomp")) p.seccomp = false;
  if (has(p.switched_off, "env_allowlist")) p.env_allowlist = false;
}

void choose_layers(SandboxPolicy& p, const Backend& backend, const nlohmann::json& target) {
  const IsolationSupport& sup = probe_isolation();
  auto pick = [&](const std::string& layer, bool machine, const std::string& why_not) {
    if (has(p.switched_off, layer))
      p.off[layer] = "switched off (MBLAST_SANDBOX)";
    else if (!backend.tolerates_sandbox_layer(layer, target))
      p.off[layer] = "not tolerated by the " + std::string(backend.name()) + " backend's driver";
    else if (!machine)
      p.off[layer] = why_not;
    else
      return true;
    return false;
  };
  auto why = [&](const char* part) {
    auto it = sup.why_not.find(part);
    return it == sup.why_not.end() ? std::string("refused here") : it->second;
  };
  Isolation& iso = p.isolation;
  const bool root = ::geteuid() == 0;
  iso.user_ns = pick("user_ns", sup.user_ns, why("user_ns"));
  // Without a user namespace only root may make the others (and then the probe said so).
  iso.mount_ns = pick("mount_ns", sup.mount_ns && (iso.user_ns || root), why("mount_ns"));
  iso.pid_ns = pick("pid_ns", sup.pid_ns && (iso.user_ns || root), why("pid_ns"));
  iso.net_ns = pick("net_ns", sup.net_ns && (iso.user_ns || root), why("net_ns"));
  iso.ipc_ns = pick("ipc_ns", sup.ipc_ns && (iso.user_ns || root), why("ipc_ns"));
  iso.own_proc = iso.pid_ns && iso.mount_ns && sup.own_proc;
  p.own_proc = iso.own_proc;
  if (iso.pid_ns && !iso.own_proc) p.off["own_proc"] = iso.mount_ns ? why("own_proc") : "needs the mount namespace";
  if (pick("scratch", iso.mount_ns && sup.private_dirs,
           iso.mount_ns ? why("private_dirs") : "needs the mount namespace")) {
    iso.private_dirs = {"/tmp", "/dev/shm"};
    iso.private_dir_bytes = p.max_file_bytes;
    // What the worker must read beneath them (an ICD folder named by OCL_ICD_VENDORS, made with
    // mktemp) stays visible, read-only, over its own tmpfs.
    // The worker's own folders there too (a cache folder under /tmp), writable.
    auto beneath = [&](const std::filesystem::path& r) {
      for (const auto& d : iso.private_dirs) {
        const std::string rs = r.lexically_normal().string(), ds = d.string() + "/";
        if (rs.rfind(ds, 0) == 0 && rs.size() > ds.size()) return true;
      }
      return false;
    };
    for (const auto& r : p.read_paths)
      if (beneath(r)) iso.keep_visible.push_back(r);
    for (const auto& w : p.write_paths)
      if (beneath(w)) iso.keep_writable.push_back(w);
    p.private_tmp = true;
  }
  if (pick("capabilities", sup.drop_capabilities && (iso.user_ns || root), why("drop_capabilities")))
    iso.drop_capabilities = true;
  // The process limit: the PID namespace's pid_max binds root too; RLIMIT_NPROC does not bind
  // uid 0, and outside a user namespace it would count every process of the user.
  if (pick("process_limit", true, "")) {
    if (iso.own_proc && sup.max_tasks)
      iso.max_tasks = p.max_tasks;
    else if (iso.user_ns && !root)
      p.nproc_rlimit = p.max_tasks;
    else
      p.off["process_limit"] = root ? "a root runner needs a PID namespace with its own pid_max (Linux 6.14): "
                                      "RLIMIT_NPROC does not bind uid 0" +
                                          (iso.own_proc ? ", and here: " + why("max_tasks") : std::string())
                                    : "needs a user namespace (RLIMIT_NPROC would count every process of the user)";
  }
  if (!p.landlock)
    p.off["landlock"] = "switched off (MBLAST_SANDBOX)";
  else if (!backend.tolerates_sandbox_layer("landlock", target)) {
    p.landlock = false;
    p.off["landlock"] = "not tolerated by the " + std::string(backend.name()) + " backend's driver";
  } else if (landlock_abi_version() == 0)
    p.off["landlock"] = "unavailable on this kernel (not built in, or not in the lsm= list)";
  std::string seccomp_why;
  if (!p.seccomp)
    p.off["seccomp"] = "switched off (MBLAST_SANDBOX)";
  else if (!backend.tolerates_sandbox_layer("seccomp", target)) {
    p.seccomp = false;
    p.off["seccomp"] = "not tolerated by the " + std::string(backend.name()) + " backend's driver";
  } else if (!seccomp_available(&seccomp_why)) {
    p.seccomp = false;
    p.off["seccomp"] = seccomp_why;
  }
  if (!p.memory_rlimits)
    p.off["memory_rlimits"] = has(p.switched_off, "memory_rlimits")
                                  ? "switched off (MBLAST_SANDBOX)"
                                  : "the GPU driver maps large ranges: the resident-set watchdog only";
  if (!p.env_allowlist) p.off["env_allowlist"] = "switched off (MBLAST_SANDBOX)";
  p.env_kept.clear();
  for (char** e = environ; *e; ++e) {
    const std::string s = *e;
    const std::string name = s.substr(0, s.find('='));
    if (!p.env_allowlist || env_name_kept(name, worker_environment_allowlist())) p.env_kept.push_back(name);
  }
}

std::string sandbox_description(const SandboxPolicy& p) {
  std::string ns;
  for (auto [on, name] : std::initializer_list<std::pair<bool, const char*>>{{p.isolation.user_ns, "user"},
                                                                             {p.isolation.pid_ns, "pid"},
                                                                             {p.isolation.mount_ns, "mount"},
                                                                             {p.isolation.net_ns, "net"},
                                                                             {p.isolation.ipc_ns, "ipc"}})
    if (on) ns += (ns.empty() ? "" : ",") + std::string(name);
  std::string s = "namespaces " + (ns.empty() ? std::string("none") : ns) + (p.own_proc ? " (own /proc)" : "");
  const int ll = p.landlock ? landlock_abi_version() : 0;
  if (ll) {
    s += "; landlock abi " + std::to_string(ll) + ": filesystem limited to system and driver paths" +
         (p.proc_write ? " (/proc writable for the GPU driver)" : "") + (ll >= 4 ? ", no TCP" : "") +
         (ll >= 6 && !p.landlock_in_worker ? ", signals and abstract sockets scoped" : "") +
         (p.landlock_in_worker ? ", applied by the worker after opening the device, before loading the candidate" : "");
  } else {
    s += "; landlock " + std::string(p.landlock ? "unavailable on this kernel" : "OFF (MBLAST_SANDBOX=no-landlock)") +
         ": filesystem not restricted";
  }
  s += p.seccomp
           ? "; seccomp: " + std::to_string(denied().size()) + " calls, namespace clones and inet sockets refused" +
                 (p.landlock_in_worker && ll ? " (with Landlock, in the worker)" : "")
           : "; seccomp off";
  s += "; memory " + std::to_string(p.memory_bytes >> 20) + " MiB (resident-set watchdog" +
       (p.memory_rlimits ? std::string(", RLIMIT_DATA and RLIMIT_AS")
                         : std::string(" only: the driver maps large ranges")) +
       "); rlimits: file size, no core";
  if (p.isolation.max_tasks)
    s += "; processes: at most about " + std::to_string(p.max_tasks) + " (pid_max of its PID namespace)";
  else if (p.nproc_rlimit)
    s += "; processes: at most " + std::to_string(p.nproc_rlimit) + " (RLIMIT_NPROC)";
  else
    s += "; process limit off";
  s += p.env_allowlist
           ? "; environment: allow-list (" + std::to_string(p.env_kept.size()) + " of the runner's variables)"
           : "; environment: inherited (allow-list off)";
  s += "; scratch folder removed after the eval" + std::string(p.private_tmp ? ", /tmp and /dev/shm private" : "");
  if (p.isolation.drop_capabilities) s += "; capabilities dropped";
  if (!p.off.empty()) {
    s += "; off:";
    for (const auto& [k, why] : p.off) s += " " + k + " (" + why + ")";
  }
  return s;
}

nlohmann::json sandbox_layers(const SandboxPolicy& p) {
  using nlohmann::json;
  json j = json::object();
  auto layer = [&](const std::string& name, bool on, const std::string& how) {
    json l = {{"on", on}};
    if (on) l["how"] = how;
    auto it = p.off.find(name);
    if (!on || it != p.off.end()) l["why_off"] = it != p.off.end() ? it->second : "off";
    j[name] = l;
  };
  layer("user_ns", p.isolation.user_ns, "the runner's uid and gid are 0 inside");
  layer("pid_ns", p.isolation.pid_ns, "the worker is its init: every process it starts ends with it");
  if (p.isolation.pid_ns) j["pid_ns"]["own_proc"] = p.own_proc;
  layer("mount_ns", p.isolation.mount_ns, "private mounts");
  layer("net_ns", p.isolation.net_ns, "only a loopback of its own, down");
  layer("ipc_ns", p.isolation.ipc_ns, "System V IPC and message queues of its own");
  const int ll = p.landlock ? landlock_abi_version() : 0;
  layer("landlock", ll > 0,
        p.landlock_in_worker ? "applied by the worker after opening the device" : "applied before exec");
  if (ll) {
    j["landlock"]["abi"] = ll;
    j["landlock"]["tcp_denied"] = ll >= 4;
    j["landlock"]["scoped"] = ll >= 6 && !p.landlock_in_worker;
  }
  layer("seccomp", p.seccomp,
        p.landlock_in_worker && ll ? "installed by the worker with Landlock" : "installed before exec");
  if (p.seccomp) j["seccomp"]["denied"] = seccomp_denied_calls();
  layer("memory_rlimits", p.memory_rlimits, "RLIMIT_DATA and RLIMIT_AS");
  j["memory_rlimits"]["watchdog_bytes"] = p.memory_bytes;
  j["file_size_bytes"] = p.max_file_bytes;
  layer("process_limit", p.isolation.max_tasks > 0 || p.nproc_rlimit > 0,
        p.isolation.max_tasks ? "pid_max of its PID namespace" : "RLIMIT_NPROC in its user namespace");
  if (p.isolation.max_tasks || p.nproc_rlimit) j["process_limit"]["max"] = p.max_tasks;
  layer("env_allowlist", p.env_allowlist, "only allowed variables, HOME and TMPDIR in the scratch folder");
  j["env_allowlist"]["kept"] = p.env_kept;
  layer("scratch", true,
        p.private_tmp ? "working folder removed after the eval; /tmp and /dev/shm private tmpfs"
                      : "working folder removed after the eval");
  j["scratch"]["private_tmp"] = p.private_tmp;
  layer("capabilities", p.isolation.drop_capabilities || (!p.isolation.user_ns && ::geteuid() != 0),
        p.isolation.drop_capabilities ? "all dropped before exec" : "none held (not root)");
  return j;
}

nlohmann::json sandbox_support() {
  using nlohmann::json;
  const IsolationSupport& sup = probe_isolation();
  json j = json::object();
  auto part = [&](const std::string& name, bool ok) {
    json v = {{"available", ok}};
    if (!ok) {
      auto it = sup.why_not.find(name);
      v["why_not"] = it == sup.why_not.end() ? "refused here" : it->second;
    }
    j[name] = v;
  };
  part("user_ns", sup.user_ns);
  part("pid_ns", sup.pid_ns);
  part("mount_ns", sup.mount_ns);
  part("net_ns", sup.net_ns);
  part("ipc_ns", sup.ipc_ns);
  part("own_proc", sup.own_proc);
  part("private_dirs", sup.private_dirs);
  part("max_tasks", sup.max_tasks);
  part("drop_capabilities", sup.drop_capabilities);
  const int ll = landlock_abi_version();
  j["landlock"] = ll ? json{{"available", true}, {"abi", ll}}
                     : json{{"available", false}, {"why_not", "unavailable on this kernel"}};
  std::string why;
  j["seccomp"] = seccomp_available(&why) ? json{{"available", true}} : json{{"available", false}, {"why_not", why}};
  j["runs_as_root"] = ::geteuid() == 0;
  return j;
}

std::vector<std::filesystem::path> default_read_paths() {
  return {"/usr/lib",
          "/usr/lib32",
          "/usr/lib64",
          "/usr/libexec",
          "/usr/bin",
          "/usr/sbin",
          "/usr/local",
          "/usr/include",
          "/usr/share/pocl",
          "/usr/riscv64-linux-gnu",
          "/lib",
          "/lib64",
          "/bin",
          "/sbin",
          "/etc",
          "/proc",
          "/sys",
          "/dev",
          "/opt",
          "/run"};
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
  if (p.nproc_rlimit > 0) set(RLIMIT_NPROC, static_cast<rlim_t>(p.nproc_rlimit));
  if (p.landlock_in_worker && p.landlock && landlock_abi_version() > 0) return "";  // both in the worker
  if (std::string err = apply_landlock(p); !err.empty()) return err;
  return p.seccomp ? install_seccomp(0) : "";
}

std::string apply_seccomp() { return install_seccomp(SECCOMP_FILTER_FLAG_TSYNC); }

nlohmann::json landlock_to_json(const SandboxPolicy& p) {
  nlohmann::json j = {{"read", nlohmann::json::array()}, {"write", nlohmann::json::array()},
                      {"proc_write", p.proc_write},      {"private_tmp", p.private_tmp},
                      {"own_proc", p.own_proc},          {"seccomp", p.seccomp}};
  for (const auto& r : p.read_paths) j["read"].push_back(r.string());
  for (const auto& w : p.write_paths) j["write"].push_back(w.string());
  return j;
}

SandboxPolicy landlock_from_json(const nlohmann::json& j) {
  SandboxPolicy p;
  for (const auto& r : j.at("read")) p.read_paths.emplace_back(r.get<std::string>());
  for (const auto& w : j.at("write")) p.write_paths.emplace_back(w.get<std::string>());
  p.proc_write = j.value("proc_write", false);
  p.private_tmp = j.value("private_tmp", false);
  p.own_proc = j.value("own_proc", false);
  p.seccomp_with_landlock = j.value("seccomp", false);
  p.landlock_in_worker = true;
  return p;
}

std::string apply_landlock(const SandboxPolicy& p) {
  const int abi = p.landlock ? landlock_abi_version() : 0;
  if (abi == 0) return p.seccomp_with_landlock ? apply_seccomp() : "";
  __u64 handled = kV1All;
  if (abi >= 2) handled |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
  RulesetAttr attr;
  attr.handled_access_fs = handled;
  // No TCP bind or connect at all (no rule allows a port): no network where no network
  // namespace could be made. Scopes: no signal to, and no abstract socket of, a process outside
  // the sandbox (not for a worker that restricts itself after its driver started threads).
  if (abi >= 4) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  if (abi >= 6 && !p.landlock_in_worker) attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  const size_t attr_size = abi >= 6   ? sizeof attr
                           : abi >= 4 ? offsetof(RulesetAttr, scoped)
                                      : offsetof(RulesetAttr, handled_access_net);
  int rs = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0));
  if (rs < 0) return std::string("sandbox: landlock_create_ruleset failed: ") + std::strerror(errno);
  // Without a /proc of its own, the worker reads only its own entry and system-wide files there
  // (no other process's environ or cmdline). A GPU driver that writes /proc keeps all of it.
  const bool narrow_proc = !p.own_proc && !p.proc_write;
  for (const auto& r : p.read_paths) {
    if (narrow_proc && r == "/proc") continue;
    if (!add_rule(rs, r.c_str(), kReadAccess)) return "sandbox: cannot add read rule for " + r.string();
  }
  if (narrow_proc)
    for (const char* f : {"/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/filesystems", "/proc/sys",
                          "/proc/driver", "/proc/version", "/proc/self"})
      add_rule(rs, f, kReadAccess);
  for (const auto& w : p.write_paths)
    if (!add_rule(rs, w.c_str(), handled)) return "sandbox: cannot add write rule for " + w.string();
  // Device nodes (GPU drivers) must be writable; creating files under /dev is not needed.
  add_rule(rs, "/dev", kReadAccess | LANDLOCK_ACCESS_FS_WRITE_FILE | (abi >= 3 ? LANDLOCK_ACCESS_FS_TRUNCATE : 0));
  // /tmp and /dev/shm only where they are the worker's own tmpfs (gone with its namespace);
  // the host's would keep what the candidate wrote.
  if (p.private_tmp) {
    add_rule(rs, "/dev/shm", handled);
    add_rule(rs, "/tmp", handled);
  }
  // The process's own /proc entry stays writable: GPU drivers name their threads by writing
  // /proc/self/task/<tid>/comm (cuInit fails with CUDA_ERROR_OPERATING_SYSTEM otherwise).
  // /proc/self resolves here, in the child, to /proc/<pid> of the process that will exec.
  add_rule(rs, p.proc_write ? "/proc" : "/proc/self", kReadAccess | LANDLOCK_ACCESS_FS_WRITE_FILE);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "sandbox: PR_SET_NO_NEW_PRIVS failed";
  if (::syscall(SYS_landlock_restrict_self, rs, 0) != 0)
    return std::string("sandbox: landlock_restrict_self failed: ") + std::strerror(errno);
  ::close(rs);
  return p.seccomp_with_landlock ? apply_seccomp() : "";
}

}  // namespace mblast::runner
