// The driver <-> runner protocol, and runner <-> worker: framed messages over a byte stream
// (a pipe to a local child, or ssh's stdin/stdout). A message is one line of JSON that carries
// "payload_bytes": N, followed by N raw bytes (a safetensors blob, or nothing).
//
// Conversation for "eval" (see docs/runner-protocol.md):
//   driver -> runner  {"op":"eval", ...} + inputs/parameters payload
//   runner -> driver  {"stage":"verify_run", "case":{...}} + that run's outputs, once per run
//                     (with "stream_runs": relayed as they arrive, then {"stage":"verify_run_end"});
//   driver -> runner  {"op":"continue"} or {"op":"stop"} after each of them
//   runner -> driver  {"stage":"verify", "cases":[...]} once every run has been answered
//   driver -> runner  {"op":"time"} or {"op":"stop"}
//   runner -> driver  {"stage":"timing", ...} + outputs of the timed buffer sets
// Any stage may instead be answered by {"stage":"failed","failure_kind":...,"reason":...}.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/error.h"

namespace mblast::protocol {

constexpr int kVersion = 2;  // 2: timed calls driven one by one by the runner

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;

struct Message {
  nlohmann::json header;
  std::vector<std::byte> payload;
};

class Timeout : public Error {
 public:
  using Error::Error;
};

// Writes one message. Throws Error when the other side has gone (EPIPE).
void write_message(int fd, nlohmann::json header, std::span<const std::byte> payload = {});
// Writes a message's header line announcing PAYLOAD_BYTES, which the caller then writes itself
// (MessageReader::relay_payload). Throws Error when the other side has gone.
void write_header(int fd, nlohmann::json header, size_t payload_bytes);
// Writes N zero bytes: the rest of an announced payload whose source failed, so that the stream
// stays framed.
void write_zeros(int fd, size_t n);

// Reads messages from one file descriptor, keeping what it read ahead.
class MessageReader {
 public:
  explicit MessageReader(int fd) : fd_(fd) {}
  // Returns nullopt on end of stream before the first byte of a message. Throws Timeout when
  // the deadline passes, Error on a malformed message or a stream cut inside one.
  std::optional<Message> read(Deadline deadline = std::nullopt);
  // Gives a payload buffer back: the next payload that fits is read into it, so a conversation
  // of many large messages does not fault in fresh pages for every one.
  void recycle(std::vector<std::byte>&& buffer);
  // The next message's header alone, its payload left in the stream for relay_payload() (a
  // relay passes a payload on as it arrives instead of holding all of it); nullptr on end of
  // stream before a message, and the same throws as read(). The header stays pending (and the
  // pointer valid) until its payload is relayed, or read() returns the message whole.
  const nlohmann::json* read_header(Deadline deadline = std::nullopt);
  // Writes the payload of the header read_header() returned to OUT_FD as it arrives. Throws
  // Timeout at the deadline (call again to go on), Error when the stream ends inside the payload
  // or OUT_FD fails. relay_left() says how many bytes are still to come.
  void relay_payload(int out_fd, Deadline deadline = std::nullopt);
  size_t relay_left() const { return relay_left_; }

 private:
  bool wait_readable(Deadline deadline);                     // throws Timeout
  void take_pending_header();                                // read_header()'s header -> pending_, for read()
  size_t read_some(void* dst, size_t n, Deadline deadline);  // 0 on EOF
  int fd_;
  std::vector<char> buf_;  // header bytes read ahead
  size_t pos_ = 0;
  std::optional<Message> pending_;                // header parsed, payload still arriving
  size_t have_ = 0;                               // payload bytes of pending_ received so far
  std::vector<std::vector<std::byte>> spares_;    // recycled payload buffers, at most two
  std::optional<nlohmann::json> header_pending_;  // read_header() parsed it; its payload is next
  size_t relay_left_ = 0;                         // payload bytes relay_payload() has still to pass on
  std::vector<char> relay_buf_;                   // relay_payload()'s chunk buffer
};

// Why a candidate was not accepted. Candidate failures are results, never exceptions.
enum class FailureKind {
  none,
  build_failed,         // the compiler rejected the candidate (log attached)
  abi_error,            // mblast_run missing, or a symbol with the wrong ABI version
  launch_failed,        // mblast_prepare/mblast_run returned non-zero, or the API reported an error
  crashed,              // the process running the candidate died on a signal
  timeout,              // it did not finish within the time limit
  out_of_memory,        // over the memory limit
  out_of_bounds_write,  // wrote outside an output buffer (guard bytes changed)
  unwritten_output,     // output elements still hold the poison written before the run
  wrong_output,         // outside tolerance against the reference
  nan_or_inf,           // NaN or Inf where the reference is finite
  input_modified,       // inputs or parameters changed by the run
  nondeterministic,     // two runs on the same inputs disagree
  unavailable,          // the target cannot be reached or has no device here
  runner_error,         // the measurement infrastructure itself failed
  timing_inconsistent,  // the cost did not come from the runner's own measurement: figures at odds with its clock,
                        // messages out of order, forged counts
  implausible_speed,    // faster than the problem's speed-of-light time on the target allows
};

std::string_view failure_kind_name(FailureKind k);
std::optional<FailureKind> parse_failure_kind(std::string_view name);

}  // namespace mblast::protocol
