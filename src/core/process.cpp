#include "mblast/process.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

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
}  // namespace

Child::Child(Child&& o) noexcept { *this = std::move(o); }
Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0) kill();
    close_fds();
    pid_ = o.pid_; in_fd_ = o.in_fd_; out_fd_ = o.out_fd_; to_fd_ = o.to_fd_; from_fd_ = o.from_fd_;
    o.pid_ = -1; o.in_fd_ = o.out_fd_ = o.to_fd_ = o.from_fd_ = -1;
  }
  return *this;
}
Child::~Child() {
  if (pid_ > 0) kill();
  close_fds();
}
void Child::close_fds() {
  close_if(in_fd_); close_if(out_fd_); close_if(to_fd_); close_if(from_fd_);
}
void Child::close_stdin() { close_if(in_fd_); }

std::optional<Child::Exit> Child::wait(std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (pid_ <= 0) return Exit{true, 0, 0};
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, deadline ? WNOHANG : 0);
    if (r == pid_) {
      pid_ = -1;
      Exit e;
      if (WIFEXITED(status)) { e.exited = true; e.code = WEXITSTATUS(status); }
      else if (WIFSIGNALED(status)) { e.signal = WTERMSIG(status); }
      return e;
    }
    if (r < 0 && errno != EINTR) { pid_ = -1; return Exit{true, 0, 0}; }
    if (deadline && std::chrono::steady_clock::now() >= *deadline) return std::nullopt;
    if (deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Child::Exit Child::kill() {
  if (pid_ <= 0) return Exit{true, 0, 0};
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  auto e = wait();
  return e.value_or(Exit{});
}

Child spawn(const SpawnOptions& opts) {
  if (opts.argv.empty()) throw Error("spawn: empty command");
  if (opts.inherit_fds.size() > 8) throw Error("spawn: at most 8 inherited fds");
  int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, to_p[2] = {-1, -1}, from_p[2] = {-1, -1}, err_p[2];
  auto mk = [](int p[2]) {
    if (::pipe2(p, O_CLOEXEC) != 0) throw Error(std::string("spawn: pipe failed: ") + std::strerror(errno));
    // Payloads are tens of MB: a 1 MiB pipe (the default ceiling of pipe-max-size) instead of
    // 64 KiB cuts the wake-ups between writer and reader sixteen-fold. Best effort.
    ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  };
  if (opts.pipe_stdin) mk(in_p);
  if (opts.pipe_stdout) mk(out_p);
  if (opts.protocol_pipes) { mk(to_p); mk(from_p); }
  mk(err_p);

  // Prepare everything that allocates before fork.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    auto eq = s.find('=');
    if (eq != std::string::npos && opts.set_env.count(s.substr(0, eq))) continue;
    bool drop = false;
    for (const auto& pre : opts.drop_env_prefixes) drop = drop || s.rfind(pre, 0) == 0;
    if (drop) continue;
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
    if (opts.pipe_stdin) ::dup2(in_r, 0);
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
    if (opts.before_exec) {
      std::string err = opts.before_exec();
      if (!err.empty()) child_fail(ef, err);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    child_fail(ef, "spawn: cannot run " + std::string(argv[0]) + ": " + std::strerror(errno));
  }
  ::close(err_p[1]);
  Child c;
  c.pid_ = pid;
  if (opts.pipe_stdin) { ::close(in_p[0]); c.in_fd_ = in_p[1]; }
  if (opts.pipe_stdout) { ::close(out_p[1]); c.out_fd_ = out_p[0]; }
  if (opts.protocol_pipes) {
    ::close(to_p[0]); ::close(from_p[1]);
    c.to_fd_ = to_p[1]; c.from_fd_ = from_p[0];
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

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s,
                          const std::optional<std::filesystem::path>& cwd, size_t max_output) {
  auto t0 = std::chrono::steady_clock::now();
  SpawnOptions o;
  o.argv = argv;
  o.cwd = cwd;
  o.pipe_stdout = true;
  o.before_exec = [] { ::dup2(1, 2); return std::string(); };
  Child c = spawn(o);
  auto deadline = t0 + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  CommandResult r;
  char buf[8192];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) { r.timed_out = true; break; }
    pollfd p{c.stdout_fd(), POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t n = ::read(c.stdout_fd(), buf, sizeof buf);
    if (n <= 0) break;
    if (r.output.size() < max_output) r.output.append(buf, std::min<size_t>(static_cast<size_t>(n), max_output - r.output.size()));
  }
  if (r.timed_out) r.exit = c.kill();
  else r.exit = c.wait().value_or(Child::Exit{});
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string shell_quote(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == std::string::npos;
    if (plain) { out += a; continue; }
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
