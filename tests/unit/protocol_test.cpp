#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>
#include <optional>
#include <thread>

#include "mblast/protocol.h"

namespace mblast::protocol {
namespace {

struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    r = p[0];
    w = p[1];
  }
  ~Pipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
  void close_write() {
    ::close(w);
    w = -1;
  }
};

TEST(Protocol, MessageWithPayloadArrivesWhole) {
  Pipe p;
  std::vector<std::byte> payload(100000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7);
  std::thread writer([&] { write_message(p.w, {{"op", "x"}, {"n", 3}}, payload); });
  MessageReader reader(p.r);
  auto m = reader.read(Clock::now() + std::chrono::seconds(10));
  writer.join();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->header["op"], "x");
  EXPECT_EQ(m->payload, payload);
}

TEST(Protocol, RecycledBuffersCarryTheNextPayloads) {
  // A stream of large messages (one per verification run) reuses the buffers given back
  // instead of faulting in fresh memory for each; the bytes are still each message's own.
  Pipe p;
  MessageReader reader(p.r);
  std::vector<const std::byte*> seen;
  for (int k = 0; k < 4; ++k) {
    std::vector<std::byte> payload(50000, static_cast<std::byte>(k + 1));
    std::thread writer([&] { write_message(p.w, {{"k", k}}, payload); });
    auto m = reader.read(Clock::now() + std::chrono::seconds(10));
    writer.join();
    ASSERT_TRUE(m);
    EXPECT_EQ(m->payload, payload);
    seen.push_back(m->payload.data());
    reader.recycle(std::move(m->payload));
  }
  EXPECT_EQ(seen[1], seen[0]);
  EXPECT_EQ(seen[3], seen[0]);
  // A small message does not take a large spare, and still arrives whole.
  std::thread writer([&] { write_message(p.w, {{"small", true}}, std::vector<std::byte>(10, std::byte{7})); });
  auto m = reader.read(Clock::now() + std::chrono::seconds(10));
  writer.join();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->payload, std::vector<std::byte>(10, std::byte{7}));
  EXPECT_NE(m->payload.data(), seen[0]);
}

TEST(Protocol, TimeoutInsideAPayloadLosesNothing) {
  // The runner reads with short deadlines while it watches the worker; a deadline that passes
  // in the middle of a payload must leave the message intact for the next read.
  Pipe p;
  std::vector<std::byte> payload(1 << 20, std::byte{0x5a});
  std::string header = nlohmann::json{{"op", "big"}, {"payload_bytes", payload.size()}}.dump() + "\n";
  ASSERT_EQ(::write(p.w, header.data(), header.size()), static_cast<ssize_t>(header.size()));
  ASSERT_EQ(::write(p.w, payload.data(), 1000), 1000);
  MessageReader reader(p.r);
  EXPECT_THROW(reader.read(Clock::now() + std::chrono::milliseconds(30)), Timeout);
  std::thread rest([&] {
    size_t off = 1000;
    while (off < payload.size()) off += static_cast<size_t>(::write(p.w, payload.data() + off, payload.size() - off));
  });
  auto m = reader.read(Clock::now() + std::chrono::seconds(10));
  rest.join();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->header["op"], "big");
  EXPECT_EQ(m->payload.size(), payload.size());
  EXPECT_EQ(m->payload, payload);
}

// The runner relays a run's outputs as they arrive: header first, then the payload straight to
// the driver's stream, across deadlines that pass in the middle; the next message reads whole.
TEST(Protocol, RelayedPayloadArrivesWholeAcrossDeadlines) {
  Pipe in, out;
  std::vector<std::byte> payload(3 << 20);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 13);
  std::string header = nlohmann::json{{"stage", "verify_run"}, {"payload_bytes", payload.size()}}.dump() + "\n";
  ASSERT_EQ(::write(in.w, header.data(), header.size()), static_cast<ssize_t>(header.size()));
  ASSERT_EQ(::write(in.w, payload.data(), 1000), 1000);
  MessageReader reader(in.r);
  auto h = reader.read_header(Clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(h);
  EXPECT_EQ((*h)["stage"], "verify_run");
  EXPECT_EQ(reader.relay_left(), payload.size());
  // The far side reads what is relayed (a pipe holds less than the payload).
  std::optional<Message> got;
  std::thread far([&] {
    MessageReader r(out.r);
    got = r.read(Clock::now() + std::chrono::seconds(20));
  });
  write_header(out.w, {{"stage", "verify_run"}, {"streamed", true}}, reader.relay_left());
  EXPECT_THROW(reader.relay_payload(out.w, Clock::now() + std::chrono::milliseconds(30)), Timeout);
  EXPECT_EQ(reader.relay_left(), payload.size() - 1000);
  std::thread rest([&] {
    size_t off = 1000;
    while (off < payload.size()) off += static_cast<size_t>(::write(in.w, payload.data() + off, payload.size() - off));
    write_message(in.w, {{"stage", "verify"}}, std::vector<std::byte>(5, std::byte{9}));
  });
  reader.relay_payload(out.w, Clock::now() + std::chrono::seconds(20));
  EXPECT_EQ(reader.relay_left(), 0u);
  far.join();
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->header["streamed"].get<bool>());
  EXPECT_EQ(got->payload, payload);
  // A header read alone can still be read whole.
  h = reader.read_header(Clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(h);
  EXPECT_EQ((*h)["stage"], "verify");
  auto m = reader.read(Clock::now() + std::chrono::seconds(10));
  rest.join();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->header["stage"], "verify");
  EXPECT_EQ(m->payload, std::vector<std::byte>(5, std::byte{9}));
}

// A source that ends inside a relayed payload: relay_payload() throws and says how much is
// missing; zeros in its place keep the far stream framed for the message after it.
TEST(Protocol, RelayCutShortLeavesTheFarStreamFramed) {
  Pipe in, out;
  std::string cut = R"({"stage": "verify_run", "payload_bytes": 5000})"
                    "\n" +
                    std::string(1200, 'a');
  ASSERT_EQ(::write(in.w, cut.data(), cut.size()), static_cast<ssize_t>(cut.size()));
  in.close_write();
  MessageReader reader(in.r);
  ASSERT_TRUE(reader.read_header());
  write_header(out.w, {{"stage", "verify_run"}}, reader.relay_left());
  EXPECT_THROW(reader.relay_payload(out.w), Error);
  EXPECT_EQ(reader.relay_left(), 3800u);
  write_zeros(out.w, reader.relay_left());
  write_message(out.w, {{"stage", "verify_run_end"}, {"complete", false}});
  MessageReader far(out.r);
  auto m = far.read(Clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(m);
  ASSERT_EQ(m->payload.size(), 5000u);
  EXPECT_EQ(m->payload[1199], std::byte{'a'});
  EXPECT_EQ(m->payload[1200], std::byte{0});
  auto end = far.read(Clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->header["stage"], "verify_run_end");
  EXPECT_FALSE(end->header["complete"].get<bool>());
}

TEST(Protocol, EndOfStreamAndGarbage) {
  {
    Pipe p;
    p.close_write();
    MessageReader reader(p.r);
    EXPECT_FALSE(reader.read().has_value());
  }
  {
    Pipe p;
    std::string junk = "this is not json\n";
    ASSERT_EQ(::write(p.w, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    MessageReader reader(p.r);
    EXPECT_THROW(reader.read(), Error);
  }
  {
    Pipe p;
    std::string cut = R"({"payload_bytes": 50})"
                      "\nabc";
    ASSERT_EQ(::write(p.w, cut.data(), cut.size()), static_cast<ssize_t>(cut.size()));
    p.close_write();
    MessageReader reader(p.r);
    EXPECT_THROW(reader.read(), Error);
  }
}

TEST(Protocol, FailureKindNamesRoundTrip) {
  for (int k = 0; k <= static_cast<int>(FailureKind::runner_error); ++k) {
    auto kind = static_cast<FailureKind>(k);
    EXPECT_EQ(parse_failure_kind(failure_kind_name(kind)), kind);
  }
  EXPECT_FALSE(parse_failure_kind("passed").has_value());
}

}  // namespace
}  // namespace mblast::protocol
