// One worker process and the supervision around it: the sandbox it starts in, its memory and
// time watched while the runner waits for its messages, and a worker that dies, hangs or
// overgrows turned into a "failed" message.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <span>

#include <nlohmann/json.hpp>

#include "mblast/process.h"
#include "mblast/protocol.h"
#include "mblast/runner/backend.h"

namespace mblast::runner {

class RunnerService;

// {"stage": "failed", ...} with the failure's kind, reason and stage.
nlohmann::json failed(protocol::FailureKind kind, const std::string& reason, const std::string& stage);
std::string fmt_number(double s);
std::filesystem::path unique_dir(const std::filesystem::path& parent, const std::string& stem);
// Waits until every worker a WorkerRun left behind is reaped and its folder removed.
void finish_pending_reaps();

class WorkerRun {
 public:
  // payload_fd >= 0: a shared payload, which the worker gets as fd kSharedPayloadFd.
  WorkerRun(RunnerService& svc, Backend& backend, const nlohmann::json& target, const std::filesystem::path& artifact,
            const nlohmann::json& limits, int payload_fd = -1);
  ~WorkerRun();

  const std::filesystem::path& dir() const { return dir_; }
  // Whether every process the worker starts stays in its PID namespace (and so descends from
  // the runner): what the timed stage's measure of the machine's other load relies on.
  bool contained() const { return sandbox_layers_.value("pid_ns", nlohmann::json::object()).value("on", false); }

  // Waits for the worker to exit on its own (it does right after its last message); kills it
  // after timeout_s.
  void wait_exit(double timeout_s);

  void send(const nlohmann::json& header, std::span<const std::byte> payload = {});

  void recycle(std::vector<std::byte>&& payload) { reader_->recycle(std::move(payload)); }

  // The worker's log and the sandbox it ran in, added to a message about it.
  protocol::Message decorate(protocol::Message m);

  // Waits for the worker's "prepared" (mblast_prepare has run on the parameters, which came in
  // the request), then gives it the inputs: the shared payload's fd on the inputs channel, or
  // PAYLOAD in a message. Returns "prepared", or the message that came instead (a failure).
  protocol::Message deliver_inputs(double timeout_s, std::span<const std::byte> payload);

  // The worker's next message, or a "failed" message saying why there is none.
  protocol::Message receive(double timeout_s, const std::string& stage, const std::string& limit_note = "");

  // The worker's next message within TIMEOUT_S, its payload included. One of stage RELAYED goes
  // on to OUT_FD as it arrives (its header with EXTRA and "streamed": true, the payload, then
  // {"stage": END, "complete"}), and nullopt is returned. Any other message comes back whole
  // (a worker that died, hung or overgrew: its "failed" message); so does the failure that cut a
  // relayed payload short, with CUT set (zeros and an incomplete END already went on).
  std::optional<protocol::Message> pass_on(int out_fd, const std::string& relayed, const std::string& end,
                                           const nlohmann::json& extra, double timeout_s, const std::string& stage,
                                           const std::string& limit_note, bool* cut);

 private:
  size_t relay_left() const { return reader_->relay_left(); }

  // The next message's header alone (decorated), its payload left for relay(); or a "failed"
  // message saying why there is none (FAILED set).
  nlohmann::json receive_header(double timeout_s, const std::string& stage, const std::string& limit_note,
                                bool* failed_now);

  // Passes the payload of the header receive_header() returned on to OUT_FD as it arrives;
  // nullopt when all of it went, else the failure, after zeros in place of the rest (the stream
  // to OUT_FD stays framed).
  std::optional<protocol::Message> relay(int out_fd, double timeout_s, const std::string& stage,
                                         const std::string& limit_note);

  nlohmann::json worker_landlock_;  // null: Landlock was applied before exec

  // Runs STEP (a read from the worker with a deadline; false: the worker's stream ended) in
  // 20 ms slices until it is done, watching the worker's memory and the time meanwhile. nullopt
  // when STEP finished, else the "failed" message (the worker is killed or dead).
  template <class Step>
  std::optional<protocol::Message> watch(double timeout_s, const std::string& stage, const std::string& limit_note,
                                         Step&& step);
  protocol::Message death(const std::string& stage);

  RunnerService& svc_;
  int inputs_channel_ = -1;  // the runner's end of the inputs channel
  int payload_fd_ = -1;      // the shared payload, or -1: the inputs go in a message
  std::filesystem::path dir_, log_;
  size_t memory_bytes_ = 0;
  std::string sandbox_;
  nlohmann::json sandbox_layers_;
  Child child_;
  std::unique_ptr<protocol::MessageReader> reader_;
};

}  // namespace mblast::runner
