// Child processes: the runner (from the driver), the worker and compilers (from the runner).
// POSIX only. Every child gets its own process group, so killing it kills what it started.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace mblast {

// The Linux namespaces, mounts and privileges a child starts with (the candidate's worker).
// Every part asked for must take effect, or spawn() fails with the reason: the caller asks only
// for what probe_isolation() found this machine allows, so a result can say what was in force.
struct Isolation {
  bool user_ns = false;   // a user namespace; the caller's uid and gid are 0 inside
  bool pid_ns = false;    // a PID namespace with a small init of its own that ends when the command
                          // does: the kernel then kills every process in it (setsid or double fork too)
  bool mount_ns = false;  // a mount namespace of its own, private propagation (none reach the host)
  bool net_ns = false;    // a network namespace: only a loopback of its own, left down
  bool ipc_ns = false;    // System V IPC and POSIX message queues of its own (gone with it)
  bool own_proc = false;  // (pid_ns, mount_ns) /proc mounted for the new PID namespace: no other process's /proc
  // (mount_ns) An empty tmpfs of private_dir_bytes on each of these (/tmp, /dev/shm): what the
  // command writes there goes when the namespace ends.
  std::vector<std::filesystem::path> private_dirs;
  size_t private_dir_bytes = 256u << 20;
  // Host paths beneath the private dirs that stay visible there, bound read-only over the tmpfs.
  std::vector<std::filesystem::path> keep_visible;
  std::vector<std::filesystem::path> keep_writable;  // the same, bound read-write
  // (own_proc) The PID namespace's pid_max (Linux >= 6.14), so that it holds at most about this
  // many processes and threads; 0: no such limit.
  int max_tasks = 0;
  // No capabilities at exec, even as uid 0 (inside the user namespace, or a root runner without
  // one): the command cannot undo the mounts or leave the namespaces.
  bool drop_capabilities = false;
  bool any() const { return user_ns || pid_ns || mount_ns || net_ns || ipc_ns || drop_capabilities; }
};

// What this machine lets a child of this process have, found once by starting a throwaway child
// that tries each part (cached; thread-safe). A part that is refused carries the reason.
struct IsolationSupport {
  bool user_ns = false, pid_ns = false, mount_ns = false, net_ns = false, ipc_ns = false;
  bool own_proc = false, private_dirs = false, max_tasks = false, drop_capabilities = false;
  std::map<std::string, std::string> why_not;  // part name ("user_ns", "own_proc", ...) -> why it is refused
};
const IsolationSupport& probe_isolation();

// Whether an environment variable NAME is on an allow-list (names, or prefixes ending in '*').
bool env_name_kept(const std::string& name, const std::vector<std::string>& keep);

struct SpawnOptions {
  std::vector<std::string> argv;
  std::map<std::string, std::string> set_env;  // added to (or replacing in) the inherited environment
  std::vector<std::string> drop_env_prefixes;  // inherited variables starting with these are removed
  // When set, an allow-list: of the inherited environment only variables named here (or starting
  // with an entry that ends in '*') are passed on; set_env is passed on in any case.
  std::optional<std::vector<std::string>> keep_env;
  Isolation isolation;
  std::optional<std::filesystem::path> cwd;
  // The child's fds 0 and 1 are pipes to the parent when these are true.
  bool pipe_stdin = false;
  bool pipe_stdout = false;
  // Where the child's stdout/stderr go when not piped (nullopt: inherited).
  std::optional<std::filesystem::path> output_file;
  // Extra pipes: child fd 3 reads what the parent writes to to_child_fd, child fd 4 writes
  // what the parent reads from from_child_fd (the worker's protocol channel).
  bool protocol_pipes = false;
  // Parent fds the child gets at the given numbers (parent fd, child fd), e.g. a shared payload.
  // Child fds 0-4 are the ones above; use 5 and up.
  std::vector<std::pair<int, int>> inherit_fds;
  // Runs in the child after fork, before exec (limits, sandbox). Must be async-signal-safe in
  // spirit: no locks held by other threads. Returns an error text, or empty.
  std::function<std::string()> before_exec;
};

class Child {
 public:
  Child() = default;
  Child(Child&&) noexcept;
  Child& operator=(Child&&) noexcept;
  Child(const Child&) = delete;
  ~Child();  // kills and reaps a child still running

  // The process running the command, as this process sees it (with Isolation::pid_ns, what this
  // object waits for is a small keeper outside the namespace, which ends as the command did).
  pid_t pid() const { return pid_; }
  int stdin_fd() const { return in_fd_; }     // -1 when not piped
  int stdout_fd() const { return out_fd_; }   // -1 when not piped
  int to_child_fd() const { return to_fd_; }  // protocol_pipes only
  int from_child_fd() const { return from_fd_; }
  void close_stdin();

  struct Exit {
    bool exited = false;  // normal exit (then code), else killed by signal
    int code = 0;
    int signal = 0;
  };
  // Waits until the child ends or the deadline passes (nullopt then). Reaps it.
  std::optional<Exit> wait(std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  // SIGKILL to the child's process group (and its PID namespace), then reaps. When it returns,
  // no process of a PID namespace of the child's is left.
  Exit kill();
  bool running() const { return reap_ > 0; }

  friend Child spawn(const SpawnOptions& opts);

 private:
  void close_fds();
  pid_t pid_ = -1;   // runs the command
  pid_t reap_ = -1;  // what wait() reaps: pid_, or the keeper of its PID namespace
  int in_fd_ = -1, out_fd_ = -1, to_fd_ = -1, from_fd_ = -1;
};

// Starts a child. Throws Error when fork/exec cannot even start (the exec error is reported).
Child spawn(const SpawnOptions& opts);

// Runs a command to completion with a time limit, capturing stdout+stderr (truncated to
// max_output bytes). Used for compilers.
struct CommandResult {
  bool timed_out = false;
  Child::Exit exit;
  std::string output;
  double seconds = 0;
  bool ok() const { return !timed_out && exit.exited && exit.code == 0; }
};
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s,
                          const std::optional<std::filesystem::path>& cwd = std::nullopt,
                          size_t max_output = 256 * 1024);

// Quotes a command line for display in logs and error messages.
std::string shell_quote(const std::vector<std::string>& argv);

// Finds an executable on PATH (or returns the argument when it contains a slash and exists).
std::optional<std::filesystem::path> find_program(const std::string& name);

// Adds glibc.malloc.hugetlb=1 to GLIBC_TUNABLES in this process's environment, so that the
// processes it starts (the runner, the worker and the candidate, the PyTorch helper) get
// transparent huge pages for their large allocations (glibc >= 2.35; where the kernel's THP mode
// is `madvise` or `always`). With 4 KiB pages, first touching the gigabytes a full-size problem
// moves costs millions of page faults: a 512 MiB elementwise eval on pocl-cpu took 25-33 s
// instead of 20-21 s. Candidates and PyTorch baselines run alike either way. MBLAST_HUGE_PAGES=0 leaves the
// environment as it is, as does a GLIBC_TUNABLES that already sets glibc.malloc.hugetlb.
// Returns the value set, or "" when nothing was changed.
std::string prefer_huge_pages_in_children();

// The same for this process too: glibc reads its tunables at start, so when the variable had to
// be changed the program starts itself again (execv of /proc/self/exe with the same arguments).
// Returns only when it did not (nothing to change, or the exec failed).
void restart_with_huge_pages(char** argv);

}  // namespace mblast
