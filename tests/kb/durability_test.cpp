// Durability: locked, damaged, truncated, read-only and full KB files give a clear one-line
// error and no partial write; 8 processes writing at once lose nothing; kill -9 in the middle
// of writes leaves a KB that opens with every committed record.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "kb_test_support.h"
#include "mblast/kb/seed.h"

namespace mblast::kb {
namespace {

using testing::ScratchDir;
namespace fs = std::filesystem;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void expect_one_line_naming(const std::string& what, const fs::path& file) {
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
}

// A KB with seed actions, two targets and a state; returns nothing, closes it (WAL checkpointed).
void make_kb(const fs::path& file) {
  KnowledgeBase kb(file);
  load_seed(kb, embedded_seed());
  kb.add_target(testing::target("h100", "cuda", "sm_90"));
  testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 1, 0.5, 0.1), "s0");
}

int64_t count(const fs::path& file, const std::string& table) {
  Database db(file, Database::Mode::read_only, 5000);
  return db.query_int("SELECT count(*) FROM " + table);
}

// Runs fn in a child process; returns its exit status (fn's return value, 100 on an exception).
template <class F>
int in_child(F fn, std::string* message = nullptr) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int rc = 100;
    std::string msg;
    try {
      rc = fn(msg);
    } catch (const std::exception& e) {
      msg = std::string("exception: ") + e.what();
    }
    if (!msg.empty()) (void)!write(fds[1], msg.data(), msg.size());
    close(fds[1]);
    _exit(rc);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (message) *message = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

TEST(KbDurability, AWriteWhileAnotherConnectionHoldsTheWriteLockFailsClearlyAndWritesNothing) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  make_kb(file);
  const int64_t before = count(file, "states");
  Database holder(file, Database::Mode::read_write, 0);
  holder.exec("BEGIN IMMEDIATE");
  holder.exec("INSERT INTO provenance (kind, source) VALUES ('learned', 'holder')");

  OpenOptions o;
  o.busy_timeout_ms = 100;
  KnowledgeBase kb(file, o);  // reading works while another process writes (WAL)
  try {
    testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "matmul", "compute", 50, 0.1, 0.8));
    FAIL() << "wrote through a held write lock";
  } catch (const KbFileError& e) {
    EXPECT_EQ(e.code(), SQLITE_BUSY);
    expect_one_line_naming(e.what(), file);
    EXPECT_NE(std::string(e.what()).find("locked"), std::string::npos);
  }
  EXPECT_FALSE(kb.db().in_transaction());
  holder.exec("ROLLBACK");
  EXPECT_EQ(count(file, "states"), before);
  testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "matmul", "compute", 50, 0.1, 0.8));
  EXPECT_EQ(count(file, "states"), before + 1);
}

TEST(KbDurability, AMigrationBlockedByALockLeavesTheOldVersion) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  {
    OpenOptions o;
    o.target_version = 1;
    KnowledgeBase v1(file, o);
  }
  Database holder(file, Database::Mode::read_write, 0);
  holder.exec("BEGIN IMMEDIATE");
  holder.exec("INSERT INTO provenance (kind, source) VALUES ('learned', 'holder')");
  OpenOptions o;
  o.busy_timeout_ms = 100;
  try {
    KnowledgeBase kb(file, o);
    FAIL() << "migrated through a held write lock";
  } catch (const KbFileError& e) {
    EXPECT_EQ(e.code(), SQLITE_BUSY);
    expect_one_line_naming(e.what(), file);
  }
  holder.exec("ROLLBACK");
  EXPECT_EQ(Database(file, Database::Mode::read_only, 0).query_int("PRAGMA user_version"), 1);
}

TEST(KbDurability, GarbageBytesAreReportedAsDamagedAndLeftAlone) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  std::string junk(8192, '\0');
  std::mt19937 rng(42);
  for (auto& c : junk) c = static_cast<char>(rng());
  std::ofstream(file, std::ios::binary) << junk;
  try {
    KnowledgeBase kb(file);
    FAIL() << "opened garbage";
  } catch (const KbFileError& e) {
    EXPECT_EQ(e.code(), SQLITE_NOTADB);
    expect_one_line_naming(e.what(), file);
    EXPECT_NE(std::string(e.what()).find("damaged"), std::string::npos);
  }
  EXPECT_EQ(read_bytes(file), junk);
  EXPECT_FALSE(fs::exists(file.string() + "-wal"));
}

TEST(KbDurability, ATruncatedFileIsReportedAsDamagedAndLeftAlone) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  make_kb(file);
  ASSERT_FALSE(fs::exists(file.string() + "-wal")) << "closing the last connection checkpoints the WAL";
  const auto full = fs::file_size(file);
  ASSERT_GT(full, 64u * 1024);
  for (const uintmax_t size : {full / 2, uintmax_t{4096 * 3}}) {
    const auto copy = dir / ("cut-" + std::to_string(size) + ".sqlite");
    fs::copy_file(file, copy);
    fs::resize_file(copy, size);
    const std::string bytes = read_bytes(copy);
    try {
      KnowledgeBase kb(copy);
      FAIL() << "opened a file cut to " << size << " bytes";
    } catch (const KbFileError& e) {
      EXPECT_TRUE(e.code() == SQLITE_CORRUPT || e.code() == SQLITE_NOTADB) << e.code();
      expect_one_line_naming(e.what(), copy);
    }
    EXPECT_EQ(read_bytes(copy), bytes);
  }
  // A header cut short is not a database at all.
  const auto stub = dir / "stub.sqlite";
  fs::copy_file(file, stub);
  fs::resize_file(stub, 50);
  EXPECT_THROW(KnowledgeBase kb(stub), KbFileError);
}

TEST(KbDurability, AReadOnlyConnectionRefusesWritesClearly) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  make_kb(file);
  OpenOptions o;
  o.read_only = true;
  KnowledgeBase kb(file, o);
  EXPECT_GT(kb.db().query_int("SELECT count(*) FROM actions"), 0);  // reads work
  try {
    kb.add_action(testing::action("cuda.new", "cuda"));
    FAIL() << "wrote through a read-only connection";
  } catch (const KbFileError& e) {
    EXPECT_EQ(e.code(), SQLITE_READONLY);
    expect_one_line_naming(e.what(), file);
  }
  EXPECT_EQ(count(file, "actions"), static_cast<int64_t>(embedded_seed().size()));
  OpenOptions missing;
  missing.read_only = true;
  EXPECT_THROW(KnowledgeBase(dir / "absent.sqlite", missing), KbFileError);
  EXPECT_FALSE(fs::exists(dir / "absent.sqlite"));
}

TEST(KbDurability, AFileWithoutWritePermissionGetsAClearErrorAndNoPartialWrite) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  make_kb(file);
  const int64_t before = count(file, "actions");
  const std::string bytes = read_bytes(file);
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(file, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  // Root ignores file permissions, so the writer runs as an ordinary user in a child process.
  const bool root = geteuid() == 0;
  const struct passwd* nobody = getpwnam("nobody");
  if (root && !nobody) GTEST_SKIP() << "running as root and there is no 'nobody' user to drop to";
  std::string message;
  const int rc = in_child(
      [&](std::string& msg) {
        if (root && (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0)) {
          msg = "cannot drop to nobody";
          return 3;
        }
        try {
          KnowledgeBase kb(file);
          // Reading still works: queries on a shared, read-only KB.
          if (kb.db().query_int("SELECT count(*) FROM actions") == 0 ||
              kb.ranked_actions(testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 1, 0.5, 0.1))
                  .empty()) {
            msg = "could not read the read-only KB";
            return 6;
          }
          const auto merged = KnowledgeBase::snapshot_of(file);  // what `kb diff` and `kb merge` read
          kb.add_action(testing::action("cuda.new", "cuda"));
        } catch (const KbFileError& e) {
          msg = e.what();
          return (e.code() == SQLITE_READONLY || e.code() == SQLITE_CANTOPEN) ? 0 : 4;
        }
        msg = "the write succeeded";
        return 5;
      },
      &message);
  EXPECT_EQ(rc, 0) << message;
  expect_one_line_naming(message, file);
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(read_bytes(file), bytes);
  EXPECT_EQ(count(file, "actions"), before);
}

TEST(KbDurability, AFullDiskRollsTheWholeWriteBack) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  make_kb(file);
  const int64_t before = count(file, "states");
  {
    KnowledgeBase kb(file);
    const int64_t pages = kb.db().query_int("PRAGMA page_count");
    kb.db().exec("PRAGMA max_page_count = " + std::to_string(pages + 3));  // the disk is "full" soon
    try {
      Transaction tx(kb.db());
      for (int i = 0; i < 400; ++i)
        testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "matmul", "compute", i + 1, 0.1, 0.5),
                           std::string(2000, 'x'));
      tx.commit();
      FAIL() << "400 states of 2 KB fitted in 3 pages";
    } catch (const KbFileError& e) {
      EXPECT_EQ(e.code(), SQLITE_FULL);
      expect_one_line_naming(e.what(), file);
      EXPECT_NE(std::string(e.what()).find("full"), std::string::npos);
    }
    EXPECT_FALSE(kb.db().in_transaction());
    EXPECT_EQ(kb.integrity_check(), "ok");
  }
  EXPECT_EQ(count(file, "states"), before);
}

TEST(KbDurability, AnIoErrorInTheMiddleOfAWriteRollsItBack) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  make_kb(file);
  const int64_t before = count(file, "states");
  std::string message;
  const int rc = in_child(
      [&](std::string& msg) {
        KnowledgeBase kb(file);
        signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead of killing us
        struct rlimit lim = {64 * 1024, 64 * 1024};
        setrlimit(RLIMIT_FSIZE, &lim);
        try {
          Transaction tx(kb.db());
          for (int i = 0; i < 2000; ++i)
            testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "conv", "compute", i + 1, 0.1, 0.5),
                               std::string(2000, 'y'));
          tx.commit();
        } catch (const KbFileError& e) {
          msg = e.what();
          return (e.code() == SQLITE_IOERR || e.code() == SQLITE_FULL) ? 0 : 4;
        }
        msg = "4 MB were written under a 64 KB file-size limit";
        return 5;
      },
      &message);
  EXPECT_EQ(rc, 0) << message;
  expect_one_line_naming(message, file);
  KnowledgeBase kb(file);
  EXPECT_EQ(kb.integrity_check(), "ok");
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM states"), before);
}

TEST(KbDurability, EightConcurrentWritersLoseNothing) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  make_kb(file);
  {
    KnowledgeBase kb(file);
    kb.add_action(testing::action("cuda.shared", "cuda"));
  }
  constexpr int kWriters = 8, kEach = 60;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 0;
      try {
        OpenOptions o;
        o.busy_timeout_ms = 60000;
        KnowledgeBase kb(file, o);
        const auto s = testing::add_state(
            kb, testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 1 + w, 0.1 * w, 0.05), "writer");
        for (int i = 0; i < kEach; ++i)
          testing::add_experience(kb, s, "cuda.shared", "h100", i % 3 != 0, 1.0 + 0.01 * i,
                                  i % 3 == 0 ? "wrong_output" : "");
      } catch (const std::exception& e) {
        fprintf(stderr, "writer %d: %s\n", w, e.what());
        rc = 1;
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  KnowledgeBase kb(file);
  EXPECT_EQ(kb.integrity_check(), "ok");
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), kWriters * kEach);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM states WHERE text = 'writer'"), kWriters);
  EXPECT_EQ(kb.db().query_int("SELECT sum(tries) FROM policy_stats"), kWriters * kEach);
  const int64_t wins = kb.db().query_int("SELECT sum(wins) FROM policy_stats");
  kb.rebuild_policy_stats();
  EXPECT_EQ(kb.db().query_int("SELECT sum(tries) FROM policy_stats"), kWriters * kEach);
  EXPECT_EQ(kb.db().query_int("SELECT sum(wins) FROM policy_stats"), wins);
}

TEST(KbDurability, KillNineDuringWritesKeepsEveryCommittedRecord) {
  ScratchDir dir;
  const auto file = dir / "kb.sqlite";
  make_kb(file);
  {
    KnowledgeBase kb(file);
    kb.add_action(testing::action("cuda.k", "cuda"));
  }
  std::set<std::string> committed;
  std::mt19937 rng(7);
  for (int round = 0; round < 6; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      try {
        KnowledgeBase kb(file);
        const auto s =
            testing::add_state(kb, testing::signature("cuda", "sm_90", "h100", "matmul", "compute", 8, 0.2, 0.6));
        for (int i = 0;; ++i) {
          // Big transactions too, so the kill often lands in the middle of one.
          Transaction tx(kb.db());
          std::vector<std::string> ids;
          for (int j = 0; j < 1 + (i % 7) * 20; ++j)
            ids.push_back(testing::add_experience(kb, s, "cuda.k", "h100", true, 1.1));
          tx.commit();
          std::string line;
          for (const auto& id : ids) line += id + "\n";
          if (write(fds[1], line.data(), line.size()) < 0) _exit(2);
        }
      } catch (...) {
        _exit(1);
      }
    }
    close(fds[1]);
    std::string got;
    char buf[8192];
    // Start the clock at the writer's first commit (a busy machine may take a while to get there).
    const ssize_t first = read(fds[0], buf, sizeof buf);
    if (first > 0) got.append(buf, static_cast<size_t>(first));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20 + rng() % 200);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    while (std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n > 0)
        got.append(buf, static_cast<size_t>(n));
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status)) << "the writer stopped on its own in round " << round;
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    std::istringstream lines(got);
    for (std::string id; std::getline(lines, id);)
      if (id.size() == 32) committed.insert(id);  // a torn last line was never fully reported
  }
  ASSERT_FALSE(committed.empty());
  KnowledgeBase kb(file);
  EXPECT_EQ(kb.integrity_check(), "ok");
  std::set<std::string> present;
  Statement st(kb.db(), "SELECT id FROM experiences");
  while (st.step()) present.insert(st.get_text(0));
  for (const auto& id : committed) EXPECT_TRUE(present.count(id)) << "lost committed experience " << id;
  const int64_t tries = kb.db().query_int("SELECT sum(tries) FROM policy_stats");
  EXPECT_EQ(tries, static_cast<int64_t>(present.size())) << "statistics and experiences disagree after kill -9";
}

}  // namespace
}  // namespace mblast::kb
