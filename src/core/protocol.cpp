#include "mblast/protocol.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <unistd.h>

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

constexpr const char* kKindNames[] = {
    "none",         "build_failed",   "abi_error",       "launch_failed",   "crashed",
    "timeout",      "out_of_memory",  "out_of_bounds_write", "unwritten_output", "wrong_output",
    "nan_or_inf",   "input_modified", "nondeterministic", "unavailable",     "runner_error"};
}  // namespace

std::string_view failure_kind_name(FailureKind k) { return kKindNames[static_cast<int>(k)]; }

std::optional<FailureKind> parse_failure_kind(std::string_view name) {
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (name == kKindNames[i]) return static_cast<FailureKind>(i);
  return std::nullopt;
}

void write_message(int fd, nlohmann::json header, std::span<const std::byte> payload) {
  header["payload_bytes"] = payload.size();
  std::string line = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line.push_back('\n');
  write_all(fd, line.data(), line.size());
  if (!payload.empty()) write_all(fd, payload.data(), payload.size());
}

bool MessageReader::fill(Deadline deadline) {
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
    if (r == 0) continue;  // re-check the deadline
    static thread_local char tmp[1 << 20];
    ssize_t n = ::read(fd_, tmp, sizeof tmp);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error(std::string("protocol: read failed: ") + std::strerror(errno));
    }
    if (n == 0) return false;
    if (pos_ > 0 && !pending_) {  // drop consumed bytes before growing
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(pos_));
      pos_ = 0;
    }
    buf_.insert(buf_.end(), tmp, tmp + n);
    return true;
  }
}

std::optional<Message> MessageReader::read(Deadline deadline) {
  // Nothing is consumed until a whole message is buffered, so a Timeout can be retried.
  for (;;) {
    auto begin = buf_.begin() + static_cast<ptrdiff_t>(pos_);
    auto it = std::find(begin, buf_.end(), '\n');
    if (it != buf_.end()) {
      const size_t nl = static_cast<size_t>(it - buf_.begin());
      if (!pending_) {
        nlohmann::json h = nlohmann::json::parse(begin, it, nullptr, false);
        if (h.is_discarded() || !h.is_object()) throw Error("protocol: message header is not a JSON object");
        pending_ = std::move(h);
      }
      const size_t want = pending_->value("payload_bytes", size_t{0});
      if (buf_.size() - (nl + 1) >= want) {
        Message m;
        m.header = std::move(*pending_);
        pending_.reset();
        const auto* src = reinterpret_cast<const std::byte*>(buf_.data() + nl + 1);
        m.payload.assign(src, src + want);
        pos_ = nl + 1 + want;
        if (pos_ == buf_.size()) {
          buf_.clear();
          pos_ = 0;
        }
        return m;
      }
    } else if (buf_.size() - pos_ > kMaxHeaderBytes) {
      throw Error("protocol: message header too long");
    }
    if (!fill(deadline)) {
      if (buf_.size() == pos_) return std::nullopt;
      throw Error("protocol: stream ended inside a message");
    }
  }
}

}  // namespace mblast::protocol
