// The runner's side of the timed stage (timed_loop.h, docs/measurement.md).
#include "timed_loop.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <unordered_map>

#include <fmt/format.h>

#include "mblast/digest.h"
#include "mblast/problem.h"
#include "mblast/safetensors.h"
#include "mblast/stats.h"
#include "mblast/tensor.h"
#include "mblast/verify.h"

namespace mblast::runner {

using nlohmann::json;
using protocol::FailureKind;
using protocol::Message;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Call {
  size_t i = 0;
  bool timed = false;
  uint64_t key = 0;
  int poison = 0xFF;
  CallRecord rec;
  std::vector<OutputDigest> digests;
};

// The stage's failure, as the driver takes any failure: the worker's log and sandbox attached
// by the caller.
json stage_failure(FailureKind kind, const std::string& reason) { return failed(kind, reason, "timing"); }

// Whether no correct element can hold the poison (0xFF or 0x7F bytes): for floats it is a NaN no
// kernel writes, for bools neither 0 nor 1.
bool poison_is_invalid(DType t) { return dtype_is_float(t) || t == DType::boolean; }

// A timed call that left elements unwritten did not do its work. An integer output may hold the
// poison's value legitimately, so only an output left wholly unwritten counts there (the spot
// checks see the rest).
std::string unwritten(const std::vector<TensorSpec>& outs, const Call& c) {
  for (size_t o = 0; o < outs.size() && o < c.digests.size(); ++o) {
    const uint64_t n = c.digests[o].poisoned;
    if (n == 0) continue;
    if (!poison_is_invalid(outs[o].dtype) && n < outs[o].numel()) continue;
    return fmt::format("{} call {}: {} of {} elements of '{}' still hold the poison written before the call",
                       c.timed ? "timed" : "warm-up", c.i, n, outs[o].numel(), outs[o].name);
  }
  return "";
}

// The view of output o inside a safetensors blob of all outputs.
std::span<const std::byte> output_bytes(const TensorViews& v, const TensorSpec& spec) {
  const TensorView* t = v.find(spec.name);
  if (!t) throw Error("the outputs lack '" + spec.name + "'");
  return t->data;
}

// One process as /proc/PID/stat shows it.
struct ProcStat {
  pid_t ppid = 0;
  bool kernel_thread = false;
  double cpu_ticks = 0;  // utime + stime + cutime + cstime: its threads, and its children it reaped
};

std::optional<ProcStat> read_proc_stat(const char* pid) {
  char path[64], buf[1024];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command's name may hold spaces and parentheses
  if (!p) return std::nullopt;
  // After the name: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
  // utime stime cutime cstime.
  unsigned long long f[15] = {};
  char state = 0;
  if (std::sscanf(p + 1, " %c %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &state, &f[1],
                  &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12], &f[13], &f[14]) != 15)
    return std::nullopt;
  ProcStat s;
  s.ppid = static_cast<pid_t>(f[1]);
  s.kernel_thread = (f[6] & 0x00200000ULL) != 0;  // PF_KTHREAD
  s.cpu_ticks = static_cast<double>(f[11] + f[12] + f[13] + f[14]);
  return s;
}

// The hypervisor's stolen time, all CPUs, in ticks; and the number of CPUs.
std::pair<double, int> stolen_ticks() {
  FILE* f = std::fopen("/proc/stat", "re");
  if (!f) return {0, 0};
  char line[512];
  double steal = 0;
  int cpus = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "cpu", 3) != 0) break;
    if (line[3] == ' ') {
      unsigned long long v[8] = {};
      std::sscanf(line + 3, " %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                  &v[7]);
      steal = static_cast<double>(v[7]);
    } else {
      ++cpus;
    }
  }
  std::fclose(f);
  return {steal, cpus};
}

}  // namespace

CpuTimes cpu_times() {
  CpuTimes t;
  t.wall_s = now_s();
  DIR* d = ::opendir("/proc");
  if (!d) return t;
  std::unordered_map<pid_t, ProcStat> procs;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (auto s = read_proc_stat(e->d_name)) procs.emplace(static_cast<pid_t>(std::atoi(e->d_name)), *s);
  }
  ::closedir(d);
  const pid_t self = ::getpid();
  if (!procs.count(self)) return t;  // a /proc that does not show this process cannot tell ours from others
  // Ours: this process and every process whose chain of parents reaches it. A worker's PID
  // namespace keeps everything the candidate starts below its worker (orphans go to the
  // worker, its init), so none of it counts as the machine's other load.
  std::unordered_map<pid_t, bool> ours;
  auto is_ours = [&](pid_t pid) {
    std::vector<pid_t> chain;
    bool result = false;
    for (pid_t p = pid; p > 0 && chain.size() < 4096;) {
      if (p == self) {
        result = true;
        break;
      }
      if (auto it = ours.find(p); it != ours.end()) {
        result = it->second;
        break;
      }
      chain.push_back(p);
      auto it = procs.find(p);
      if (it == procs.end()) break;
      p = it->second.ppid;
    }
    for (pid_t p : chain) ours[p] = result;
    return result;
  };
  double ours_ticks = 0, others_ticks = 0;
  for (const auto& [pid, s] : procs) {
    if (is_ours(pid))
      ours_ticks += s.cpu_ticks;
    else if (!s.kernel_thread)
      others_ticks += s.cpu_ticks;  // a kernel thread may work for anyone, ours too
  }
  const auto [steal, cpus] = stolen_ticks();
  const double tick = 1.0 / static_cast<double>(std::max(1L, ::sysconf(_SC_CLK_TCK)));
  t.ours_s = ours_ticks * tick;
  t.others_s = (others_ticks + steal) * tick;
  t.cpus = std::max(cpus, 1);
  t.ok = true;
  return t;
}

double machine_load(const CpuTimes& a, const CpuTimes& b) {
  if (!a.ok || !b.ok || b.wall_s <= a.wall_s) return 0;
  // Processes that end and are reaped by one outside are counted again in their parent's
  // children's time: the difference holds them once. One that ends unreaped under a parent
  // that never waits is lost, which only makes the figure smaller (the stricter bound).
  const double used = std::max(0.0, b.others_s - a.others_s);
  return std::clamp(used / ((b.wall_s - a.wall_s) * a.cpus), 0.0, 1.0);
}

std::string audit_clock(const std::vector<CallRecord>& timed, const json& check_costs, const CallBuffers& buffers,
                        double other_load) {
  const double input_bytes = buffers.input_bytes, output_bytes_total = buffers.output_bytes;
  if (timed.empty()) return "";
  constexpr double kSlack = 2e-3;  // seconds: pipes, scheduling, the checks' own bookkeeping
  std::vector<double> unexplained, windows, flushes, mixes, checks;
  for (size_t n = 0; n < timed.size(); ++n) {
    const CallRecord& r = timed[n];
    const double parts = r.mix_s + r.flush_s + r.wall_s + r.check_s;
    if (r.sample > r.window_s + kSlack || parts > r.window_s + kSlack)
      return fmt::format(
          "timed call {} took {:.3f} ms on the runner's clock, but the worker reports {:.3f} ms of "
          "device time and {:.3f} ms of work around it",
          n, r.window_s * 1e3, r.sample * 1e3, parts * 1e3);
    unexplained.push_back(r.window_s - parts);
    windows.push_back(r.window_s);
    flushes.push_back(r.flush_s);
    mixes.push_back(r.mix_s);
    checks.push_back(r.check_s);
  }
  const double mw = median_of(windows), mu = median_of(unexplained);
  // Every part of a call is the worker's account but the window: what it does not account for
  // is the call's time hidden from its figures. 5 ms: on a loaded machine (tests side by side on
  // two cores) the runner's own wake-ups take milliseconds.
  if (mu > std::max(5e-3, 0.5 * mw))
    return fmt::format(
        "the runner saw {:.3f} ms per timed call (median), of which the worker accounts for only "
        "{:.3f} ms",
        mw * 1e3, (mw - mu) * 1e3);
  // A device time far below the worker's own clock around the same calls (a sample rewritten in
  // the worker). 5 ms of slack: launches and a busy machine's wake-ups are honest, and under CI they
  // can be most of an honest call's wall time (benchmarks/results/measurement-design-figures.json,
  // runner-clock-slack).
  std::vector<double> samples, walls;
  for (const auto& r : timed) {
    samples.push_back(r.sample);
    walls.push_back(r.wall_s);
  }
  if (median_of(samples) < 0.5 * median_of(walls) - 5e-3)
    return fmt::format(
        "the worker's device time ({:.3f} ms, median) is less than half of its own clock around the "
        "same calls ({:.3f} ms)",
        median_of(samples) * 1e3, median_of(walls) * 1e3);
  // The work around each call, bounded by what it costs on this device with no candidate
  // loaded: the call's time cannot hide in it.
  if (check_costs.is_object()) {
    const double flush = check_costs.value("flush_s", 0.0);
    const double mix_rate = check_costs.value("mix_and_poison_bytes_per_s", 0.0);
    const double digest_rate = check_costs.value("digest_bytes_per_s", 0.0);
    // A fixed cost per buffer besides the bytes (a launch, a wake-up of the device's threads):
    // it is what a small output's checks cost, more so on a busy machine.
    const double mix_latency = check_costs.value("mix_and_poison_latency_s", 0.0) * (buffers.inputs + buffers.outputs);
    const double check_latency = check_costs.value("check_latency_s", 0.0) * buffers.outputs;
    // Four times what it costs quiet, plus a slack for wake-ups: 2 ms, and up to 12 ms more as
    // the machine's other processes use its CPUs (tests side by side, builds), whose turns on
    // the CPUs the worker waits for at every hand-off between its threads and the device's. The
    // candidate's own processes are never the machine's load (cpu_times): it cannot widen the
    // bound. The guard checks and the device's health are counted in the checks' part.
    const double slack = kQuietCostSlack + kLoadCostSlack * std::clamp(other_load, 0.0, 1.0);
    auto over = [&](double got, double expected) { return got > 4 * expected + slack; };
    const std::string bound = fmt::format(
        "at most 4x that and {:.1f} ms were allowed, the machine's other processes "
        "using {:.0f} % of its CPUs",
        slack * 1e3, 100 * std::clamp(other_load, 0.0, 1.0));
    if (flush > 0 && over(median_of(flushes), flush))
      return fmt::format("the worker's cache flushes took {:.3f} ms (median); this device's take {:.3f} ms ({})",
                         median_of(flushes) * 1e3, flush * 1e3, bound);
    const double mix_need = mix_latency + (input_bytes + output_bytes_total) / mix_rate;
    if (mix_rate > 0 && over(median_of(mixes), mix_need))
      return fmt::format("the worker's input mixing took {:.3f} ms (median); this device needs {:.3f} ms ({})",
                         median_of(mixes) * 1e3, mix_need * 1e3, bound);
    const double check_need = check_latency + output_bytes_total / digest_rate;
    if (digest_rate > 0 && over(median_of(checks), check_need))
      return fmt::format("the worker's output checks took {:.3f} ms (median); this device needs {:.3f} ms ({})",
                         median_of(checks) * 1e3, check_need * 1e3, bound);
  }
  return "";
}

json run_timed_stage(const TimedStage& st, WorkerRun& w, WorkerRun* spot) {
  const json& req = st.request;
  std::vector<TensorSpec> outs, ins;
  for (const auto& o : st.eval.at("outputs")) outs.push_back(o.get<TensorSpec>());
  for (const auto& x : st.eval.at("inputs")) ins.push_back(x.get<TensorSpec>());
  double in_bytes = 0, out_bytes = 0;
  for (const auto& s : ins) in_bytes += static_cast<double>(s.nbytes());
  for (const auto& s : outs) out_bytes += static_cast<double>(s.nbytes());
  std::vector<Tolerance> tol;
  for (size_t o = 0; o < outs.size(); ++o) {
    const json t =
        req.value("output_tolerances", json::array()).size() > o ? req["output_tolerances"][o] : json::object();
    Tolerance d = default_tolerance(outs[o].dtype);
    tol.push_back({t.value("atol", d.atol), t.value("rtol", d.rtol), t.value("min_match", d.min_match)});
  }

  // Secrets of the runner: the keys, the seeds mixed, which calls are checked.
  std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32));
  std::vector<int> seeds = st.eval.at("seeds").get<std::vector<int>>();
  std::shuffle(seeds.begin(), seeds.end(), rng);
  const json fresh_seeds = {seeds.at(0), seeds.size() > 1 ? seeds[1] : seeds[0]};

  const int rotate = std::max(1, req.value("rotate", 4));
  const double stage_start = now_s();
  w.send({{"op", "time"}, {"init", req.value("init", 0)}, {"rotate", rotate}, {"fresh_seeds", fresh_seeds}});
  Message ready = w.receive(st.time_s, "timing");
  const double ready_s = now_s() - stage_start;
  if (ready.header.value("stage", "") != "timing_ready") return ready.header;
  const bool deterministic = ready.header.value("unit", "s") != "s";

  const int warmup = deterministic ? 0 : std::max(req.value("warmup", 3), rotate);
  const int min_repeats = deterministic ? rotate : req.value("min_repeats", 10);
  const int max_repeats = deterministic ? rotate : std::max(min_repeats, req.value("max_repeats", 200));
  const double min_seconds = std::min(req.value("min_seconds", 0.2), req.value("max_wall_seconds", 10.0));
  // Under emulation (a deterministic count, one call per rotating set) each re-run in a fresh
  // process costs a second or more: at most two of those few calls are checked.
  const int spot_target = std::min(std::max(0, req.value("spot_checks", 3)), deterministic ? 2 : 1 << 30);

  std::vector<Call> calls;
  std::vector<std::pair<size_t, std::vector<std::byte>>> kept;  // checked calls' outputs
  // Asks for the outputs call I left (still in its buffer set) and keeps them; a failure to say.
  auto report = [&](size_t i) -> std::optional<json> {
    w.send({{"op", "report"}, {"i", i}});
    Message o = w.receive(st.time_s, "timing");
    if (o.header.value("stage", "") == "failed") return o.header;
    if (o.header.value("stage", "") != "call_outputs" || o.header.value("i", json()) != json(i))
      return stage_failure(FailureKind::timing_inconsistent,
                           fmt::format("a message out of protocol order: expected the outputs of call {}", i));
    kept.emplace_back(i, std::move(o.payload));
    return std::nullopt;
  };
  std::vector<double> timed_windows;
  double timed_start = 0;
  int timed_n = 0;
  // The machine's other load over the timed calls: only where the worker's PID namespace keeps
  // everything the candidate starts below the runner (else a double fork would pass for another's).
  CpuTimes cpu_at_start;
  for (size_t i = 0;; ++i) {
    const bool timed = static_cast<int>(i) >= warmup;
    if (timed) {
      const bool enough = timed_n >= max_repeats ||
                          (timed_n >= min_repeats && now_s() - timed_start >= (deterministic ? 0.0 : min_seconds));
      if (enough) break;
      if (timed_n == 0) {
        if (w.contained()) cpu_at_start = cpu_times();
        timed_start = now_s();
      }
    }
    Call c;
    c.i = i;
    c.timed = timed;
    c.key = rng();
    c.poison = (i % 2 == 0) ? 0xFF : 0x7F;
    const double t_go = now_s();
    w.send({{"op", "call"}, {"i", i}, {"key", c.key}, {"poison", c.poison}, {"timed", timed}});
    Message m = w.receive(st.time_s, "timing");
    c.rec.window_s = now_s() - t_go;
    const std::string stg = m.header.value("stage", "");
    if (stg == "failed") {
      m.header["reason"] = fmt::format("{} call {}: {}", timed ? "timed" : "warm-up", i, m.header.value("reason", ""));
      return m.header;
    }
    if (stg != "call_done" || m.header.value("i", json()) != json(i))
      return stage_failure(FailureKind::timing_inconsistent,
                           fmt::format("a message out of protocol order: expected call_done for call {}, got '{}' "
                                       "(i = {})",
                                       i, stg, m.header.value("i", json()).dump()));
    c.rec.sample = m.header.value("sample", 0.0);
    c.rec.wall_s = m.header.value("wall", 0.0);
    c.rec.mix_s = m.header.value("mix_s", 0.0);
    c.rec.flush_s = m.header.value("flush_s", 0.0);
    c.rec.check_s = m.header.value("check_s", 0.0);
    for (const auto& d : m.header.value("outputs", json::array()))
      c.digests.push_back({d.value("hash", uint64_t{0}), d.value("poisoned", uint64_t{0})});
    if (c.digests.size() != outs.size())
      return stage_failure(
          FailureKind::timing_inconsistent,
          fmt::format("call {}: {} output fingerprints for {} outputs", i, c.digests.size(), outs.size()));
    if (std::string u = unwritten(outs, c); !u.empty()) return stage_failure(FailureKind::unwritten_output, u);
    if (timed) {
      ++timed_n;
      timed_windows.push_back(c.rec.window_s);
      // Checked with a probability that gives about spot_target checks over the calls this
      // stage is expected to take; the worker learns it only after the call has run.
      const double per_call = std::max(median_of(timed_windows), 1e-6);
      const double expected =
          std::clamp(min_seconds / per_call, static_cast<double>(min_repeats), static_cast<double>(max_repeats));
      const bool check = static_cast<int>(kept.size()) < 2 * spot_target && spot_target > 0 &&
                         std::uniform_real_distribution<double>(0, 1)(rng) < spot_target / expected;
      if (check)
        if (auto f = report(i)) return *f;
    }
    calls.push_back(std::move(c));
  }
  // At least one check: the last timed call's outputs are still in its buffer set.
  if (kept.empty() && spot_target > 0 && timed_n > 0)
    if (auto f = report(calls.back().i)) return *f;
  const double loop_s = timed_n > 0 ? now_s() - timed_start : 0.0;  // the runner's clock, flushes included
  const double other_load = cpu_at_start.ok ? machine_load(cpu_at_start, cpu_times()) : 0.0;
  const double end_start = now_s();
  w.send({{"op", "end"}});
  Message fin = w.receive(st.time_s, "timing");
  const double end_s = now_s() - end_start;
  if (fin.header.value("stage", "") == "failed") return fin.header;
  if (fin.header.value("stage", "") != "timing")
    return stage_failure(FailureKind::timing_inconsistent,
                         "a message out of protocol order: expected the end of the timed stage, got '" +
                             fin.header.value("stage", "") + "'");

  // The checked calls' outputs are what the call left when it returned (the fingerprint taken
  // then), and the same inputs in a fresh process give the same outputs within tolerance.
  json checked = json::array();
  for (const auto& [i, blob] : kept) {
    const Call& c = calls.at(i);
    const TensorViews v = view_safetensors(blob);
    for (size_t o = 0; o < outs.size(); ++o) {
      const OutputDigest d = output_digest(output_bytes(v, outs[o]), dtype_size(outs[o].dtype), std::byte(c.poison));
      if (d.hash != c.digests[o].hash)
        return stage_failure(
            FailureKind::wrong_output,
            fmt::format("timed call {}: output '{}' changed after the call returned and the device was "
                        "synchronised: work still running outside the clock",
                        i, outs[o].name));
    }
  }
  const double spot_start = now_s();
  if (spot && !kept.empty()) {
    Message r = spot->deliver_inputs(st.time_s, st.payload);
    if (r.header.value("stage", "") == "prepared") r = spot->receive(st.time_s, "spot check");
    if (r.header.value("stage", "") != "spot_ready") {
      r.header["reason"] = "the spot check's fresh process: " + r.header.value("reason", "");
      return r.header;
    }
    json list = json::array();
    for (const auto& [i, blob] : kept) list.push_back({{"i", i}, {"key", calls[i].key}, {"poison", calls[i].poison}});
    spot->send({{"op", "spot_calls"}, {"fresh_seeds", fresh_seeds}, {"calls", list}});
    for (const auto& [i, blob] : kept) {
      Message s = spot->receive(st.time_s, "spot check");
      if (s.header.value("stage", "") != "spot_outputs" || s.header.value("i", json()) != json(i)) {
        if (s.header.value("stage", "") == "failed") {
          s.header["reason"] =
              fmt::format("re-running timed call {} in a fresh process: {}", i, s.header.value("reason", ""));
          return s.header;
        }
        return stage_failure(FailureKind::runner_error, fmt::format("the spot check did not return call {}", i));
      }
      const TensorViews fresh = view_safetensors(s.payload), timed_out = view_safetensors(blob);
      json per = json::array();
      for (size_t o = 0; o < outs.size(); ++o) {
        const auto poison = std::byte(calls[i].poison);
        const auto ref = output_bytes(fresh, outs[o]);
        const OutputDigest fd = output_digest(ref, dtype_size(outs[o].dtype), poison);
        if (fd.poisoned > 0 && (poison_is_invalid(outs[o].dtype) || fd.poisoned == outs[o].numel()))
          return stage_failure(
              FailureKind::unwritten_output,
              fmt::format("timed call {} run again in a fresh process left {} elements of '{}' unwritten", i,
                          fd.poisoned, outs[o].name));
        OutputCheck oc = check_agreement(outs[o], tol[o], ref, output_bytes(timed_out, outs[o]));
        per.push_back({{"output", outs[o].name}, {"ok", oc.ok()}, {"max_abs_err", oc.max_abs_err}});
        if (!oc.ok())
          return stage_failure(
              FailureKind::wrong_output,
              fmt::format("timed call {}: its outputs differ from the same inputs run in a fresh process "
                          "(which saw no earlier call): {}",
                          i, oc.reason));
      }
      checked.push_back({{"call", i}, {"outputs", per}});
    }
  }

  const double spot_s = now_s() - spot_start;

  std::vector<CallRecord> timed_recs;
  json samples = json::array(), wall = json::array();
  for (const auto& c : calls)
    if (c.timed) {
      timed_recs.push_back(c.rec);
      samples.push_back(c.rec.sample);
      wall.push_back(c.rec.wall_s);
    }
  const CallBuffers shape{in_bytes, out_bytes, static_cast<int>(ins.size()), static_cast<int>(outs.size())};
  bool costs_remeasured = false;
  const double audit_start = now_s();
  if (!deterministic) {
    std::string why = audit_clock(timed_recs, st.check_costs, shape, other_load);
    // The cached costs may be a quiet machine's, or there are none yet (a first eval): on a
    // loaded machine the work around an honest call takes longer. Measured now, with the
    // candidate's processes gone (they cannot slow the measurement down), the bound is today's.
    if ((!why.empty() || !st.check_costs.is_object()) && st.costs_now) {
      w.wait_exit(2.0);
      if (spot) spot->wait_exit(2.0);
      const json now = st.costs_now();
      if (now.is_object()) {
        why = audit_clock(timed_recs, now, shape, other_load);
        if (!why.empty()) why += " (by the device's costs measured again just now)";
        costs_remeasured = true;
      } else if (!why.empty()) {
        why += " (the device's costs could not be measured again)";
      }
    }
    if (!why.empty()) return stage_failure(FailureKind::timing_inconsistent, why);
  }

  json out = fin.header;
  // The runner's clock on the stage's parts: the worker's setup (its rotating sets), the loop
  // (warm-up calls not included), the worker's end of it, the spot check (its worker's inputs,
  // the checked calls run again, the comparison) and the audit (with the costs measured again
  // in a worker of their own, opening the device, when it asked for them).
  out["worker_phases"]["ready_s"] = ready_s;
  out["worker_phases"]["loop_s"] = loop_s;
  out["worker_phases"]["end_s"] = end_s;
  out["worker_phases"]["spot_check_s"] = spot_s;
  out["worker_phases"]["audit_s"] = now_s() - audit_start;
  out["samples"] = samples;
  out["wall_samples"] = wall;
  json sets = json::array();
  for (int k = 0; k < rotate; ++k) sets.push_back({{"set", k}});
  out["sets"] = sets;
  std::vector<double> win;
  for (const auto& r : timed_recs) win.push_back(r.window_s);
  out["checks"] = {{"calls", calls.size()},
                   {"warmup_calls", std::min<size_t>(calls.size(), static_cast<size_t>(warmup))},
                   {"fresh_inputs", fresh_seeds[0] != fresh_seeds[1]},
                   {"fresh_seeds", fresh_seeds},
                   {"every_call_fingerprinted", true},
                   {"spot_checked", checked},
                   {"runner_clock_median_s", median_of(win)},
                   {"check_costs_remeasured", costs_remeasured},
                   {"machine_load", other_load}};
  return out;
}

}  // namespace mblast::runner
