// Which part of the runner's sandbox stops the CUDA driver? Forks one child per variant of
// the sandbox policy; each applies it (through the runner's own apply_sandbox) and calls
// cuInit(0) from libcuda.so.1. Prints one line per variant. Diagnostic, run on a GPU machine:
//   build/tests/mblast_cuda_sandbox_probe
#include <dlfcn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "mblast/runner/sandbox.h"

using mblast::runner::SandboxPolicy;

namespace {

int cu_init() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  using Init = int (*)(unsigned);
  auto init = reinterpret_cast<Init>(dlsym(h, "cuInit"));
  if (!init) return -2;
  int r = init(0);
  if (r != 0) return r;
  using Count = int (*)(int*);
  auto count = reinterpret_cast<Count>(dlsym(h, "cuDeviceGetCount"));
  int n = 0;
  if (count && count(&n) == 0 && n > 0) return 0;
  return -3;
}

SandboxPolicy base() {
  SandboxPolicy p;
  p.memory_rlimits = false;
  p.read_paths = mblast::runner::default_read_paths();
  if (const char* home = std::getenv("HOME")) p.read_paths.push_back(home);
  p.write_paths = {"/tmp/mblast-probe-scratch"};
  return p;
}

}  // namespace

// The runner's worker as the runner makes it: paths as in runner_service.cpp (no $HOME), /proc
// writable, then exec.
SandboxPolicy worker_like(bool home, bool tmp) {
  SandboxPolicy p;
  p.memory_rlimits = false;
  p.proc_write = true;
  p.read_paths = mblast::runner::default_read_paths();
  p.read_paths.push_back("/tmp/mblast-probe-scratch");
  if (home && std::getenv("HOME")) p.read_paths.push_back(std::getenv("HOME"));
  p.write_paths = {"/tmp/mblast-probe-scratch/work", "/tmp/mblast-probe-scratch/driver-cache"};
  if (tmp) p.write_paths.push_back("/tmp");
  return p;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--cuinit") {
    int r = cu_init();
    std::fprintf(stderr, "  (exec'd) cuInit/cuDeviceGetCount gave %d\n", r);
    return r == 0 ? 0 : 99;
  }
  std::string self = "/proc/self/exe";
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) self.assign(buf, static_cast<size_t>(n));
  if (std::system("mkdir -p /tmp/mblast-probe-scratch/work /tmp/mblast-probe-scratch/driver-cache") != 0) return 2;
  // The exec'd copy lives in a path the sandbox lets it read and execute, like the runner's worker.
  if (std::system(("cp '" + self + "' /tmp/mblast-probe-scratch/probe").c_str()) != 0) return 2;
  auto exec_like = [](bool home, bool tmp, bool proc_write) {
    return [=]() {
      SandboxPolicy p = worker_like(home, tmp);
      p.proc_write = proc_write;
      std::string err = mblast::runner::apply_sandbox(p);
      if (!err.empty()) return err;
      execl("/tmp/mblast-probe-scratch/probe", "probe", "--cuinit", static_cast<char*>(nullptr));
      return std::string("exec failed");
    };
  };
  struct Variant {
    std::string name;
    std::function<std::string()> apply;
  };
  auto with = [](std::vector<std::string> extra_write, std::vector<std::string> extra_read = {}) {
    return [=]() {
      SandboxPolicy p = base();
      for (const auto& w : extra_write) p.write_paths.push_back(w);
      for (const auto& r : extra_read) p.read_paths.push_back(r);
      return mblast::runner::apply_sandbox(p);
    };
  };
  std::vector<Variant> variants = {
      {"no sandbox", [] { return std::string(); }},
      {"no_new_privs only",
       [] { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? std::string() : std::string("prctl"); }},
      {"landlock, write everywhere", with({"/"})},
      {"runner policy", with({})},
      {"+ write /proc", with({"/proc"})},
      {"+ write /sys", with({"/sys"})},
      {"+ write /dev", with({"/dev"})},
      {"+ write /run /var /tmp", with({"/run", "/var", "/tmp"})},
      {"+ write $HOME", with({std::getenv("HOME") ? std::getenv("HOME") : "/root"})},
      {"+ read /", with({}, {"/"})},
      {"worker-like, exec", exec_like(false, false, true)},
      {"worker-like, exec, + $HOME", exec_like(true, false, true)},
      {"worker-like, exec, + /tmp", exec_like(false, true, true)},
      {"worker-like, exec, no /proc", exec_like(false, false, false)},
  };
  int ok = 0;
  for (const auto& v : variants) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string err = v.apply();
      if (!err.empty()) {
        std::fprintf(stderr, "%s\n", err.c_str());
        _exit(200);
      }
      int r = cu_init();
      std::fprintf(stderr, "  %s: cuInit/cuDeviceGetCount gave %d\n", v.name.c_str(), r);
      _exit(r < 0 ? 100 - r : (r > 99 ? 99 : r));
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::printf("%-30s %s (exit %d)\n", v.name.c_str(), code == 0 ? "cuInit OK" : "FAILED", code);
    ok += code == 0;
  }
  return ok > 0 ? 0 : 1;
}
