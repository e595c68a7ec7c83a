// The driver's end of the runner protocol: starts mblast-runner locally or over ssh and
// exchanges messages with it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "mblast/process.h"
#include "mblast/protocol.h"
#include "mblast/shared_payload.h"
#include "mblast/target.h"

namespace mblast {

class RunnerClient {
 public:
  // Starts the runner for this address and checks the protocol version (hello).
  // Throws Error with a one-line reason when it cannot be started or does not answer.
  explicit RunnerClient(const RunnerAddress& addr, double connect_timeout_s = 60);
  ~RunnerClient();

  // An eval request's payload of 1 MiB or more goes to a local runner as shared memory
  // (mblast/shared_payload.h) when the runner said at hello that it can open it;
  // MBLAST_SHARED_PAYLOAD=0 keeps every payload in the message.
  void send(const nlohmann::json& header, std::span<const std::byte> payload = {});
  // Throws Error when the runner goes away or the deadline passes.
  protocol::Message receive(double timeout_s);
  // Gives a received payload back for the next message to reuse (see MessageReader::recycle).
  void recycle(std::vector<std::byte>&& payload) { reader_->recycle(std::move(payload)); }

  const nlohmann::json& hello() const { return hello_; }
  bool shares_payloads() const { return shares_payloads_; }
  bool last_payload_shared() const { return last_shared_; }  // the last send's payload went as shared memory
  std::string describe() const { return describe_; }         // "local mblast-runner" or "ssh root@host:port"

 private:
  Child child_;
  std::unique_ptr<protocol::MessageReader> reader_;
  nlohmann::json hello_;
  std::string describe_;
  bool shares_payloads_ = false;
  bool last_shared_ = false;
  // The last shared payload sent, kept open until the runner answers (it opens it on receipt).
  std::optional<SharedPayload> in_flight_;
};

// The command line that starts the runner for an address (exposed for tests and messages).
std::vector<std::string> runner_command(const RunnerAddress& addr);

}  // namespace mblast
