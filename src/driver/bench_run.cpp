// bench(): the suite run itself — find the files, import each (cached), measure PyTorch, evaluate
// the candidate — one row per problem (docs/bench.md).
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "mblast/driver/baseline_command.h"
#include "mblast/driver/bench_command.h"
#include "mblast/driver/bench_report.h"
#include "mblast/driver/import_cache.h"
#include "mblast/driver/kernelbench_tool.h"
#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/kb/records.h"
#include "mblast/measure/runner_client.h"
#include "mblast/progress.h"
#include "mblast/tensor.h"
#include "mblast/version.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

json read_json(const fs::path& p) {
  std::ifstream in(p);
  json j = in ? json::parse(in, nullptr, false) : json();
  if (!in || j.is_discarded()) throw UserError(p.string() + ": not readable JSON");
  return j;
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  return last;
}

// Sets an environment variable for the lifetime of this object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct SuiteFile {
  fs::path file;
  std::string level, stem, key;  // key: "<level>/<stem>"
};

bool hidden(const std::string& name) { return name.empty() || name[0] == '.' || name[0] == '_'; }

// Every KernelBench file of the suites, in the order given (each folder sorted by path).
std::vector<SuiteFile> discover(const std::vector<fs::path>& suites, const std::string& filter) {
  std::vector<SuiteFile> out;
  std::set<fs::path> seen;
  std::map<std::string, fs::path> by_key;
  auto add = [&](const fs::path& f) {
    const fs::path file = fs::weakly_canonical(fs::absolute(f));
    if (!seen.insert(file).second) return;
    SuiteFile s{file, file.parent_path().filename().string(), file.stem().string(), ""};
    s.key = s.level + "/" + s.stem;
    if (!filter.empty() && s.key.find(filter) == std::string::npos) return;
    if (auto it = by_key.find(s.key); it != by_key.end())
      throw UserError("two files give the problem " + s.key + ": " + it->second.string() + " and " + file.string());
    by_key[s.key] = file;
    out.push_back(std::move(s));
  };
  for (const fs::path& suite : suites) {
    std::error_code ec;
    const auto st = fs::status(suite, ec);
    if (ec || !fs::exists(st)) throw UserError(suite.string() + ": no such file or directory");
    if (fs::is_regular_file(st)) {
      if (suite.extension() != ".py") throw UserError(suite.string() + ": not a KernelBench .py file");
      add(suite);
      continue;
    }
    if (!fs::is_directory(st)) throw UserError(suite.string() + ": neither a file nor a folder");
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(suite, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (it->is_directory()) {
        // candidates/ holds sources, not problems; __pycache__ and dot folders are not the suite;
        // nor is an imported problem (its model.py), as `mblast import sol-execbench` leaves one
        // next to the file it came from.
        if (hidden(name) || name == "candidates" || fs::exists(it->path() / "problem.json"))
          it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && it->path().extension() == ".py" && !hidden(name)) files.push_back(it->path());
    }
    if (ec) throw UserError(suite.string() + ": cannot list: " + ec.message());
    if (files.empty()) throw UserError(suite.string() + ": no KernelBench .py files in it");
    std::sort(files.begin(), files.end());
    for (const auto& f : files) add(f);
  }
  if (out.empty()) throw UserError("no problem matches --filter '" + filter + "'");
  return out;
}

// Everything one run shares.
struct Run {
  const BenchOptions& o;
  fs::path work;  // o.work, absolute
  Target target;
  std::string python, torch_version;
  std::string importer_hash;  // of the helper's sources: a changed importer imports again
  std::string torch_device;   // "cpu" / "cuda", or "" when PyTorch cannot run on this target
  std::string no_torch_why;   // why not, then
  std::string import_device;  // where the reference data is computed
  std::unique_ptr<RunnerClient> client;
  json runner_device;                         // what the runner reported, from the first evaluation
  std::unique_ptr<KernelbenchServer> helper;  // the imports' and baselines' Python process (started on first use)
  std::vector<fs::path> slots;                // every problem's import slot, in the run's order (empty: unreadable)
  size_t row = 0;                             // the problem being measured

  RunnerClient* runner() {
    if (!client) client = std::make_unique<RunnerClient>(target.runner);
    return client.get();
  }
};

// The interpreter's torch version; UserError with the reason when it has no torch/safetensors.
std::string probe_torch(const std::string& python) {
  CommandResult r;
  try {
    r = run_command({python, "-c", "import sys, torch, safetensors; sys.stdout.write('torch=' + torch.__version__)"},
                    300);
  } catch (const Error& e) {
    throw UserError("cannot run " + python + ": " + e.what() + " (use --python or MBLAST_PYTHON)");
  }
  const std::string line = last_line(r.output);
  if (!r.ok() || line.rfind("torch=", 0) != 0)
    throw UserError("the interpreter " + python + " cannot import torch and safetensors (" +
                    (line.empty() ? "no output" : line) + "); use --python or MBLAST_PYTHON");
  return line.substr(6);
}

// A digest of tools/mblast_kernelbench.py and tools/kernelbench/ (sources and templates).
std::string importer_digest() {
  const fs::path tool = kernelbench_tool_path();
  std::vector<fs::path> files = {tool};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(tool.parent_path() / "kernelbench", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file() && it->path().string().find("__pycache__") == std::string::npos)
      files.push_back(it->path());
  std::sort(files.begin() + 1, files.end());
  std::string all;
  for (const auto& f : files) all += f.filename().string() + "=" + content_hash_hex(read_file(f)) + "\n";
  return content_hash_hex(all);
}

struct Imported {
  fs::path dir;
  bool cached = false;
  double seconds = 0;
  std::string failure;  // empty: imported
  json helper;          // the helper's summary of this import (its --json-out "files"[0]), when it ran
  SlotLock lock;        // shared while the row uses the slot: no other run removes it meanwhile
  Eviction evicted;     // cached imports removed to make room for this one
};

// Runs the helper command ARGS, which writes the JSON file OUT: in the bench's one helper
// process (torch imported once) where it answers with a status SERVED accepts and OUT exists;
// else as a command alone, whose result is returned (nullopt: served). UserError when it timed out.
std::optional<CommandResult> run_helper(Run& run, const std::vector<std::string>& args, double timeout_s,
                                        const fs::path& out, bool (*served)(int)) {
  if (KernelbenchServer::enabled()) {
    if (!run.helper) run.helper = std::make_unique<KernelbenchServer>(run.python);
    const std::optional<int> code = run.helper->run(args, timeout_s);
    if (code && served(*code) && fs::exists(out)) return std::nullopt;
  }
  std::error_code ec;
  fs::remove(out, ec);  // a served try's leftover is not this command's
  return run_kernelbench_tool(run.python, args, timeout_s);
}

// One run of the helper's import into SLOT; an empty string when it wrote the problem, else
// the reason. DISK_FULL: whether the helper says the disk was full. ENTRY: the helper's summary
// of the file (phases, settings set back), when it wrote one.
std::string run_import(Run& run, const SuiteFile& s, const fs::path& slot, bool* disk_full, json* entry) {
  *disk_full = false;  // a retry that times out is a time-out, whatever the first try said
  const fs::path dir = slot / s.stem;
  const fs::path out = kernelbench_json_path("bench-import");
  std::error_code ec;
  fs::remove_all(dir, ec);  // an interrupted or failed import: start again
  const std::vector<std::string> args = {"import",     s.file.string(),
                                         "--out",      slot.string(),
                                         "--seeds",    std::to_string(run.o.seeds),
                                         "--inits",    std::to_string(run.o.inits),
                                         "--device",   run.import_device,
                                         "--json-out", out.string()};
  std::vector<std::string> argv = args;
  if (run.o.max_bytes > 0) argv.insert(argv.end(), {"--max-bytes", std::to_string(run.o.max_bytes)});
  std::string failure;
  try {
    // Exit 1: this file failed, and the summary says why.
    const std::optional<CommandResult> alone =
        run_helper(run, argv, run.o.import_timeout_s, out, [](int c) { return c <= 1; });
    json file;  // the summary's entry for this file
    try {
      const json summary = read_json(out);
      if (summary.contains("files") && summary["files"].is_array() && summary["files"].size() == 1)
        file = summary["files"][0];
    } catch (const Error&) {  // none: the helper failed before writing it; its output says why
    }
    if (file.is_object()) *entry = file;
    const bool ok = file.value("ok", false) && (!alone || alone->ok()) && fs::exists(dir / "problem.json");
    if (!ok) {
      failure = file.value("reason", "");
      // Else the helper's line about this file ("mblast_kernelbench: FILE: reason"), not its
      // closing "imported 0, failed 1"; the row names the file already.
      const std::string tag = "mblast_kernelbench: " + s.file.string() + ": ";
      std::istringstream lines(alone ? alone->output : "");
      for (std::string line; failure.empty() && std::getline(lines, line);)
        if (line.rfind(tag, 0) == 0) failure = line.substr(tag.size());
      if (failure.empty()) failure = alone ? kernelbench_tool_failure(*alone) : "the import wrote no summary";
    }
    *disk_full = says_disk_full(failure) || (alone && says_disk_full(alone->output));
  } catch (const UserError& e) {  // the helper timed out
    failure = e.what();
  }
  fs::remove(out, ec);
  if (!failure.empty()) fs::remove_all(dir, ec);  // no half-written problem stays in the cache
  return failure;
}

// WORK/imports/<level>/<stem>.<key>/ for a file with this text: key digests everything the
// imported problem depends on.
fs::path import_slot(const Run& run, const SuiteFile& s, const std::string& text) {
  const std::string key = content_hash_hex(
      fmt::format("mblast bench import 1\n{}\nsize={}\ndevice={}\nseeds={}\ninits={}\ntorch={}\n"
                  "importer={}\n{}",
                  content_hash_hex(text), run.o.size, run.import_device, run.o.seeds, run.o.inits, run.torch_version,
                  run.importer_hash, run.o.max_bytes ? fmt::format("max_bytes={}\n", run.o.max_bytes) : ""));
  return run.work / "imports" / s.level / (s.stem + "." + key.substr(0, 16));
}

// How soon this run needs the slot named `<level>/<slot>` again, for make_room(): 1 for the next
// problem, 0 for none of the rest.
std::size_t next_use(const Run& run, const fs::path& slot) {
  const fs::path name = slot.parent_path().filename() / slot.filename();
  for (std::size_t k = run.row + 1; k < run.slots.size(); ++k)
    if (run.slots[k].parent_path().filename() / run.slots[k].filename() == name) return k - run.row;
  return 0;
}

// Imports one file into its slot (import_slot()); an earlier complete import there is used as it is.
Imported import_file(Run& run, const SuiteFile& s) {
  Imported im;
  const auto t0 = Clock::now();
  std::string text;
  try {
    text = read_file(s.file);
  } catch (const UserError& e) {
    im.failure = e.what();
    return im;
  }
  const fs::path root = run.work / "imports";
  const fs::path slot = import_slot(run, s, text);
  im.dir = slot / s.stem;
  im.lock = SlotLock::exclusive(slot);
  im.lock.mark_used();
  if (fs::exists(im.dir / "problem.json") && fs::exists(im.dir / "data" / "MANIFEST.json")) {
    im.cached = true;
    im.lock.share();
    return im;
  }
  // Room first: imports no run is using go (those this run will not measure again, then those it
  // measures latest), so that the disk keeps --keep-free (default: import_reserve()) free; a
  // full-size suite's imports fill tens of GiB.
  auto add = [&im](const Eviction& e) {
    im.evicted.removed += e.removed;
    im.evicted.bytes += e.bytes;
  };
  const double gib = 1073741824.0;
  const std::uintmax_t keep = run.o.keep_free_gib < 0 ? import_reserve(root)
                              : run.o.keep_free_gib * gib >= 1.8e19
                                  ? std::numeric_limits<std::uintmax_t>::max()
                                  : static_cast<std::uintmax_t>(run.o.keep_free_gib * gib);
  const NextUse soon = [&run](const fs::path& d) { return next_use(run, d); };
  add(make_room(root, slot, keep, {}, soon));
  bool disk_full = false;
  im.failure = run_import(run, s, slot, &disk_full, &im.helper);
  if (!im.failure.empty() && disk_full) {
    // Still too little: every import no run is using goes, and the import runs once more.
    add(make_room(root, slot, std::numeric_limits<std::uintmax_t>::max(), {}, soon));
    im.failure = run_import(run, s, slot, &disk_full, &im.helper);
    if (!im.failure.empty() && disk_full) {
      std::error_code ec;
      const auto sp = fs::space(root, ec);
      im.failure = fmt::format(
          "no space left on the disk of {} for this import ({:.1f} GiB free after removing {} cached "
          "imports that no run was using); use --work on a larger disk",
          root.string(), ec ? 0.0 : sp.available / gib, im.evicted.removed);
    }
  }
  im.lock.share();
  im.seconds = since(t0);
  return im;
}

// One PyTorch timing (eager or compile) as a row shows it.
json timing_entry(const json& s) {
  if (!s.is_object()) return {{"unavailable", "not measured"}};
  if (s.contains("unavailable")) return {{"unavailable", s["unavailable"]}};
  if (s.contains("failed")) return {{"failed", s["failed"]}};
  json t = {{"median_us", s.value("median_us", 0.0)},
            {"spread_pct", s.value("spread_pct", 0.0)},
            {"p25_us", s.value("p25_us", 0.0)},
            {"p75_us", s.value("p75_us", 0.0)},
            {"samples", s.value("samples", 0)}};
  if (s.contains("check")) t["within_tolerance"] = s["check"].value("within_tolerance", true);
  if (s.contains("tf32")) t["tf32_off"] = s["tf32"];  // PyTorch's default was outside the tolerance
  if (s.contains("compile_seconds")) t["compile_seconds"] = s["compile_seconds"];
  return t;
}

// PyTorch on the problem, by the runner's rules (the same helper call as `mblast baseline`),
// stored in PROBLEM/baselines.json. Throws UserError with the reason when it fails.
json measure_baseline(Run& run, const Problem& p) {
  const fs::path out = kernelbench_json_path("bench-baseline");
  std::vector<std::string> args = {"baseline",      p.dir.string(),
                                   "--device",      run.torch_device,
                                   "--warmup",      std::to_string(run.o.baseline_warmup),
                                   "--repeats",     std::to_string(run.o.baseline_repeats),
                                   "--min-seconds", fmt::format("{}", run.o.baseline_min_seconds),
                                   "--json-out",    out.string()};
  if (run.o.compile) args.push_back("--compile");
  for (auto& x : baseline_cache_args(run.target)) args.push_back(std::move(x));
  std::error_code ec;
  // Where the served try fails, the command alone says why.
  const std::optional<CommandResult> alone =
      run_helper(run, args, run.o.baseline_timeout_s, out, [](int c) { return c == 0; });
  if (alone && (!alone->ok() || !fs::exists(out))) {
    fs::remove(out, ec);
    std::string why = kernelbench_tool_failure(*alone);
    const std::string prefix = p.dir.string() + ": ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    throw UserError(why);
  }
  json entry;
  try {
    entry = read_json(out);
  } catch (...) {
    fs::remove(out, ec);
    throw;
  }
  fs::remove(out, ec);
  entry["target"] = run.target.name;
  entry["backend"] = run.target.backend;
  entry["torch_device"] = run.torch_device;
  entry["measured_at"] = kb::utc_now_iso();
  entry["python"] = run.python;
  if (p.provenance.contains("sha256")) entry["model_sha256"] = p.provenance["sha256"];
  store_baseline(p.dir.string(), run.target.name, entry);
  return entry;
}

// The eager and compile entries of a row, and where they came from.
void add_baselines(Run& run, const Problem& p, json& row) {
  auto unavailable = [&](const std::string& why) {
    row["eager"] = {{"unavailable", why}};
    row["compile"] = {{"unavailable", why}};
  };
  if (run.torch_device.empty()) return unavailable(run.no_torch_why);
  json entry;
  if (run.o.measure_baselines) {
    try {
      entry = measure_baseline(run, p);
      row["baseline"] = {{"measured", "in this run"}};
      if (entry.contains("phases")) row["baseline"]["helper_phases"] = entry["phases"];
    } catch (const UserError& e) {
      row["eager"] = {{"failed", e.what()}};
      row["compile"] = {{"failed", e.what()}};
      return;
    }
  } else {
    const fs::path file = p.dir / "baselines.json";
    try {
      if (fs::exists(file)) entry = read_json(file).value("baselines", json::object()).value(run.target.name, json());
    } catch (const std::exception& e) {  // unreadable, or not the layout store_baseline writes
      return unavailable(std::string("--no-baseline, and the stored baselines cannot be read: ") + e.what());
    }
    if (!entry.is_object())
      return unavailable("--no-baseline, and no baseline on " + run.target.name + " stored by an earlier run");
    row["baseline"] = {{"measured", "reused (--no-baseline)"}};
  }
  row["baseline"]["measured_at"] = entry.value("measured_at", "");
  row["baseline"]["torch"] = entry.value("torch", "");
  row["baseline"]["device"] = entry.value("device", json::object()).value("name", "");
  // Why eager may be weak here (the reference BLAS, or a BLAS whose threads fight PyTorch's):
  // said with the figures, not only in a log.
  if (entry.value("device", json::object()).contains("blas_note"))
    row["baseline"]["note"] = entry["device"]["blas_note"];
  row["eager"] = timing_entry(entry.value("eager", json()));
  row["compile"] = timing_entry(entry.value("compile", json()));
}

double median_of(const json& t) {
  return t.is_object() && t.contains("median_us") ? t["median_us"].get<double>() : 0.0;
}

// The first line of a build log that reports an error, for the one-line reason.
std::string first_error_line(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.find("error") != std::string::npos) return line.size() > 300 ? line.substr(0, 300) + "..." : line;
  return "";
}

void set_status(json& row, const std::string& status, const json& kind, const std::string& reason) {
  row["status"] = status;
  row["correct"] = status == "correct";
  row["failure_kind"] = kind;
  row["reason"] = reason.empty() ? json() : json(reason);
}

// Verifies and times the candidate the provider chose; fills the row's status and figures.
void add_candidate(Run& run, const Problem& p, const SuiteFile& s, const CandidateProvider& provider, json& row) {
  std::optional<CandidateChoice> choice;
  try {
    choice = provider(p, run.target, s.level, s.stem);
  } catch (const NoCandidate& e) {
    return set_status(row, "no_candidate", "no_candidate", e.what());
  } catch (const OptimizeFailed& e) {
    return set_status(row, "error", "optimize_failed", e.what());
  } catch (const UserError& e) {
    return set_status(row, "candidate_error", "candidate_error", e.what());
  }
  if (!choice) return set_status(row, "no_candidate", "no_candidate", "no candidate");
  row["candidate"] = {{"file", fs::absolute(choice->source).string()}, {"origin", choice->origin}};
  if (!choice->details.is_null()) row["candidate"]["details"] = choice->details;
  json r;
  try {
    row["candidate"]["hash"] = content_hash_hex(read_file(choice->source));
    r = choice->measured.is_object() ? choice->measured
                                     : evaluate(p, run.target, choice->source, run.o.eval, run.runner());
  } catch (const UserError& e) {
    return set_status(row, "candidate_error", "candidate_error", e.what());
  }
  if (run.runner_device.is_null() && r.contains("device")) run.runner_device = r["device"];
  row["candidate"]["build_cached"] = r.value("build", json::object()).value("cached", false);
  row["eval_seconds"] = r.value("phases", json::object()).value("total_s", 0.0);
  // The evaluation's whole split (mblast eval's `phases`: the driver's checks, the worker's own
  // steps), so that a slow row says where its time went.
  if (r.contains("phases") && r["phases"].is_object()) row["eval_phases"] = r["phases"];
  if (r.contains("payload")) row["eval_phases"]["payload"] = r["payload"];  // shared memory or the messages
  if (!r.value("correct", false)) {
    const std::string kind =
        r.value("failure_kind", json("unknown")).is_string() ? r["failure_kind"].get<std::string>() : "unknown";
    std::string reason = r.value("reason", json("")).is_string() ? r["reason"].get<std::string>() : "";
    if (kind == "build_failed") {
      const std::string log = r.value("build", json::object()).value("log", "");
      const std::string first = first_error_line(log);
      if (!first.empty()) reason += ": " + first;
      row["build_log"] = log.size() > 8000 ? log.substr(0, 8000) + "\n[... truncated]" : log;
    }
    // The runner or the target failing is not the candidate being wrong.
    const bool infrastructure = kind == "runner_error" || kind == "unavailable";
    return set_status(row, infrastructure ? "error" : "incorrect", kind, reason);
  }
  set_status(row, "correct", nullptr, "");
  const json& t = r["time"];
  row["time"] = {
      {"median", t.value("median", 0.0)}, {"unit", t.value("unit", "us")}, {"spread_pct", t.value("spread_pct", 0.0)},
      {"p25", t.value("p25", 0.0)},       {"p75", t.value("p75", 0.0)},    {"samples", t.value("samples", 0)},
      {"method", t.value("method", "")}};
  const json& pk = r.value("peak", json::object());
  // The peaks the fractions are of, so a reader (mblast report's roofline) need not derive them.
  for (const char* k : {"bandwidth_fraction", "compute_fraction", "fraction_of_peak", "bound", "note",
                        "peak_bandwidth_bytes_per_s", "peak_fp32_flops_per_s"})
    if (pk.contains(k)) row[k] = pk[k];
}

// Speedups of the candidate over PyTorch, when both are times of a correct result.
void add_speedups(json& row) {
  row["speedup_vs_eager"] = nullptr;
  row["speedup_vs_compile"] = nullptr;
  if (!row.contains("sol_time_us")) row["sol_time_us"] = nullptr;
  row["fraction_of_sol"] = nullptr;  // of the problem's speed-of-light time, when it has one
  const double eager = median_of(row["eager"]), compile = median_of(row["compile"]);
  row["compile_speedup_vs_eager"] = eager > 0 && compile > 0 ? json(eager / compile) : json();
  if (!row.value("correct", false) || !row["time"].is_object() || row["time"].value("unit", "") != "us") return;
  const double t = row["time"].value("median", 0.0);
  if (t <= 0) return;
  if (eager > 0) row["speedup_vs_eager"] = eager / t;
  if (compile > 0) row["speedup_vs_compile"] = compile / t;
  if (row.value("sol_time_us", json()).is_number()) row["fraction_of_sol"] = row["sol_time_us"].get<double>() / t;
}

std::string short_result(const json& row) {
  const std::string status = row.value("status", "");
  if (status != "correct") {
    std::string reason = row.value("reason", json("")).is_string() ? row["reason"].get<std::string>() : "";
    if (reason.size() > 100) reason = reason.substr(0, 100) + "...";
    return status + (reason.empty() || status == "no_candidate" ? "" : ": " + reason);
  }
  std::string s = fmt::format("correct, {:.3g} {}", row["time"].value("median", 0.0), row["time"].value("unit", ""));
  if (row["speedup_vs_eager"].is_number())
    s += fmt::format(", {:.2f}x vs eager", row["speedup_vs_eager"].get<double>());
  if (row["speedup_vs_compile"].is_number())
    s += fmt::format(", {:.2f}x vs torch.compile", row["speedup_vs_compile"].get<double>());
  if (row.value("fraction_of_sol", json()).is_number())
    s += fmt::format(", {:.3g}% of SOL", 100 * row["fraction_of_sol"].get<double>());
  return s;
}

// One problem's row: import, baselines, candidate. Its failures are in the row.
json measure_problem(Run& run, const SuiteFile& s, const CandidateProvider& provider) {
  json row = {{"level", s.level},           {"name", s.stem},       {"key", s.key},
              {"file", s.file.string()},    {"candidate", nullptr}, {"time", nullptr},
              {"fraction_of_peak", nullptr}};
  Progress::phase_of_active("import");
  const Imported im = import_file(run, s);
  row["import"] = {{"cached", im.cached}, {"seconds", im.seconds}};
  // where the import went, and the process-wide PyTorch settings its model file changed
  for (const char* k : {"phases", "settings_set_back"})
    if (im.helper.contains(k)) row["import"][k] = im.helper[k];
  if (im.evicted.removed > 0) row["import"]["evicted"] = {{"imports", im.evicted.removed}, {"bytes", im.evicted.bytes}};
  auto import_failed = [&](const std::string& why) {
    row["import"]["failed"] = why;
    set_status(row, "import_failed", "import_failed", why);
    row["eager"] = {{"failed", "not imported"}};
    row["compile"] = {{"failed", "not imported"}};
    return row;
  };
  if (!im.failure.empty()) return import_failed(im.failure);
  row["problem_dir"] = im.dir.string();
  Problem p;
  json pj;
  try {
    p = load_problem(im.dir);
    pj = read_json(im.dir / "problem.json");
  } catch (const UserError& e) {  // the helper wrote something mblast cannot read
    return import_failed(e.what());
  }
  p.provenance["source"] = s.file.string();  // this run's file (the cache may come from a copy)
  row["op_class"] = pj.value("op_class", "");
  row["graph"] = pj.contains("graph") && !pj["graph"].is_null();
  if (!row["graph"].get<bool>() && pj.contains("graph_note")) row["graph_note"] = pj["graph_note"];
  row["flops"] = pj.value("flops", 0.0);
  row["flops_method"] = pj.value("flops_method", "");
  row["bytes"] = pj.value("bytes", 0.0);
  if (pj.contains("scale")) row["scale"] = pj["scale"];  // the sizes it was imported at (--max-bytes)
  // The problem's own speed-of-light time (SOL-ExecBench's), which add_speedups() compares with.
  const json sol = pj.value("speed_of_light", json::object());
  row["sol_time_us"] = sol.contains("time_us") && sol["time_us"].is_number() ? sol["time_us"] : json();
  const auto t_base = Clock::now();
  Progress::phase_of_active("baseline");
  add_baselines(run, p, row);
  const double baselines_s = since(t_base);
  const auto t_cand = Clock::now();
  Progress::phase_of_active("candidate");
  add_candidate(run, p, s, provider, row);
  // Where the row's time went after the import (row["import"]["seconds"]); the candidate's part
  // includes an optimize run when there is one.
  row["phases"] = {{"baselines_s", baselines_s}, {"candidate_s", since(t_cand)}};
  return row;
}

json machine_facts() {
  json m;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) m["hostname"] = host;
  struct utsname u {};
  if (::uname(&u) == 0) {
    m["os"] = std::string(u.sysname) + " " + u.release;
    m["arch"] = u.machine;
  }
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) m["cpu"] = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  m["cpus_online"] = ::sysconf(_SC_NPROCESSORS_ONLN);
  return m;
}

}  // namespace

std::string candidate_extension(const std::string& backend) {
  if (backend == "cuda") return ".cuda.cu";
  if (backend == "opencl") return ".opencl.cpp";
  if (backend == "rvv") return ".rvv.c";
  return "";
}

CandidateProvider file_candidate_provider(const fs::path& dir) {
  return [dir](const Problem& p, const Target& t, const std::string& level,
               const std::string& stem) -> std::optional<CandidateChoice> {
    const std::string ext = candidate_extension(t.backend);
    if (ext.empty()) throw UserError("no candidate file naming for backend '" + t.backend + "'");
    fs::path root = dir;
    if (root.empty()) {
      const std::string source = p.provenance.value("source", "");
      if (source.empty()) return std::nullopt;
      root = fs::path(source).parent_path().parent_path() / "candidates";
    }
    for (const fs::path& f : {root / level / (stem + ext), root / (stem + ext)})
      if (fs::is_regular_file(f))
        return CandidateChoice{f, dir.empty() ? "suite candidates" : "--candidates " + dir.string(), nullptr, nullptr};
    return std::nullopt;
  };
}

json bench(const BenchOptions& o, const CandidateProvider& provider) {
  const auto t_start = Clock::now();
  if (o.size != "small" && o.size != "full") throw UserError("--size must be small or full, not '" + o.size + "'");
  if (o.work.empty()) throw UserError("no work folder given");
  const std::vector<SuiteFile> files = discover(o.suites, o.filter);

  Run run{
      o, fs::absolute(o.work), find_target(o.target, o.runner), "", "", "", "", "", "", nullptr, nullptr, nullptr, {},
      0};
  if (const std::string why = run.target.unreachable_reason(); !why.empty())
    throw UserError("target " + run.target.name + " is unavailable: " + why);
  run.torch_device = baseline_device(run.target, &run.no_torch_why);
  run.import_device = run.torch_device.empty() ? "cpu" : run.torch_device;
  run.python = kernelbench_python(o.python);
  run.torch_version = probe_torch(run.python);
  run.importer_hash = importer_digest();
  ScopedEnv size_env("MBLAST_BENCH_SIZE", o.size);
  fs::create_directories(run.work);

  // Every problem's import slot, so that making room keeps the imports this run needs soonest.
  for (const auto& f : files) {
    try {
      run.slots.push_back(import_slot(run, f, read_file(f.file)));
    } catch (const UserError&) {  // unreadable: its row says so
      run.slots.emplace_back();
    }
  }
  json rows = json::array();
  ProgressOptions po;
  po.enabled = o.progress;
  Progress progress("bench", files.size(), stderr_progress_output(), po);
  for (size_t i = 0; i < files.size(); ++i) {
    const auto t_row = Clock::now();
    run.row = i;
    progress.start(files[i].key, "import");
    json row = measure_problem(run, files[i], provider);
    add_speedups(row);
    row["seconds"] = since(t_row);
    progress.done(fmt::format("[{}/{}] {}: {}", i + 1, files.size(), files[i].key, short_result(row)));
    rows.push_back(std::move(row));
    if (!o.partial_out.empty()) {
      json partial = {{"format", 1},
                      {"kind", "mblast-bench"},
                      {"complete", false},
                      {"meta",
                       {{"target", run.target.name},
                        {"size", o.size},
                        {"max_bytes", o.max_bytes ? json(o.max_bytes) : json()},
                        {"torch", run.torch_version},
                        {"problems_done", rows.size()},
                        {"problems_total", files.size()},
                        {"seconds", since(t_start)}}},
                      {"problems", rows}};
      partial["summary"] = summarize_bench(rows);
      write_file_atomically(o.partial_out, partial.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
    }
  }

  std::vector<std::string> suites;
  for (const auto& s : o.suites) suites.push_back(fs::absolute(s).string());
  json meta = {
      {"mblast_version", kMblastVersion},
      {"target", run.target.name},
      {"backend", run.target.backend},
      {"target_description", run.target.description},
      {"size", o.size},
      {"max_bytes", o.max_bytes ? json(o.max_bytes) : json()},
      {"torch", run.torch_version},
      {"python", run.python},
      {"torch_device", run.torch_device.empty() ? json() : json(run.torch_device)},
      {"runner_device", run.runner_device},
      {"date", kb::utc_now_iso()},
      {"machine", machine_facts()},
      {"suites", suites},
      {"filter", o.filter},
      {"candidates", o.candidates_note},
      {"work", run.work.string()},
      {"baselines", o.measure_baselines ? "measured in this run" : "reused from an earlier run (--no-baseline)"},
      {"compile_requested", o.compile},
      {"timing",
       {{"candidate_min_seconds", o.eval.min_seconds},
        {"candidate_min_repeats", o.eval.min_repeats},
        {"baseline_min_seconds", o.baseline_min_seconds},
        {"baseline_min_repeats", o.baseline_repeats}}},
      {"seconds", since(t_start)}};
  if (run.torch_device.empty()) meta["no_pytorch_baseline"] = run.no_torch_why;
  json results = {{"format", 1}, {"kind", "mblast-bench"}, {"meta", meta}, {"problems", rows}};
  results["summary"] = summarize_bench(rows);
  return results;
}

}  // namespace mblast
