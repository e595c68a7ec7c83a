#include "mblast/measure/evaluate.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "mblast/candidate_file.h"
#include "mblast/measure/plausibility.h"
#include "mblast/measure/runner_client.h"
#include "mblast/progress.h"
#include "mblast/stats.h"
#include "mblast/verify.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;
using protocol::FailureKind;

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

json spec_list(const std::vector<TensorSpec>& v) {
  json a = json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

// Refuses a file that is not source text (a binary, an image, another encoding) before the
// build, with one line: the compiler's log of one is pages of noise.
std::string read_source(const fs::path& p) { return read_candidate_source(p); }

// The reference data the driver holds: inputs and parameters it sends, expected outputs it
// keeps. Files are mapped, not copied: full-size problems have gigabytes of them.
struct ReferenceData {
  const Problem& p;
  std::vector<std::unique_ptr<MappedSafetensors>> sources;  // inputs per seed, then parameters per init
  std::vector<TensorView> sent;  // views into sources, named "in/<seed>/<name>", "par/<init>/<name>"
  std::map<std::pair<int, int>, std::unique_ptr<MappedSafetensors>> expected;
  std::map<std::string, std::string> sent_hash;  // "in/<seed>/<name>" -> content hash
  std::vector<int> inits;                        // the inits the candidate runs on

  ReferenceData(const Problem& prob, std::vector<int> run_inits) : p(prob), inits(std::move(run_inits)) {
    for (const auto& s : p.seeds) add(p.inputs_file(s.seed), p.inputs, "in/" + std::to_string(s.seed) + "/");
    for (int i : inits) add(p.params_file(i), p.parameters, "par/" + std::to_string(i) + "/");
  }
  void add(const fs::path& file, const std::vector<TensorSpec>& specs, const std::string& prefix) {
    sources.push_back(map_checked(file, specs));
    for (const auto& s : specs) {
      TensorView t = *sources.back()->tensors().find(s.name);
      t.spec.name = prefix + s.name;
      sent_hash[t.spec.name] = content_hash_hex(t.data);
      sent.push_back(std::move(t));
    }
  }
  // The payload for the runner: every input and parameter under its prefixed name.
  std::vector<std::byte> payload() const {
    std::vector<TensorSpec> specs;
    for (const auto& t : sent) specs.push_back(t.spec);
    SafetensorsLayout l = layout_safetensors(specs);
    for (size_t i = 0; i < sent.size(); ++i)
      if (!sent[i].data.empty()) std::memcpy(l.blob.data() + l.offsets[i], sent[i].data.data(), sent[i].data.size());
    return std::move(l.blob);
  }
  const TensorViews& expected_for(int seed, int init) {
    auto key = std::make_pair(seed, init);
    auto it = expected.find(key);
    if (it == expected.end()) it = expected.emplace(key, map_checked(p.expected_file(seed, init), p.outputs)).first;
    return it->second->tensors();
  }
};

struct Verdict {
  FailureKind kind = FailureKind::none;
  std::string reason;
  json checks = json::array();
  bool ok() const { return kind == FailureKind::none; }
  void fail(FailureKind k, std::string r) {
    if (ok()) {
      kind = k;
      reason = std::move(r);
    }
  }
};

const TensorView& output_in(const TensorViews& outs, const std::string& key) {
  const TensorView* t = outs.find(key);
  if (!t) throw Error("runner answer lacks output " + key);
  return *t;
}

// Inputs and parameters must come back unchanged after a run. Checked before its outputs: a
// candidate that overwrites its inputs usually breaks its outputs too, and the cause is what counts.
void verify_inputs_unchanged(const Problem& p, ReferenceData& ref, const json& c, Verdict& v) {
  const int seed = c.at("seed"), init = c.at("init"), run = c.at("run");
  auto unchanged = [&](const char* field, const std::vector<TensorSpec>& specs, const std::string& sent_prefix,
                       const char* what) {
    if (!c.contains(field)) return;
    for (const auto& spec : specs)
      if (c[field].value(spec.name, "") != ref.sent_hash[sent_prefix + spec.name])
        v.fail(FailureKind::input_modified,
               fmt::format("seed {} init {} (after run {}): {} '{}' was modified by the candidate", seed, init, run,
                           what, spec.name));
  };
  unchanged("input_hashes_after", p.inputs, "in/" + std::to_string(seed) + "/", "input");
  unchanged("param_hashes_after", p.parameters, "par/" + std::to_string(init) + "/", "parameter");
}

// Whether all of message M is the worker's: a message the runner relayed as it arrived
// ("streamed") is followed by {"stage": END, "complete"}; false when the worker failed inside its
// payload (zeros stand in for the rest: it must not be checked), and the failure comes next.
bool arrived_whole(RunnerClient& client, const protocol::Message& m, const std::string& end, double wait_s) {
  if (!m.header.value("streamed", false)) return true;
  const protocol::Message e = client.receive(wait_s);
  if (e.header.value("stage", "") != end)
    throw Error("runner protocol: a streamed " + m.header.value("stage", std::string("message")) + " without its " +
                end + " (got '" + e.header.value("stage", "") + "')");
  return e.header.value("complete", false);
}

// Receives the verification runs as the runner streams them, one message per run, and gives
// each to `on_run`, which checks it and says whether all is well so far (it may keep the
// message's payload; what it leaves is reused for the next message). The worker is told to go
// on before a run is checked, so it runs the next one meanwhile; the first run after a failed
// check is told to stop. Returns the stage's last message: "verify" after every run (its last
// run may have failed its check: the caller must still answer it), a failure, or the message
// of the run that was told to stop.
using RunHandler = std::function<bool(const json& run_case, protocol::Message& m)>;
protocol::Message receive_runs(RunnerClient& client, const EvalOptions& o, const json& req, const RunHandler& on_run) {
  const double run_limit = o.run_s + req["limits"].value("data_s", 0.0);
  double wait_s = o.build_s + run_limit + 60;  // the first answer comes after the build
  bool go_on = true;
  for (;;) {
    protocol::Message m = client.receive(wait_s);
    wait_s = run_limit + 60;
    if (m.header.value("stage", "") != "verify_run") return m;
    Progress::phase_of_active("verify");                        // a run arrived: the build is done
    if (!arrived_whole(client, m, "verify_run_end", wait_s)) {  // not checked; the failure follows
      client.recycle(std::move(m.payload));
      return client.receive(wait_s);
    }
    if (!go_on) {
      client.send({{"op", "stop"}});
      return m;
    }
    client.send({{"op", "continue"}});
    try {
      go_on = on_run(m.header.at("case"), m);
    } catch (...) {
      // The runner waits for a word on the next run: end the request so the runner stays usable.
      auto next = client.receive(wait_s);
      if (next.header.value("stage", "") == "verify_run" || next.header.value("stage", "") == "verify")
        client.send({{"op", "stop"}});
      throw;
    }
    client.recycle(std::move(m.payload));
  }
}

// Checks each verification run as it arrives: outputs against the reference, and the runs on
// the same inputs agree with each other. Holds the first run's outputs of a seed and init until
// the next run of them has been compared.
class RunChecker {
 public:
  RunChecker(const Problem& p, ReferenceData& ref, RunnerClient& client, int runs_per_case)
      : runs_per_case_(runs_per_case), p_(p), ref_(ref), client_(client) {}

  bool operator()(const json& c, protocol::Message& m) {
    const auto t0 = std::chrono::steady_clock::now();
    ++runs;
    const int seed = c.at("seed"), init = c.at("init"), run = c.at("run");
    const auto poison = static_cast<std::byte>(c.value("poison", 0xFF));
    const std::string where = fmt::format("seed {} init {} run {}", seed, init, run);
    verify_inputs_unchanged(p_, ref_, c, verdict);
    const TensorViews outs = view_safetensors(m.payload);
    const TensorViews& expected = ref_.expected_for(seed, init);
    const auto key = std::make_pair(seed, init);
    auto first = first_.find(key);
    if (run > 0 && runs_per_case_ > 1 && first == first_.end())
      verdict.fail(FailureKind::runner_error,
                   where + ": arrived without run 0 of the same seed and init to agree with");
    const TensorViews first_outs = first == first_.end() ? TensorViews{} : view_safetensors(first->second);
    for (const auto& spec : p_.outputs) {
      const TensorView& got = output_in(outs, spec.name);
      OutputCheck oc =
          check_output(spec, p_.tolerance_for(spec.dtype), got.data, expected.find(spec.name)->data, poison);
      verdict.checks.push_back({{"seed", seed},
                                {"init", init},
                                {"run", run},
                                {"output", spec.name},
                                {"ok", oc.ok()},
                                {"matched", oc.matched},
                                {"total", oc.total},
                                {"max_abs_err", oc.max_abs_err},
                                {"max_rel_err", oc.max_rel_err}});
      if (!oc.ok()) verdict.fail(oc.kind, where + ": " + oc.reason);
      if (run > 0 && oc.ok() && first != first_.end()) {
        OutputCheck ag =
            check_agreement(spec, p_.tolerance_for(spec.dtype), output_in(first_outs, spec.name).data, got.data);
        if (!ag.ok()) verdict.fail(FailureKind::nondeterministic, where + ": " + ag.reason);
      }
    }
    const bool last = run + 1 >= runs_per_case_;
    if (run == 0 && !last) {
      first_[key] = std::move(m.payload);
    } else if (last && first != first_.end()) {
      client_.recycle(std::move(first->second));
      first_.erase(first);
    }
    seconds += since(t0);
    return verdict.ok();
  }

  Verdict verdict;
  size_t runs = 0;     // runs checked
  double seconds = 0;  // spent checking them

 private:
  int runs_per_case_;
  const Problem& p_;
  ReferenceData& ref_;
  RunnerClient& client_;
  std::map<std::pair<int, int>, std::vector<std::byte>> first_;  // payload of run 0 per (seed, init)
};

void set_failure(json& r, FailureKind k, const std::string& reason) {
  r["correct"] = false;
  r["failure_kind"] = protocol::failure_kind_name(k);
  r["reason"] = reason;
}

void take_runner_failure(json& r, const json& h) {
  r["correct"] = false;
  r["failure_kind"] = h.value("failure_kind", "runner_error");
  r["reason"] = h.value("reason", "no reason given");
  r["failed_stage"] = h.value("failed_stage", "");
}

// The runner that serves `target`: the one the options name, else the target's own, which
// must be reachable.
RunnerAddress runner_for(const Target& target, const EvalOptions& o) {
  if (o.runner) return *o.runner;
  const std::string why = target.unreachable_reason();
  if (!why.empty()) throw UserError("target " + target.name + " is unavailable: " + why);
  return target.runner;
}

// Seconds a verification run may take beyond the run limit for the data it moves: one seed's
// inputs up and back (hashed after the call), the parameters back, and the outputs down and
// through the runner to the driver, at no less than 64 MiB/s. A full-size problem on a modest
// host is not a "timeout" of its candidate.
double data_seconds_per_run(const Problem& p) {
  double bytes = 0;
  for (const auto& t : p.inputs) bytes += 2.0 * static_cast<double>(t.nbytes());
  for (const auto& t : p.parameters) bytes += static_cast<double>(t.nbytes());
  for (const auto& t : p.outputs) bytes += 3.0 * static_cast<double>(t.nbytes());
  return std::ceil(bytes / (64.0 * 1024 * 1024));
}

// The runner request that builds a candidate and runs it on every seed x init (o.runs times).
json eval_request(const Problem& p, const std::vector<int>& inits, const Target& target, const std::string& source,
                  const fs::path& candidate, const EvalOptions& o) {
  json seeds = json::array();
  for (const auto& s : p.seeds) seeds.push_back(s.seed);
  return {{"op", "eval"},
          {"target", target.spec},
          {"candidate", {{"source", source}, {"filename", candidate.filename().string()}}},
          {"inputs", spec_list(p.inputs)},
          {"parameters", spec_list(p.parameters)},
          {"outputs", spec_list(p.outputs)},
          {"seeds", seeds},
          {"inits", inits},
          {"runs", o.runs},
          {"timing", o.timing},  // the runner then starts the spot check's worker beside the verification
          {"timing_init", p.inits.front()},
          {"stream_runs", true},  // each run's outputs relayed as they arrive (receive_runs())
          {"limits",
           {{"build_s", o.build_s}, {"run_s", o.run_s}, {"data_s", data_seconds_per_run(p)}, {"time_s", o.time_s}}}};
}

// The worker holds the inputs and parameters of every seed and init, the outputs of the runs
// it returns and its rotating buffer sets: the default limit grows with the problem's data.
void set_memory_limit(json& req, const Problem& p, size_t payload_bytes, const EvalOptions& o, int rotate) {
  double out_bytes = 0;
  for (const auto& t : p.outputs) out_bytes += static_cast<double>(t.nbytes());
  const double data_mib = (static_cast<double>(payload_bytes) + out_bytes * (rotate + 1)) / (1024.0 * 1024.0);
  req["limits"]["memory_mb"] = o.memory_mb > 0 ? o.memory_mb : 4096 + static_cast<int>(4 * data_mib);
}

json peak_fractions(const Problem& p, const json& peaks, double median_s) {
  json f;
  const double bw = p.bytes / median_s, fl = p.flops / median_s;
  f["achieved_bandwidth_bytes_per_s"] = bw;
  f["achieved_flops_per_s"] = fl;
  if (!peaks.is_object() || !peaks.contains("bandwidth_bytes_per_s")) {
    f["fraction_of_peak"] = nullptr;
    f["note"] = "no peaks measured for this target";
    return f;
  }
  const double pbw = peaks["bandwidth_bytes_per_s"], pfl = peaks["fp32_flops_per_s"];
  const double fbw = pbw > 0 ? bw / pbw : 0, ffl = pfl > 0 ? fl / pfl : 0;
  f["peak_bandwidth_bytes_per_s"] = pbw;
  f["peak_fp32_flops_per_s"] = pfl;
  f["bandwidth_fraction"] = fbw;
  f["compute_fraction"] = ffl;
  f["fraction_of_peak"] = std::max(fbw, ffl);
  f["bound"] = fbw >= ffl ? "memory" : "compute";
  f["peaks_method"] = peaks.value("method", "");
  f["peaks_cached"] = peaks.value("cached", false);
  // A fraction above 1 is reported as measured, with what it means.
  std::string over;
  if (fbw > 1) over = fmt::format("bandwidth {:.2f}", fbw);
  if (ffl > 1) over += fmt::format("{}fp32 compute {:.2f}", over.empty() ? "" : ", ", ffl);
  if (!over.empty())
    f["note"] = "above the measured peak (" + over +
                "): the kernel moves fewer bytes or does fewer operations than the problem counts (data served "
                "from a cache, a fast algorithm such as an FFT or Winograd convolution, tensor cores against the "
                "fp32 peak), or the peak figure is low";
  return f;
}

}  // namespace

int rotating_sets(const Problem& p, const Target& target, int requested) {
  if (requested > 0) return requested;
  double input_bytes = 0;
  for (const auto& t : p.inputs) input_bytes += static_cast<double>(t.nbytes());
  const double budget = target.backend == "cuda" ? 4.0 * (1 << 30) : 1.0 * (1 << 30);
  const int fit = input_bytes > 0 ? static_cast<int>(std::min(4.0, std::floor(budget / input_bytes))) : 4;
  return std::max(static_cast<int>(std::max<size_t>(p.seeds.size(), 1)), fit);
}

namespace {

json evaluate_once(const Problem& p, const Target& target, const fs::path& candidate, const EvalOptions& o,
                   RunnerClient* client) {
  const auto t_start = std::chrono::steady_clock::now();
  const std::string source = read_source(candidate);
  const RunnerAddress addr = runner_for(target, o);
  ensure_problem_data(p, o.quiet);
  ReferenceData ref(p, p.inits_to_run());
  const double t_prepared = since(t_start);

  std::unique_ptr<RunnerClient> own;
  if (!client) {
    own = std::make_unique<RunnerClient>(addr);
    client = own.get();
  }
  const double t_connected = since(t_start);

  json r;
  r["problem"] = p.name;
  r["target"] = target.name;
  r["backend"] = target.backend;
  r["candidate"] = fs::absolute(candidate).string();
  r["runner"] = client->describe();
  r["correct"] = false;
  r["failure_kind"] = nullptr;
  r["reason"] = nullptr;

  json req = eval_request(p, ref.inits, target, source, candidate, o);
  if (ref.inits.size() < p.inits.size())
    r["inits_run"] = {
        {"inits", ref.inits},
        {"note", fmt::format("the problem has no parameters and its {} inits have identical expected outputs "
                             "(data/MANIFEST.json): one computation, run once",
                             p.inits.size())}};
  const int rotate = rotating_sets(p, target, o.rotate);
  std::chrono::steady_clock::time_point t_sent;
  {  // the payload is the runner's once sent (in the pipe, or shared): not held through the eval
    const auto payload = ref.payload();
    set_memory_limit(req, p, payload.size(), o, rotate);
    t_sent = std::chrono::steady_clock::now();
    Progress::phase_of_active("build");  // the runner builds the candidate, then streams the verification runs
    client->send(req, payload);
    r["payload"] = {{"bytes", payload.size()}, {"shared", client->last_payload_shared()}};
  }
  RunChecker checker(p, ref, *client, o.runs);
  auto v = receive_runs(*client, o, req, std::ref(checker));
  const double verify_wall = since(t_sent);

  const json& build = v.header.value("build", json::object());
  const double build_s = build.value("seconds", 0.0);
  r["build"] = {{"cached", build.value("cached", false)},
                {"seconds", build_s},
                {"command", build.value("command", "")},
                {"log", build.value("log", "")}};
  r["sandbox"] = v.header.value("sandbox", "");
  if (v.header.contains("sandbox_layers")) r["sandbox_layers"] = v.header["sandbox_layers"];
  r["log"] = v.header.value("log", "");
  if (v.header.contains("device")) r["device"] = v.header["device"];
  json phases = {
      {"load_data_s", t_prepared},         {"start_runner_s", t_connected - t_prepared}, {"build_s", build_s},
      {"verify_s", verify_wall - build_s}, {"check_outputs_s", checker.seconds},         {"timing_s", 0.0}};
  if (v.header.contains("worker_phases")) phases["worker"] = v.header["worker_phases"];

  auto finish = [&]() {
    phases["total_s"] = since(t_start);
    double timed = 0;
    if (r.contains("time") && r["time"].contains("samples_sum_s")) timed = r["time"]["samples_sum_s"];
    phases["timed_runs_s"] = timed;
    phases["overhead_s"] = phases["total_s"].get<double>() - build_s - timed;
    // The candidate's own untimed calls (verification runs, warm-up) are work it asked for;
    // what is left is the cost of measuring: processes, transfers, poisoning, hashing,
    // checks, cache flushes.
    double calls = 0;
    if (v.header.contains("cases"))
      for (const auto& c : v.header["cases"]) calls += c.value("seconds", 0.0);
    if (phases.contains("worker_timing")) calls += phases["worker_timing"].value("warmup_calls_s", 0.0);
    phases["untimed_calls_s"] = calls;
    phases["measuring_s"] = phases["overhead_s"].get<double>() - calls;
    r["phases"] = phases;
    return r;
  };

  r["checks"] = checker.verdict.checks;
  if (!checker.verdict.ok()) {  // the runs stopped after the first wrong one
    if (v.header.value("stage", "") == "verify") client->send({{"op", "stop"}});
    set_failure(r, checker.verdict.kind, checker.verdict.reason);
    return finish();
  }
  if (v.header.value("stage", "") != "verify") {
    take_runner_failure(r, v.header);
    return finish();
  }
  if (checker.runs != v.header.at("cases").size() || checker.runs == 0) {
    set_failure(r, FailureKind::runner_error,
                fmt::format("the runner reported {} verification runs but sent the outputs of {}",
                            v.header.at("cases").size(), checker.runs));
    client->send({{"op", "stop"}});
    return finish();
  }
  if (!o.timing) {
    client->send({{"op", "stop"}});
    r["correct"] = true;
    r["time"] = nullptr;
    return finish();
  }

  const auto t_time = std::chrono::steady_clock::now();
  json tolerances = json::array();
  for (const auto& spec : p.outputs) {
    const Tolerance tol = p.tolerance_for(spec.dtype);
    tolerances.push_back({{"atol", tol.atol}, {"rtol", tol.rtol}, {"min_match", tol.min_match}});
  }
  Progress::phase_of_active("time");
  client->send({{"op", "time"},
                {"init", p.inits.front()},
                {"warmup", o.warmup},
                {"min_repeats", o.min_repeats},
                {"max_repeats", o.max_repeats},
                {"min_seconds", o.min_seconds},
                {"rotate", rotate},
                {"max_wall_seconds", o.max_wall_seconds},
                {"spot_checks", o.spot_checks},
                {"output_tolerances", tolerances}});
  // The runner drives the timed calls, checks every one and spot-checks some in a fresh process
  // (docs/measurement.md); what comes back is the verdict with the samples.
  const protocol::Message t = client->receive(o.time_s + 600);
  phases["timing_s"] = since(t_time);
  if (t.header.contains("worker_phases")) phases["worker_timing"] = t.header["worker_phases"];
  if (!t.header.value("log", "").empty()) r["log"] = t.header["log"];
  if (t.header.contains("sandbox")) r["sandbox"] = t.header["sandbox"];
  if (t.header.value("stage", "") != "timing") {
    take_runner_failure(r, t.header);
    return finish();
  }
  std::vector<double> samples = t.header.at("samples").get<std::vector<double>>();
  const std::string unit = t.header.value("unit", "s");
  const bool seconds = unit == "s";
  const double scale = seconds ? 1e6 : 1.0;  // seconds are reported in microseconds
  SampleSummary s = summarize(samples);
  SampleSummary w = summarize(t.header.at("wall_samples").get<std::vector<double>>());
  double sum = 0;
  for (double x : samples) sum += x;
  r["correct"] = true;
  r["time"] = {{"median", s.median * scale},
               {"unit", seconds ? "us" : unit},
               {"min", s.min * scale},
               {"max", s.max * scale},
               {"p25", s.p25 * scale},
               {"p75", s.p75 * scale},
               {"mean", s.mean * scale},
               {"stddev", s.stddev * scale},
               {"spread_pct", s.spread_pct},
               {"samples", s.count},
               {"samples_sum_s", seconds ? sum : 0.0},
               {"host_wall_median", w.median * 1e6},
               {"method", t.header.value("method", "")},
               {"rotating_sets", t.header.at("sets").size()},
               {"warmup", o.warmup},
               {"prepare_s", t.header.value("prepare_seconds", 0.0)},
               {"checks", t.header.value("checks", json::object())}};
  if (t.header.contains("cost")) r["time"]["cost"] = t.header["cost"];  // backend detail (e.g. vector instructions)
  if (seconds) {
    json used_peaks = t.header.value("peaks", json());
    r["peak"] = peak_fractions(p, used_peaks, s.median);
    // A kernel cannot stream faster than memory: a cached peak bandwidth it beats by more than
    // 10 % was measured while other work ran, which can halve it on a shared machine
    // (benchmarks/results/measurement-design-figures.json, peak-bandwidth-busy-machine). It is
    // measured again now, kept for later evaluations (the runner keeps the higher of the two
    // figures), and used here. The cache remembers the bandwidth that caused it (`beaten_by`), and
    // only a kernel 10 % faster than that has it measured again: a problem whose counted bytes
    // overstate its traffic pays for one measurement, not one per eval, and a figure measured on a
    // busy machine is not kept for good.
    const json cached = t.header.value("peaks", json());
    const double achieved = r["peak"].value("achieved_bandwidth_bytes_per_s", 0.0);
    if (r["peak"].value("peaks_cached", false) && r["peak"].value("bandwidth_fraction", 0.0) > 1.1 &&
        achieved > 1.1 * cached.value("beaten_by", 0.0)) {
      const double stale = r["peak"]["peak_bandwidth_bytes_per_s"].get<double>();
      Progress::phase_of_active("peaks");
      client->send({{"op", "peaks"}, {"target", target.spec}, {"refresh", true}, {"beaten_by", achieved}});
      const protocol::Message m = client->receive(330);
      if (m.header.value("stage", "") == "peaks") {
        used_peaks = m.header;
        r["peak"] = peak_fractions(p, m.header, s.median);
        r["peak"]["remeasured"] =
            fmt::format("the cached peak bandwidth ({:.1f} GB/s) was below this kernel's; measured again", stale / 1e9);
      } else {
        r["peak"]["note"] = "the cached peak bandwidth is below this kernel's, and measuring it again failed: " +
                            m.header.value("reason", std::string("the runner said nothing"));
      }
    }
    r["fraction_of_peak"] = r["peak"]["fraction_of_peak"];
    if (const std::string why = implausible_time(p, used_peaks, s.median); !why.empty()) {
      set_failure(r, FailureKind::implausible_speed, why);
      return finish();
    }
  } else {
    r["peak"] = {{"fraction_of_peak", nullptr},
                 {"note", "the cost is a count of " + unit + ", not a time: no speed-of-light fraction"}};
    r["fraction_of_peak"] = nullptr;
    if (const std::string why = implausible_count(p, target, unit, s.median); !why.empty()) {
      set_failure(r, FailureKind::implausible_speed, why);
      return finish();
    }
  }
  return finish();
}

}  // namespace

json evaluate(const Problem& p, const Target& target, const fs::path& candidate, const EvalOptions& o,
              RunnerClient* client) {
  json r = evaluate_once(p, target, candidate, o, client);
  if (r.value("correct", false) || r.value("failure_kind", json("")) != "timing_inconsistent") return r;
  // A refused timing stands only if an independent second measurement is refused too: on a busy
  // machine (other processes, a hypervisor's steal) an honest candidate can overrun the bounds of
  // one measurement, while a candidate that hides its work overruns them every time. The second
  // attempt's time is added to the measuring cost. An instruction count under QEMU has no clock
  // for a busy machine to disturb: its refusals stand at once.
  const json execution = target.spec.value("execution", json::object());
  if (execution.is_object() && execution.value("kind", "") == "qemu") return r;
  const json first = r;
  r = evaluate_once(p, target, candidate, o, client);
  const double first_s = first.contains("phases") ? first["phases"].value("total_s", 0.0) : 0.0;
  if (r.contains("phases")) {
    for (const char* k : {"total_s", "overhead_s", "measuring_s"})
      if (r["phases"].contains(k)) r["phases"][k] = r["phases"][k].get<double>() + first_s;
    r["phases"]["refused_attempt_s"] = first_s;
  }
  r["remeasured"] = {{"why", "the first measurement was refused as timing_inconsistent"},
                     {"first_reason", first.value("reason", json(""))}};
  return r;
}

json capture_outputs(const Problem& p, const Target& target, const fs::path& candidate, const EvalOptions& o,
                     std::map<std::pair<int, int>, TensorSet>& outputs) {
  const std::string source = read_source(candidate);
  ReferenceData ref(p, p.inits);  // inputs and parameters only: there is no expected data yet
  RunnerClient client(runner_for(target, o));
  json r = {{"problem", p.name}, {"target", target.name},   {"candidate", fs::absolute(candidate).string()},
            {"correct", false},  {"failure_kind", nullptr}, {"reason", nullptr}};
  EvalOptions two = o;
  two.runs = std::max(2, o.runs);  // the second run must agree with the first
  two.timing = false;
  json req = eval_request(p, ref.inits, target, source, candidate, two);
  const auto payload = ref.payload();
  set_memory_limit(req, p, payload.size(), two, 0);  // no timing stage, no rotating sets
  client.send(req, payload);
  Verdict verdict;
  std::map<std::pair<int, int>, TensorSet> got;
  auto v = receive_runs(client, two, req, [&](const json& c, protocol::Message& m) {
    const int seed = c.at("seed"), init = c.at("init"), run = c.at("run");
    const auto key = std::make_pair(seed, init);
    const std::string where = fmt::format("seed {} init {} run {}", seed, init, run);
    verify_inputs_unchanged(p, ref, c, verdict);
    const TensorViews outs = view_safetensors(m.payload);
    for (const auto& spec : p.outputs) {
      const TensorView& t = output_in(outs, spec.name);
      if (run == 0) {
        // Every element must be a number: a NaN left here is also an element the kernel never
        // wrote (the first run's outputs are poisoned with 0xFF bytes, a NaN pattern).
        if (dtype_is_float(spec.dtype))
          for (size_t i = 0; i < spec.numel(); ++i)
            if (!std::isfinite(element_as_double(spec.dtype, t.data.data(), i))) {
              verdict.fail(
                  FailureKind::nan_or_inf,
                  fmt::format("{}: output '{}' is {} at {} (unwritten, or not finite): it cannot be the reference",
                              where, spec.name, element_as_double(spec.dtype, t.data.data(), i),
                              index_string(spec, i)));
              break;
            }
        if (spec.dtype == DType::boolean)  // the ABI's bool is one byte, 0 or 1
          for (size_t i = 0; i < spec.numel(); ++i)
            if (static_cast<uint8_t>(t.data[i]) > 1) {
              verdict.fail(FailureKind::wrong_output,
                           fmt::format("{}: bool output '{}' holds {} at {} (unwritten, or not 0/1): it cannot be "
                                       "the reference",
                                       where, spec.name, static_cast<int>(t.data[i]), index_string(spec, i)));
              break;
            }
        HostTensor copy{t.spec, std::vector<std::byte>(t.data.begin(), t.data.end())};
        got[key].add(std::move(copy));
      } else if (const HostTensor* first = got.count(key) ? got[key].find(spec.name) : nullptr) {
        OutputCheck ag = check_agreement(spec, p.tolerance_for(spec.dtype), first->data, t.data);
        if (!ag.ok()) verdict.fail(FailureKind::nondeterministic, where + ": " + ag.reason);
      }
    }
    return verdict.ok();
  });
  const json& build = v.header.value("build", json::object());
  r["build"] = {{"cached", build.value("cached", false)},
                {"seconds", build.value("seconds", 0.0)},
                {"log", build.value("log", "")}};
  r["log"] = v.header.value("log", "");
  if (!verdict.ok()) {
    if (v.header.value("stage", "") == "verify") client.send({{"op", "stop"}});
    set_failure(r, verdict.kind, verdict.reason);
    return r;
  }
  if (v.header.value("stage", "") != "verify") {
    take_runner_failure(r, v.header);
    return r;
  }
  client.send({{"op", "stop"}});
  for (const auto& s : p.seeds)
    for (int i : p.inits)
      if (!got.count({s.seed, i}))
        verdict.fail(FailureKind::runner_error, fmt::format("no outputs for seed {} init {}", s.seed, i));
  if (!verdict.ok()) {
    set_failure(r, verdict.kind, verdict.reason);
    return r;
  }
  outputs = std::move(got);
  r["correct"] = true;
  return r;
}

std::string format_eval_result(const json& r) {
  std::ostringstream o;
  o << fmt::format("problem   {}\ntarget    {} ({})\ncandidate {}\n", r.value("problem", ""), r.value("target", ""),
                   r.value("backend", ""), r.value("candidate", ""));
  if (r.contains("device") && r["device"].is_object())
    o << fmt::format("device    {}\n", r["device"].value("name", "?"));
  if (r.value("correct", false)) {
    o << "result    CORRECT on every seed, init and run\n";
    if (r.contains("inits_run")) o << fmt::format("          ({})\n", r["inits_run"].value("note", ""));
  } else {
    o << fmt::format("result    REJECTED: {}\n          {}\n", r.value("failure_kind", json("?")).get<std::string>(),
                     r.value("reason", json("")).is_string() ? r["reason"].get<std::string>() : "");
    // One line of a failed build's log here; the whole of it in --json (build.log) and a file.
    const std::string log = r.value("build", json::object()).value("log", "");
    if (r.value("failure_kind", json("")) == "build_failed" && !log.empty()) {
      const fs::path kept = keep_build_log(log);
      o << fmt::format("          {}\n          (full build log: {})\n",
                       first_error_line(log, r.value("candidate", "")),
                       kept.empty() ? std::string("`--json`, field build.log") : kept.string());
    }
  }
  if (r.contains("time") && r["time"].is_object()) {
    const json& t = r["time"];
    const std::string unit = t.value("unit", "us");
    o << fmt::format("time      median {:.3f} {}  (p25 {:.3f}, p75 {:.3f}, spread {:.1f}%, {} samples)\n",
                     t.value("median", 0.0), unit, t.value("p25", 0.0), t.value("p75", 0.0), t.value("spread_pct", 0.0),
                     t.value("samples", 0));
    const json& pk = r.value("peak", json::object());
    if (unit == "us") {
      o << fmt::format("achieved  {:.2f} GB/s, {:.2f} GFLOP/s", pk.value("achieved_bandwidth_bytes_per_s", 0.0) / 1e9,
                       pk.value("achieved_flops_per_s", 0.0) / 1e9);
      if (pk.contains("fraction_of_peak") && pk["fraction_of_peak"].is_number())
        o << fmt::format("  = {:.1f}% of peak ({}-bound; peaks {:.1f} GB/s, {:.1f} GFLOP/s)",
                         100 * pk["fraction_of_peak"].get<double>(), pk.value("bound", "?"),
                         pk.value("peak_bandwidth_bytes_per_s", 0.0) / 1e9,
                         pk.value("peak_fp32_flops_per_s", 0.0) / 1e9);
      o << "\n";
      if (pk.contains("note")) o << "          " << pk["note"].get<std::string>() << "\n";
    } else if (t.contains("cost") && t["cost"].is_object()) {
      o << fmt::format("cost      {} vector of {} instructions per call (deterministic)\n",
                       t["cost"].value("vector_insns_median", json()).dump(),
                       t["cost"].value("total_insns_median", json()).dump());
    }
  }
  if (r.contains("phases")) {
    const json& ph = r["phases"];
    o << fmt::format("phases    build {:.3f} s{}, verify {:.3f} s, timing {:.3f} s, total {:.3f} s\n",
                     ph.value("build_s", 0.0),
                     r.value("build", json::object()).value("cached", false) ? " (cached)" : "",
                     ph.value("verify_s", 0.0), ph.value("timing_s", 0.0), ph.value("total_s", 0.0));
  }
  return o.str();
}

}  // namespace mblast
