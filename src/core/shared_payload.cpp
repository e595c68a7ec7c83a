#include "mblast/shared_payload.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "mblast/error.h"

namespace mblast {

std::optional<SharedPayload> SharedPayload::create(std::span<const std::byte> payload, std::string* why) {
  const int fd = ::memfd_create("mblast-payload", MFD_CLOEXEC);
  if (fd < 0) {
    *why = std::string("memfd_create: ") + std::strerror(errno);
    return std::nullopt;
  }
  SharedPayload s(fd, payload.size());
  // write(), not a mapping: a full memory cgroup or tmpfs is an error here, not a SIGBUS later.
  size_t done = 0;
  while (done < payload.size()) {
    const ssize_t n = ::write(fd, payload.data() + done, payload.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = std::string("writing the payload to a memfd: ") + (n < 0 ? std::strerror(errno) : "no progress");
      return std::nullopt;
    }
    done += static_cast<size_t>(n);
  }
  return s;
}

SharedPayload::SharedPayload(SharedPayload&& o) noexcept : fd_(std::exchange(o.fd_, -1)), bytes_(o.bytes_) {}

SharedPayload& SharedPayload::operator=(SharedPayload&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    bytes_ = o.bytes_;
  }
  return *this;
}

SharedPayload::~SharedPayload() {
  if (fd_ >= 0) ::close(fd_);
}

std::string SharedPayload::path() const { return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd_); }

int open_shared_payload(const std::string& path, size_t bytes, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot open the shared payload " + path + ": " + std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != bytes) {
    *why = "the shared payload " + path + " does not hold the " + std::to_string(bytes) + " bytes announced";
    ::close(fd);
    return -1;
  }
  return fd;
}

MappedPayload::MappedPayload(int fd, size_t bytes) : size_(bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    ::close(fd);
    throw Error("worker: the shared payload holds fewer than the " + std::to_string(bytes) + " bytes announced");
  }
  if (bytes > 0) {
    data_ = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (data_ == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      data_ = nullptr;
      throw Error(std::string("worker: cannot map the shared payload: ") + std::strerror(e));
    }
  }
  ::close(fd);
}

MappedPayload::~MappedPayload() {
  if (data_) ::munmap(data_, size_);
}

void send_fd(int socket, int fd) {
  char byte = 'i';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t n;
  do n = ::sendmsg(socket, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != 1) throw Error(std::string("sending the inputs' payload to the worker: ") + std::strerror(errno));
}

int receive_fd(int socket) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(socket, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  const cmsghdr* c = n == 1 ? CMSG_FIRSTHDR(&m) : nullptr;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
    throw Error("worker: no inputs' payload came on the inputs channel");
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

}  // namespace mblast
