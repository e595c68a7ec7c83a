// A throwaway PostgreSQL server for the knowledge-base tests (tests/kb/postgres_test.cpp and
// postgres_cli_test.cpp), and knowledge that is the same whichever engine holds it.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "kb_test_support.h"
#include "mblast/kb/seed.h"

namespace mblast::kb::testing {

namespace pg_detail {
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace pg_detail

inline constexpr const char* kPgBin = "/usr/lib/postgresql/15/bin";

// A throwaway PostgreSQL cluster in a scratch folder. initdb refuses to run as root, so as root
// the server runs as `nobody` (setpriv), owning the folder.
class PgServer {
 public:
  ~PgServer() { stop(); }

  // Empty on success, else why the server could not start.
  std::string start() {
    if (!std::filesystem::exists(std::filesystem::path(kPgBin) / "initdb"))
      return std::string(kPgBin) + "/initdb is missing (apt-get install postgresql)";
    if (geteuid() == 0) {
      if (!std::filesystem::exists("/usr/bin/setpriv"))
        return "running as root and setpriv is missing to run the server as nobody";
      as_user_ = "setpriv --reuid=65534 --regid=65534 --clear-groups -- ";
      if (chown(dir_.path().c_str(), 65534, 65534) != 0) return "cannot hand the scratch folder to nobody";
    }
    const std::string d = dir_.path().string();
    if (sh(fmt("{}/initdb -D {}/data -A trust -U mblast --locale=C -E UTF8 --no-sync > {}/initdb.log 2>&1", kPgBin, d,
               d)) != 0)
      return "initdb failed: " + pg_detail::slurp(dir_ / "initdb.log").substr(0, 400);
    if (!start_server()) return "pg_ctl start failed: " + pg_detail::slurp(dir_ / "server.log").substr(0, 400);
    running_ = true;
    return {};
  }

  bool start_server() {
    const std::string d = dir_.path().string();
    return sh(fmt(
               "{}/pg_ctl -D {}/data -w -t 60 -l {}/server.log -o \"-k {} -c listen_addresses='' -c fsync=off\" start "
               "> /dev/null 2>&1",
               kPgBin, d, d, d)) == 0;
  }
  bool stop_server() {
    return sh(fmt("{}/pg_ctl -D {}/data -w -t 60 -m fast stop > /dev/null 2>&1", kPgBin, dir_.path().string())) == 0;
  }
  void stop() {
    if (running_) stop_server();
    running_ = false;
  }

  // A fresh database; returns its URL.
  std::string create_db(const std::string& name) {
    PGconn* c = PQconnectdb(fmt("host={} user=mblast dbname=postgres", dir_.path().string()).c_str());
    EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
    PQclear(PQexec(c, ("CREATE DATABASE " + name).c_str()));
    PQfinish(c);
    return url(name);
  }
  // A login role that must give its password (SCRAM-SHA-256 over the socket; every other role
  // keeps trust), owning a fresh database `db`. Returns that database's URL without a password.
  std::string add_password_role(const std::string& role, const std::string& password, const std::string& db) {
    PGconn* c = PQconnectdb(fmt("host={} user=mblast dbname=postgres", dir_.path().string()).c_str());
    EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
    for (const std::string& sql :
         {fmt("SET password_encryption = 'scram-sha-256'; CREATE ROLE {} LOGIN PASSWORD '{}'", role, password),
          fmt("CREATE DATABASE {} OWNER {}", db, role)}) {
      PGresult* r = PQexec(c, sql.c_str());
      EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(c);
      PQclear(r);
    }
    const auto hba = dir_ / "data" / "pg_hba.conf";
    const std::string rules = pg_detail::slurp(hba);
    std::ofstream(hba, std::ios::trunc) << fmt("local all {} scram-sha-256\n", role) << rules;
    PQclear(PQexec(c, "SELECT pg_reload_conf()"));
    PQfinish(c);
    // The reload is asynchronous: wait until a connection without the password is refused.
    const std::string probe = fmt("host={} user={} dbname={} passfile=/nonexistent", dir_.path().string(), role, db);
    for (int i = 0; i < 100; ++i) {
      PGconn* p = PQconnectdb(probe.c_str());
      const bool refused = PQstatus(p) != CONNECTION_OK;
      PQfinish(p);
      if (refused) break;
      usleep(50000);
    }
    return "postgresql://" + role + "@/" + db + "?host=" + dir_.path().string();
  }

  std::string url(const std::string& db, const std::string& password = "") const {
    return "postgresql://mblast" + (password.empty() ? "" : ":" + password) + "@/" + db +
           "?host=" + dir_.path().string();
  }
  const std::filesystem::path& dir() const { return dir_.path(); }

 private:
  template <class... A>
  static std::string fmt(const char* f, const A&... a) {
    return ::fmt::format(::fmt::runtime(f), a...);
  }
  int sh(const std::string& cmd) const {
    return std::system(("cd " + dir_.path().string() + " && " + as_user_ + cmd).c_str());
  }

  ScratchDir dir_;
  std::string as_user_;
  bool running_ = false;
};

class Postgres : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = server.start();
    if (!why.empty()) GTEST_SKIP() << "no PostgreSQL server for this test: " << why;
    url = server.create_db("kb");
  }
  PgServer server;
  std::string url;
};

// Deterministic knowledge (fixed ids and times), the same whichever engine holds it.
inline void fill(KnowledgeBase& kb) {
  load_seed(kb, embedded_seed());
  kb.add_target(target("h100", "cuda", "sm_90"));
  kb.add_target(target("a100", "cuda", "sm_80"));
  for (int a = 0; a < 4; ++a) kb.add_action(action("cuda.test" + std::to_string(a), "cuda", 0.01 * a));
  const char* ops[] = {"softmax", "matmul", "norm"};
  const char* bottlenecks[] = {"memory", "compute", "latency"};
  for (int i = 0; i < 30; ++i) {
    StateRecord r;
    r.id = fmt::format("state{:02}", i);
    r.signature = signature("cuda", i % 3 ? "sm_90" : "sm_80", i % 3 ? "h100" : "a100", ops[i % 3],
                            bottlenecks[(i / 3) % 3], 0.5 + i * 0.7, 0.03 * i, 0.9 - 0.025 * i);
    r.text = "state " + std::to_string(i);
    r.provenance = {"learned", "test"};
    r.created_at = "2025-01-02T00:00:00.000Z";
    kb.add_state(r);
    for (int j = 0; j < 3; ++j) {
      ExperienceRecord e;
      e.id = fmt::format("exp{:02}-{}", i, j);
      e.state_id = r.id;
      e.action_id = "cuda.test" + std::to_string((i + j) % 4);
      e.target = r.signature.target;
      e.correct = (i + j) % 5 != 0;
      if (e.correct)
        e.speedup = 0.8 + 0.037 * ((i * 7 + j * 3) % 17);
      else
        e.failure_kind = j == 2 ? "build_failed" : "wrong_output";
      e.critic_text = "critic " + e.id;
      e.provenance = {"learned", "test"};
      e.created_at = "2025-01-03T00:00:00.000Z";
      kb.add_experience(e);
    }
  }
}

}  // namespace mblast::kb::testing
