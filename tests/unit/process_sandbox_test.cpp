#include <gtest/gtest.h>

#include <fcntl.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <fstream>

#include "mblast/error.h"
#include "mblast/process.h"
#include "mblast/runner/sandbox.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;

TEST(Process, CapturesOutputAndExitStatus) {
  auto r = run_command({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(r.exit.exited);
  EXPECT_EQ(r.exit.code, 3);
  EXPECT_NE(r.output.find("out"), std::string::npos);
  EXPECT_NE(r.output.find("err"), std::string::npos);
}

TEST(Process, TimeoutKillsTheWholeGroup) {
  auto r = run_command({"/bin/sh", "-c", "sleep 30 & sleep 30"}, 0.3);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 5);
}

// The processes mblast starts get glibc's huge-page tunable, added to what the user set, once.
TEST(Process, HugePagesTunableReachesChildrenBesideTheUsersTunables) {
  const char* saved = std::getenv("GLIBC_TUNABLES");
  const std::string before = saved ? saved : "";
  ::unsetenv("MBLAST_HUGE_PAGES");
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2", 1);
  EXPECT_EQ(prefer_huge_pages_in_children(), "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  EXPECT_EQ(prefer_huge_pages_in_children(), "");  // already there: left alone
  auto r = run_command({"/bin/sh", "-c", "printf %s \"$GLIBC_TUNABLES\""}, 10);
  EXPECT_EQ(r.output, "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  ::unsetenv("GLIBC_TUNABLES");
  ::setenv("MBLAST_HUGE_PAGES", "0", 1);  // the opt-out
  EXPECT_EQ(prefer_huge_pages_in_children(), "");
  EXPECT_EQ(std::getenv("GLIBC_TUNABLES"), nullptr);
  ::unsetenv("MBLAST_HUGE_PAGES");
  if (saved) ::setenv("GLIBC_TUNABLES", before.c_str(), 1);
}

// A parent fd passed on as the child's fd 5 arrives there, also from a number that the child's
// own set-up (the protocol pipes at 3 and 4) replaces.
TEST(Process, InheritedFdArrivesAtItsNumberFromAnyParentNumber) {
  const fs::path file = fs::path(::testing::TempDir()) / ("mblast-inherit-" + std::to_string(::getpid()));
  std::ofstream(file) << "passed on";
  std::vector<int> froms;  // each its own opening of the file (an offset of its own)
  for (int low : {3, 4})   // a free protocol number, if there is one in this process
    if (::fcntl(low, F_GETFD) < 0) {
      const int f = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (f == low || (::dup3(f, low, O_CLOEXEC) == low && ::close(f) == 0)) froms.push_back(low);
    }
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  froms.push_back(fd);
  for (int from : froms) {
    SCOPED_TRACE("parent fd " + std::to_string(from));
    SpawnOptions o;
    o.argv = {"/bin/sh", "-c", "cat <&5"};
    o.pipe_stdout = true;
    o.protocol_pipes = true;
    o.inherit_fds = {{from, 5}};
    Child c = spawn(o);
    std::string out;
    char buf[64];
    for (ssize_t n; (n = ::read(c.stdout_fd(), buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    c.wait();
    EXPECT_EQ(out, "passed on");
    ::close(from);
  }
  fs::remove(file);
}

TEST(Process, MissingProgramIsAnError) {
  SpawnOptions o;
  o.argv = {"/nonexistent/program"};
  EXPECT_THROW(spawn(o), Error);
}

TEST(Sandbox, CandidateProcessCannotReadFilesOutsideTheAllowedPaths) {
  if (runner::landlock_abi_version() == 0) GTEST_SKIP() << "landlock unavailable on this kernel";
  const fs::path secret = fs::temp_directory_path() / ("mblast-secret-" + std::to_string(::getpid()));
  std::ofstream(secret) << "expected outputs";
  runner::SandboxPolicy pol;
  pol.read_paths = runner::default_read_paths();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!runner::apply_sandbox(pol).empty()) ::_exit(10);
    FILE* f = std::fopen(secret.c_str(), "rb");
    FILE* lib = std::fopen("/etc/hostname", "rb");  // an allowed path still reads
    ::_exit(f ? 11 : (lib || errno == ENOENT) ? 0 : 12);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  fs::remove(secret);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: sandbox failed, 11: secret readable, 12: allowed path unreadable";
}

TEST(Sandbox, MemoryLimitStopsLargeAllocations) {
  runner::SandboxPolicy pol;
  pol.memory_bytes = 256u << 20;
  pid_t pid = ::fork();
  if (pid == 0) {
    runner::apply_sandbox(pol);
    void* p = std::malloc(size_t{1} << 30);
    ::_exit(p ? 1 : 0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a 1 GiB malloc succeeded under a 256 MiB limit";
}

}  // namespace
}  // namespace mblast
