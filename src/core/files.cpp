#include "mblast/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "mblast/error.h"

namespace fs = std::filesystem;

namespace mblast {

std::optional<std::string> try_read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string read_file(const fs::path& file) {
  auto text = try_read_file(file);
  if (!text) throw UserError("cannot read " + file.string());
  return std::move(*text);
}

void write_file_atomically(const fs::path& file, const std::string& text) {
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  const fs::path tmp = file.parent_path() / ("." + file.filename().string() + ".tmp" + std::to_string(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write " + file.string() + ": " + std::strerror(errno));
  size_t done = 0;
  int err = 0;
  while (!err && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      err = n < 0 ? errno : EIO;
    else
      done += static_cast<size_t>(n);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  std::error_code ec;
  if (!err) {
    fs::rename(tmp, file, ec);
    if (ec) err = ec.value();
  }
  if (err) {
    fs::remove(tmp, ec);
    throw Error("cannot write " + file.string() + ": " + std::strerror(err));
  }
}

int open_locked(const fs::path& file, int op) {
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  while (::flock(fd, op) != 0) {
    if (errno != EINTR) {
      const int e = errno;
      ::close(fd);
      errno = e;
      return -1;
    }
  }
  return fd;
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string templ = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(templ.data())) throw Error("cannot make a temporary folder " + templ + ": " + std::strerror(errno));
  path_ = templ;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace mblast
