// Reading and writing whole files, the way every part of mblast does it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace mblast {

// The file's bytes, or nothing when it cannot be opened.
std::optional<std::string> try_read_file(const std::filesystem::path& file);
// The file's bytes; throws UserError("cannot read FILE") when it cannot be opened.
std::string read_file(const std::filesystem::path& file);
// Writes `text` beside `file` under a temporary name, syncs it and renames it over `file`: a
// reader sees the old file or the whole new one, never half of it. Creates missing folders.
// Throws Error with the reason when any step fails (the temporary file is removed).
void write_file_atomically(const std::filesystem::path& file, const std::string& text);
// Opens FILE (creating it) and takes flock(OP) on it (LOCK_EX or LOCK_SH), waiting for it. The
// descriptor, whose close releases the lock; -1 with errno set when either step fails.
int open_locked(const std::filesystem::path& file, int op);

// A new folder under the system's temporary folder (`<prefix>-XXXXXX`), removed with everything
// in it when this goes out of scope. Throws Error when it cannot be made.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mblast
