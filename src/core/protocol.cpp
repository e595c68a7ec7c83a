#include "mblast/protocol.h"

#include <poll.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mblast::protocol {

namespace {
constexpr size_t kMaxHeaderBytes = 256u << 20;

void write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("protocol: write failed: ") + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

constexpr const char* kKindNames[] = {"none",
                                      "build_failed",
                                      "abi_error",
                                      "launch_failed",
                                      "crashed",
                                      "timeout",
                                      "out_of_memory",
                                      "out_of_bounds_write",
                                      "unwritten_output",
                                      "wrong_output",
                                      "nan_or_inf",
                                      "input_modified",
                                      "nondeterministic",
                                      "unavailable",
                                      "runner_error",
                                      "timing_inconsistent",
                                      "implausible_speed"};
}  // namespace

std::string_view failure_kind_name(FailureKind k) { return kKindNames[static_cast<int>(k)]; }

std::optional<FailureKind> parse_failure_kind(std::string_view name) {
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (name == kKindNames[i]) return static_cast<FailureKind>(i);
  return std::nullopt;
}

void write_header(int fd, nlohmann::json header, size_t payload_bytes) {
  header["payload_bytes"] = payload_bytes;
  std::string line = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line.push_back('\n');
  write_all(fd, line.data(), line.size());
}

void write_message(int fd, nlohmann::json header, std::span<const std::byte> payload) {
  write_header(fd, std::move(header), payload.size());
  if (!payload.empty()) write_all(fd, payload.data(), payload.size());
}

void write_zeros(int fd, size_t n) {
  static const std::vector<char> zeros(1 << 20, 0);
  while (n > 0) {
    const size_t k = std::min(n, zeros.size());
    write_all(fd, zeros.data(), k);
    n -= k;
  }
}

const nlohmann::json* MessageReader::read_header(Deadline deadline) {
  if (header_pending_) return &*header_pending_;
  if (pending_) throw Error("protocol: read_header() while a payload is being read");
  for (;;) {
    auto begin = buf_.begin() + static_cast<ptrdiff_t>(pos_);
    auto it = std::find(begin, buf_.end(), '\n');
    if (it != buf_.end()) {
      nlohmann::json h = nlohmann::json::parse(begin, it, nullptr, false);
      if (h.is_discarded() || !h.is_object()) throw Error("protocol: message header is not a JSON object");
      pos_ = static_cast<size_t>(it - buf_.begin()) + 1;
      relay_left_ = h.value("payload_bytes", size_t{0});
      header_pending_ = std::move(h);
      return &*header_pending_;
    }
    if (buf_.size() - pos_ > kMaxHeaderBytes) throw Error("protocol: message header too long");
    if (pos_ > 0) {
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(pos_));
      pos_ = 0;
    }
    char tmp[1 << 16];
    size_t n = read_some(tmp, sizeof tmp, deadline);
    if (n == 0) {
      if (buf_.empty()) return nullptr;
      throw Error("protocol: stream ended inside a message header");
    }
    buf_.insert(buf_.end(), tmp, tmp + n);
  }
}

void MessageReader::relay_payload(int out_fd, Deadline deadline) {
  if (!header_pending_) throw Error("protocol: relay_payload() without a header");
  // Bytes read ahead with the header first, then the rest through a buffer as they arrive.
  const size_t ahead = std::min(relay_left_, buf_.size() - pos_);
  if (ahead > 0) {
    write_all(out_fd, buf_.data() + pos_, ahead);
    pos_ += ahead;
    relay_left_ -= ahead;
  }
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  if (relay_buf_.empty() && relay_left_ > 0) relay_buf_.resize(1 << 20);
  while (relay_left_ > 0) {
    const size_t n = read_some(relay_buf_.data(), std::min(relay_left_, relay_buf_.size()), deadline);
    if (n == 0) throw Error("protocol: stream ended inside a payload");
    write_all(out_fd, relay_buf_.data(), n);
    relay_left_ -= n;
  }
  header_pending_.reset();
}

void MessageReader::recycle(std::vector<std::byte>&& buffer) {
  if (buffer.capacity() == 0) return;
  buffer.clear();
  spares_.push_back(std::move(buffer));
  // Keep the two largest: a reader of one run's outputs while the previous run's are held.
  std::sort(spares_.begin(), spares_.end(), [](const auto& a, const auto& b) { return a.capacity() > b.capacity(); });
  if (spares_.size() > 2) spares_.resize(2);
}

bool MessageReader::wait_readable(Deadline deadline) {
  for (;;) {
    int wait_ms = -1;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) throw Timeout("protocol: timed out waiting for the other side");
      wait_ms = static_cast<int>(std::min<long long>(left, 1 << 30));
    }
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("protocol: poll failed: ") + std::strerror(errno));
    }
    if (r > 0) return true;
  }
}

size_t MessageReader::read_some(void* dst, size_t n, Deadline deadline) {
  for (;;) {
    wait_readable(deadline);
    ssize_t got = ::read(fd_, dst, n);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error(std::string("protocol: read failed: ") + std::strerror(errno));
    }
    return static_cast<size_t>(got);
  }
}

// The header read_header() parsed becomes the message read() completes: its payload goes into
// the smallest spare that fits (unless that is more than twice what it needs), bytes read ahead
// with the header first.
void MessageReader::take_pending_header() {
  Message m{std::move(*header_pending_), {}};
  header_pending_.reset();
  const size_t payload_bytes = relay_left_;
  relay_left_ = 0;
  for (size_t i = spares_.size(); i-- > 0;)
    if (payload_bytes > 0 && spares_[i].capacity() >= payload_bytes && payload_bytes >= spares_[i].capacity() / 2) {
      m.payload = std::move(spares_[i]);
      spares_.erase(spares_.begin() + static_cast<ptrdiff_t>(i));
      break;
    }
  m.payload.resize(payload_bytes);
  have_ = std::min(m.payload.size(), buf_.size() - pos_);
  std::memcpy(m.payload.data(), buf_.data() + pos_, have_);
  pos_ += have_;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  pending_ = std::move(m);
}

std::optional<Message> MessageReader::read(Deadline deadline) {
  // State survives a Timeout: a partly received message is completed by the next call.
  if (!pending_) {
    if (!read_header(deadline)) return std::nullopt;
    take_pending_header();
  }
  auto& payload = pending_->payload;
  while (have_ < payload.size()) {
    size_t n = read_some(payload.data() + have_, payload.size() - have_, deadline);
    if (n == 0) throw Error("protocol: stream ended inside a payload");
    have_ += n;
  }
  Message m = std::move(*pending_);
  pending_.reset();
  return m;
}

}  // namespace mblast::protocol
