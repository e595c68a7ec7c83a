// `mblast kb ...` on a PostgreSQL KB (issue 44) end to end through cli_main: init, seed, a record
// written and retrieved, export, merge from a SQLite file; and a postgresql:// URL never becoming
// a folder or showing its password. The server comes from pg_test_server.h.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_capture.h"
#include "mblast/driver/cli.h"
#include "mblast/kb/exchange.h"
#include "mblast/kb/schema.h"
#include "pg_test_server.h"

namespace mblast::kb {
namespace {

using nlohmann::json;
using testing::fill;
using testing::PgServer;
using testing::ScratchDir;
namespace fs = std::filesystem;

class PostgresCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = server.start();
    if (!why.empty()) GTEST_SKIP() << "no PostgreSQL server for this test: " << why;
    url = server.create_db("kb");
  }
  PgServer server;
  std::string url;
};

using Result = mblast::testing::CliResult;
using mblast::testing::run_cli;

// Issue 44's bug: `--kb postgresql://...` was taken as a path and a folder `postgresql:` appeared.
TEST(PostgresUrl, AUrlNeverBecomesAFolderAndAFailedConnectionIsOneLineWithoutThePassword) {
  ScratchDir dir;
  const fs::path old = fs::current_path();
  fs::current_path(dir.path());
  const std::string bad = "postgresql://ann:s3cret@/nodb?host=" + (dir / "no-server").string();
  try {
    KnowledgeBase kb(bad);
    ADD_FAILURE() << "connected to a server that does not exist";
  } catch (const KbFileError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
    EXPECT_NE(what.find("cannot connect"), std::string::npos) << what;
  }
  ::setenv("MBLAST_KB", bad.c_str(), 1);
  const Result r = run_cli({"kb", "stats"});
  ::unsetenv("MBLAST_KB");
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"kb", "init", "--kb", "mysql://ann@db/kb"}).rc, 2);
  fs::current_path(old);
  EXPECT_FALSE(fs::exists(dir / "postgresql:"));
  EXPECT_FALSE(fs::exists(dir / "mysql:"));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// What `ps` shows of a running mblast: its --kb URL, without the password.
TEST(PostgresUrl, ARunningMblastShowsItsKbUrlWithoutThePassword) {
  const fs::path mblast = fs::path(MBLAST_TEST_BINARY_DIR) / "bin" / "mblast";
  if (!fs::exists(mblast)) GTEST_SKIP() << "build/bin/mblast is not built";
  ScratchDir dir;
  // A "server" that takes the connection and never answers: mblast waits in libpq's connect
  // (its timeout is 10 s) while its arguments are read here.
  const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = (dir / ".s.PGSQL.5432").string();
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  const std::string url = "postgresql://ann:s3cret-in-argv@/kb?host=" + dir.path().string();
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(mblast.c_str(), "mblast", "kb", "stats", "--kb", url.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string shown;
  bool redacted = false;
  for (int i = 0; i < 200 && !redacted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    shown = testing::pg_detail::slurp(fmt::format("/proc/{}/cmdline", pid));
    std::replace(shown.begin(), shown.end(), '\0', ' ');
    redacted = shown.find("postgresql://ann@/kb?host=") != std::string::npos;
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(listener);
  EXPECT_TRUE(redacted) << shown;
  EXPECT_EQ(shown.find("s3cret"), std::string::npos) << shown;
}

TEST_F(PostgresCli, KbCommandsRoundTripExportAndMergeFromSqlite) {
  ::setenv("MBLAST_KB", url.c_str(), 1);
  const Result init = run_cli({"kb", "init", "--json"});
  ASSERT_EQ(init.rc, 0) << init.err;
  const json j = json::parse(init.out);
  EXPECT_EQ(j["kb"], url);
  EXPECT_TRUE(j["created"].get<bool>());
  EXPECT_EQ(j["integrity"], "ok");
  EXPECT_GE(j["seed"]["actions_per_backend"]["cuda"].get<int>(), 40);
  const json again = json::parse(run_cli({"kb", "init", "--json"}).out);
  EXPECT_FALSE(again["created"].get<bool>());
  {
    KnowledgeBase kb(url);
    EXPECT_EQ(kb.schema_version(), latest_schema_version());
    kb.add_target(testing::target("h100", "cuda", "sm_90"));
    const auto s =
        testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 1, 0.5, 0.1));
    const auto actions =
        kb.ranked_actions(testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 1, 0.5, 0.1));
    ASSERT_FALSE(actions.empty());
    const std::string e =
        testing::add_experience(kb, s, actions.front().id, "h100", true, 1.5, "", "__global__ void k() {}");
    const auto again_ranked =
        kb.ranked_actions(testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 1, 0.5, 0.1));
    const auto it = std::find_if(again_ranked.begin(), again_ranked.end(),
                                 [&](const RankedAction& a) { return a.id == actions.front().id; });
    ASSERT_NE(it, again_ranked.end());
    EXPECT_EQ(it->tries, 1);
    EXPECT_EQ(it->cluster_stats.tries, 1);
    ASSERT_EQ(it->examples.size(), 1u);
    EXPECT_EQ(it->examples[0].experience_id, e);
    EXPECT_EQ(kb.integrity_check(), "ok");
  }
  ScratchDir dir;
  const Result exp = run_cli({"kb", "export", "--out", (dir / "out.jsonl").string()});
  ASSERT_EQ(exp.rc, 0) << exp.err;
  EXPECT_NE(testing::pg_detail::slurp(dir / "out.jsonl").find("\"kind\":\"experience\""), std::string::npos);
  // Another team's SQLite KB merges into the server, statistics counted once.
  {
    KnowledgeBase theirs(dir / "theirs.sqlite");
    fill(theirs);
  }
  const Result merge = run_cli({"kb", "merge", (dir / "theirs.sqlite").string()});
  ASSERT_EQ(merge.rc, 0) << merge.err;
  const Result merge2 = run_cli({"kb", "merge", (dir / "theirs.sqlite").string(), "--json"});
  ASSERT_EQ(merge2.rc, 0) << merge2.err;
  // And back: the server merged into a local SQLite KB, which then holds the same knowledge.
  const Result back = run_cli({"kb", "merge", url, "--kb", (dir / "local.sqlite").string()});
  ASSERT_EQ(back.rc, 0) << back.err;
  const Result same = run_cli({"kb", "diff", url, "--kb", (dir / "local.sqlite").string(), "--json"});
  ASSERT_EQ(same.rc, 0) << same.err;
  EXPECT_TRUE(json::parse(same.out)["identical"].get<bool>()) << same.out;
  const Result stats = run_cli({"kb", "stats", "--json"});
  EXPECT_EQ(stats.rc, 0) << stats.err;
  const Result show = run_cli({"kb", "show", "cuda.test1"});
  EXPECT_EQ(show.rc, 0) << show.err;
  EXPECT_NE(show.out.find("title of cuda.test1"), std::string::npos) << show.out;
  ::unsetenv("MBLAST_KB");
  KnowledgeBase kb(url);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), 91);
  EXPECT_EQ(kb.db().query_int("SELECT sum(tries) FROM policy_stats"), 91);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM states WHERE id LIKE 'state%'"), 30);
  EXPECT_EQ(kb.integrity_check(), "ok");
  // And the merged server exported again equals the SQLite KB's knowledge.
  KnowledgeBase sqlite_kb(dir / "theirs.sqlite");
  const auto d = diff_records(export_records(sqlite_kb), export_records(kb));
  EXPECT_TRUE(d.only_here.empty());
  EXPECT_TRUE(d.different.empty()) << json(d.different).dump();
}

}  // namespace
}  // namespace mblast::kb
