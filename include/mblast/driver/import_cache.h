#pragma once
// The bench's import cache (WORK/imports/<level>/<slot>/): a lock per slot, and room made on the
// disk by removing the least recently used slots that no process is using.
//
// A full-size suite's imports take tens of GiB (reference outputs for every seed and init), more
// than many disks hold; the cache must not fill the disk, and a slot in use must not go.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace mblast {

// flock() on SLOT/.lock. Exclusive while a slot is checked or written, shared while a row uses it;
// make_room() takes only slots it can lock exclusively without waiting. The lock is on the file
// that is at the path: a slot removed while this waited is made again, and locked again.
class SlotLock {
 public:
  SlotLock() = default;
  // Creates SLOT when missing; waits for the lock. Throws Error when the lock cannot be taken.
  static SlotLock exclusive(const std::filesystem::path& slot);
  SlotLock(SlotLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  SlotLock& operator=(SlotLock&& o) noexcept;
  SlotLock(const SlotLock&) = delete;
  SlotLock& operator=(const SlotLock&) = delete;
  ~SlotLock();

  void share();      // exclusive -> shared: others may use the slot, nobody may remove it
  void mark_used();  // the slot's last use (the eviction order) is now
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct Eviction {
  int removed = 0;
  std::uintmax_t bytes = 0;
};

// The bytes under DIR (regular files, each hard-linked file once; symbolic links not followed).
std::uintmax_t tree_bytes(const std::filesystem::path& dir);

// Free space to keep on the disk of ROOT before an import: twice the largest slot there (the next
// import is probably no larger), at least 1 GiB and 5 % of the disk's capacity.
std::uintmax_t import_reserve(const std::filesystem::path& root);

// How soon the caller needs a slot again: 1 for the next problem, 2 for the one after, ...; 0
// when it will not (a bench knows the rest of its list).
using NextUse = std::function<std::size_t(const std::filesystem::path& slot)>;

// Removes slots of ROOT (ROOT/<level>/<slot>) until AVAILABLE() says at least WANT bytes are free:
// first the slots NEXT_USE says are not needed again, least recently used first, then those needed
// latest first (without NEXT_USE: least recently used first). A suite bench that does not fit the
// disk then keeps what it needs soonest: least recently used alone removes, on a second pass over
// the same list, each import just before it is needed. KEEP and slots that another holder has
// locked are left alone. AVAILABLE: the free bytes now (default: the disk's, for an unprivileged user).
Eviction make_room(const std::filesystem::path& root, const std::filesystem::path& keep, std::uintmax_t want,
                   const std::function<std::uintmax_t()>& available = {}, const NextUse& next_use = {});

// Whether an import's output says the disk was full.
bool says_disk_full(const std::string& output);

}  // namespace mblast
