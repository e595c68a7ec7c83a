// Schema and migrations: a fresh KB, an older file migrated, a newer or foreign one refused,
// a failed migration leaving the file as it was.
#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

#include "kb_test_support.h"
#include "mblast/kb/schema.h"

namespace mblast::kb {
namespace {

using testing::ScratchDir;

int64_t count(KnowledgeBase& kb, const std::string& table) {
  return kb.db().query_int("SELECT count(*) FROM " + table);
}

TEST(KbSchema, MigrationsAreEmbeddedAndNumberedWithoutGaps) {
  const auto& ms = migrations();
  ASSERT_GE(ms.size(), 2u);
  for (size_t i = 0; i < ms.size(); ++i) {
    EXPECT_EQ(ms[i].version, static_cast<int>(i) + 1);
    EXPECT_FALSE(ms[i].sql.empty());
  }
  EXPECT_EQ(latest_schema_version(), ms.back().version);
}

TEST(KbSchema, FreshFileGetsTheNewestSchemaInWalMode) {
  ScratchDir dir;
  const auto file = dir / "sub" / "folder" / "kb.sqlite";  // folders are created on first use
  KnowledgeBase kb(file);
  EXPECT_TRUE(kb.created());
  EXPECT_EQ(kb.migrated_from(), 0);
  EXPECT_EQ(kb.schema_version(), latest_schema_version());
  EXPECT_EQ(kb.db().query_int("PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(kb.db().query_int("PRAGMA foreign_keys"), 1);
  Statement mode(kb.db(), "PRAGMA journal_mode");
  ASSERT_TRUE(mode.step());
  EXPECT_EQ(mode.get_text(0), "wal");
  for (const char* table :
       {"provenance", "targets", "problems", "candidates", "build_logs", "runs", "states", "actions", "action_backends",
        "experiences", "constraints", "constraint_evidence", "text_versions", "policy_stats"})
    EXPECT_EQ(kb.db().query_int(std::string("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '") +
                                table + "'"),
              1)
        << table;
  EXPECT_EQ(kb.integrity_check(), "ok");
}

TEST(KbSchema, ReopeningACurrentKbMigratesNothing) {
  ScratchDir dir;
  { KnowledgeBase kb(dir / "kb.sqlite"); }
  KnowledgeBase again(dir / "kb.sqlite");
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.migrated_from(), latest_schema_version());
}

TEST(KbSchema, AnOlderFileIsMigratedAndKeepsItsRows) {
  ScratchDir dir;
  const auto file = dir / "old.sqlite";
  {
    OpenOptions o;
    o.target_version = 1;  // what an mblast that knew only migration 0001 wrote
    KnowledgeBase v1(file, o);
    ASSERT_EQ(v1.schema_version(), 1);
    v1.add_target(testing::target("h100", "cuda", "sm_90"));
    v1.add_action(testing::action("cuda.a", "cuda"));
    EXPECT_EQ(v1.db().query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'experiences_by_state'"), 0);
  }
  KnowledgeBase kb(file);
  EXPECT_FALSE(kb.created());
  EXPECT_EQ(kb.migrated_from(), 1);
  EXPECT_EQ(kb.schema_version(), latest_schema_version());
  EXPECT_EQ(count(kb, "targets"), 1);
  EXPECT_EQ(count(kb, "actions"), 1);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'experiences_by_state'"), 1);
}

TEST(KbSchema, ANewerFileIsRefusedAndLeftUntouched) {
  ScratchDir dir;
  const auto file = dir / "new.sqlite";
  { KnowledgeBase kb(file); }
  {
    Database raw(file, Database::Mode::read_write, 1000);
    raw.exec("PRAGMA user_version = " + std::to_string(latest_schema_version() + 1));
  }
  const auto before = std::filesystem::last_write_time(file);
  try {
    KnowledgeBase kb(file);
    FAIL() << "a newer KB was opened";
  } catch (const KbFileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find("newer"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line";
  }
  EXPECT_EQ(std::filesystem::last_write_time(file), before);
  Database raw(file, Database::Mode::read_only, 1000);
  EXPECT_EQ(raw.query_int("PRAGMA user_version"), latest_schema_version() + 1);
}

TEST(KbSchema, AnotherApplicationsDatabaseIsRefused) {
  ScratchDir dir;
  const auto file = dir / "other.sqlite";
  {
    Database raw(file, Database::Mode::read_write_create, 1000);
    raw.exec("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('keep me')");
  }
  EXPECT_THROW(KnowledgeBase kb(file), KbFileError);
  Database raw(file, Database::Mode::read_only, 1000);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM notes"), 1);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'actions'"), 0);
}

TEST(KbSchema, AFailedMigrationLeavesTheOldVersion) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  {
    OpenOptions o;
    o.target_version = 1;
    KnowledgeBase v1(file, o);
    v1.add_action(testing::action("cuda.a", "cuda"));
  }
  std::vector<Migration> broken = migrations();
  broken.push_back({latest_schema_version() + 1, "9999_broken.sql",
                    "CREATE TABLE half_done (x INTEGER); INSERT INTO no_such_table VALUES (1);"});
  Database db(file, Database::Mode::read_write, 1000);
  EXPECT_THROW(migrate(db, broken, latest_schema_version() + 1), Error);
  EXPECT_EQ(db.query_int("PRAGMA user_version"), 1) << "the whole upgrade rolled back, not only the last step";
  EXPECT_EQ(db.query_int("SELECT count(*) FROM sqlite_schema WHERE name IN ('half_done', 'experiences_by_state')"), 0);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM actions"), 1);
}

TEST(KbSchema, MeasuredRowsAreImmutable) {
  KnowledgeBase kb = KnowledgeBase::in_memory();
  kb.add_target(testing::target("h100", "cuda", "sm_90"));
  kb.add_action(testing::action("cuda.a", "cuda"));
  const auto s = testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 1, 0.5, 0.1));
  const auto e = testing::add_experience(kb, s, "cuda.a", "h100", true, 1.5);
  EXPECT_THROW(kb.db().exec("UPDATE experiences SET speedup = 9 WHERE id = '" + e + "'"), Error);
  EXPECT_THROW(kb.db().exec("DELETE FROM experiences"), Error);
  EXPECT_THROW(kb.db().exec("UPDATE actions SET title = 'x'"), Error);
  EXPECT_THROW(kb.db().exec("UPDATE states SET text = 'x'"), Error);
}

TEST(KbSchema, DefaultPathFollowsMblastKbThenXdgDataHome) {
  struct Restore {  // leave the environment as it was for the tests that follow in this process
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    Restore() {
      for (const char* v : {"MBLAST_KB", "XDG_DATA_HOME", "HOME"}) {
        const char* x = std::getenv(v);
        saved.emplace_back(v, x ? std::optional<std::string>(x) : std::nullopt);
      }
    }
    ~Restore() {
      for (const auto& [k, v] : saved) v ? (void)::setenv(k.c_str(), v->c_str(), 1) : (void)::unsetenv(k.c_str());
    }
  } restore;
  ::setenv("MBLAST_KB", "/somewhere/team.sqlite", 1);
  EXPECT_EQ(default_kb_path(), "/somewhere/team.sqlite");
  ::unsetenv("MBLAST_KB");
  ::setenv("XDG_DATA_HOME", "/data", 1);
  EXPECT_EQ(default_kb_path(), "/data/mblast/kb.sqlite");
  ::unsetenv("XDG_DATA_HOME");
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(default_kb_path(), "/home/someone/.local/share/mblast/kb.sqlite");
}

}  // namespace
}  // namespace mblast::kb
