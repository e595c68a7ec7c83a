// KernelbenchServer (the bench's one PyTorch helper process) against stand-in servers: shell
// scripts in place of the Python interpreter, which answer, hang, die or write garbage.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "mblast/driver/kernelbench_tool.h"
#include "mblast/error.h"

namespace fs = std::filesystem;
using mblast::KernelbenchServer;

namespace {

class KernelbenchServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("mblast-kbserver-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stand-in for `python3 mblast_kernelbench.py serve`: it gets the tool's path and "serve" as
  // arguments, requests on fd 3 and answers on fd 4. Every start appends its pid to `pids`.
  std::string server(const std::string& name, const std::string& body) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\necho $$ >> " << (dir_ / "pids").string() << "\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }
  std::vector<pid_t> pids() const {
    std::vector<pid_t> v;
    std::ifstream in(dir_ / "pids");
    for (pid_t p; in >> p;) v.push_back(p);
    return v;
  }
  static bool gone(pid_t p) { return ::kill(p, 0) != 0 && errno == ESRCH; }

  fs::path dir_;
};

// Answers every request with an exit status of 3, until its stdin closes.
const char* kAnswers = "while read -r line <&3; do printf '{\"exit\":3,\"payload_bytes\":0}\\n' >&4; done";

TEST_F(KernelbenchServerTest, OneProcessAnswersEveryRequest) {
  KernelbenchServer s(server("answers.sh", kAnswers));
  EXPECT_EQ(s.run({"baseline", "a"}, 10), 3);
  EXPECT_EQ(s.run({"baseline", "b"}, 10), 3);
  EXPECT_EQ(pids().size(), 1u) << "started once for both requests";
}

// No answer within the time-out: a one-line reason, the server killed (it would hold the CPU or
// GPU that the next measurement needs), and a new one started for the next request.
TEST_F(KernelbenchServerTest, AServerThatHangsIsKilledAndTheNextRequestGetsANewOne) {
  const std::string first = dir_ / "started";
  KernelbenchServer s(server(
      "hangs_once.sh", "if [ -e " + first + " ]; then " + kAnswers + "; fi\ntouch " + first + "\nexec sleep 600"));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s.run({"baseline", "slow"}, 1);
    FAIL() << "a server that never answered was taken at its word";
  } catch (const mblast::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("did not finish within 1 s"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
  ASSERT_EQ(pids().size(), 1u);
  EXPECT_TRUE(gone(pids()[0])) << "the hung server " << pids()[0] << " is still running";
  EXPECT_EQ(s.run({"baseline", "next"}, 10), 3);
  EXPECT_EQ(pids().size(), 2u);
}

// A server that dies, or answers with something that is not an exit status: nullopt (the caller
// runs the command in a process of its own to learn why), and a new server next time.
TEST_F(KernelbenchServerTest, ADeadOrGarbledServerIsNoAnswer) {
  KernelbenchServer dies(server("dies.sh", "read -r line <&3; exit 1"));
  EXPECT_EQ(dies.run({"baseline", "x"}, 10), std::nullopt);
  EXPECT_EQ(dies.run({"baseline", "y"}, 10), std::nullopt);
  EXPECT_EQ(pids().size(), 2u) << "started again after it died";
  for (pid_t p : pids()) EXPECT_TRUE(gone(p));

  KernelbenchServer garbage(
      server("garbage.sh", "read -r line <&3; echo 'Traceback (most recent call last):' >&4; exec sleep 600"));
  EXPECT_EQ(garbage.run({"baseline", "x"}, 10), std::nullopt);
  KernelbenchServer no_status(
      server("no_status.sh", "read -r line <&3; printf '{\"exit\":\"0\",\"payload_bytes\":0}\\n' >&4; exec sleep 600"));
  EXPECT_EQ(no_status.run({"baseline", "x"}, 10), std::nullopt);
  ASSERT_EQ(pids().size(), 4u);
  EXPECT_TRUE(gone(pids()[2])) << "a garbled server is stopped";
  EXPECT_TRUE(gone(pids()[3]));
}

TEST_F(KernelbenchServerTest, AServerThatCannotStartIsNoAnswer) {
  KernelbenchServer s((dir_ / "no-such-python").string());
  EXPECT_EQ(s.run({"baseline", "x"}, 10), std::nullopt);
}

}  // namespace
