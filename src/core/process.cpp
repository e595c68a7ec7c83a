#include "mblast/process.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "mblast/error.h"

extern char** environ;

namespace mblast {

namespace {
void close_if(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}
[[noreturn]] void child_fail(int err_fd, const std::string& msg) {
  (void)!::write(err_fd, msg.data(), msg.size());
  ::_exit(127);
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

bool write_text(const char* path, const char* text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const size_t n = std::strlen(text);
  const bool ok = ::write(fd, text, n) == static_cast<ssize_t>(n);
  ::close(fd);
  return ok;
}

// The kernel reserves the PIDs below 300 once a namespace's numbers wrap around (RESERVED_PIDS),
// so a pid_max of 300 + N leaves room for about N live processes and threads.
constexpr int kReservedPids = 300;

// In a forked child: a user namespace with uid and gid (of the parent namespace) as 0 inside,
// then the other namespaces, then the private mounts. "" or why a part failed.
std::string enter_namespaces(const Isolation& iso, uid_t uid, gid_t gid) {
  if (iso.user_ns) {
    if (::unshare(CLONE_NEWUSER) != 0) return errno_text("unshare(CLONE_NEWUSER)");
    char map[64];
    // An unprivileged process may map only its own ids, and gids only after giving up setgroups.
    if (!write_text("/proc/self/setgroups", "deny") && errno != ENOENT) return errno_text("write /proc/self/setgroups");
    std::snprintf(map, sizeof map, "0 %u 1", static_cast<unsigned>(uid));
    if (!write_text("/proc/self/uid_map", map)) return errno_text("write /proc/self/uid_map");
    std::snprintf(map, sizeof map, "0 %u 1", static_cast<unsigned>(gid));
    if (!write_text("/proc/self/gid_map", map)) return errno_text("write /proc/self/gid_map");
  }
  const int flags = (iso.mount_ns ? CLONE_NEWNS : 0) | (iso.pid_ns ? CLONE_NEWPID : 0) |
                    (iso.net_ns ? CLONE_NEWNET : 0) | (iso.ipc_ns ? CLONE_NEWIPC : 0);
  if (flags && ::unshare(flags) != 0) return errno_text("unshare(namespaces)");
  if (iso.mount_ns) {
    // Nothing mounted here may reach the host's namespace (a root runner's mounts are shared).
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno_text("mount --make-rprivate /");
    const std::string opts = "size=" + std::to_string(iso.private_dir_bytes) + ",mode=1777";
    // Held open across the tmpfs mounts, which hide them, then bound back read-only.
    struct Kept {
      int fd;
      std::string path;
      bool writable;
    };
    std::vector<Kept> kept;
    for (const auto& [list, writable] : {std::pair(&iso.keep_visible, false), std::pair(&iso.keep_writable, true)})
      for (const auto& k : *list) {
        const int fd = ::open(k.c_str(), O_PATH | O_CLOEXEC);
        if (fd >= 0) kept.push_back({fd, k.string(), writable});
      }
    for (const auto& d : iso.private_dirs)
      if (::mount("tmpfs", d.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
        return errno_text(("mount tmpfs on " + d.string()).c_str());
    for (const auto& [fd, path, writable] : kept) {
      struct stat st {};
      if (::fstat(fd, &st) != 0) return errno_text(("stat " + path).c_str());
      std::error_code ec;
      const std::filesystem::path target(path);
      std::filesystem::create_directories(S_ISDIR(st.st_mode) ? target : target.parent_path(), ec);
      if (!S_ISDIR(st.st_mode)) {
        const int f = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (f >= 0) ::close(f);
      }
      const std::string from = "/proc/self/fd/" + std::to_string(fd);
      if (::mount(from.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
          (!writable && ::mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                                nullptr) != 0))
        return errno_text(("bind " + path + " into the private tmpfs").c_str());
      ::close(fd);
    }
  }
  return "";
}

std::string drop_capabilities() {
  // No capabilities come back at exec (uid 0 included), and none can be regained.
  if (::prctl(PR_SET_SECUREBITS,
              SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
                  SECBIT_KEEP_CAPS_LOCKED,
              0, 0, 0) != 0)
    return errno_text("prctl(PR_SET_SECUREBITS)");
  for (int c = 0; c < 64; ++c)
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno == EINVAL) break;
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &hdr, data) != 0) return errno_text("capset");
  return "";
}

// In the process that will run the command, inside the PID namespace: its own /proc, the
// namespace's pid_max, no capabilities. "" or why a part failed.
std::string settle_in_namespace(const Isolation& iso) {
  if (iso.own_proc && ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return errno_text("mount proc on /proc");
  if (iso.max_tasks > 0 &&
      !write_text("/proc/sys/kernel/pid_max", std::to_string(kReservedPids + iso.max_tasks).c_str()))
    return errno_text("write the PID namespace's /proc/sys/kernel/pid_max");
  return "";
}

void close_all_but(int keep_fd) {
  for (int fd = 0; fd < 4096; ++fd)
    if (fd != keep_fd) ::close(fd);
}

// Init of the PID namespace: not the command itself, because init ignores the signals it sends
// itself (abort(), raise(SIGKILL)). It reaps orphans until the command ends, hands the
// command's wait status to the keeper, and ends: the kernel then kills what is left.
[[noreturn]] void be_init(pid_t command, int status_fd) {
  close_all_but(status_fd);
  for (;;) {
    int status = 0;
    const pid_t r = ::wait(&status);
    if (r < 0 && errno == EINTR) continue;
    if (r == command || r < 0) {
      if (r == command) (void)!::write(status_fd, &status, sizeof status);
      ::_exit(0);
    }
  }
}

// In the command's process: its pid, which the kernel turns into the keeper's view of it.
void send_own_pid(int sock) {
  ucred cred{::getpid(), ::getuid(), ::getgid()};
  char data = 'p';
  iovec io{&data, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof cred)] = {};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_CREDENTIALS;
  c->cmsg_len = CMSG_LEN(sizeof cred);
  std::memcpy(CMSG_DATA(c), &cred, sizeof cred);
  (void)::sendmsg(sock, &m, MSG_NOSIGNAL);
}

// The command's pid as this process sees it, or -1.
pid_t receive_pid(int sock) {
  char data;
  iovec io{&data, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(ucred))] = {};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  ssize_t n;
  while ((n = ::recvmsg(sock, &m, 0)) < 0 && errno == EINTR) {
  }
  if (n <= 0) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      ucred cred;
      std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
      return cred.pid;
    }
  return -1;
}

// The PID namespace's init is the keeper's child; the keeper waits for it and ends as the
// command did (its wait status comes from init on STATUS_FD). The kernel reaps the init only
// after every other process of the namespace has gone, so when the keeper ends, it is empty.
[[noreturn]] void keep(pid_t init, int status_fd) {
  close_all_but(status_fd);
  int status = 0;
  while (::waitpid(init, &status, 0) < 0 && errno == EINTR) {
  }
  int command_status = 0;
  if (::read(status_fd, &command_status, sizeof command_status) == static_cast<ssize_t>(sizeof command_status))
    status = command_status;
  if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::kill(::getpid(), sig);
  ::_exit(128 + sig);
}
}  // namespace

bool env_name_kept(const std::string& name, const std::vector<std::string>& keep) {
  for (const auto& k : keep) {
    if (!k.empty() && k.back() == '*' ? name.rfind(k.substr(0, k.size() - 1), 0) == 0 : name == k) return true;
  }
  return false;
}

Child::Child(Child&& o) noexcept { *this = std::move(o); }
Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0) kill();
    close_fds();
    pid_ = o.pid_;
    reap_ = o.reap_;
    in_fd_ = o.in_fd_;
    out_fd_ = o.out_fd_;
    to_fd_ = o.to_fd_;
    from_fd_ = o.from_fd_;
    o.pid_ = o.reap_ = -1;
    o.in_fd_ = o.out_fd_ = o.to_fd_ = o.from_fd_ = -1;
  }
  return *this;
}
Child::~Child() {
  if (reap_ > 0) kill();
  close_fds();
}
void Child::close_fds() {
  close_if(in_fd_);
  close_if(out_fd_);
  close_if(to_fd_);
  close_if(from_fd_);
}
void Child::close_stdin() { close_if(in_fd_); }

std::optional<Child::Exit> Child::wait(std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (reap_ <= 0) return Exit{true, 0, 0};
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(reap_, &status, deadline ? WNOHANG : 0);
    if (r == reap_) {
      pid_ = reap_ = -1;
      Exit e;
      if (WIFEXITED(status)) {
        e.exited = true;
        e.code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        e.signal = WTERMSIG(status);
      }
      return e;
    }
    if (r < 0 && errno != EINTR) {
      pid_ = reap_ = -1;
      return Exit{true, 0, 0};
    }
    if (deadline && std::chrono::steady_clock::now() >= *deadline) return std::nullopt;
    if (deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Child::Exit Child::kill() {
  if (reap_ <= 0) return Exit{true, 0, 0};
  if (pid_ != reap_) {
    // The command first: init then ends, and the keeper once every process in it has gone.
    ::kill(pid_, SIGKILL);
    if (auto e = wait(std::chrono::steady_clock::now() + std::chrono::seconds(5))) return *e;
  }
  ::kill(-reap_, SIGKILL);
  ::kill(reap_, SIGKILL);
  auto e = wait();
  return e.value_or(Exit{});
}

Child spawn(const SpawnOptions& opts) {
  if (opts.argv.empty()) throw Error("spawn: empty command");
  if (opts.inherit_fds.size() > 8) throw Error("spawn: at most 8 inherited fds");
  int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, to_p[2] = {-1, -1}, from_p[2] = {-1, -1}, err_p[2], pid_p[2] = {-1, -1};
  auto mk = [](int p[2]) {
    if (::pipe2(p, O_CLOEXEC) != 0) throw Error(std::string("spawn: pipe failed: ") + std::strerror(errno));
    // Payloads are tens of MB: a 1 MiB pipe (the default ceiling of pipe-max-size) instead of
    // 64 KiB cuts the wake-ups between writer and reader sixteen-fold. Best effort.
    ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  };
  if (opts.pipe_stdin) mk(in_p);
  if (opts.pipe_stdout) mk(out_p);
  if (opts.protocol_pipes) {
    mk(to_p);
    mk(from_p);
  }
  mk(err_p);
  const Isolation& iso = opts.isolation;
  if (iso.pid_ns) mk(pid_p);
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();

  // Prepare everything that allocates before fork.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    auto eq = s.find('=');
    if (eq != std::string::npos && opts.set_env.count(s.substr(0, eq))) continue;
    bool drop = false;
    for (const auto& pre : opts.drop_env_prefixes) drop = drop || s.rfind(pre, 0) == 0;
    if (drop) continue;
    if (opts.keep_env && (eq == std::string::npos || !env_name_kept(s.substr(0, eq), *opts.keep_env))) continue;
    env_strings.push_back(std::move(s));
  }
  for (const auto& [k, v] : opts.set_env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = opts.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string out_path = opts.output_file ? opts.output_file->string() : std::string();
  std::string cwd = opts.cwd ? opts.cwd->string() : std::string();

  pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("spawn: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);
    // Above every number the child gets below (0-4 and inherit_fds), so that none replaces it.
    int ef = ::fcntl(err_p[1], F_DUPFD_CLOEXEC, 64);
    if (ef < 0) ef = err_p[1];
    // Every fd the child keeps, out of the way first: the parent's may sit at a number that one
    // of the dup2 calls below (0-4, an inherited fd's) replaces, e.g. the stdout pipe at 4.
    auto away = [&](int f) {
      if (f < 0) return -1;
      const int moved = ::fcntl(f, F_DUPFD_CLOEXEC, 64);
      if (moved < 0) child_fail(ef, "spawn: cannot move an fd");
      return moved;
    };
    const int in_r = away(in_p[0]), out_w = away(out_p[1]), to_r = away(to_p[0]), from_w = away(from_p[1]);
    int moved[8];
    const size_t inherit = std::min<size_t>(opts.inherit_fds.size(), 8);
    for (size_t i = 0; i < inherit; ++i) moved[i] = away(opts.inherit_fds[i].first);
    if (opts.protocol_pipes && (::dup2(to_r, 3) < 0 || ::dup2(from_w, 4) < 0)) child_fail(ef, "spawn: dup2 failed");
    if (opts.pipe_stdin)
      ::dup2(in_r, 0);
    else if (opts.protocol_pipes || !out_path.empty()) {
      int dn = ::open("/dev/null", O_RDONLY);
      if (dn >= 0) ::dup2(dn, 0);
    }
    if (opts.pipe_stdout) ::dup2(out_w, 1);
    if (!out_path.empty()) {
      int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) child_fail(ef, "spawn: cannot open " + out_path);
      if (!opts.pipe_stdout) ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) child_fail(ef, "spawn: cannot enter " + cwd);
    for (size_t i = 0; i < inherit; ++i)
      if (::dup2(moved[i], opts.inherit_fds[i].second) < 0) child_fail(ef, "spawn: dup2 failed");
    if (iso.any()) {
      std::string err = enter_namespaces(iso, uid, gid);
      if (!err.empty()) child_fail(ef, "spawn: " + err);
      if (iso.pid_ns) {
        // Only a child enters the new PID namespace, as its init; this process keeps it, and
        // learns the command's pid from the credentials the command sends.
        int sock[2], status_p[2];
        if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sock) != 0 || ::pipe2(status_p, O_CLOEXEC) != 0)
          child_fail(ef, errno_text("spawn: socketpair"));
        const int on = 1;
        ::setsockopt(sock[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
        const pid_t init = ::fork();
        if (init < 0) child_fail(ef, errno_text("spawn: fork into the PID namespace"));
        if (init > 0) {
          ::close(sock[1]);
          ::close(status_p[1]);
          pid_t command = receive_pid(sock[0]);
          if (command <= 0) command = init;
          (void)!::write(pid_p[1], &command, sizeof command);
          keep(init, status_p[0]);
        }
        // Killed with the keeper, so that a killed keeper leaves no namespace behind.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        err = settle_in_namespace(iso);
        if (!err.empty()) child_fail(ef, "spawn: " + err);
        const pid_t command = ::fork();
        if (command < 0) child_fail(ef, errno_text("spawn: fork in the PID namespace"));
        if (command > 0) be_init(command, status_p[1]);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        send_own_pid(sock[1]);
        ::close(sock[1]);
      }
      if (iso.drop_capabilities) err = drop_capabilities();
      if (!err.empty()) child_fail(ef, "spawn: " + err);
    }
    if (opts.before_exec) {
      std::string err = opts.before_exec();
      if (!err.empty()) child_fail(ef, err);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    child_fail(ef, "spawn: cannot run " + std::string(argv[0]) + ": " + std::strerror(errno));
  }
  ::close(err_p[1]);
  Child c;
  c.pid_ = c.reap_ = pid;
  if (iso.pid_ns) {
    ::close(pid_p[1]);
    pid_t init = -1;
    ssize_t got;
    while ((got = ::read(pid_p[0], &init, sizeof init)) < 0 && errno == EINTR) {
    }
    if (got == static_cast<ssize_t>(sizeof init) && init > 0) c.pid_ = init;
    ::close(pid_p[0]);
  }
  if (opts.pipe_stdin) {
    ::close(in_p[0]);
    c.in_fd_ = in_p[1];
  }
  if (opts.pipe_stdout) {
    ::close(out_p[1]);
    c.out_fd_ = out_p[0];
  }
  if (opts.protocol_pipes) {
    ::close(to_p[0]);
    ::close(from_p[1]);
    c.to_fd_ = to_p[1];
    c.from_fd_ = from_p[0];
  }
  // The error pipe is close-on-exec: EOF with no bytes means exec succeeded.
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = ::read(err_p[0], buf, sizeof buf)) > 0) err.append(buf, static_cast<size_t>(n));
  ::close(err_p[0]);
  if (!err.empty()) {
    c.wait();
    throw Error(err);
  }
  return c;
}

namespace {
// The probe's child: tries each part of an Isolation in the order spawn() takes them and writes
// "part\twhy\n" lines to FD (an empty why: it worked).
[[noreturn]] void probe_child(int fd) {
  auto report = [fd](const char* part, const std::string& why) {
    const std::string line = std::string(part) + "\t" + why + "\n";
    (void)!::write(fd, line.data(), line.size());
  };
  const bool root = ::geteuid() == 0;
  Isolation user;
  user.user_ns = true;
  std::string why = enter_namespaces(user, ::geteuid(), ::getegid());
  report("user_ns", why);
  const bool in_user_ns = why.empty();
  auto one = [&](const char* part, void (*set)(Isolation&)) {
    Isolation i;
    set(i);
    const std::string w = enter_namespaces(i, 0, 0);
    report(part, w.empty() || in_user_ns || root ? w : w + " (not root, and no user namespace)");
    return w.empty();
  };
  const bool mnt = one("mount_ns", [](Isolation& i) { i.mount_ns = true; });
  one("net_ns", [](Isolation& i) { i.net_ns = true; });
  one("ipc_ns", [](Isolation& i) { i.ipc_ns = true; });
  if (mnt) {
    // enter_namespaces with mount_ns already did the private propagation; a tmpfs on /tmp here
    // is seen by nobody else.
    const std::string opts = "size=1048576,mode=1777";
    report("private_dirs", ::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0
                               ? ""
                               : errno_text("mount tmpfs on /tmp"));
  } else {
    report("private_dirs", "needs a mount namespace");
  }
  const bool pid = one("pid_ns", [](Isolation& i) { i.pid_ns = true; });
  const pid_t c = pid ? ::fork() : -1;
  if (c == 0) {
    std::string proc = !mnt ? "needs a mount namespace"
                       : ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0
                           ? ""
                           : errno_text("mount proc on /proc");
    report("own_proc", proc);
    if (!proc.empty())
      report("max_tasks", "needs the PID namespace's own /proc");
    else
      report("max_tasks",
             write_text("/proc/sys/kernel/pid_max", std::to_string(kReservedPids + 64).c_str())
                 ? ""
                 : errno_text("write pid_max in a PID namespace (per-namespace pid_max came with Linux 6.14)"));
    report("drop_capabilities",
           in_user_ns || root ? drop_capabilities() : "no capabilities held (not root, no user namespace)");
    ::_exit(0);
  }
  if (c > 0) {
    int st = 0;
    while (::waitpid(c, &st, 0) < 0 && errno == EINTR) {
    }
  } else {
    const char* w = pid ? "fork failed" : "needs a PID namespace";
    report("own_proc", w);
    report("max_tasks", w);
    report("drop_capabilities",
           in_user_ns || root ? drop_capabilities() : "no capabilities held (not root, no user namespace)");
  }
  ::_exit(0);
}
}  // namespace

const IsolationSupport& probe_isolation() {
  static std::once_flag once;
  static IsolationSupport s;
  std::call_once(once, [] {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      s.why_not["user_ns"] = errno_text("pipe");
      return;
    }
    const pid_t c = ::fork();
    if (c == 0) {
      ::close(p[0]);
      probe_child(p[1]);
    }
    ::close(p[1]);
    std::string text;
    char buf[512];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0) text.append(buf, static_cast<size_t>(n));
    ::close(p[0]);
    if (c > 0) {
      int st = 0;
      while (::waitpid(c, &st, 0) < 0 && errno == EINTR) {
      }
    }
    const std::map<std::string, bool*> parts = {{"user_ns", &s.user_ns},
                                                {"pid_ns", &s.pid_ns},
                                                {"mount_ns", &s.mount_ns},
                                                {"net_ns", &s.net_ns},
                                                {"ipc_ns", &s.ipc_ns},
                                                {"own_proc", &s.own_proc},
                                                {"private_dirs", &s.private_dirs},
                                                {"max_tasks", &s.max_tasks},
                                                {"drop_capabilities", &s.drop_capabilities}};
    for (const auto& [name, flag] : parts) s.why_not[name] = c < 0 ? errno_text("fork") : "the probe did not report it";
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      start = end + 1;
      const size_t tab = line.find('\t');
      if (tab == std::string::npos) continue;
      auto it = parts.find(line.substr(0, tab));
      if (it == parts.end()) continue;
      const std::string why = line.substr(tab + 1);
      *it->second = why.empty();
      if (why.empty())
        s.why_not.erase(it->first);
      else
        s.why_not[it->first] = why;
    }
  });
  return s;
}

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s,
                          const std::optional<std::filesystem::path>& cwd, size_t max_output) {
  auto t0 = std::chrono::steady_clock::now();
  SpawnOptions o;
  o.argv = argv;
  o.cwd = cwd;
  o.pipe_stdout = true;
  o.before_exec = [] {
    ::dup2(1, 2);
    return std::string();
  };
  Child c = spawn(o);
  auto deadline = t0 + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  CommandResult r;
  char buf[8192];
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd p{c.stdout_fd(), POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t n = ::read(c.stdout_fd(), buf, sizeof buf);
    if (n <= 0) break;
    if (r.output.size() < max_output)
      r.output.append(buf, std::min<size_t>(static_cast<size_t>(n), max_output - r.output.size()));
  }
  if (r.timed_out)
    r.exit = c.kill();
  else
    r.exit = c.wait().value_or(Child::Exit{});
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string shell_quote(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain =
        !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
                          std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char ch : a) out += (ch == '\'') ? std::string("'\\''") : std::string(1, ch);
    out += '\'';
  }
  return out;
}

std::optional<std::filesystem::path> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return std::filesystem::path(name);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::filesystem::path cand = std::filesystem::path(p.substr(start, end - start)) / name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return std::nullopt;
}

std::string prefer_huge_pages_in_children() {
  if (const char* v = std::getenv("MBLAST_HUGE_PAGES"); v && std::string(v) == "0") return "";
  const char* cur = std::getenv("GLIBC_TUNABLES");
  std::string value = cur ? cur : "";
  if (value.find("glibc.malloc.hugetlb") != std::string::npos) return "";
  value += (value.empty() ? "" : ":") + std::string("glibc.malloc.hugetlb=1");
  ::setenv("GLIBC_TUNABLES", value.c_str(), 1);
  return value;
}

void restart_with_huge_pages(char** argv) {
  if (prefer_huge_pages_in_children().empty()) return;
  ::execv("/proc/self/exe", argv);  // returns only on failure: go on with 4 KiB pages here
}

}  // namespace mblast
