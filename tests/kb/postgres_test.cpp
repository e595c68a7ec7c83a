// The knowledge base on a PostgreSQL server (`--kb postgresql://...`): each test starts a server
// of its own (Debian's postgresql 15: initdb into a scratch folder, listening only on a Unix
// socket in that folder) and stops it; skipped, with the reason, where one cannot start.
// Covered here: the same retrieval result as SQLite for the same data, the same schema from both
// migration texts, 16 concurrent writer processes losing nothing, concurrent critic edits all
// kept, two deadlocked writers both committing after a retry, a writer killed mid-transaction, a
// server restarted mid-run; a URL never becomes a folder, and a password (URL, PGPASSWORD or
// .pgpass) is never shown. The kb commands end to end: postgres_cli_test.cpp.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

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

// ---- the two migration texts describe one schema ---------------------------------------------
//
// Each engine's schema, as read back from its catalog after the migrations ran, written as lines
// in one vocabulary: columns (type mapped, NOT NULL, default), primary keys, unique constraints,
// indexes, foreign keys (with their actions), CHECK constraints (the columns and the literals they
// name) and triggers (timing, event, columns, message). Bodies of the statistics trigger are not
// compared (SQL against PL/pgSQL); its timing and event are.

// Columns and literals named in one SQL expression: identifiers outside quotes that are columns
// of the table, and quoted strings and numbers.
std::string expression_terms(std::string_view expr, const std::set<std::string>& columns) {
  std::set<std::string> cols, lits;
  for (size_t i = 0; i < expr.size();) {
    const char c = expr[i];
    if (c == '\'') {
      const size_t end = expr.find('\'', i + 1);
      lits.insert(std::string(expr.substr(i + 1, end - i - 1)));
      i = end + 1;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '"') {
      size_t j = i + 1;
      while (j < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[j])) || expr[j] == '_' || expr[j] == '"'))
        ++j;
      std::string word(expr.substr(i, j - i));
      std::erase(word, '"');
      if (columns.count(word)) cols.insert(word);
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < expr.size() && (std::isdigit(static_cast<unsigned char>(expr[j])) || expr[j] == '.')) ++j;
      lits.insert(std::string(expr.substr(i, j - i)));
      i = j;
    } else {
      ++i;
    }
  }
  auto join = [](const std::set<std::string>& s) {
    std::string out;
    for (const auto& e : s) out += (out.empty() ? "" : ",") + e;
    return out;
  };
  return "on (" + join(cols) + ") literals (" + join(lits) + ")";
}

// The CHECK (...) clauses of a CREATE TABLE text, outside quotes.
std::vector<std::string> check_clauses(const std::string& sql) {
  std::vector<std::string> out;
  for (size_t i = 0; i < sql.size(); ++i) {
    if (sql[i] == '\'') {
      i = sql.find('\'', i + 1);
      continue;
    }
    if (sql.compare(i, 5, "CHECK") != 0 || (i > 0 && (std::isalnum(static_cast<unsigned char>(sql[i - 1]))))) continue;
    size_t open = sql.find('(', i);
    int depth = 0;
    size_t j = open;
    for (; j < sql.size(); ++j) {
      if (sql[j] == '\'')
        j = sql.find('\'', j + 1);
      else if (sql[j] == '(')
        ++depth;
      else if (sql[j] == ')' && --depth == 0)
        break;
    }
    out.push_back(sql.substr(open, j - open + 1));
    i = j;
  }
  return out;
}

std::string first_quoted(const std::string& s, size_t from) {
  const size_t a = s.find('\'', from);
  if (a == std::string::npos) return "";
  return s.substr(a + 1, s.find('\'', a + 1) - a - 1);
}

std::string joined(std::vector<std::string> v, bool sort) {
  if (sort) std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& e : v) out += (out.empty() ? "" : ",") + e;
  return out;
}

std::set<std::string> sqlite_schema_lines(const Database& db) {
  std::set<std::string> out;
  const std::map<std::string, std::string> types = {
      {"INTEGER", "bigint"}, {"REAL", "double precision"}, {"TEXT", "text"}};
  std::vector<std::pair<std::string, std::string>> tables;
  {
    Statement t(db, "SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
    while (t.step()) tables.emplace_back(t.get_text(0), t.get_text(1));
  }
  for (const auto& [table, sql] : tables) {
    std::set<std::string> columns;
    std::map<int64_t, std::string> pk;
    Statement c(db, "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?)");
    c.bind(1, table);
    int64_t pk_count = 0;
    std::vector<std::tuple<std::string, std::string, bool, std::string, int64_t>> cols;
    while (c.step()) {
      cols.emplace_back(c.get_text(0), c.get_text(1), c.get_int(2) != 0, c.is_null(3) ? "" : c.get_text(3),
                        c.get_int(4));
      pk_count += c.get_int(4) > 0;
    }
    for (const auto& [name, type, notnull, dflt, pos] : cols) {
      const bool rowid_alias = pos > 0 && pk_count == 1 && type == "INTEGER";  // filled in by the engine
      const std::string def = rowid_alias ? "<generated>" : dflt;
      out.insert(fmt::format("column {}.{} {}{}{}", table, name, types.at(type), notnull || pos ? " not null" : "",
                             def.empty() ? "" : " default " + def));
      columns.insert(name);
      if (pos) pk[pos] = name;
    }
    std::vector<std::string> pk_cols;
    for (const auto& [_, n] : pk) pk_cols.push_back(n);
    out.insert(fmt::format("primary key {} ({})", table, joined(pk_cols, false)));
    Statement ix(db, "SELECT name, \"unique\", origin, partial FROM pragma_index_list(?)");
    ix.bind(1, table);
    while (ix.step()) {
      if (ix.get_text(2) == "pk") continue;
      std::vector<std::string> ic;
      Statement ii(db, "SELECT coalesce(name, '<expr>') FROM pragma_index_info(?) ORDER BY seqno");
      ii.bind(1, ix.get_text(0));
      while (ii.step()) ic.push_back(ii.get_text(0));
      if (ix.get_text(2) == "u")
        out.insert(fmt::format("unique {} ({})", table, joined(ic, false)));
      else
        out.insert(fmt::format("index {} on {} ({}){}{}", ix.get_text(0), table, joined(ic, false),
                               ix.get_int(1) ? " unique" : "", ix.get_int(3) ? " partial" : ""));
    }
    Statement fk(db,
                 "SELECT id, \"table\", \"from\", \"to\", on_update, on_delete FROM pragma_foreign_key_list(?) "
                 "ORDER BY id, seq");
    fk.bind(1, table);
    std::map<int64_t, std::array<std::string, 5>> fks;
    while (fk.step()) {
      auto& f = fks[fk.get_int(0)];
      f[0] = fk.get_text(1);
      f[1] += (f[1].empty() ? "" : ",") + fk.get_text(2);
      f[2] += (f[2].empty() ? "" : ",") + fk.get_text(3);
      f[3] = fk.get_text(4);
      f[4] = fk.get_text(5);
    }
    for (const auto& [_, f] : fks)
      out.insert(fmt::format("foreign key {} ({}) references {} ({}) on update {} on delete {}", table, f[1], f[0],
                             f[2], f[3], f[4]));
    for (const auto& check : check_clauses(sql))
      out.insert(fmt::format("check {} {}", table, expression_terms(check, columns)));
  }
  Statement tg(db, "SELECT name, tbl_name, sql FROM sqlite_schema WHERE type = 'trigger'");
  static const std::regex head(
      R"(CREATE\s+TRIGGER\s+\S+\s+(BEFORE|AFTER|INSTEAD OF)\s+(INSERT|DELETE|UPDATE)(\s+OF\s+(.*?))?\s+ON\s)",
      std::regex::icase);
  while (tg.step()) {
    const std::string sql = tg.get_text(2);
    std::smatch m;
    if (!std::regex_search(sql, m, head)) {
      out.insert("unreadable trigger " + tg.get_text(0));
      continue;
    }
    std::vector<std::string> of;
    std::stringstream ss(m[4].str());
    for (std::string col; std::getline(ss, col, ',');) of.push_back(col.substr(col.find_first_not_of(" \n")));
    const auto raise = sql.find("RAISE(ABORT,");
    out.insert(fmt::format("trigger {} on {} {} {}{} for each row{}", tg.get_text(0), tg.get_text(1), m[1].str(),
                           m[2].str(), of.empty() ? "" : " of (" + joined(of, true) + ")",
                           raise == std::string::npos ? "" : " message '" + first_quoted(sql, raise) + "'"));
  }
  return out;
}

std::set<std::string> postgresql_schema_lines(const Database& db) {
  std::set<std::string> out;
  // states.rowid is PostgreSQL's stand-in for SQLite's implicit rowid (the order the retrieval
  // index refreshes by): the one deliberate difference, left out with its UNIQUE constraint.
  Statement c(db,
              "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable, coalesce(c.column_default, ''), "
              "c.is_identity FROM information_schema.columns c JOIN information_schema.tables t "
              "USING (table_schema, table_name) WHERE c.table_schema = current_schema() "
              "AND t.table_type = 'BASE TABLE' AND c.table_name <> 'mblast_schema' "
              "AND NOT (c.table_name = 'states' AND c.column_name = 'rowid')");
  static const std::regex cast(R"(::[a-z ]+$)");
  while (c.step()) {
    const std::string def = c.get_text(5) == "YES" ? "<generated>" : std::regex_replace(c.get_text(4), cast, "");
    out.insert(fmt::format("column {}.{} {}{}{}", c.get_text(0), c.get_text(1), c.get_text(2),
                           c.get_text(3) == "NO" ? " not null" : "", def.empty() ? "" : " default " + def));
  }
  const std::string cols_of =
      "array_to_string(array(SELECT a.attname FROM unnest({0}) WITH ORDINALITY k(n, o) "
      "JOIN pg_attribute a ON a.attrelid = {1} AND a.attnum = k.n ORDER BY k.o), ',')";
  Statement k(
      db, fmt::format("SELECT con.contype, rel.relname, {}, coalesce(frel.relname, ''), {}, con.confupdtype, "
                      "con.confdeltype, con.condeferrable, pg_get_constraintdef(con.oid) FROM pg_constraint con "
                      "JOIN pg_class rel ON rel.oid = con.conrelid JOIN pg_namespace ns ON ns.oid = rel.relnamespace "
                      "LEFT JOIN pg_class frel ON frel.oid = con.confrelid "
                      "WHERE ns.nspname = current_schema() AND rel.relname <> 'mblast_schema'",
                      fmt::format(fmt::runtime(cols_of), "con.conkey", "con.conrelid"),
                      fmt::format(fmt::runtime(cols_of), "con.confkey", "con.confrelid")));
  const std::map<std::string, std::string> action = {
      {"a", "NO ACTION"}, {"r", "RESTRICT"}, {"c", "CASCADE"}, {"n", "SET NULL"}, {"d", "SET DEFAULT"}};
  while (k.step()) {
    const std::string type = k.get_text(0), table = k.get_text(1), cols = k.get_text(2);
    if (type == "p")
      out.insert(fmt::format("primary key {} ({})", table, cols));
    else if (type == "u" && !(table == "states" && cols == "rowid"))
      out.insert(fmt::format("unique {} ({})", table, cols));
    else if (type == "f") {
      out.insert(fmt::format("foreign key {} ({}) references {} ({}) on update {} on delete {}", table, cols,
                             k.get_text(3), k.get_text(4), action.at(k.get_text(5)), action.at(k.get_text(6))));
      // kb merge defers every reference to the end of its transaction (SET CONSTRAINTS ALL DEFERRED).
      if (k.get_text(7) != "t") out.insert(fmt::format("foreign key {} ({}) is not DEFERRABLE", table, cols));
    } else if (type == "c") {
      // The columns from the constraint itself: its text casts to types (::text) named like columns.
      std::set<std::string> own;
      std::stringstream ss(cols);
      for (std::string col; std::getline(ss, col, ',');) own.insert(col);
      out.insert(fmt::format("check {} {}", table, expression_terms(k.get_text(8), own)));
    } else if (type != "u") {
      out.insert(fmt::format("constraint of kind {} on {}", type, table));
    }
  }
  Statement ix(db,
               "SELECT i.relname, t.relname, ix.indisunique, ix.indpred IS NOT NULL, "
               "array_to_string(array(SELECT coalesce(a.attname, '<expr>') FROM unnest(ix.indkey::int2[]) "
               "WITH ORDINALITY k(n, o) LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n "
               "ORDER BY k.o), ',') FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid "
               "JOIN pg_class t ON t.oid = ix.indrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace "
               "WHERE ns.nspname = current_schema() AND t.relname <> 'mblast_schema' AND NOT EXISTS "
               "(SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid AND c.conrelid = ix.indrelid "
               "AND c.contype IN ('p', 'u', 'x'))");
  while (ix.step())
    out.insert(fmt::format("index {} on {} ({}){}{}", ix.get_text(0), ix.get_text(1), ix.get_text(4),
                           ix.get_text(2) == "t" ? " unique" : "", ix.get_text(3) == "t" ? " partial" : ""));
  Statement tg(db,
               "SELECT tg.tgname, t.relname, tg.tgtype, array_to_string(array(SELECT a.attname FROM "
               "unnest(tg.tgattr::int2[]) k(n) JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n "
               "ORDER BY a.attname), ','), pg_get_triggerdef(tg.oid), tg.tgnargs FROM pg_trigger tg "
               "JOIN pg_class t ON t.oid = tg.tgrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace "
               "WHERE ns.nspname = current_schema() AND NOT tg.tgisinternal");
  while (tg.step()) {
    const int64_t bits = tg.get_int(2);
    const std::string timing = bits & 2 ? "BEFORE" : bits & 64 ? "INSTEAD OF" : "AFTER";
    const std::string event = bits & 4 ? "INSERT" : bits & 8 ? "DELETE" : bits & 16 ? "UPDATE" : "TRUNCATE";
    const std::string def = tg.get_text(4);
    out.insert(fmt::format("trigger {} on {} {} {}{} for each {}{}", tg.get_text(0), tg.get_text(1), timing, event,
                           tg.get_text(3).empty() ? "" : " of (" + tg.get_text(3) + ")", bits & 1 ? "row" : "statement",
                           tg.get_int(5) ? " message '" + first_quoted(def, def.find("EXECUTE FUNCTION")) + "'" : ""));
  }
  return out;
}

std::string lines_only_in(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::string out;
  for (const auto& l : a)
    if (!b.count(l)) out += "\n  " + l;
  return out.empty() ? " (none)" : out;
}

// ---- against a server ------------------------------------------------------------------------

// A change to one migration text and not the other fails here (issue 44: one source of truth).
TEST_F(Postgres, BothMigrationTextsDescribeTheSameSchema) {
  KnowledgeBase pg(url);
  KnowledgeBase lite = KnowledgeBase::in_memory();
  const auto a = sqlite_schema_lines(lite.db());
  const auto b = postgresql_schema_lines(pg.db());
  EXPECT_TRUE(a == b) << "only in the SQLite migrations:" << lines_only_in(a, b)
                      << "\nonly in the PostgreSQL migrations:" << lines_only_in(b, a);
  std::map<std::string, int> kinds;
  for (const auto& l : a) ++kinds[l.substr(0, l.find(' '))];
  EXPECT_GT(kinds["column"], 100);
  for (const char* k : {"primary", "unique", "index", "foreign", "check", "trigger"}) EXPECT_GT(kinds[k], 0) << k;
  // The description sees a drift of every kind (each change rolled back after).
  const char* drifts[] = {"ALTER TABLE targets ALTER COLUMN arch SET DEFAULT 'generic'",
                          "ALTER TABLE runs ALTER COLUMN median_s TYPE real",
                          "ALTER TABLE problems ALTER COLUMN op_class DROP NOT NULL",
                          "DROP INDEX experiences_by_state",
                          "CREATE UNIQUE INDEX experiences_by_model ON experiences (model) WHERE model <> ''",
                          "ALTER TABLE text_versions DROP CONSTRAINT text_versions_version_check",
                          "ALTER TABLE constraints DROP CONSTRAINT constraints_effect_check, "
                          "ADD CHECK (effect IN ('exclude', 'demote', 'boost'))",
                          "ALTER TABLE constraint_evidence DROP CONSTRAINT constraint_evidence_experience_id_fkey, "
                          "ADD FOREIGN KEY (experience_id) REFERENCES experiences (id) ON DELETE CASCADE DEFERRABLE",
                          "DROP TRIGGER runs_are_immutable ON runs",
                          "ALTER TABLE provenance DROP CONSTRAINT provenance_kind_source_key"};
  for (const char* d : drifts) {
    Transaction tx(pg.db());
    pg.db().exec(d);
    EXPECT_TRUE(postgresql_schema_lines(pg.db()) != b) << "not seen: " << d;
  }
  EXPECT_TRUE(postgresql_schema_lines(pg.db()) == b);
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

// Two writers that take the same two statistics rows in opposite orders deadlock: the server undoes
// one of them (SQLSTATE 40P01). Alone that is a one-line error; under retry_on_conflict the undone
// transaction is redone whole, and both commit.
TEST_F(Postgres, DeadlockedWritersAreRetriedWholeAndBothCommit) {
  const auto sig = testing::signature("cuda", "sm_90", "h100", "norm", "memory", 1, 0.5, 0.1);
  std::string state;
  {
    KnowledgeBase kb(url);
    kb.add_target(testing::target("h100", "cuda", "sm_90"));
    kb.add_action(testing::action("cuda.a", "cuda"));
    kb.add_action(testing::action("cuda.b", "cuda"));
    state = testing::add_state(kb, sig);
    testing::add_experience(kb, state, "cuda.a", "h100", true, 1.5);  // the two statistics rows
    testing::add_experience(kb, state, "cuda.b", "h100", true, 1.5);
  }
  struct Outcome {
    std::array<std::string, 2> errors;
    int tries = 0;
  };
  auto two_writers = [&](int attempts) {
    std::atomic<int> holding{0}, tries{0};
    Outcome out;
    auto writer = [&](int w) {
      try {
        OpenOptions o;
        o.busy_timeout_ms = 60000;  // longer than the server's deadlock_timeout (1 s)
        KnowledgeBase kb(url, o);
        bool first = true;
        retry_on_conflict(
            kb.db(),
            [&] {
              ++tries;
              Transaction tx(kb.db());
              testing::add_experience(kb, state, w == 0 ? "cuda.a" : "cuda.b", "h100", true, 1.5);
              if (first) {  // the first time, both hold their first row before either asks for the second
                first = false;
                ++holding;
                for (int i = 0; holding < 2 && i < 20000; ++i)
                  std::this_thread::sleep_for(std::chrono::milliseconds(1));
              }
              testing::add_experience(kb, state, w == 0 ? "cuda.b" : "cuda.a", "h100", true, 1.5);
              tx.commit();
            },
            attempts);
      } catch (const std::exception& e) {
        out.errors[static_cast<size_t>(w)] = e.what();
      }
    };
    std::thread a(writer, 0), b(writer, 1);
    a.join();
    b.join();
    out.tries = tries;
    return out;
  };
  KnowledgeBase kb(url);
  auto tries_of = [&](const char* action) {
    return kb.db().query_int(std::string("SELECT tries FROM policy_stats WHERE action_id = '") + action + "'");
  };
  // Without a retry: one writer is the deadlock's victim and says so in one line; nothing of it is kept.
  const Outcome once = two_writers(1);
  EXPECT_EQ(once.tries, 2);
  const std::string victim = once.errors[0].empty() ? once.errors[1] : once.errors[0];
  EXPECT_TRUE(once.errors[0].empty() != once.errors[1].empty()) << once.errors[0] << " | " << once.errors[1];
  EXPECT_NE(victim.find("deadlock"), std::string::npos) << victim;
  EXPECT_EQ(victim.find('\n'), std::string::npos) << victim;
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), 4);
  EXPECT_EQ(tries_of("cuda.a"), 2);
  EXPECT_EQ(tries_of("cuda.b"), 2);
  // With it: the victim's transaction runs again whole and both writers commit both rows.
  const Outcome retried = two_writers(kConflictAttempts);
  EXPECT_EQ(retried.errors[0], "");
  EXPECT_EQ(retried.errors[1], "");
  EXPECT_EQ(retried.tries, 3);  // one deadlock, one redo
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), 8);
  EXPECT_EQ(tries_of("cuda.a"), 4);
  EXPECT_EQ(tries_of("cuda.b"), 4);
  EXPECT_EQ(kb.integrity_check(), "ok");
}

// A role with a real password (SCRAM): the password comes from the URL, PGPASSWORD or a .pgpass
// file; a missing or wrong one is refused in one line that shows neither it nor the real one.
TEST_F(Postgres, APasswordFromTheUrlPgpasswordOrPgpassConnectsAndIsNeverShown) {
  const std::string secret = "Zq7-sekret-pw", wrong = "Wr0ng-guess-pw";
  const std::string bare = server.add_password_role("ann", secret, "annkb");
  const std::string with = "postgresql://ann:" + secret + "@/annkb?host=" + server.dir().string();
  ScratchDir dir;
  ::unsetenv("PGPASSWORD");
  ::setenv("PGPASSFILE", (dir / "none").c_str(), 1);  // not the person's own ~/.pgpass
  auto refused = [&](const std::string& u, const char* why) {
    try {
      KnowledgeBase kb(u);
      ADD_FAILURE() << "connected without the right password: " << why;
    } catch (const KbFileError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_EQ(what.find(secret), std::string::npos) << what;
      EXPECT_EQ(what.find(wrong), std::string::npos) << what;
      EXPECT_NE(what.find("password"), std::string::npos) << what;  // says what to check
      EXPECT_NE(what.find("postgresql://ann@/annkb"), std::string::npos) << what;
    }
  };
  refused(bare, "no password at all");
  refused("postgresql://ann:" + wrong + "@/annkb?host=" + server.dir().string(), "a wrong one in the URL");
  refused(bare + "&password=" + wrong, "a wrong one as a URL parameter");
  {
    KnowledgeBase kb(with);
    EXPECT_EQ(kb.file().string(), bare);
    kb.add_target(testing::target("h100", "cuda", "sm_90"));
  }
  ::setenv("PGPASSWORD", wrong.c_str(), 1);
  refused(bare, "a wrong PGPASSWORD");
  ::setenv("PGPASSWORD", secret.c_str(), 1);
  EXPECT_EQ(KnowledgeBase(bare).db().query_int("SELECT count(*) FROM targets"), 1);
  ::unsetenv("PGPASSWORD");
  const fs::path pgpass = dir / "pgpass";
  std::ofstream(pgpass) << "*:*:annkb:ann:" << secret << "\n";
  fs::permissions(pgpass, fs::perms::owner_read | fs::perms::owner_write);  // libpq ignores a file others can read
  ::setenv("PGPASSFILE", pgpass.c_str(), 1);
  EXPECT_EQ(KnowledgeBase(bare).db().query_int("SELECT count(*) FROM targets"), 1);
  ::unsetenv("PGPASSFILE");
}

// `ps` shows a process's arguments: a password in a --kb URL is blanked there once parsed.
TEST(PostgresUrl, APasswordInTheArgumentsIsHiddenInPlace) {
  std::string a0 = "mblast", a1 = "--kb", a2 = "postgresql://ann:s3cret@db:5433/kb?sslmode=require&password=x2",
              a3 = "--kb=postgres://bob:hunter2@/kb", a4 = "/home/ann/kb.sqlite";
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data(), nullptr};
  const std::string before = a2;
  hide_kb_passwords_in_arguments(5, argv);
  EXPECT_STREQ(argv[2], "postgresql://ann@db:5433/kb?sslmode=require");
  EXPECT_STREQ(argv[3], "--kb=postgres://bob@/kb");
  EXPECT_STREQ(argv[4], "/home/ann/kb.sqlite");
  EXPECT_EQ(std::string(a2.data(), before.size()).find("s3cret"), std::string::npos);  // the bytes, not only the text
  EXPECT_EQ(std::string(a3.data(), a3.size()).find("hunter2"), std::string::npos);
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
