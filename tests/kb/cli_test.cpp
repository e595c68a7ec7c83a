// `mblast kb ...` end to end through cli_main, with MBLAST_KB pointing at scratch files, and
// eight `mblast kb import` processes writing one KB at once.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_capture.h"
#include "kb_test_support.h"
#include "mblast/kb/exchange.h"
#include "mblast/kb/schema.h"

namespace mblast {
namespace {

using kb::testing::ScratchDir;
using nlohmann::json;
namespace fs = std::filesystem;

using Result = mblast::testing::CliResult;
Result run(std::vector<std::string> args) { return mblast::testing::run_cli(std::move(args)); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class KbCli : public ::testing::Test {
 protected:
  void SetUp() override {
    kb_file = dir / "kb.sqlite";
    ::setenv("MBLAST_KB", kb_file.c_str(), 1);
  }
  void TearDown() override { ::unsetenv("MBLAST_KB"); }
  ScratchDir dir;
  fs::path kb_file;
};

TEST_F(KbCli, InitCreatesTheDefaultKbAndLoadsTheSeedOnce) {
  const Result r = run({"kb", "init", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["kb"], kb_file.string());
  EXPECT_TRUE(j["created"].get<bool>());
  EXPECT_EQ(j["integrity"], "ok");
  EXPECT_GE(j["seed"]["actions_per_backend"]["cuda"].get<int>(), 40);
  EXPECT_GE(j["seed"]["actions_per_backend"]["opencl"].get<int>(), 25);
  EXPECT_GE(j["seed"]["actions_per_backend"]["rvv"].get<int>(), 25);
  const json again = json::parse(run({"kb", "init", "--json"}).out);
  EXPECT_FALSE(again["created"].get<bool>());
  EXPECT_EQ(again["seed"]["actions_added"], 0);
  const Result people = run({"kb", "init"});
  EXPECT_NE(people.out.find("up to date"), std::string::npos) << people.out;
}

TEST_F(KbCli, StatsJsonCountsPerBackendSeedAndLearnedApart) {
  ASSERT_EQ(run({"kb", "init"}).rc, 0);
  {
    kb::KnowledgeBase kb(kb_file);
    kb.add_target(kb::testing::target("h100", "cuda", "sm_90"));
    const auto s = kb::testing::add_state(
        kb, kb::testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.5, 0.02));
    kb::testing::add_experience(kb, s, "cuda.online-softmax", "h100", true, 1.4);
    kb::testing::add_experience(kb, s, "cuda.hopper-wgmma", "h100", false, 0, "build_failed");
  }
  const Result r = run({"kb", "stats", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  const json& cuda = j["backends"]["cuda"];
  EXPECT_GE(cuda["actions"]["seed"].get<int>(), 40);
  EXPECT_EQ(cuda["actions"]["learned"], 0);
  EXPECT_EQ(cuda["states"]["learned"], 1);
  EXPECT_EQ(cuda["experiences"]["learned"], 2);
  EXPECT_EQ(cuda["experiences"]["seed"], 0);
  EXPECT_GT(cuda["constraints"]["seed"].get<int>(), 0);
  EXPECT_EQ(cuda["constraints"]["learned"], 1);  // the build failure
  EXPECT_GE(j["backends"]["rvv"]["actions"]["seed"].get<int>(), 25);
  EXPECT_EQ(j["backends"]["opencl"]["states"]["seed"], 0);
  EXPECT_EQ(j["schema_version"], kb::latest_schema_version());
  const Result table = run({"kb", "stats"});
  EXPECT_NE(table.out.find("seed/learned"), std::string::npos);
}

TEST_F(KbCli, QueryAnswersWhatWorkedForMemoryBoundSoftmaxOnSm90) {
  ASSERT_EQ(run({"kb", "init"}).rc, 0);
  {
    kb::KnowledgeBase kb(kb_file);
    kb.add_target(kb::testing::target("h100", "cuda", "sm_90"));
    const auto s = kb::testing::add_state(
        kb, kb::testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.45, 0.02));
    for (int i = 0; i < 3; ++i)
      kb::testing::add_experience(kb, s, "cuda.vectorized-global-access", "h100", true, 1.9, "",
                                  "v" + std::to_string(i));
  }
  const Result r =
      run({"kb", "query", "--target", "sm_90", "--op-class", "softmax", "--bottleneck", "memory", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["query"]["backend"], "cuda");
  EXPECT_EQ(j["query"]["arch"], "sm_90");
  ASSERT_FALSE(j["actions"].empty());
  EXPECT_EQ(j["actions"][0]["id"], "cuda.vectorized-global-access");
  EXPECT_EQ(j["actions"][0]["wins"], 3);
  EXPECT_EQ(j["actions"][0]["examples"].size(), 3u);
  EXPECT_EQ(j["nearest_states"][0]["same_target"], true) << "a query by arch treats that arch as the same target";
  // By target name (from targets/*.json) and with a text filter; people's table too.
  const Result named = run({"kb", "query", "--target", "h100", "--text", "shuffle", "--json"});
  ASSERT_EQ(named.rc, 0) << named.err;
  for (const auto& a : json::parse(named.out)["actions"])
    EXPECT_NE(a["id"].get<std::string>().find("shuffle"), std::string::npos);
  const Result table = run({"kb", "query", "--backend", "rvv", "--op-class", "softmax", "-n", "5"});
  EXPECT_EQ(table.rc, 0);
  EXPECT_NE(table.out.find("rvv."), std::string::npos) << table.out;
  const Result bad = run({"kb", "query", "--target", "no-such-thing"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("no-such-thing"), std::string::npos);
}

TEST_F(KbCli, ShowFindsRowsByIdOrPrefix) {
  ASSERT_EQ(run({"kb", "init"}).rc, 0);
  const Result r = run({"kb", "show", "cuda.hopper-wgmma", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["kind"], "action");
  EXPECT_EQ(j["record"]["provenance"]["kind"], "seed");
  EXPECT_FALSE(j["details"]["constraints"].empty());
  const Result people = run({"kb", "show", "cuda.blackwell-tensor"});
  EXPECT_EQ(people.rc, 0) << people.err;
  EXPECT_NE(people.out.find("Tensor Memory"), std::string::npos);
  const Result ambiguous = run({"kb", "show", "cuda.hopper"});
  EXPECT_EQ(ambiguous.rc, 2);
  EXPECT_NE(ambiguous.err.find("ambiguous"), std::string::npos);
  EXPECT_EQ(run({"kb", "show", "zzzzzz"}).rc, 2);
}

TEST_F(KbCli, ExportImportRoundTripThroughFiles) {
  ASSERT_EQ(run({"kb", "init"}).rc, 0);
  {
    kb::KnowledgeBase kb(kb_file);
    kb.add_target(kb::testing::target("h100", "cuda", "sm_90"));
    const auto s = kb::testing::add_state(
        kb, kb::testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.5, 0.02));
    kb::testing::add_experience(kb, s, "cuda.online-softmax", "h100", true, 1.4, "", "code");
  }
  const auto out1 = dir / "one.jsonl", out2 = dir / "two.jsonl", empty = dir / "empty.sqlite";
  ASSERT_EQ(run({"kb", "export", "--out", out1.string()}).rc, 0);
  const Result imp = run({"kb", "import", out1.string(), "--kb", empty.string(), "--json"});
  ASSERT_EQ(imp.rc, 0) << imp.err;
  EXPECT_GT(json::parse(imp.out)["total_added"].get<int>(), 100);
  ASSERT_EQ(run({"kb", "export", "--kb", empty.string(), "--out", out2.string()}).rc, 0);
  EXPECT_EQ(slurp(out1), slurp(out2));
  EXPECT_FALSE(fs::exists(out1.string() + ".partial"));
  // Standard output works too.
  EXPECT_EQ(run({"kb", "export"}).out, slurp(out1));
  // Importing again adds nothing.
  EXPECT_EQ(json::parse(run({"kb", "import", out1.string(), "--kb", empty.string(), "--json"}).out)["total_added"], 0);
}

TEST_F(KbCli, MergeAndDiff) {
  const auto other = dir / "other.sqlite";
  ASSERT_EQ(run({"kb", "init"}).rc, 0);
  ASSERT_EQ(run({"kb", "init", "--kb", other.string()}).rc, 0);
  {
    kb::KnowledgeBase kb(other);
    kb.add_target(kb::testing::target("a100", "cuda", "sm_80"));
    const auto s =
        kb::testing::add_state(kb, kb::testing::signature("cuda", "sm_80", "a100", "matmul", "compute", 80, 0.2, 0.7));
    kb::testing::add_experience(kb, s, "cuda.tensor-core-mma", "a100", true, 3.0, "", "mma kernel");
  }
  const Result d = run({"kb", "diff", other.string(), "--json"});
  ASSERT_EQ(d.rc, 0) << d.err;
  const json dj = json::parse(d.out);
  EXPECT_FALSE(dj["identical"].get<bool>());
  EXPECT_EQ(dj["only_there"]["experience"].size(), 1u);
  EXPECT_TRUE(dj["only_here"].empty());
  const Result m = run({"kb", "merge", other.string(), "--json"});
  ASSERT_EQ(m.rc, 0) << m.err;
  EXPECT_EQ(json::parse(m.out)["added"]["experience"], 1);
  EXPECT_TRUE(json::parse(run({"kb", "diff", other.string(), "--json"}).out)["identical"].get<bool>());
  EXPECT_EQ(json::parse(run({"kb", "merge", other.string(), "--json"}).out)["total_added"], 0);
  const Result people = run({"kb", "diff", other.string()});
  EXPECT_NE(people.out.find("same knowledge"), std::string::npos) << people.out;
  EXPECT_EQ(run({"kb", "merge", kb_file.string()}).rc, 2) << "merging a KB into itself is refused";
}

TEST_F(KbCli, DamagedOrLockedKbGivesOneLineAndExitStatusTwo) {
  std::ofstream(kb_file) << "this is not a database, just some text that is long enough to have a header";
  Result r = run({"kb", "stats"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(kb_file.string()), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  fs::remove(kb_file);
  ASSERT_EQ(run({"kb", "init"}).rc, 0);
  kb::Database holder(kb_file, kb::Database::Mode::read_write, 0);
  holder.exec("BEGIN IMMEDIATE");
  holder.exec("INSERT INTO provenance (kind, source) VALUES ('learned', 'holder')");
  ::setenv("MBLAST_KB_BUSY_TIMEOUT_MS", "50", 1);
  r = run({"kb", "init"});
  ::unsetenv("MBLAST_KB_BUSY_TIMEOUT_MS");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("locked"), std::string::npos) << r.err;
  holder.exec("ROLLBACK");
}

TEST_F(KbCli, EightConcurrentImportProcessesLoseNothing) {
  const fs::path mblast = fs::path(MBLAST_TEST_BINARY_DIR) / "bin" / "mblast";
  if (!fs::exists(mblast)) GTEST_SKIP() << "build/bin/mblast is not built";
  ASSERT_EQ(run({"kb", "init"}).rc, 0);
  // Eight files, each with its own experiences on a shared seed.
  std::vector<fs::path> files;
  int expected = 0;
  for (int w = 0; w < 8; ++w) {
    kb::KnowledgeBase part = kb::KnowledgeBase::in_memory();
    part.add_action(kb::testing::action("cuda.shared", "cuda"));
    part.add_target(kb::testing::target("h100", "cuda", "sm_90"));
    const auto s = kb::testing::add_state(
        part, kb::testing::signature("cuda", "sm_90", "h100", "norm", "memory", 1, 0.1 * w, 0.1));
    for (int i = 0; i < 25; ++i, ++expected)
      kb::testing::add_experience(part, s, "cuda.shared", "h100", true, 1.0 + i * 0.01);
    files.push_back(dir / ("part" + std::to_string(w) + ".jsonl"));
    std::ofstream out(files.back());
    kb::write_jsonl(kb::export_records(part), out);
  }
  std::vector<pid_t> pids;
  for (const auto& f : files) {
    const pid_t pid = fork();
    if (pid == 0) {
      ::setenv("MBLAST_KB_BUSY_TIMEOUT_MS", "60000", 1);
      const int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, 1);
      execl(mblast.c_str(), "mblast", "kb", "import", f.c_str(), "--json", static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  kb::KnowledgeBase kb(kb_file);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), expected);
  EXPECT_EQ(kb.db().query_int("SELECT sum(tries) FROM policy_stats"), expected);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM actions WHERE id = 'cuda.shared'"), 1);
  EXPECT_EQ(kb.integrity_check(), "ok");
}

}  // namespace
}  // namespace mblast
