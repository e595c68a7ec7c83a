// mblast-runner's service loop: answers hello / probe / peaks / eval over stdin/stdout.
// It builds candidates (content-addressed cache), starts one sandboxed worker per request,
// relays stage messages, and turns a worker that dies, hangs or overgrows into a result.
#include "runner_service.h"

#include <sys/prctl.h>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

#include "mblast/process.h"
#include "mblast/protocol.h"
#include "mblast/shared_payload.h"
#include "mblast/runner/backend.h"
#include "mblast/runner/sandbox.h"
#include "mblast/tensor.h"
#include "mblast/version.h"

namespace mblast::runner {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::FailureKind;
using protocol::Message;

namespace {

json failed(FailureKind kind, const std::string& reason, const std::string& stage) {
  return {{"stage", "failed"}, {"failed_stage", stage}, {"failure_kind", protocol::failure_kind_name(kind)},
          {"reason", reason}};
}

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
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGFPE: return "SIGFPE (arithmetic exception)";
    case SIGABRT: return "SIGABRT (aborted)";
    case SIGKILL: return "SIGKILL";
    case SIGXFSZ: return "SIGXFSZ (file size limit)";
    case SIGXCPU: return "SIGXCPU (CPU time limit)";
    default: return "signal " + std::to_string(sig);
  }
}

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

}  // namespace

// One worker process and the supervision around it.
class WorkerRun {
 public:
  // payload_fd >= 0: a shared payload, which the worker gets as fd kSharedPayloadFd.
  WorkerRun(RunnerService& svc, Backend& backend, const json& target, const fs::path& artifact,
            const json& limits, int payload_fd = -1)
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
    fs::create_directories(svc.cache_dir() / "driver-cache");
    apply_sandbox_setting(pol);
    sandbox_ = sandbox_description(pol);
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
    for (const auto& [k, v] : backend.worker_environment(target))
      if (!std::getenv(k.c_str())) o.set_env.emplace(k, v);  // the user's setting stands
    o.drop_env_prefixes = {"QEMU_", "LD_PRELOAD", "MBLAST_"};  // nothing from the runner's environment steers the worker
    o.before_exec = [pol] { return apply_sandbox(pol); };
    if (payload_fd >= 0) o.inherit_fds = {{payload_fd, kSharedPayloadFd}};
    child_ = spawn(o);
    reader_ = std::make_unique<protocol::MessageReader>(child_.from_child_fd());
  }
  ~WorkerRun() {
    child_.kill();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  const fs::path& dir() const { return dir_; }

  // Waits for the worker to exit on its own (it does right after its last message); kills it
  // after timeout_s.
  void wait_exit(double timeout_s) {
    if (!child_.wait(protocol::Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000))))
      child_.kill();
  }

  void send(const json& header, std::span<const std::byte> payload = {}) {
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

  void recycle(std::vector<std::byte>&& payload) { reader_->recycle(std::move(payload)); }

  // The worker's next message, or a "failed" message saying why there is none.
  Message receive(double timeout_s, const std::string& stage, const std::string& limit_note = "") {
    std::optional<Message> got;
    if (auto f = watch(timeout_s, stage, limit_note, [&](protocol::Deadline d) {
          got = reader_->read(d);
          return got.has_value();
        }))
      return std::move(*f);
    return decorate(std::move(*got));
  }

  // The worker's next message within TIMEOUT_S, its payload included. One of stage RELAYED goes
  // on to OUT_FD as it arrives (its header with EXTRA and "streamed": true, the payload, then
  // {"stage": END, "complete"}), and nullopt is returned. Any other message comes back whole
  // (a worker that died, hung or overgrew: its "failed" message); so does the failure that cut a
  // relayed payload short, with CUT set (zeros and an incomplete END already went on).
  std::optional<Message> pass_on(int out_fd, const std::string& relayed, const std::string& end, const json& extra,
                                 double timeout_s, const std::string& stage, const std::string& limit_note, bool* cut) {
    *cut = false;
    bool failed_now = false;
    const auto t0 = protocol::Clock::now();
    json head = receive_header(timeout_s, stage, limit_note, &failed_now);
    if (failed_now) return Message{std::move(head), {}};  // no message is pending
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

 private:
  size_t relay_left() const { return reader_->relay_left(); }

  // The next message's header alone (decorated), its payload left for relay(); or a "failed"
  // message saying why there is none (FAILED set).
  json receive_header(double timeout_s, const std::string& stage, const std::string& limit_note, bool* failed_now) {
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

  // Passes the payload of the header receive_header() returned on to OUT_FD as it arrives;
  // nullopt when all of it went, else the failure, after zeros in place of the rest (the stream
  // to OUT_FD stays framed).
  std::optional<Message> relay(int out_fd, double timeout_s, const std::string& stage, const std::string& limit_note) {
    auto f = watch(timeout_s, stage, limit_note, [&](protocol::Deadline d) {
      reader_->relay_payload(out_fd, d);
      return true;
    });
    if (f) protocol::write_zeros(out_fd, reader_->relay_left());
    return f;
  }

  json worker_landlock_;  // null: Landlock was applied before exec

  // Runs STEP (a read from the worker with a deadline; false: the worker's stream ended) in
  // 20 ms slices until it is done, watching the worker's memory and the time meanwhile. nullopt
  // when STEP finished, else the "failed" message (the worker is killed or dead).
  template <class Step>
  std::optional<Message> watch(double timeout_s, const std::string& stage, const std::string& limit_note, Step&& step) {
    const auto deadline = protocol::Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
    for (;;) {
      const auto slice = std::min(deadline, protocol::Clock::now() + std::chrono::milliseconds(20));
      try {
        if (step(protocol::Deadline(slice))) return std::nullopt;
        return death(stage);  // EOF: the worker ended without answering
      } catch (const protocol::Timeout&) {
        if (memory_bytes_ && child_.running() && rss_bytes(child_.pid()) > memory_bytes_) {
          child_.kill();
          return decorate({failed(FailureKind::out_of_memory,
                                  "resident memory passed the limit of " + std::to_string(memory_bytes_ >> 20) + " MiB", stage), {}});
        }
        if (protocol::Clock::now() >= deadline) {
          child_.kill();
          return decorate({failed(FailureKind::timeout,
                                  "no answer within " + fmt_number(timeout_s) + " s" + limit_note + " during " + stage + " (killed)", stage), {}});
        }
      } catch (const Error&) {
        return death(stage);
      }
    }
  }
  Message death(const std::string& stage) {
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
  Message decorate(Message m) {
    m.header["log"] = read_tail(log_, 16384);
    m.header["sandbox"] = sandbox_;
    return m;
  }

  RunnerService& svc_;
  fs::path dir_, log_;
  size_t memory_bytes_ = 0;
  std::string sandbox_;
  Child child_;
  std::unique_ptr<protocol::MessageReader> reader_;
};

RunnerService::RunnerService(fs::path self, fs::path cache_dir, fs::path include_dir)
    : self_(std::move(self)), cache_dir_(std::move(cache_dir)), include_dir_(std::move(include_dir)) {
  fs::create_directories(cache_dir_ / "build");
  fs::create_directories(cache_dir_ / "peaks");
  fs::create_directories(cache_dir_ / "work");
}

int RunnerService::serve(int in_fd, int out_fd) {
  ::signal(SIGPIPE, SIG_IGN);
  protocol::MessageReader reader(in_fd);
  for (;;) {
    std::optional<Message> m;
    try {
      m = reader.read();
    } catch (const Error& e) {
      protocol::write_message(out_fd, failed(FailureKind::runner_error, e.what(), "request"));
      return 1;
    }
    if (!m) return 0;
    const std::string op = m->header.value("op", "");
    if (op == "shutdown") return 0;
    try {
      if (op == "hello") {
        json names = json::array();
        for (Backend* b : all_backends()) names.push_back(b->name());
        json hello = {{"stage", "hello"}, {"protocol", protocol::kVersion}, {"version", kMblastVersion},
                      {"backends", names}, {"cache_dir", cache_dir_.string()}};
        if (m->header.contains("shared_payload_probe")) {
          std::string why;
          hello["shared_payload"] = can_read_shared_payload(m->header["shared_payload_probe"], &why);
          if (!why.empty()) hello["shared_payload_refused"] = why;
        }
        protocol::write_message(out_fd, hello);
      } else if (op == "doctor") {
        json backends = json::object();
        for (Backend* b : all_backends()) backends[std::string(b->name())] = b->environment();
        protocol::write_message(out_fd, {{"stage", "doctor"}, {"version", kMblastVersion}, {"backends", backends},
                                         {"landlock_abi", landlock_abi_version()}, {"cache_dir", cache_dir_.string()},
                                         {"include_dir", include_dir_.string()}});
      } else if (op == "probe" || op == "peaks") {
        simple(op, m->header, out_fd);
      } else if (op == "eval") {
        eval(*m, reader, out_fd);
      } else {
        protocol::write_message(out_fd, failed(FailureKind::runner_error, "unknown op '" + op + "'", "request"));
      }
    } catch (const std::exception& e) {
      protocol::write_message(out_fd, failed(FailureKind::runner_error, std::string("runner: ") + e.what(), op));
    }
  }
}

// The driver's probe at hello: its shared payload opened and read back.
bool RunnerService::can_read_shared_payload(const json& probe, std::string* why) {
  const int fd = open_shared_payload(probe.value("path", ""), sizeof kSharedPayloadProbe, why);
  if (fd < 0) return false;
  char got[sizeof kSharedPayloadProbe] = {};
  const bool same = ::pread(fd, got, sizeof got, 0) == static_cast<ssize_t>(sizeof got) &&
                    std::memcmp(got, kSharedPayloadProbe, sizeof got) == 0;
  ::close(fd);
  if (!same) *why = "the shared payload probe read back differently";
  return same;
}

Backend* RunnerService::backend_for(const json& target, std::string* why) {
  const std::string name = target.value("backend", "");
  Backend* b = find_backend(name);
  if (!b) {
    *why = "backend '" + name + "' is not compiled into this runner";
    return nullptr;
  }
  *why = b->unavailable_reason(target);
  return why->empty() ? b : nullptr;
}

void RunnerService::simple(const std::string& op, const json& req, int out_fd) {
  const json& target = req.at("target");
  std::string why;
  Backend* b = backend_for(target, &why);
  if (!b) {
    protocol::write_message(out_fd, failed(FailureKind::unavailable, why, op));
    return;
  }
  if (op == "peaks" && !req.value("refresh", false)) {
    if (auto cached = cached_peaks(target.value("name", ""), req.value("device", json()))) {
      protocol::write_message(out_fd, *cached);
      return;
    }
  }
  WorkerRun w(*this, *b, target, {}, req.value("limits", json::object()));
  w.send({{"op", op}, {"target", target}});
  Message m = w.receive(req.value("timeout_s", op == "peaks" ? 300.0 : 60.0), op);
  if (op == "peaks" && m.header.value("stage", "") == "peaks") {
    // "beaten_by": measured again because a kernel's bandwidth beat the cached figure
    // (evaluate.cpp). A peak is the best the device has shown, so the new figures do not replace
    // higher cached ones (this measurement, too, may have shared the machine); the kernel's
    // bandwidth is kept, so that only a faster one has the figure measured again.
    if (req.contains("beaten_by")) {
      const std::optional<json> old = cached_peaks(target.value("name", ""), m.header.value("device", json()));
      double beaten_by = req.value("beaten_by", 0.0);
      if (old) {
        for (const char* k : {"bandwidth_bytes_per_s", "fp32_flops_per_s"})
          m.header[k] = std::max(m.header.value(k, 0.0), old->value(k, 0.0));
        beaten_by = std::max(beaten_by, old->value("beaten_by", 0.0));
      }
      m.header["beaten_by"] = beaten_by;
    }
    store_peaks(target.value("name", ""), m.header);
  }
  protocol::write_message(out_fd, m.header, m.payload);
}

fs::path RunnerService::peaks_path(const std::string& target, const json& device) const {
  // Keyed by what identifies the device, not by what varies between openings (PoCL reports
  // global memory from what is free). The number changes with the peak kernels, so peaks
  // measured the old way are measured again.
  json key = device;
  if (key.is_object()) key.erase("global_mem_bytes");
  const std::string d = "peaks 3\n" + key.dump();
  return cache_dir_ / "peaks" / (target + "-" + content_hash_hex(std::as_bytes(std::span(d))).substr(0, 16) + ".json");
}

std::optional<json> RunnerService::cached_peaks(const std::string& target, const json& device) const {
  if (device.is_null()) return std::nullopt;
  std::ifstream in(peaks_path(target, device));
  if (!in) return std::nullopt;
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("bandwidth_bytes_per_s")) return std::nullopt;
  j["cached"] = true;
  return j;
}

void RunnerService::store_peaks(const std::string& target, const json& msg) {
  if (!msg.contains("device")) return;
  json j = msg;
  j.erase("log");
  j.erase("sandbox");
  j.erase("payload_bytes");
  j["stage"] = "peaks";
  j["target"] = target;
  j["measured_at"] = static_cast<long long>(::time(nullptr));
  const fs::path p = peaks_path(target, msg["device"]);
  const fs::path tmp = p.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
  }
  fs::rename(tmp, p);
}

json RunnerService::build(Backend& b, const json& target, const json& cand, const json& limits, fs::path* artifact) {
  const std::string source = cand.at("source").get<std::string>();
  const std::string toolchain_key = std::string(b.name()) + target.value("build", json::object()).dump();
  auto tc = toolchain_ids_.find(toolchain_key);
  if (tc == toolchain_ids_.end()) tc = toolchain_ids_.emplace(toolchain_key, b.toolchain_id(target)).first;
  const std::string key_text = std::string(b.name()) + "\n" + tc->second + "\n" +
                               target.value("arch", json::object()).dump() + "\n" +
                               target.value("build", json::object()).dump() + "\nabi " +
                               std::to_string(MBLAST_ABI_VERSION) + "\n" + source;
  const std::string key = content_hash_hex(std::as_bytes(std::span(key_text)));
  const fs::path final_dir = cache_dir_ / "build" / key;
  json info;
  if (fs::exists(final_dir / "build.json")) {
    std::ifstream in(final_dir / "build.json");
    info = json::parse(in, nullptr, false);
    if (!info.is_discarded() && fs::exists(info.value("artifact", ""))) {
      info["cached"] = true;
      info["seconds"] = 0.0;
      *artifact = info["artifact"].get<std::string>();
      return info;
    }
  }
  const fs::path tmp = unique_dir(cache_dir_ / "build", "tmp-");
  BuildRequest req{source, cand.value("filename", "candidate"), target, tmp, include_dir_, limits.value("build_s", 180.0)};
  const auto t0 = protocol::Clock::now();
  BuildOutcome out = b.build(req);
  const double secs = std::chrono::duration<double>(protocol::Clock::now() - t0).count();
  info = {{"key", key}, {"ok", out.ok}, {"command", out.command}, {"log", out.log}, {"seconds", secs}, {"cached", false}};
  if (!out.ok) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return info;
  }
  info["artifact"] = (final_dir / out.artifact.filename()).string();
  {
    std::ofstream o(tmp / "build.json");
    o << info.dump(2);
  }
  std::error_code ec;
  fs::rename(tmp, final_dir, ec);
  if (ec) fs::remove_all(tmp, ec);  // another runner built the same key first: use theirs
  *artifact = info["artifact"].get<std::string>();
  return info;
}

void RunnerService::eval(const Message& req, protocol::MessageReader& driver, int out_fd) {
  const json& h = req.header;
  const json& target = h.at("target");
  const json limits = h.value("limits", json::object());
  std::string why;
  // A shared payload is opened at once: the driver closes its end when the first answer comes.
  int shared_fd = -1;
  if (h.contains("shared_payload")) {
    const json& sp = h["shared_payload"];
    shared_fd = open_shared_payload(sp.value("path", ""), sp.value("bytes", size_t{0}), &why);
    if (shared_fd < 0) {
      protocol::write_message(out_fd, failed(FailureKind::runner_error, why, "request"));
      return;
    }
  }
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{shared_fd};
  Backend* b = backend_for(target, &why);
  if (!b) {
    protocol::write_message(out_fd, failed(FailureKind::unavailable, why, "build"));
    return;
  }
  fs::path artifact;
  json build_info = build(*b, target, h.at("candidate"), limits, &artifact);
  if (!build_info.value("ok", false)) {
    json f = failed(FailureKind::build_failed, "the candidate did not compile", "build");
    f["build"] = build_info;
    protocol::write_message(out_fd, f);
    return;
  }
  WorkerRun w(*this, *b, target, artifact, limits, shared_fd);
  json wreq = {{"op", "eval"}, {"target", target}, {"artifact", artifact.string()}};
  for (const char* k : {"inputs", "parameters", "outputs", "seeds", "inits", "runs"})
    if (h.contains(k)) wreq[k] = h[k];
  if (shared_fd >= 0) {
    wreq["shared_payload"] = {{"fd", kSharedPayloadFd}, {"bytes", h["shared_payload"].value("bytes", size_t{0})}};
    w.send(wreq);
  } else {
    w.send(wreq, req.payload);
  }
  // Each verification run answers on its own, within the run limit plus the time its data
  // takes to move (the driver sizes that). The driver's word on each run goes back to the
  // worker: "continue", or anything else to end the runs.
  const double run_s = limits.value("run_s", 60.0), data_s = limits.value("data_s", 0.0);
  const std::string note = data_s > 0 ? " (" + fmt_number(run_s) + " s per run + " + fmt_number(data_s) + " s for the data it moves)" : " per run";
  // A driver that asks for it ("stream_runs") gets each run's outputs as they arrive from the
  // worker, not after all of them have: the two hops overlap. The header announces the size, so
  // a worker failing inside the payload leaves zeros in its place, then a "verify_run_end" that
  // says the run is incomplete, then the failure; a complete run ends with a complete one.
  const bool stream = h.value("stream_runs", false);
  Message v;
  for (;;) {
    if (stream) {
      // The run's one limit covers its header and its payload.
      bool cut = false;
      auto other = w.pass_on(out_fd, "verify_run", "verify_run_end", {{"build", build_info}}, run_s + data_s, "verify", note, &cut);
      if (other) {  // "verify", or the worker's failure
        other->header["build"] = build_info;
        if (cut) {
          protocol::write_message(out_fd, other->header);
          return;
        }
        v = std::move(*other);
        break;
      }
    } else {
      v = w.receive(run_s + data_s, "verify", note);
      v.header["build"] = build_info;
      if (v.header.value("stage", "") != "verify_run") break;
      protocol::write_message(out_fd, v.header, v.payload);
      w.recycle(std::move(v.payload));
    }
    auto word = driver.read();
    if (!word || word->header.value("op", "") != "continue") {
      w.send({{"op", "stop"}});
      return;
    }
    w.send(word->header);
  }
  protocol::write_message(out_fd, v.header, v.payload);
  if (v.header.value("stage", "") != "verify") return;

  auto next = driver.read();
  if (!next || next->header.value("op", "") != "time") {
    w.send({{"op", "stop"}});
    return;
  }
  json treq = next->header;
  const json device = v.header.value("device", json());
  auto cached = cached_peaks(target.value("name", ""), device);
  treq["measure_peaks"] = !cached.has_value() && treq.value("want_peaks", true);
  w.send(treq);
  // The outputs left in each rotating buffer set come one set per message, then the samples.
  // Streamed like the verification runs: a set's header goes on at once, its payload as it
  // arrives, then a "timing_set_end" that says whether all of it was the worker's.
  const double time_s = limits.value("time_s", 300.0);  // per message, its payload included
  Message t;
  for (;;) {
    if (stream) {
      bool cut = false;
      auto other = w.pass_on(out_fd, "timing_set", "timing_set_end", json::object(), time_s, "timing", "", &cut);
      if (!other) continue;
      if (cut) {
        protocol::write_message(out_fd, other->header);
        return;
      }
      t = std::move(*other);  // the samples, or the worker's failure
      break;
    }
    t = w.receive(time_s, "timing");
    if (t.header.value("stage", "") != "timing_set") break;
    protocol::write_message(out_fd, t.header, t.payload);
    w.recycle(std::move(t.payload));
  }
  if (t.header.value("stage", "") == "timing") {
    w.wait_exit(10.0);
    b->finish_timing(t.header, w.dir(), target);
  }
  if (t.header.value("stage", "") == "timing") {
    if (t.header.contains("peaks")) {
      json pk = t.header["peaks"];
      pk["device"] = device;
      store_peaks(target.value("name", ""), pk);
      t.header["peaks"]["cached"] = false;
    } else if (cached) {
      t.header["peaks"] = *cached;
    }
  }
  protocol::write_message(out_fd, t.header, t.payload);
}

}  // namespace mblast::runner
