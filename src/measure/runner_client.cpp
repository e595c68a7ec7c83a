#include "mblast/measure/runner_client.h"

#include <csignal>
#include <sstream>

#include "mblast/paths.h"

namespace mblast {

std::vector<std::string> runner_command(const RunnerAddress& addr) {
  if (addr.transport == "local") {
    auto local = self_executable().parent_path() / "mblast-runner";
    if (const char* env = std::getenv("MBLAST_RUNNER"); env && *env) local = env;
    return {local.string(), "--stdio"};
  }
  if (addr.transport == "ssh") {
    std::vector<std::string> argv = {"ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20"};
    if (addr.port) {
      argv.push_back("-p");
      argv.push_back(std::to_string(addr.port));
    }
    argv.insert(argv.end(), addr.ssh_options.begin(), addr.ssh_options.end());
    // $MBLAST_SSH_OPTIONS: arguments for every ssh runner (an identity file, a jump host), split at
    // spaces, after the target's own.
    if (const char* env = std::getenv("MBLAST_SSH_OPTIONS"); env && *env) {
      std::istringstream words(env);
      for (std::string w; words >> w;) argv.push_back(w);
    }
    argv.push_back(addr.host);
    argv.push_back(addr.runner_path + " --stdio");
    return argv;
  }
  throw Error("the " + addr.transport + " transport is not implemented");
}

RunnerClient::RunnerClient(const RunnerAddress& addr, double connect_timeout_s) {
  ::signal(SIGPIPE, SIG_IGN);
  SpawnOptions o;
  o.argv = runner_command(addr);
  o.pipe_stdin = true;
  o.pipe_stdout = true;
  describe_ = addr.transport == "local" ? "local " + o.argv[0]
                                        : "ssh " + addr.host + (addr.port ? ":" + std::to_string(addr.port) : "");
  child_ = spawn(o);
  reader_ = std::make_unique<protocol::MessageReader>(child_.stdout_fd());
  // A local runner is asked whether it can open a shared payload of this process (a runner of
  // another user, or one that /proc does not show this process to, says no).
  nlohmann::json hello = {{"op", "hello"}, {"protocol", protocol::kVersion}};
  std::optional<SharedPayload> probe;
  const char* share = std::getenv("MBLAST_SHARED_PAYLOAD");
  if (addr.transport == "local" && !(share && std::string(share) == "0")) {
    std::string why;
    probe = SharedPayload::create(std::as_bytes(std::span(kSharedPayloadProbe)), &why);
    if (probe) hello["shared_payload_probe"] = {{"path", probe->path()}};  // kSharedPayloadProbe's bytes
  }
  try {
    send(hello);
    auto m = receive(connect_timeout_s);
    if (m.header.value("stage", "") != "hello") throw Error("unexpected answer: " + m.header.dump().substr(0, 200));
    if (m.header.value("protocol", 0) != protocol::kVersion)
      throw Error("protocol version " + std::to_string(m.header.value("protocol", 0)) + ", this mblast speaks " +
                  std::to_string(protocol::kVersion));
    hello_ = m.header;
    shares_payloads_ = probe && hello_.value("shared_payload", false);
  } catch (const Error& e) {
    throw Error("runner (" + describe_ + ") did not start: " + e.what());
  }
}

RunnerClient::~RunnerClient() {
  if (child_.running()) {
    try {
      protocol::write_message(child_.stdin_fd(), {{"op", "shutdown"}});
    } catch (...) {
    }
    child_.close_stdin();
    if (!child_.wait(std::chrono::steady_clock::now() + std::chrono::seconds(5))) child_.kill();
  }
}

void RunnerClient::send(const nlohmann::json& header, std::span<const std::byte> payload) {
  last_shared_ = false;
  try {
    if (shares_payloads_ && payload.size() >= (size_t{1} << 20) && header.value("op", "") == "eval") {
      std::string why;
      if (auto shared = SharedPayload::create(payload, &why)) {  // else in the message, as to a remote runner
        nlohmann::json h = header;
        h["shared_payload"] = {{"path", shared->path()}, {"bytes", shared->bytes()}};
        protocol::write_message(child_.stdin_fd(), h);
        in_flight_ = std::move(shared);
        last_shared_ = true;
        return;
      }
    }
    protocol::write_message(child_.stdin_fd(), header, payload);
  } catch (const Error& e) {
    throw Error("runner (" + describe_ + ") went away: " + e.what());
  }
}

protocol::Message RunnerClient::receive(double timeout_s) {
  auto deadline = protocol::Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  std::optional<protocol::Message> m;
  try {
    m = reader_->read(deadline);
  } catch (const protocol::Timeout&) {
    throw Error("runner (" + describe_ + ") did not answer within " + std::to_string(static_cast<int>(timeout_s)) +
                " s");
  }
  if (!m) {
    auto exit = child_.wait(std::chrono::steady_clock::now() + std::chrono::seconds(2));
    std::string how = !exit          ? ""
                      : exit->exited ? " (exit status " + std::to_string(exit->code) + ")"
                                     : " (signal " + std::to_string(exit->signal) + ")";
    throw Error("runner (" + describe_ + ") closed the connection" + how);
  }
  in_flight_.reset();  // the runner has read the request, and opened its shared payload
  return std::move(*m);
}

}  // namespace mblast
