// Helpers of WorkerRun (worker_run.h).
#include "worker_run.h"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "mblast/runner/sandbox.h"
#include "mblast/shared_payload.h"
#include "runner_service.h"

namespace mblast::runner {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::FailureKind;
using protocol::Message;

json failed(FailureKind kind, const std::string& reason, const std::string& stage) {
  return {{"stage", "failed"},
          {"failed_stage", stage},
          {"failure_kind", protocol::failure_kind_name(kind)},
          {"reason", reason}};
}

namespace {

// Workers being killed and reaped (WorkerRun's destructor), joined by finish_pending_reaps().
struct Reaper {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> done;
};
std::mutex g_reapers_mu;
std::vector<Reaper> g_reapers;

std::string read_tail(const fs::path& p, size_t max_bytes) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  const size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string s(size - start, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  if (start > 0) s = "[... " + std::to_string(start) + " bytes cut ...]\n" + s;
  return s;
}

size_t rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV (invalid memory access)";
    case SIGBUS:
      return "SIGBUS (bus error)";
    case SIGILL:
      return "SIGILL (illegal instruction)";
    case SIGFPE:
      return "SIGFPE (arithmetic exception)";
    case SIGABRT:
      return "SIGABRT (aborted)";
    case SIGKILL:
      return "SIGKILL";
    case SIGXFSZ:
      return "SIGXFSZ (file size limit)";
    case SIGXCPU:
      return "SIGXCPU (CPU time limit)";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace

std::string fmt_number(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

fs::path unique_dir(const fs::path& parent, const std::string& stem) {
  std::random_device rd;
  for (;;) {
    fs::path p = parent / (stem + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    if (fs::create_directories(p)) return p;
  }
}

WorkerRun::WorkerRun(RunnerService& svc, Backend& backend, const json& target, const fs::path& artifact,
                     const json& limits, int payload_fd)
    : svc_(svc) {
  dir_ = unique_dir(svc.cache_dir() / "work", "w");
  log_ = dir_ / "candidate.log";
  memory_bytes_ = static_cast<size_t>(limits.value("memory_mb", 4096)) << 20;
  SandboxPolicy pol;
  pol.memory_bytes = memory_bytes_;
  pol.memory_rlimits = backend.allows_memory_rlimits(target);
  pol.proc_write = backend.driver_writes_proc(target);
  pol.landlock_in_worker = pol.proc_write;
  // With /proc writable by the worker, nothing of the runner may be reachable through it.
  if (pol.proc_write) ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  pol.read_paths = default_read_paths();
  for (const auto& p : backend.sandbox_read_paths()) pol.read_paths.push_back(p);
  pol.read_paths.push_back(svc.self().parent_path());
  if (!artifact.empty()) pol.read_paths.push_back(artifact.parent_path());
  pol.write_paths = {dir_, svc.cache_dir() / "driver-cache"};
  pol.scratch = dir_;
  fs::create_directories(svc.cache_dir() / "driver-cache");
  apply_sandbox_setting(pol);
  choose_layers(pol, backend, target);
  sandbox_ = sandbox_description(pol);
  sandbox_layers_ = sandbox_layers(pol);
  if (pol.landlock && pol.landlock_in_worker && landlock_abi_version() > 0) worker_landlock_ = landlock_to_json(pol);

  SpawnOptions o;
  o.argv = backend.worker_command(svc.self(), artifact, target);
  o.protocol_pipes = true;
  o.output_file = log_;
  o.cwd = dir_;
  o.set_env = {{"TMPDIR", dir_.string()},
               {"HOME", dir_.string()},
               {"POCL_CACHE_DIR", (svc.cache_dir() / "driver-cache" / "pocl").string()},
               {"CUDA_CACHE_PATH", (svc.cache_dir() / "driver-cache" / "nv").string()}};
  // The user's own setting of a variable the backend sets stands, allow-listed or not.
  for (const auto& [k, v] : backend.worker_environment(target)) {
    const char* user = std::getenv(k.c_str());
    o.set_env.emplace(k, user ? std::string(user) : v);
  }
  o.drop_env_prefixes = {"QEMU_", "LD_PRELOAD", "MBLAST_"};  // nothing from the runner's environment steers the worker
  // Of the runner's environment only what a driver reads: no API key, nothing of the user's shell.
  if (pol.env_allowlist) o.keep_env = worker_environment_allowlist();
  o.isolation = pol.isolation;
  o.before_exec = [pol] { return apply_sandbox(pol); };
  // The inputs come on a channel of their own once the parameters are prepared (shared_payload.h).
  int channel[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0)
    throw Error(std::string("runner: socketpair: ") + std::strerror(errno));
  inputs_channel_ = channel[0];
  payload_fd_ = payload_fd;
  o.inherit_fds = {{channel[1], kInputsChannelFd}};
  try {
    child_ = spawn(o);
  } catch (...) {
    ::close(channel[1]);
    throw;
  }
  ::close(channel[1]);
  reader_ = std::make_unique<protocol::MessageReader>(child_.from_child_fd());
}

WorkerRun::~WorkerRun() {
  if (inputs_channel_ >= 0) ::close(inputs_channel_);
  // Killed, reaped and its folder removed beside the next request: a GPU driver takes a tenth of
  // a second or more to tear a process's context down, which no result waits for.
  std::lock_guard<std::mutex> lock(g_reapers_mu);
  for (auto it = g_reapers.begin(); it != g_reapers.end();) {  // the ones done by now
    if (it->done->load()) {
      it->thread.join();
      it = g_reapers.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  g_reapers.push_back({std::thread([child = std::move(child_), dir = dir_, done]() mutable {
                         child.kill();
                         std::error_code ec;
                         fs::remove_all(dir, ec);
                         done->store(true);
                       }),
                       done});
}

void finish_pending_reaps() {
  std::vector<Reaper> all;
  {
    std::lock_guard<std::mutex> lock(g_reapers_mu);
    all.swap(g_reapers);
  }
  for (auto& r : all) r.thread.join();
}

void WorkerRun::wait_exit(double timeout_s) {
  if (!child_.wait(protocol::Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000))))
    child_.kill();
}

void WorkerRun::send(const json& header, std::span<const std::byte> payload) {
  try {
    if (worker_landlock_.is_null()) {
      protocol::write_message(child_.to_child_fd(), header, payload);
    } else {
      json h = header;
      h["worker_landlock"] = worker_landlock_;  // applied by the worker after opening the device
      protocol::write_message(child_.to_child_fd(), h, payload);
    }
  } catch (const Error&) {
    // The worker died; the next receive() says how.
  }
}

Message WorkerRun::receive(double timeout_s, const std::string& stage, const std::string& limit_note) {
  std::optional<Message> got;
  if (auto f = watch(timeout_s, stage, limit_note, [&](protocol::Deadline d) {
        got = reader_->read(d);
        return got.has_value();
      }))
    return std::move(*f);
  return decorate(std::move(*got));
}

std::optional<Message> WorkerRun::pass_on(int out_fd, const std::string& relayed, const std::string& end,
                                          const json& extra, double timeout_s, const std::string& stage,
                                          const std::string& limit_note, bool* cut) {
  *cut = false;
  bool failed_now = false;
  const auto t0 = protocol::Clock::now();
  json head = receive_header(timeout_s, stage, limit_note, &failed_now);
  if (failed_now) return Message{std::move(head), {}};                                   // no message is pending
  if (head.value("stage", "") != relayed) return receive(timeout_s, stage, limit_note);  // read whole
  head.update(extra);
  head["streamed"] = true;
  protocol::write_header(out_fd, head, relay_left());
  const double spent = std::chrono::duration<double>(protocol::Clock::now() - t0).count();
  auto broken = relay(out_fd, std::max(timeout_s - spent, 0.001), stage, limit_note);
  protocol::write_message(out_fd, {{"stage", end}, {"complete", !broken}});
  *cut = broken.has_value();
  return broken;
}

json WorkerRun::receive_header(double timeout_s, const std::string& stage, const std::string& limit_note,
                               bool* failed_now) {
  const json* got = nullptr;
  *failed_now = false;
  if (auto f = watch(timeout_s, stage, limit_note, [&](protocol::Deadline d) {
        got = reader_->read_header(d);
        return got != nullptr;
      })) {
    *failed_now = true;
    return std::move(f->header);
  }
  return decorate({*got, {}}).header;
}

std::optional<Message> WorkerRun::relay(int out_fd, double timeout_s, const std::string& stage,
                                        const std::string& limit_note) {
  auto f = watch(timeout_s, stage, limit_note, [&](protocol::Deadline d) {
    reader_->relay_payload(out_fd, d);
    return true;
  });
  if (f) protocol::write_zeros(out_fd, reader_->relay_left());
  return f;
}

template <class Step>
std::optional<Message> WorkerRun::watch(double timeout_s, const std::string& stage, const std::string& limit_note,
                                        Step&& step) {
  const auto deadline = protocol::Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  for (;;) {
    const auto slice = std::min(deadline, protocol::Clock::now() + std::chrono::milliseconds(20));
    try {
      if (step(protocol::Deadline(slice))) return std::nullopt;
      return death(stage);  // EOF: the worker ended without answering
    } catch (const protocol::Timeout&) {
      if (memory_bytes_ && child_.running() && rss_bytes(child_.pid()) > memory_bytes_) {
        child_.kill();
        return decorate(
            {failed(FailureKind::out_of_memory,
                    "resident memory passed the limit of " + std::to_string(memory_bytes_ >> 20) + " MiB", stage),
             {}});
      }
      if (protocol::Clock::now() >= deadline) {
        child_.kill();
        return decorate(
            {failed(FailureKind::timeout,
                    "no answer within " + fmt_number(timeout_s) + " s" + limit_note + " during " + stage + " (killed)",
                    stage),
             {}});
      }
    } catch (const Error&) {
      return death(stage);
    }
  }
}

Message WorkerRun::death(const std::string& stage) {
  auto exit = child_.wait(protocol::Clock::now() + std::chrono::seconds(5));
  if (!exit) exit = child_.kill();
  std::string why;
  FailureKind kind = FailureKind::crashed;
  if (!exit->exited) {
    why = "the process running the candidate was killed by " + signal_name(exit->signal);
    if (exit->signal == SIGXCPU) kind = FailureKind::timeout;
  } else {
    why = "the process running the candidate exited with status " + std::to_string(exit->code) + " before answering";
  }
  const std::string log = read_tail(log_, 4096);
  if (log.find("std::bad_alloc") != std::string::npos || log.find("Cannot allocate memory") != std::string::npos)
    kind = FailureKind::out_of_memory;
  return decorate({failed(kind, why + " during " + stage, stage), {}});
}

Message WorkerRun::decorate(Message m) {
  m.header["log"] = read_tail(log_, 16384);
  m.header["sandbox"] = sandbox_;
  m.header["sandbox_layers"] = sandbox_layers_;
  return m;
}

Message WorkerRun::deliver_inputs(double timeout_s, std::span<const std::byte> payload) {
  Message m = receive(timeout_s, "prepare");
  if (m.header.value("stage", "") != "prepared") return m;
  try {
    if (payload_fd_ >= 0)
      send_fd(inputs_channel_, payload_fd_);
    else
      send({{"op", "inputs"}}, payload);
  } catch (const Error&) {
    // The worker died; the next receive() says how.
  }
  return m;
}

}  // namespace mblast::runner
