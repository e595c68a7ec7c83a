// The knowledge base on a PostgreSQL server (`--kb postgresql://...`): each test starts a server
// of its own (Debian's postgresql 15: initdb into a scratch folder, listening only on a Unix
// socket in that folder) and stops it; skipped, with the reason, where one cannot start.
// Covered here: the same retrieval result as SQLite for the same data, the same tables on both
// engines, 16 concurrent writer processes losing nothing, concurrent critic edits all kept, a
// writer killed mid-transaction, a server restarted mid-run; a URL never becomes a folder and
// its password is never shown. The kb commands end to end: postgres_cli_test.cpp.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "mblast/kb/exchange.h"
#include "mblast/kb/schema.h"
#include "mblast/kb/seed.h"
#include "pg_test_server.h"

namespace mblast::kb {
namespace {

using nlohmann::json;
using testing::fill;
using testing::PgServer;
using testing::Postgres;
using testing::ScratchDir;
namespace fs = std::filesystem;

// ---- without a server ------------------------------------------------------------------------

TEST(PostgresUrl, PasswordIsRemovedWhereverAUrlIsShown) {
  EXPECT_EQ(redact_kb_location("postgresql://ann:s3cret@db.example:5433/kb"), "postgresql://ann@db.example:5433/kb");
  EXPECT_EQ(redact_kb_location("postgres://ann@db/kb?password=s3cret&sslmode=require"),
            "postgres://ann@db/kb?sslmode=require");
  EXPECT_EQ(redact_kb_location("postgresql://ann:p@ss@db/kb"), "postgresql://ann@db/kb");
  EXPECT_EQ(redact_kb_location("/home/ann/kb.sqlite"), "/home/ann/kb.sqlite");
  EXPECT_TRUE(is_postgresql_url("PostgreSQL://x@y/z"));
  EXPECT_FALSE(is_postgresql_url("postgresql.sqlite"));
  EXPECT_TRUE(looks_like_url("mysql://x@y/z"));
  EXPECT_FALSE(looks_like_url("./kb://odd"));
}

TEST(PostgresUrl, PlaceholdersAreNumberedOutsideQuotes) {
  EXPECT_EQ(postgresql_placeholders("SELECT a FROM t WHERE b = ? AND c = '?' AND \"d?\" = ? -- ?\n LIMIT ?"),
            "SELECT a FROM t WHERE b = $1 AND c = '?' AND \"d?\" = $2 -- ?\n LIMIT $3");
}

// Issue 44's bug: `--kb postgresql://...` was taken as a path and a folder `postgresql:` appeared.
TEST(PostgresUrl, AUrlNeverBecomesAFolder) {
  ScratchDir dir;
  const fs::path old = fs::current_path();
  fs::current_path(dir.path());
  const std::string bad = "postgresql://ann:s3cret@/nodb?host=" + (dir / "no-server").string();
  ::setenv("MBLAST_KB", bad.c_str(), 1);
  try {
    KnowledgeBase kb(default_kb_path());
    ADD_FAILURE() << "connected to a server that does not exist";
  } catch (const KbFileError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
    EXPECT_NE(what.find("cannot connect"), std::string::npos) << what;
  }
  ::unsetenv("MBLAST_KB");
  EXPECT_THROW(KnowledgeBase("mysql://ann@db/kb"), KbFileError);
  EXPECT_THROW(KnowledgeBase("postgres://ann@/kb?host=/nonexistent", OpenOptions{true, -1, 0}), KbFileError);
  fs::current_path(old);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// ---- against a server ------------------------------------------------------------------------

TEST_F(Postgres, SameTablesAndColumnsAsSqlite) {
  KnowledgeBase pg(url);
  KnowledgeBase lite = KnowledgeBase::in_memory();
  std::map<std::string, std::string> a, b;
  Statement sl(lite.db(),
               "SELECT m.name, p.name, p.type, p.\"notnull\", p.pk FROM sqlite_schema m, "
               "pragma_table_info(m.name) p WHERE m.type = 'table'");
  const std::map<std::string, std::string> types = {
      {"INTEGER", "bigint"}, {"REAL", "double precision"}, {"TEXT", "text"}};
  while (sl.step())
    a[sl.get_text(0) + "." + sl.get_text(1)] =
        types.at(sl.get_text(2)) + (sl.get_int(3) || sl.get_int(4) ? " not null" : "");
  Statement sp(pg.db(),
               "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
               "WHERE table_schema = current_schema() AND table_name <> 'mblast_schema' "
               "AND NOT (table_name = 'states' AND column_name = 'rowid')");
  while (sp.step())
    b[sp.get_text(0) + "." + sp.get_text(1)] = sp.get_text(2) + (sp.get_text(3) == "NO" ? " not null" : "");
  EXPECT_EQ(a, b);
  EXPECT_GT(a.size(), 100u);
}

TEST_F(Postgres, SameRetrievalResultAsSqliteForTheSameData) {
  ScratchDir dir;
  KnowledgeBase lite(dir / "kb.sqlite");
  KnowledgeBase pg(url);
  fill(lite);
  fill(pg);
  for (int q = 0; q < 6; ++q) {
    const auto sig = testing::signature("cuda", q % 2 ? "sm_90" : "sm_80", q % 2 ? "h100" : "a100",
                                        q % 3 ? "softmax" : "matmul", "memory", 1.0 + q * 3, 0.1 * q, 0.2);
    const auto ns_a = lite.nearest_states(sig, 8), ns_b = pg.nearest_states(sig, 8);
    ASSERT_EQ(ns_a.size(), ns_b.size());
    for (size_t i = 0; i < ns_a.size(); ++i) {
      EXPECT_EQ(ns_a[i].id, ns_b[i].id);
      EXPECT_EQ(ns_a[i].text, ns_b[i].text);
      EXPECT_DOUBLE_EQ(ns_a[i].weight, ns_b[i].weight);
      EXPECT_EQ(ns_a[i].experiences, ns_b[i].experiences);
    }
    const auto ra = lite.ranked_actions(sig), rb = pg.ranked_actions(sig);
    ASSERT_EQ(ra.size(), rb.size());
    for (size_t i = 0; i < ra.size(); ++i) {
      EXPECT_EQ(ra[i].id, rb[i].id) << "rank " << i;
      EXPECT_DOUBLE_EQ(ra[i].score, rb[i].score) << ra[i].id;
      EXPECT_DOUBLE_EQ(ra[i].mean_log_speedup, rb[i].mean_log_speedup) << ra[i].id;
      EXPECT_EQ(ra[i].tries, rb[i].tries);
      EXPECT_EQ(ra[i].excluded, rb[i].excluded);
      EXPECT_EQ(ra[i].constraints.size(), rb[i].constraints.size());
      EXPECT_EQ(ra[i].cluster_stats.tries, rb[i].cluster_stats.tries);
      EXPECT_DOUBLE_EQ(ra[i].cluster_stats.mean_log_speedup, rb[i].cluster_stats.mean_log_speedup);
      ASSERT_EQ(ra[i].examples.size(), rb[i].examples.size());
      for (size_t k = 0; k < ra[i].examples.size(); ++k)
        EXPECT_EQ(ra[i].examples[k].experience_id, rb[i].examples[k].experience_id);
    }
  }
  const auto d = diff_records(export_records(lite), export_records(pg));  // all but creation times
  EXPECT_TRUE(d.empty()) << json(d.different).dump() << json(d.only_here).dump() << json(d.only_there).dump();
}

// Runs fn in a child process; returns its exit status (fn's return value, 100 on an exception).
template <class F>
pid_t spawn(F fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 100;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    _exit(rc);
  }
  return pid;
}

TEST_F(Postgres, SixteenConcurrentWritersLoseNoIncrementAndDuplicateNoSeedRow) {
  constexpr int kWriters = 16, kEach = 25;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w)
    pids.push_back(spawn([&] {
      OpenOptions o;
      o.busy_timeout_ms = 60000;
      KnowledgeBase kb(url, o);  // all 16 migrate a fresh database at once
      load_seed(kb, embedded_seed());
      kb.add_target(testing::target("h100", "cuda", "sm_90"));
      kb.add_action(testing::action("cuda.shared", "cuda"));
      const auto s = testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "norm", "memory", 1, 0.5, 0.1));
      for (int i = 0; i < kEach; ++i) testing::add_experience(kb, s, "cuda.shared", "h100", true, 1.0 + i * 0.01);
      return 0;
    }));
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  KnowledgeBase kb(url);
  KnowledgeBase once = KnowledgeBase::in_memory();
  load_seed(once, embedded_seed());
  once.add_action(testing::action("cuda.shared", "cuda"));
  for (const char* t : {"actions", "action_backends", "text_versions", "constraints", "provenance"})
    EXPECT_EQ(kb.db().query_int(std::string("SELECT count(*) FROM ") + t),
              once.db().query_int(std::string("SELECT count(*) FROM ") + t) + (std::string(t) == "provenance" ? 1 : 0))
        << t;  // + the 'learned'/'test' provenance of the writers
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), kWriters * kEach);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM policy_stats"), 1);
  EXPECT_EQ(kb.db().query_int("SELECT tries FROM policy_stats"), kWriters * kEach);
  EXPECT_EQ(kb.db().query_int("SELECT wins FROM policy_stats"), kWriters * (kEach - 3));  // speedup > 1.02
  EXPECT_EQ(kb.integrity_check(), "ok");
}

TEST_F(Postgres, ConcurrentCriticEditsAreAllKeptNoneOverwritten) {
  {
    KnowledgeBase kb(url);
    kb.add_action(testing::action("cuda.shared", "cuda"));
  }
  constexpr int kEditors = 8;
  std::vector<pid_t> pids;
  for (int w = 0; w < kEditors; ++w)
    pids.push_back(spawn([&, w] {
      KnowledgeBase kb(url);
      kb.add_text_version("action", "cuda.shared", "summary", "edit " + std::to_string(w), "critic",
                          {"learned", "test"});
      return 0;
    }));
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  KnowledgeBase kb(url);
  const auto versions = kb.text_versions("action", "cuda.shared");
  std::set<std::string> bodies;
  for (const auto& v : versions) bodies.insert(v.body);
  for (int w = 0; w < kEditors; ++w) EXPECT_TRUE(bodies.count("edit " + std::to_string(w))) << w;
  EXPECT_EQ(kb.action("cuda.shared")->title, "title of cuda.shared");  // the row itself untouched
}

TEST_F(Postgres, AWriterKilledMidTransactionLeavesNothingHalfWritten) {
  {
    KnowledgeBase kb(url);
    kb.add_target(testing::target("h100", "cuda", "sm_90"));
    kb.add_action(testing::action("cuda.shared", "cuda"));
    const auto s =
        testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "norm", "memory", 1, 0.5, 0.1), "s0");
    testing::add_experience(kb, s, "cuda.shared", "h100", true, 1.5);
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = spawn([&] {
    KnowledgeBase kb(url);
    Transaction tx(kb.db());
    const auto s =
        testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "norm", "memory", 1, 0.5, 0.1), "dying");
    for (int i = 0; i < 10; ++i) testing::add_experience(kb, s, "cuda.shared", "h100", true, 2.0);
    (void)!write(fds[1], "x", 1);
    pause();  // killed here, before commit
    return 0;
  });
  char c = 0;
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  close(fds[1]);
  OpenOptions o;
  o.busy_timeout_ms = 30000;  // the server notices the dead client and releases its row locks
  KnowledgeBase kb(url, o);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM states WHERE text = 'dying'"), 0);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), 1);
  EXPECT_EQ(kb.db().query_int("SELECT tries FROM policy_stats"), 1);
  const auto s = testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "norm", "memory", 1, 0.5, 0.1));
  testing::add_experience(kb, s, "cuda.shared", "h100", true, 1.5);  // the same statistics row is writable
  EXPECT_EQ(kb.db().query_int("SELECT tries FROM policy_stats"), 2);
  EXPECT_EQ(kb.integrity_check(), "ok");
}

TEST_F(Postgres, ServerRestartedMidRunLosesNothingCommitted) {
  KnowledgeBase kb(server.url("kb", "s3cret"));  // trust authentication ignores the password
  EXPECT_EQ(kb.file().string().find("s3cret"), std::string::npos);
  kb.add_target(testing::target("h100", "cuda", "sm_90"));
  kb.add_action(testing::action("cuda.shared", "cuda"));
  const auto s = testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "norm", "memory", 1, 0.5, 0.1));
  testing::add_experience(kb, s, "cuda.shared", "h100", true, 1.5);
  ASSERT_TRUE(server.stop_server());
  ASSERT_TRUE(server.start_server());
  // Between transactions: the connection is made again and the write goes through.
  testing::add_experience(kb, s, "cuda.shared", "h100", true, 1.5);
  // Inside one: a clear one-line error, and nothing of that transaction is kept.
  {
    Transaction tx(kb.db());
    testing::add_experience(kb, s, "cuda.shared", "h100", true, 3.0);
    ASSERT_TRUE(server.stop_server());
    ASSERT_TRUE(server.start_server());
    try {
      testing::add_experience(kb, s, "cuda.shared", "h100", true, 3.0);
      ADD_FAILURE() << "a write on a connection lost mid-transaction went through";
    } catch (const KbFileError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find("connection"), std::string::npos) << what;
      EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
    }
  }
  testing::add_experience(kb, s, "cuda.shared", "h100", true, 1.5);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), 3);
  EXPECT_EQ(kb.db().query_int("SELECT tries FROM policy_stats"), 3);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences WHERE speedup = 3.0"), 0);
  // The server gone: a one-line error, never a hang or a crash.
  ASSERT_TRUE(server.stop_server());
  try {
    testing::add_experience(kb, s, "cuda.shared", "h100", true, 1.5);
    ADD_FAILURE() << "wrote to a stopped server";
  } catch (const KbFileError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
  }
  ASSERT_TRUE(server.start_server());
  KnowledgeBase again(url);
  EXPECT_EQ(again.db().query_int("SELECT count(*) FROM experiences"), 3);
  EXPECT_EQ(again.integrity_check(), "ok");
}

}  // namespace
}  // namespace mblast::kb
