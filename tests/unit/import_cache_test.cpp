// The bench's import cache (mblast/driver/import_cache.h): which slots make_room() removes, in
// which order, which it leaves, and that a waiting lock follows its slot when the slot is removed.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "mblast/driver/import_cache.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;

class ImportCache : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("mblast-import-cache-" + std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A slot ROOT/level1/NAME holding BYTES of data, last used AGE_S seconds ago.
  fs::path slot(const std::string& name, size_t bytes, int age_s) {
    const fs::path d = root_ / "level1" / name;
    fs::create_directories(d / "p" / "data");
    std::ofstream(d / "p" / "data" / "x.safetensors") << std::string(bytes, 'x');
    std::ofstream(d / ".lock");
    fs::last_write_time(d / ".lock", fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
    return d;
  }

  fs::path root_;
};

// A bench that knows the rest of its list removes what it will not need first (least recently
// used first), then what it needs latest; never, as least recently used alone would, the import
// it needs next.
TEST_F(ImportCache, KeepsWhatTheCallerNeedsSoonest) {
  const fs::path a = slot("a.1", 100, 500), b = slot("b.1", 100, 400), c = slot("c.1", 100, 300),
                 d = slot("d.1", 100, 200), e = slot("e.1", 100, 100);
  auto available = [&] { return std::uintmax_t{1000} - tree_bytes(root_); };
  // a (the oldest) is needed next, c after four more problems, e after two; b and d not again.
  auto next = [&](const fs::path& s) -> std::size_t {
    const std::string n = s.filename().string();
    return n == "a.1" ? 1 : n == "c.1" ? 5 : n == "e.1" ? 3 : 0;
  };
  // 650 free needs 150 more: b and d (not needed again, b first as the less recently used).
  Eviction ev = make_room(root_, root_ / "level1" / "other", 650, available, next);
  EXPECT_EQ(ev.removed, 2);
  EXPECT_FALSE(fs::exists(b));
  EXPECT_FALSE(fs::exists(d));
  // 750 needs one more: c, needed latest; a and e stay.
  ev = make_room(root_, root_ / "level1" / "other", 750, available, next);
  EXPECT_EQ(ev.removed, 1);
  EXPECT_FALSE(fs::exists(c));
  EXPECT_TRUE(fs::exists(a));
  EXPECT_TRUE(fs::exists(e));
  // Then e, then a.
  ev = make_room(root_, root_ / "level1" / "other", 850, available, next);
  EXPECT_FALSE(fs::exists(e));
  EXPECT_TRUE(fs::exists(a));
}

// An import links the expected outputs that several inits share: they take the disk once.
TEST_F(ImportCache, CountsAHardLinkedFileOnce) {
  const fs::path d = slot("a.1", 100, 0);
  EXPECT_EQ(tree_bytes(d), 100u);
  fs::create_hard_link(d / "p" / "data" / "x.safetensors", d / "p" / "data" / "y.safetensors");
  EXPECT_EQ(tree_bytes(d), 100u);
  std::ofstream(d / "p" / "data" / "z.safetensors") << std::string(50, 'z');
  EXPECT_EQ(tree_bytes(d), 150u);
  fs::create_symlink(d / "p" / "data" / "z.safetensors", d / "p" / "data" / "s.safetensors");
  EXPECT_EQ(tree_bytes(d), 150u);
}

TEST_F(ImportCache, RemovesTheLeastRecentlyUsedFirstAndOnlyWhatIsNeeded) {
  const fs::path a = slot("a.1", 100, 400), b = slot("b.1", 200, 300), c = slot("c.1", 300, 200),
                 d = slot("d.1", 400, 100);
  EXPECT_EQ(tree_bytes(d), 400u);
  // The disk's free bytes: what the slots held and no longer hold.
  auto available = [&] { return std::uintmax_t{1000} - tree_bytes(root_); };
  // a is the oldest; 250 bytes need a (100) and b (200), and c and d stay.
  Eviction e = make_room(root_, root_ / "level1" / "other", 250, available);
  EXPECT_EQ(e.removed, 2);
  EXPECT_EQ(e.bytes, 300u);
  EXPECT_FALSE(fs::exists(a));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_TRUE(fs::exists(c));
  EXPECT_TRUE(fs::exists(d));
  // Nothing of the removal is left behind.
  for (const auto& x : fs::directory_iterator(root_)) EXPECT_EQ(x.path().filename(), "level1");
}

TEST_F(ImportCache, LeavesTheSlotToKeepAndSlotsInUse) {
  const fs::path a = slot("a.1", 100, 400), b = slot("b.1", 200, 300), c = slot("c.1", 300, 200);
  SlotLock in_use = SlotLock::exclusive(a);
  in_use.share();  // a row is using a
  // Asked for more than there is: everything that may go goes, and only that.
  Eviction e = make_room(root_, b, 1u << 30, [] { return std::uintmax_t{0}; });
  EXPECT_EQ(e.removed, 1);
  EXPECT_EQ(e.bytes, 300u);
  EXPECT_TRUE(fs::exists(a / "p" / "data" / "x.safetensors"));
  EXPECT_TRUE(fs::exists(b / "p" / "data" / "x.safetensors"));
  EXPECT_FALSE(fs::exists(c));
  // Free already: nothing goes.
  EXPECT_EQ(make_room(root_, b, 10, [] { return std::uintmax_t{10}; }).removed, 0);
}

TEST_F(ImportCache, ALockWaitingOnARemovedSlotMakesItAgain) {
  const fs::path a = slot("a.1", 100, 10);
  // Another process's removal, by its steps: lock, rename away, unlock, delete.
  const int fd = ::open((a / ".lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    SlotLock l = SlotLock::exclusive(a);
    got = true;
    // The lock held is on the slot's path now, and the slot is there again (empty).
    EXPECT_TRUE(l.held());
    EXPECT_TRUE(fs::exists(a / ".lock"));
    EXPECT_FALSE(fs::exists(a / "p"));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(got.load());
  fs::rename(a, root_ / ".evicting-test");
  ::close(fd);
  fs::remove_all(root_ / ".evicting-test");
  waiter.join();
  EXPECT_TRUE(got.load());
}

TEST(ImportCacheText, RecognisesAFullDisk) {
  EXPECT_TRUE(
      says_disk_full("SafetensorError: Error while serializing: I/O error: No space left on device (os error 28)"));
  EXPECT_TRUE(says_disk_full("OSError: [Errno 28] No space left on device: '/tmp/x'"));
  EXPECT_FALSE(says_disk_full("RuntimeError: CUDA out of memory"));
}

}  // namespace
}  // namespace mblast
