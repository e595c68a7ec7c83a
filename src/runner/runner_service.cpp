// mblast-runner's service loop: answers hello / probe / peaks / eval over stdin/stdout.
// It builds candidates (content-addressed cache), starts one sandboxed worker per request,
// relays stage messages (worker_run.h supervises each worker).
#include "runner_service.h"

#include <sys/prctl.h>
#include <unistd.h>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "mblast/process.h"
#include "mblast/protocol.h"
#include "mblast/runner/backend.h"
#include "mblast/runner/sandbox.h"
#include "mblast/safetensors.h"
#include "mblast/shared_payload.h"
#include "mblast/tensor.h"
#include "mblast/version.h"
#include "timed_loop.h"
#include "worker_run.h"

namespace mblast::runner {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::FailureKind;
using protocol::Message;

namespace {
// The parameters of a request's payload ("par/<init>/<name>"), as a blob of their own.
std::vector<std::byte> params_only(std::span<const std::byte> payload) {
  const TensorViews all = view_safetensors(payload);
  std::vector<TensorSpec> specs;
  std::vector<const TensorView*> from;
  for (const auto& t : all.tensors)
    if (t.spec.name.rfind("par/", 0) == 0) {
      specs.push_back(t.spec);
      from.push_back(&t);
    }
  SafetensorsLayout l = layout_safetensors(specs);
  for (size_t i = 0; i < from.size(); ++i)
    if (!from[i]->data.empty()) std::memcpy(l.blob.data() + l.offsets[i], from[i]->data.data(), from[i]->data.size());
  return std::move(l.blob);
}
}  // namespace

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
    if (!m) {
      finish_pending_reaps();
      return 0;
    }
    const std::string op = m->header.value("op", "");
    if (op == "shutdown") {
      finish_pending_reaps();
      return 0;
    }
    try {
      if (op == "hello") {
        json names = json::array();
        for (Backend* b : all_backends()) names.push_back(b->name());
        json hello = {{"stage", "hello"},
                      {"protocol", protocol::kVersion},
                      {"version", kMblastVersion},
                      {"backends", names},
                      {"cache_dir", cache_dir_.string()}};
        if (m->header.contains("shared_payload_probe")) {
          std::string why;
          hello["shared_payload"] = can_read_shared_payload(m->header["shared_payload_probe"], &why);
          if (!why.empty()) hello["shared_payload_refused"] = why;
        }
        protocol::write_message(out_fd, hello);
      } else if (op == "doctor") {
        json backends = json::object();
        for (Backend* b : all_backends()) backends[std::string(b->name())] = b->environment();
        protocol::write_message(out_fd, {{"stage", "doctor"},
                                         {"version", kMblastVersion},
                                         {"backends", backends},
                                         {"landlock_abi", landlock_abi_version()},
                                         {"sandbox", sandbox_support()},
                                         {"cache_dir", cache_dir_.string()},
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
  // and checks measured the old way are measured again (4: the checks include the outputs' second look).
  json key = device;
  if (key.is_object()) key.erase("global_mem_bytes");
  const std::string d = "peaks 4\n" + key.dump();
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
  const std::string key_text =
      std::string(b.name()) + "\n" + tc->second + "\n" + target.value("arch", json::object()).dump() + "\n" +
      target.value("build", json::object()).dump() + "\nabi " + std::to_string(MBLAST_ABI_VERSION) + "\n" + source;
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
  BuildRequest req{source,       cand.value("filename", "candidate"), target, tmp,
                   include_dir_, limits.value("build_s", 180.0)};
  const auto t0 = protocol::Clock::now();
  BuildOutcome out = b.build(req);
  const double secs = std::chrono::duration<double>(protocol::Clock::now() - t0).count();
  info = {{"key", key},     {"ok", out.ok},    {"command", out.command},
          {"log", out.log}, {"seconds", secs}, {"cached", false}};
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
  if (shared_fd >= 0) wreq["shared_payload"] = {{"bytes", h["shared_payload"].value("bytes", size_t{0})}};
  // The parameters alone come with the request; the inputs only once mblast_prepare has run
  // (WorkerRun::deliver_inputs), so that no input is in the worker while the candidate prepares.
  std::vector<std::byte> params;
  {
    std::optional<MappedPayload> mapped;
    if (shared_fd >= 0) mapped.emplace(::dup(shared_fd), h["shared_payload"].value("bytes", size_t{0}));
    params = params_only(mapped ? mapped->bytes() : std::span<const std::byte>(req.payload));
  }
  w.send(wreq, params);
  // The spot check's worker starts now, beside the verification, so that opening its device
  // costs the eval no time: it prepares, then waits for the keys of the timed calls chosen for
  // checking (timed_loop.h).
  std::unique_ptr<WorkerRun> spot;
  if (h.value("timing", false)) {
    spot = std::make_unique<WorkerRun>(*this, *b, target, artifact, limits, shared_fd);
    json sreq = wreq;
    sreq["op"] = "spot";
    sreq["init"] = h.value("timing_init", h.value("inits", json::array({0})).at(0).get<int>());
    spot->send(sreq, params);
  }
  // Each verification run answers on its own, within the run limit plus the time its data
  // takes to move (the driver sizes that). The driver's word on each run goes back to the
  // worker: "continue", or anything else to end the runs.
  const double run_s = limits.value("run_s", 60.0), data_s = limits.value("data_s", 0.0);
  const std::string note =
      data_s > 0 ? " (" + fmt_number(run_s) + " s per run + " + fmt_number(data_s) + " s for the data it moves)"
                 : " per run";
  // A driver that asks for it ("stream_runs") gets each run's outputs as they arrive from the
  // worker, not after all of them have: the two hops overlap. The header announces the size, so
  // a worker failing inside the payload leaves zeros in its place, then a "verify_run_end" that
  // says the run is incomplete, then the failure; a complete run ends with a complete one.
  const bool stream = h.value("stream_runs", false);
  Message v = w.deliver_inputs(run_s + data_s, req.payload);
  if (v.header.value("stage", "") != "prepared") {
    v.header["build"] = build_info;
    protocol::write_message(out_fd, v.header, v.payload);
    return;
  }
  for (;;) {
    if (stream) {
      // The run's one limit covers its header and its payload.
      bool cut = false;
      auto other = w.pass_on(out_fd, "verify_run", "verify_run_end", {{"build", build_info}}, run_s + data_s, "verify",
                             note, &cut);
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
  // Only the stage's own messages are taken: anything else (a message a candidate wrote to the
  // worker's descriptor itself, say) ends the eval as inconsistent.
  const std::string vstage = v.header.value("stage", "");
  if (vstage != "verify" && vstage != "failed")
    v = w.decorate({failed(FailureKind::timing_inconsistent,
                           "a message out of protocol order during verification: '" + vstage + "'", "verify"),
                    {}});
  v.header["build"] = build_info;
  protocol::write_message(out_fd, v.header, v.payload);
  if (v.header.value("stage", "") != "verify") return;

  auto next = driver.read();
  if (!next || next->header.value("op", "") != "time") {
    w.send({{"op", "stop"}});
    return;
  }
  const json& treq = next->header;
  const json device = v.header.value("device", json());
  const auto cached = cached_peaks(target.value("name", ""), device);
  const json no_costs;
  TimedStage stage{treq,        h, cached ? cached->value("checks", no_costs) : no_costs, limits.value("time_s", 300.0),
                   req.payload, {}};
  // Peaks come only from the runner's own peak kernels, in a worker with no candidate loaded:
  // nothing a candidate reports or does can raise them. Where none are cached they are measured
  // once, when the audit first asks for the device's costs (they hold them) or after the stage.
  std::optional<json> fresh_peaks;
  auto measure_peaks = [&]() {
    WorkerRun pw(*this, *b, target, {}, limits);
    pw.send({{"op", "peaks"}, {"target", target}});
    Message pm = pw.receive(300.0, "peaks");
    if (pm.header.value("stage", "") != "peaks") return;
    store_peaks(target.value("name", ""), pm.header);
    pm.header.erase("log");
    pm.header.erase("sandbox");
    fresh_peaks = pm.header;
    (*fresh_peaks)["cached"] = false;
  };
  const bool want_peaks = treq.value("want_peaks", true);
  stage.costs_now = [&]() -> json {
    if (!cached && want_peaks) {
      measure_peaks();
      return fresh_peaks ? fresh_peaks->value("checks", json()) : json();
    }
    WorkerRun cw(*this, *b, target, {}, limits);
    cw.send({{"op", "checks"}, {"target", target}});
    Message cm = cw.receive(60.0, "checks");
    return cm.header.value("stage", "") == "checks" ? cm.header.value("checks", json()) : json();
  };
  json t = run_timed_stage(stage, w, spot.get());
  spot.reset();
  if (t.value("stage", "") == "timing") {
    if (b->timing_needs_worker_exit()) w.wait_exit(10.0);
    b->finish_timing(t, w.dir(), target);
  }
  t = w.decorate({t, {}}).header;
  if (t.value("stage", "") == "timing") {
    if (cached) {
      t["peaks"] = *cached;
    } else if (want_peaks) {
      if (!fresh_peaks) measure_peaks();
      if (fresh_peaks) t["peaks"] = *fresh_peaks;
    }
  }
  protocol::write_message(out_fd, t);
}

}  // namespace mblast::runner
