#include "mblast/driver/import_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "mblast/error.h"
#include "mblast/files.h"

namespace mblast {

namespace fs = std::filesystem;

SlotLock SlotLock::exclusive(const fs::path& slot) {
  const fs::path p = slot / ".lock";
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    fs::create_directories(slot, ec);
    const int fd = open_locked(p, LOCK_EX);
    if (fd < 0) {
      if (errno == ENOENT && attempt < 100) continue;  // removed between the two steps
      throw Error("cannot lock " + p.string() + ": " + std::strerror(errno));
    }
    struct stat held {
    }, now{};
    if (::fstat(fd, &held) == 0 && ::stat(p.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      SlotLock l;
      l.fd_ = fd;
      return l;
    }
    ::close(fd);  // the slot was removed while this waited: make it again
    if (attempt >= 100) throw Error("cannot lock " + p.string() + ": it keeps being removed");
  }
}

SlotLock& SlotLock::operator=(SlotLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

SlotLock::~SlotLock() {
  if (fd_ >= 0) ::close(fd_);
}

void SlotLock::share() {
  if (fd_ < 0) return;
  while (::flock(fd_, LOCK_SH) != 0 && errno == EINTR) {
  }
}

void SlotLock::mark_used() {
  if (fd_ >= 0) ::futimens(fd_, nullptr);
}

std::uintmax_t tree_bytes(const fs::path& dir) {
  // Each file once: an import links the expected outputs that several inits share.
  std::set<std::pair<dev_t, ino_t>> seen;
  std::uintmax_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (st.st_nlink > 1 && !seen.insert({st.st_dev, st.st_ino}).second) continue;
    n += static_cast<std::uintmax_t>(st.st_size);
  }
  return n;
}

namespace {

struct Slot {
  fs::path dir;
  fs::file_time_type used;
  std::size_t next = 0;  // NextUse's answer
};

// ROOT/<level>/<slot> folders; a slot's last use is its lock file's time (the folder's without one).
std::vector<Slot> list_slots(const fs::path& root) {
  std::vector<Slot> v;
  std::error_code ec;
  for (const auto& level : fs::directory_iterator(root, ec)) {
    if (!level.is_directory() || level.path().filename().string().rfind('.', 0) == 0) continue;
    std::error_code e2;
    for (const auto& s : fs::directory_iterator(level.path(), e2)) {
      if (!s.is_directory()) continue;
      std::error_code e3;
      auto t = fs::last_write_time(s.path() / ".lock", e3);
      if (e3) t = fs::last_write_time(s.path(), e3);
      v.push_back({s.path(), t, 0});
    }
  }
  return v;
}

bool same_path(const fs::path& a, const fs::path& b) { return fs::weakly_canonical(a) == fs::weakly_canonical(b); }

}  // namespace

std::uintmax_t import_reserve(const fs::path& root) {
  std::uintmax_t largest = 0;
  for (const auto& s : list_slots(root)) largest = std::max(largest, tree_bytes(s.dir));
  std::error_code ec;
  const auto sp = fs::space(root, ec);
  const std::uintmax_t capacity = ec ? 0 : sp.capacity;
  return std::max({std::uintmax_t{1} << 30, 2 * largest, capacity / 20});
}

Eviction make_room(const fs::path& root, const fs::path& keep, std::uintmax_t want,
                   const std::function<std::uintmax_t()>& available, const NextUse& next_use) {
  auto free_now = [&]() -> std::uintmax_t {
    if (available) return available();
    std::error_code ec;
    const auto sp = fs::space(root, ec);
    return ec ? 0 : sp.available;
  };
  Eviction ev;
  std::error_code ec;
  // Leftovers of a removal that was interrupted.
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.path().filename().string().rfind(".evicting-", 0) == 0) fs::remove_all(e.path(), ec);
  if (free_now() >= want) return ev;
  std::vector<Slot> slots = list_slots(root);
  for (auto& s : slots) s.next = next_use ? next_use(s.dir) : 0;
  // Not needed again (0) first, by last use; then the latest needed first.
  std::sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) {
    if ((a.next == 0) != (b.next == 0)) return a.next == 0;
    if (a.next != b.next) return a.next > b.next;
    return a.used < b.used;
  });
  for (const auto& s : slots) {
    if (free_now() >= want) break;
    if (same_path(s.dir, keep)) continue;
    const fs::path lock = s.dir / ".lock";
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // being imported or used
      ::close(fd);
      continue;
    }
    // Renamed first, while locked: a process that waits for this lock finds its slot gone and
    // makes a new one (SlotLock::exclusive), never a half-removed one.
    const fs::path gone = root / (".evicting-" + s.dir.parent_path().filename().string() + "-" +
                                  s.dir.filename().string() + "-" + std::to_string(::getpid()));
    const std::uintmax_t bytes = tree_bytes(s.dir);
    std::error_code e2;
    fs::rename(s.dir, gone, e2);
    ::close(fd);
    if (e2) continue;
    fs::remove_all(gone, e2);
    ++ev.removed;
    ev.bytes += bytes;
  }
  return ev;
}

bool says_disk_full(const std::string& output) {
  for (const char* s : {"No space left on device", "ENOSPC", "os error 28", "Errno 28"})
    if (output.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace mblast
