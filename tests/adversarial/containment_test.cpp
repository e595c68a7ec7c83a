// Containment of the candidate's processes (issue 38, item 6): each case is a correct vec_add
// that also does one misdeed on its first call (tests/adversarial/containment/). The eval must
// stay correct (a misdeed that works where it should not aborts the candidate, naming it), and
// the world after the eval must show nothing of it: no process, no file, no connection. Run for
// every backend with a compute part and a target here; a backend without either is a skip.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "mblast/measure/evaluate.h"
#include "mblast/measure/runner_client.h"
#include "mblast/paths.h"
#include "mblast/runner/sandbox.h"
#include "test_env.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kSecret = "sk-mblast-containment-7f3a9c";

struct Case {
  std::string backend, name;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.backend << "/" << c.name; }

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (const auto& b : testing::all_backend_names())
    for (const char* n : {"setsid_children", "scratch_files", "env_secret", "proc_other", "tcp_connect", "fork_bomb",
                          "sysv_shm", "sets_clock"})
      v.push_back({b, n});
  return v;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

fs::path containment_dir() { return testing::source_dir() / "tests" / "adversarial" / "containment"; }

// Processes of this machine whose name (comm) is MARKER.
std::vector<pid_t> processes_named(const std::string& marker) {
  std::vector<pid_t> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string comm;
    try {
      comm = read_file(e.path() / "comm");
    } catch (const std::exception&) {
      continue;  // it ended while being read
    }
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm == marker) v.push_back(static_cast<pid_t>(std::stol(n)));
  }
  return v;
}

// Whether PRED holds within 3 s (the runner removes the worker after its last message).
template <class Pred>
bool within_3s(Pred&& pred) {
  for (int i = 0; i < 150; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// The marked processes still there after up to 3 s (the runner removes the worker after its
// last message); kills what is left, so that a failing run leaves nothing behind.
size_t survivors(const std::string& marker) {
  std::vector<pid_t> left;
  for (int i = 0; i < 150; ++i) {
    left = processes_named(marker);
    if (left.empty()) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t p : left) ::kill(p, SIGKILL);
  return left.size();
}

// A TCP listener on 127.0.0.1 with a port of the kernel's choosing.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port = ntohs(a.sin_port);
  }
  ~Listener() {
    if (fd >= 0) ::close(fd);
  }
  int connections() const {
    int n = 0;
    for (int c; (c = ::accept(fd, nullptr, nullptr)) >= 0; ++n) ::close(c);
    return n;
  }
};

class Containment : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    // In the environment of every runner the tests start (RunnerClient's runner inherits it).
    for (const char* k : {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MBLAST_TEST_SECRET"}) ::setenv(k, kSecret, 1);
  }
};

TEST_P(Containment, LeavesNothingBehind) {
  const Case& c = GetParam();
  const fs::path compute = containment_dir() / ("compute." + c.backend + testing::candidate_extension(c.backend));
  if (!fs::exists(compute)) GTEST_SKIP() << "NOT_SUPPORTED: no " << c.backend << " compute part";
  std::string why;
  auto targets = testing::available_targets(c.backend, &why);
  if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
  Problem p = load_problem(testing::source_dir() / "problems" / "vec_add");
  ensure_problem_data(p, true);

  // At most 15 characters: the kernel's limit for a process name.
  const std::string marker = "mbc" + std::to_string(::getpid() % 100000) + c.name.substr(0, 6);
  Listener listener;
  ASSERT_GT(listener.port, 0) << "cannot listen on 127.0.0.1";
  std::string code = read_file(containment_dir() / (c.name + ".c")) + "\n" + read_file(compute);
  code = std::regex_replace(code, std::regex("@MARKER@"), marker);
  code = std::regex_replace(code, std::regex("@SECRET@"), kSecret);
  code = std::regex_replace(code, std::regex("@PORT@"), std::to_string(listener.port));
  const long shm_size = 1000003 + ::getpid() % 1000;  // a System V segment the test can recognise
  code = std::regex_replace(code, std::regex("@SHMSIZE@"), std::to_string(shm_size));
  const fs::path work = fs::temp_directory_path() / ("mblast-contain-" + c.backend + "-" + c.name);
  fs::create_directories(work);
  const fs::path cand = work / ("candidate" + testing::candidate_extension(c.backend));
  std::ofstream(cand) << code;

  const Target& t = targets.front();  // the layers are the runner's, not the target's
  RunnerClient client(RunnerAddress{});
  EvalOptions o = testing::quick_timing();
  o.timing = false;  // the misdeed happens on the first call; verification is enough
  o.run_s = 60;
  o.memory_mb = 2048;
  json r = evaluate(p, t, cand, o, &client);
  const std::string said =
      r.value("reason", json()).dump() + "\nsandbox: " + r.value("sandbox", "") + "\nlog: " + r.value("log", "");
  EXPECT_TRUE(r.value("correct", false)) << "the misdeed worked or broke the eval: " << said;
  ASSERT_TRUE(r["sandbox_layers"].is_object()) << said;
  for (const auto& layer : runner::sandbox_layer_names()) EXPECT_TRUE(r["sandbox_layers"].contains(layer)) << layer;
  EXPECT_EQ(r.value("sandbox", "").find('\n'), std::string::npos) << "the sandbox line is one line";

  // The world after the eval.
  EXPECT_EQ(survivors(marker), 0u) << "processes the candidate started outlived its eval\n" << said;
  if (c.name == "scratch_files") {
    EXPECT_FALSE(fs::exists(fs::path("/dev/shm") / marker)) << "a file it wrote to /dev/shm survived";
    EXPECT_FALSE(fs::exists(fs::path("/tmp") / marker)) << "a file it wrote to /tmp survived";
    std::error_code ec;
    fs::path left;
    EXPECT_TRUE(within_3s([&] {
      left.clear();
      for (const auto& e : fs::directory_iterator(cache_dir() / "work", ec))
        if (fs::exists(e.path() / marker, ec)) left = e.path();
      return left.empty();
    })) << "its scratch folder survived: "
        << left;
    fs::remove(fs::path("/dev/shm") / marker, ec);
    fs::remove(fs::path("/tmp") / marker, ec);
  }
  EXPECT_EQ(listener.connections(), 0) << "the candidate reached a listener on 127.0.0.1";
  if (c.name == "sysv_shm") {
    // /proc/sysvipc/shm: key shmid perms size ...; a segment of the marked size outlived the eval.
    std::ifstream in("/proc/sysvipc/shm");
    std::string line;
    std::getline(in, line);
    bool left = false;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      long key = 0, id = 0, perms = 0, size = 0;
      f >> key >> id >> perms >> size;
      if (size == shm_size) {
        left = true;
        ::shmctl(static_cast<int>(id), IPC_RMID, nullptr);
      }
    }
    EXPECT_FALSE(left) << "a System V shared memory segment it made outlived the eval";
  }
  if (c.name == "fork_bomb") {
    const json& limit = r["sandbox_layers"]["process_limit"];
    if (limit.value("on", false))
      EXPECT_GT(limit.value("max", 0), 0);
    else
      std::cerr << "process limit off here: " << limit.dump() << "\n";
  }

  // The runner survives: the next eval on it works.
  json after = evaluate(p, t, p.dir / "candidates" / ("naive." + c.backend + testing::candidate_extension(c.backend)),
                        o, &client);
  EXPECT_TRUE(after.value("correct", false)) << "runner did not recover: " << after.value("reason", json()).dump();
}

INSTANTIATE_TEST_SUITE_P(AllBackends, Containment, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.backend + "_" + i.param.name; });

// A layer switched off is reported off, with why, in the line and in the object.
TEST(ContainmentLayers, SwitchedOffLayerIsReportedOff) {
  std::string why;
  std::vector<Target> targets;
  std::string backend;
  for (const char* b : {"opencl", "rvv", "cuda"})
    if (targets = testing::available_targets(b, &why); !targets.empty()) {
      backend = b;
      break;
    }
  if (targets.empty()) GTEST_SKIP() << "no backend here";
  Problem p = load_problem(testing::source_dir() / "problems" / "vec_add");
  ensure_problem_data(p, true);
  ::setenv("MBLAST_SANDBOX", "no-net-ns,no-seccomp", 1);
  RunnerClient client(RunnerAddress{});  // a runner started now reads the setting
  ::unsetenv("MBLAST_SANDBOX");
  EvalOptions o = testing::quick_timing();
  o.timing = false;
  json r = evaluate(p, targets.front(),
                    p.dir / "candidates" / ("naive." + backend + testing::candidate_extension(backend)), o, &client);
  ASSERT_TRUE(r.value("correct", false)) << r.dump(2);
  EXPECT_FALSE(r["sandbox_layers"]["net_ns"]["on"].get<bool>());
  EXPECT_FALSE(r["sandbox_layers"]["seccomp"]["on"].get<bool>());
  EXPECT_NE(r["sandbox_layers"]["net_ns"].value("why_off", "").find("MBLAST_SANDBOX"), std::string::npos);
  EXPECT_NE(r.value("sandbox", "").find("net_ns (switched off"), std::string::npos) << r.value("sandbox", "");
  EXPECT_NE(r.value("sandbox", "").find("seccomp off"), std::string::npos) << r.value("sandbox", "");
}

}  // namespace
}  // namespace mblast
