// A request's payload (inputs and parameters, hundreds of MiB at full size) handed from the
// driver to a local runner and on to its worker as shared memory instead of through two pipes:
// the driver writes it once into an anonymous memory file (memfd), the runner opens that file
// through /proc/<driver>/fd/<n> and passes it to the worker as an inherited fd, and the worker
// maps it read-only. Nothing is copied between the processes and no process clears fresh pages
// for a private copy; the candidate cannot write to it. Remote runners (ssh) get the payload in
// the message as before. docs/runner-protocol.md has the fields.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace mblast {

// Driver side: the payload in a memfd, open for as long as this object lives.
class SharedPayload {
 public:
  // nullopt, with the reason in *why, when no memfd can be made or filled (the caller sends the
  // payload in the message instead).
  static std::optional<SharedPayload> create(std::span<const std::byte> payload, std::string* why);
  SharedPayload(SharedPayload&&) noexcept;
  SharedPayload& operator=(SharedPayload&&) noexcept;
  SharedPayload(const SharedPayload&) = delete;
  SharedPayload& operator=(const SharedPayload&) = delete;
  ~SharedPayload();

  std::string path() const;  // "/proc/<this process>/fd/<n>": how a process of the same user opens it
  size_t bytes() const { return bytes_; }

 private:
  SharedPayload(int fd, size_t bytes) : fd_(fd), bytes_(bytes) {}
  int fd_ = -1;
  size_t bytes_ = 0;
};

// Runner side: opens the file at `path` read-only (close-on-exec) and checks that it holds
// `bytes`. Returns the fd, or -1 with the reason in *why.
int open_shared_payload(const std::string& path, size_t bytes, std::string* why);

// Worker side: `fd` mapped read-only (the fd is closed; the mapping stays for this object's life).
class MappedPayload {
 public:
  // Throws Error when the fd cannot be mapped or is smaller than `bytes`.
  MappedPayload(int fd, size_t bytes);
  MappedPayload(const MappedPayload&) = delete;
  MappedPayload& operator=(const MappedPayload&) = delete;
  ~MappedPayload();
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// The fd number at which a worker finds a shared payload.
inline constexpr int kSharedPayloadFd = 5;

// The fd number of the channel (a Unix socket) on which an eval's worker receives the shared
// payload of its inputs, as SCM_RIGHTS, once mblast_prepare has run on the parameters alone:
// no input is in the process while the candidate prepares (include/mblast/abi.h).
inline constexpr int kInputsChannelFd = 6;
// Sends FD over the Unix socket SOCKET; throws Error.
void send_fd(int socket, int fd);
// Receives one fd sent by send_fd() (blocking); throws Error.
int receive_fd(int socket);

// What the driver's probe at hello holds; a runner that reads it back can open shared payloads.
inline constexpr char kSharedPayloadProbe[8] = {'m', 'b', 'l', 'a', 's', 't', '!', '\n'};

}  // namespace mblast
