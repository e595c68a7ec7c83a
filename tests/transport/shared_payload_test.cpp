// A local runner gets an eval's payload as shared memory (mblast/shared_payload.h) instead of
// through the pipes; the verdict is the same either way, and a runner that cannot open the
// payload says why in one line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "mblast/measure/evaluate.h"
#include "mblast/measure/runner_client.h"
#include "mblast/shared_payload.h"
#include "test_env.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The first local target of any backend that can run here (pocl-cpu in CI).
std::optional<Target> some_target(std::string* why) {
  for (const auto& backend : testing::all_backend_names()) {
    std::string w;
    auto t = testing::available_targets(backend, &w);
    if (!t.empty()) return t.front();
    *why += w + "; ";
  }
  return std::nullopt;
}

TEST(SharedPayload, ALargePayloadGoesAsSharedMemoryAndTheVerdictIsTheSame) {
  std::string why;
  const auto t = some_target(&why);
  if (!t) GTEST_SKIP() << "no backend can run here: " << why;
  const fs::path dir = testing::source_dir() / "problems" / "vec_add";
  const fs::path cand = dir / "candidates" / ("naive." + t->backend + testing::candidate_extension(t->backend));
  const fs::path wrong = testing::source_dir() / "tests" / "adversarial" / t->backend /
                         ("stale_output" + testing::candidate_extension(t->backend));
  const Problem p = load_problem(dir);

  ::unsetenv("MBLAST_SHARED_PAYLOAD");
  RunnerClient shared(RunnerAddress{});
  ASSERT_TRUE(shared.hello().contains("shared_payload"))
      << "the runner did not answer the probe: " << shared.hello().dump();
  if (!shared.shares_payloads())  // a machine whose /proc does not let the runner reopen it
    GTEST_SKIP() << "the runner cannot open this process's memfd: "
                 << shared.hello().value("shared_payload_refused", "");
  const json a = evaluate(p, *t, cand, testing::quick_timing(), &shared);
  ASSERT_TRUE(a["correct"].get<bool>()) << a.value("reason", json()).dump();
  EXPECT_TRUE(a["payload"]["shared"].get<bool>()) << a["payload"].dump();
  EXPECT_GE(a["payload"]["bytes"].get<size_t>(), size_t{1} << 20);

  ::setenv("MBLAST_SHARED_PAYLOAD", "0", 1);  // the opt-out: in the message, as to a remote runner
  RunnerClient piped(RunnerAddress{});
  ::unsetenv("MBLAST_SHARED_PAYLOAD");
  EXPECT_FALSE(piped.shares_payloads());
  const json b = evaluate(p, *t, cand, testing::quick_timing(), &piped);
  ASSERT_TRUE(b["correct"].get<bool>()) << b.value("reason", json()).dump();
  EXPECT_FALSE(b["payload"]["shared"].get<bool>());
  EXPECT_EQ(a["checks"], b["checks"]);  // the same outputs, checked the same way

  // A wrong candidate is seen to be wrong through shared memory too.
  if (fs::exists(wrong)) {
    const json w = evaluate(p, *t, wrong, testing::quick_timing(), &shared);
    EXPECT_FALSE(w["correct"].get<bool>());
    EXPECT_EQ(w["failure_kind"], "unwritten_output") << w.value("reason", json()).dump();
    EXPECT_TRUE(w["payload"]["shared"].get<bool>());
  }
}

TEST(SharedPayload, ARunnerThatCannotOpenOrTrustItSaysWhyInOneLine) {
  RunnerClient client(RunnerAddress{});
  auto refused = [&](const json& shared) {
    client.send({{"op", "eval"}, {"target", json::object()}, {"shared_payload", shared}});
    const protocol::Message m = client.receive(30);
    EXPECT_EQ(m.header.value("stage", ""), "failed") << m.header.dump();
    EXPECT_EQ(m.header.value("failure_kind", ""), "runner_error") << m.header.dump();
    const std::string reason = m.header.value("reason", "");
    EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
    return reason;
  };
  EXPECT_NE(refused({{"path", "/nonexistent/payload"}, {"bytes", 10}}).find("cannot open the shared payload"),
            std::string::npos);
  std::string why;
  const char data[16] = "sixteen bytes!!";
  auto small = SharedPayload::create(std::as_bytes(std::span(data)), &why);
  ASSERT_TRUE(small) << why;
  EXPECT_NE(refused({{"path", small->path()}, {"bytes", 32}}).find("does not hold the 32 bytes announced"),
            std::string::npos);

  // The runner stays usable, and answers a probe it cannot read with the reason.
  client.send(
      {{"op", "hello"}, {"protocol", protocol::kVersion}, {"shared_payload_probe", {{"path", "/nonexistent/probe"}}}});
  const protocol::Message h = client.receive(30);
  EXPECT_EQ(h.header.value("stage", ""), "hello");
  EXPECT_FALSE(h.header.value("shared_payload", true));
  EXPECT_NE(h.header.value("shared_payload_refused", "").find("cannot open"), std::string::npos) << h.header.dump();
}

// The worker holds the shared payload as an fd; it must not reach the driver's or the runner's
// fds (or memory) through /proc. Landlock denies that across its domain, also to root: a candidate
// that tries every other process's /proc/<pid>/mem and fds 0-11 (it writes no output where it
// reaches one) is correct. Outside the sandbox the same code reaches them (checked by hand as root).
TEST(SharedPayload, TheCandidateReachesNoOtherProcessThroughProc) {
  std::string why;
  const auto targets = testing::available_targets("opencl", &why);
  if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
  const fs::path dir = testing::source_dir() / "problems" / "vec_add";
  const Problem p = load_problem(dir);
  RunnerClient client(RunnerAddress{});
  const json r =
      evaluate(p, targets.front(), testing::source_dir() / "tests" / "transport" / "reach_other_processes.opencl.cpp",
               testing::quick_timing(), &client);
  if (r.value("sandbox", "").find("landlock abi") == std::string::npos)
    GTEST_SKIP() << "no Landlock here: " << r.value("sandbox", "");
  EXPECT_EQ(r["payload"]["shared"].get<bool>(), client.shares_payloads());
  EXPECT_TRUE(r["correct"].get<bool>()) << r.value("failure_kind", json()).dump() << "\n" << r.value("log", "");
}

}  // namespace
}  // namespace mblast
