// The ssh transport: the same eval through `ssh host mblast-runner` against an sshd this test
// starts on 127.0.0.1 with throwaway keys. Skips, with the reason, without root or sshd.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_capture.h"
#include "mblast/measure/evaluate.h"
#include "mblast/measure/runner_client.h"
#include "mblast/process.h"
#include "test_env.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;

int free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

bool port_open(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

class SshTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a throwaway sshd that accepts root logins";
    if (!fs::exists("/usr/sbin/sshd") || !find_program("ssh") || !find_program("ssh-keygen"))
      GTEST_SKIP() << "openssh-server / openssh-client not installed";
    dir_ = fs::temp_directory_path() / ("mblast-sshd-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all);
    fs::create_directories("/run/sshd");  // sshd's privilege-separation directory
    for (const char* k : {"host_key", "client_key"})
      ASSERT_TRUE(run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", (dir_ / k).string()}, 30).ok());
    fs::copy_file(dir_ / "client_key.pub", dir_ / "authorized_keys");
    port_ = free_port();
    std::ofstream(dir_ / "sshd_config") << "Port " << port_ << "\nListenAddress 127.0.0.1\nHostKey "
                                        << (dir_ / "host_key").string() << "\nAuthorizedKeysFile "
                                        << (dir_ / "authorized_keys").string()
                                        << "\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                                           "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                                        << "PidFile " << (dir_ / "sshd.pid").string() << "\n";
    SpawnOptions o;
    o.argv = {"/usr/sbin/sshd", "-D", "-e", "-f", (dir_ / "sshd_config").string()};
    o.output_file = dir_ / "sshd.log";
    sshd_ = spawn(o);
    for (int i = 0; i < 100 && !port_open(port_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(port_open(port_)) << "sshd did not start; see " << (dir_ / "sshd.log");
  }
  void TearDown() override {
    sshd_.kill();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  RunnerAddress address() const {
    RunnerAddress a;
    a.transport = "ssh";
    a.host = "root@127.0.0.1";
    a.port = port_;
    a.runner_path = std::getenv("MBLAST_RUNNER");
    a.ssh_options = {"-i", (dir_ / "client_key").string(), "-o", "StrictHostKeyChecking=no",
                     "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"};
    return a;
  }
  // `ssh://root@127.0.0.1:PORT/<runner>`, with the key in $MBLAST_SSH_OPTIONS (set for the test).
  std::string runner_url() const {
    const RunnerAddress a = address();
    std::string opts;
    for (const auto& o : a.ssh_options) opts += (opts.empty() ? "" : " ") + o;
    ::setenv("MBLAST_SSH_OPTIONS", opts.c_str(), 1);
    return "ssh://" + a.host + ":" + std::to_string(a.port) + a.runner_path;
  }
  fs::path dir_;
  int port_ = 0;
  Child sshd_;
};

using testing::run_cli;

TEST_F(SshTransport, EvalOverSshGivesTheSameVerdictsAsLocally) {
  std::string why;
  auto targets = testing::available_targets("opencl", &why);
  if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
  const Target& t = targets.front();
  EvalOptions o = testing::quick_timing();
  o.run_s = 8;
  RunnerClient client(address());
  EXPECT_EQ(client.describe().rfind("ssh ", 0), 0u) << client.describe();
  const fs::path relu = testing::source_dir() / "problems" / "relu";
  Problem p = load_problem(relu);
  auto good = evaluate(p, t, relu / "candidates" / "naive.opencl.cpp", o, &client);
  EXPECT_TRUE(good["correct"].get<bool>()) << good.dump(2);
  EXPECT_GT(good["time"]["median"].get<double>(), 0);
  EXPECT_EQ(good["runner"].get<std::string>().rfind("ssh ", 0), 0u);
  // A crash on the far side is a result there too, and the connection stays usable.
  const fs::path crash = testing::source_dir() / "tests" / "adversarial" / "opencl" / "crash.cpp";
  if (fs::exists(crash)) {
    auto bad = evaluate(load_problem(testing::source_dir() / "problems" / "vec_add"), t, crash, o, &client);
    EXPECT_EQ(bad["failure_kind"], "crashed") << bad.dump(2);
    auto again = evaluate(p, t, relu / "candidates" / "naive.opencl.cpp", o, &client);
    EXPECT_TRUE(again["correct"].get<bool>());
  }
}

TEST_F(SshTransport, RvvCandidateOverSshCostsTheSameAsLocally) {
  // The board path in miniature: the runner at the far end of ssh builds the riscv64 program
  // and runs it (here under qemu-user); the count must equal a local evaluation's.
  std::string why;
  auto targets = testing::available_targets("rvv", &why);
  if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
  const Target& t = targets.front();
  EvalOptions o;
  o.quiet = true;
  o.rotate = 2;
  o.run_s = 60;
  const fs::path dir = testing::source_dir() / "problems" / "vec_add";
  Problem p = load_problem(dir);
  RunnerClient remote(address());
  auto far = evaluate(p, t, dir / "candidates" / "naive.rvv.c", o, &remote);
  ASSERT_TRUE(far["correct"].get<bool>()) << far.dump(2);
  EXPECT_EQ(far["time"]["unit"], "instructions");
  auto near = evaluate(p, t, dir / "candidates" / "naive.rvv.c", o);
  ASSERT_TRUE(near["correct"].get<bool>());
  EXPECT_EQ(far["time"]["median"], near["time"]["median"]);
}

TEST_F(SshTransport, OptimizeMeasuresThroughTheRunnerItIsGiven) {
  std::string why;
  auto targets = testing::available_targets("opencl", &why);
  if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
  const std::string target = targets.front().name;
  const fs::path work = dir_ / "work";
  ::setenv("MBLAST_RUNS_DIR", (work / "runs").c_str(), 1);
  const std::string url = runner_url();
  const std::string relu = (testing::source_dir() / "problems" / "relu").string();
  auto opt = run_cli({"optimize", relu, "--target", target, "--runner", url, "--policy", "builtin", "--max-evals", "2",
                      "--kb", (work / "kb.sqlite").string(), "--no-confirm", "--json", "--min-time", "0.05"});
  EXPECT_EQ(opt.rc, 0) << opt.err;
  const auto r = nlohmann::json::parse(opt.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << opt.out << opt.err;
  // The result's measurements name the runner that made them: ssh, never the local one.
  EXPECT_NE(opt.out.find("\"runner\": \"ssh root@127.0.0.1"), std::string::npos) << opt.out;
  EXPECT_EQ(opt.out.find("\"runner\": \"local "), std::string::npos) << opt.out;

  // A wrong address is one line naming it, not a local measurement.
  auto bad = run_cli({"optimize", relu, "--target", target, "--runner",
                      "ssh://root@127.0.0.1:" + std::to_string(free_port()) + "/nowhere/mblast-runner", "--policy",
                      "builtin", "--max-evals", "1", "--kb", (work / "kb.sqlite").string(), "--no-confirm"});
  EXPECT_NE(bad.rc, 0);
  ::unsetenv("MBLAST_RUNS_DIR");
  ::unsetenv("MBLAST_SSH_OPTIONS");
}

TEST_F(SshTransport, UnreachableHostIsAOneLineError) {
  RunnerAddress a = address();
  a.port = free_port();  // nothing listens there
  try {
    RunnerClient client(a, 20);
    ADD_FAILURE() << "connected to a closed port";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("did not start"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace mblast
