// `mblast bench`: the command line around bench() (bench_run.cpp) and the reports
// (bench_report.cpp): options, the results file, --compare and --junit.
#include "mblast/driver/bench_command.h"
#include "mblast/driver/optimize_command.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "mblast/driver/bench_report.h"
#include "mblast/driver/import_command.h"
#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/paths.h"
#include "mblast/target.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_results(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot read the previous results");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("kind", "") != "mblast-bench")
    throw UserError(path + ": not an `mblast bench` results file");
  return j;
}

std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n"; }

}  // namespace

void add_bench(CLI::App& app, BenchArgs& a) {
  auto* c = app.add_subcommand("bench",
                               "Benchmark a suite of KernelBench problems on a target: correctness, speedups, fast_p");
  c->footer(
      "Examples:\n"
      "  mblast bench benchmarks/suite --target pocl-cpu --size small --out results.json\n"
      "  mblast bench benchmarks/suite/level1 --target h200 --size full --compare main.json --junit bench.xml\n"
      "Every .py file (folders searched recursively; the folder holding a file names its level) is\n"
      "imported once into the work folder (cached by content and size), PyTorch eager and\n"
      "torch.compile are timed on the target's device in this run, and the problem's candidate,\n"
      "<candidates>/<level>/<stem>.<backend ext> (default: the suite's candidates/ folder), is\n"
      "verified and timed like `mblast eval`. A problem that fails (import, baseline, build) is a\n"
      "row with its reason; the run goes on. Summary: geomean speedup over correct problems, fast_p\n"
      "(share of ALL problems correct and faster than p x the baseline). See docs/bench.md.\n"
      "Exit status: 0 done (with --compare: nothing regressed); 1 a regression or an\n"
      "infrastructure error; 2 bad input.");
  c->add_option("suite", a.suites, "Folders of KernelBench .py files, or single files")->required();
  c->add_option("-t,--target", a.target, "Target name (see `mblast targets`)")->required();
  c->add_option("--runner", a.runner, kRunnerOptionHelp);
  c->add_option("--size", a.size,
                "MBLAST_BENCH_SIZE for the suite files: small or full (default: $MBLAST_BENCH_SIZE, else small)")
      ->check(CLI::IsMember({"small", "full"}));
  c->add_option("--max-bytes", a.max_bytes,
                "Import each file with its size constants scaled down until one seed's inputs, parameters and "
                "outputs fit in N bytes (64M, 1G; as `mblast import kernelbench --max-bytes`)");
  c->add_option("--candidates", a.candidates,
                "Folder of candidates: <level>/<stem><ext> or <stem><ext>, ext .cuda.cu | .opencl.cpp | .rvv.c");
  c->add_option("--work", a.work,
                "Work folder holding the import cache (default: <cache>/bench, e.g. ~/.cache/mblast/bench)");
  c->add_option("--keep-free", a.keep_free_gib,
                "GiB to keep free on the work folder's disk before each import: cached imports no run is using are "
                "removed, least recently used first (default: twice the largest cached import, at least 1 GiB and 5 % "
                "of the disk)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("-o,--out", a.out, "Results JSON (default: <work>/results.json); written atomically");
  c->add_flag("--table", a.table, "Print the table (the default; with --json it goes to stderr)");
  c->add_flag("--json", a.json, "Print the results JSON on stdout instead of the table");
  c->add_flag("-q,--quiet", a.quiet,
              "No progress on stderr: neither the live line (on a terminal) nor the line per finished problem");
  c->add_option("--compare", a.compare,
                "Previous results JSON: flag problems that became incorrect or slower; exit 1 if any");
  c->add_option("--threshold", a.threshold_pct,
                "With --compare: a slowdown of at most this many percent is never a regression")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--noise-k", a.noise_k, "With --compare: nor one within K x the combined spread of the two medians")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--compare-relative", a.compare_relative,
              "With --compare: judge each problem's time relative to the run (now/before divided by the median ratio "
              "over the problems correct in both), so a machine that is uniformly slower or busier flags nothing; a "
              "change that slows every kernel alike is then not seen");
  c->add_option("--junit", a.junit, "Also write JUnit XML here (one testsuite per level, one testcase per problem)");
  c->add_option("--filter", a.filter, "Only problems whose <level>/<stem> contains this text");
  c->add_flag("--no-baseline", a.no_baseline,
              "Reuse the PyTorch timings stored by an earlier run instead of measuring");
  c->add_flag("--no-compile", a.no_compile, "Do not time torch.compile");
  c->add_option("--min-time", a.min_seconds,
                "Seconds of timing loop per measurement, cache flushes included (candidate and PyTorch alike)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_flag("--optimize", a.optimize,
              "Optimize each problem first (the builtin policy, or --llm; from its candidate, else a generated "
              "kernel) and bench the result; a failed optimize run fails its row and the exit status");
  c->add_option("--optimize-evals", a.optimize_evals, "With --optimize: evaluations per problem")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option(
       "--optimize-from", a.optimize_from,
       "With --optimize: start from the suite's candidate (default), or from the policy's first generated kernel "
       "when it has one (skips evaluating a slow naive kernel; the row's speedup_vs_start is then over that kernel)")
      ->check(CLI::IsMember({"candidate", "generated"}))
      ->capture_default_str();
  c->add_option("--llm", a.llm,
                "With --optimize: an LLM proposes (openai:MODEL, anthropic:MODEL, URL:MODEL; docs/llm.md)");
  c->add_option("--kb", a.kb,
                "With --optimize: the knowledge base (default: $MBLAST_KB, else ~/.local/share/mblast/kb.sqlite)");
  c->add_option(
      "--python", a.python,
      "Python interpreter with torch and safetensors (default: $MBLAST_PYTHON, else mblast's .venv, else python3)");
}

int run_bench(const BenchArgs& a) {
  BenchOptions o;
  for (const auto& s : a.suites) o.suites.emplace_back(s);
  o.target = a.target;
  o.runner = a.runner;
  o.size = a.size;
  if (o.size.empty()) {
    const char* env = std::getenv("MBLAST_BENCH_SIZE");
    o.size = env && *env ? env : "small";
    if (o.size != "small" && o.size != "full")
      throw UserError("MBLAST_BENCH_SIZE is '" + o.size + "'; it must be small or full (or pass --size)");
  }
  if (!a.max_bytes.empty()) o.max_bytes = parse_byte_size(a.max_bytes, "--max-bytes");
  if (!a.candidates.empty() && !fs::is_directory(a.candidates))
    throw UserError(a.candidates + ": --candidates must be a folder");
  o.work = a.work.empty() ? cache_dir() / "bench" : fs::path(a.work);
  const fs::path out = a.out.empty() ? o.work / "results.json" : fs::path(a.out);
  o.python = a.python;
  o.filter = a.filter;
  o.partial_out = out;  // rewritten after every problem; the final document replaces it
  o.progress = !a.quiet;
  o.measure_baselines = !a.no_baseline;
  o.compile = !a.no_compile;
  o.baseline_min_seconds = a.min_seconds;
  o.keep_free_gib = a.keep_free_gib;
  o.eval.min_seconds = a.min_seconds;
  o.eval.quiet = true;
  o.candidates_note =
      a.candidates.empty() ? "the suite's candidates/ folders" : "--candidates " + fs::absolute(a.candidates).string();

  // Read the previous results first: a bad file should not cost a whole suite run.
  json previous;
  if (!a.compare.empty()) {
    previous = read_results(a.compare);
    const std::string pt = previous.value("meta", json::object()).value("target", "");
    const std::string ps = previous.value("meta", json::object()).value("size", "");
    if (pt != o.target) throw UserError(a.compare + " was measured on target " + pt + ", this run is on " + o.target);
    if (ps != o.size) throw UserError(a.compare + " is of size " + ps + ", this run of size " + o.size);
    const json pm = previous.value("meta", json::object()).value("max_bytes", json());
    const uint64_t prev_max = pm.is_number_integer() && pm.get<int64_t>() > 0 ? pm.get<uint64_t>() : 0;
    auto at = [](uint64_t n) {
      return n ? "at --max-bytes " + format_byte_size(n) : std::string("at the files' own sizes");
    };
    if (prev_max != o.max_bytes)
      throw UserError(a.compare + " was imported " + at(prev_max) + ", this run " + at(o.max_bytes));
  }

  if (!a.llm.empty() && !a.optimize) throw UserError("--llm goes with --optimize");
  CandidateProvider provider = file_candidate_provider(a.candidates);
  if (a.optimize) {
    provider = [files = provider, &a, &o](const Problem& p, const Target& t, const std::string& level,
                                          const std::string& stem) -> std::optional<CandidateChoice> {
      std::optional<CandidateChoice> start = files(p, t, level, stem);
      const bool generates = builtin_generates(p, t);
      if (a.optimize_from == "generated" && generates) start.reset();
      // Nothing to start from: the row says so (a problem that gains a generator later is
      // became_correct under --compare, never a regression).
      if (!start && !generates)
        throw NoCandidate("no candidate file and no generator applies: " + builtin_plan_note(p, t));
      loop::OptimizeOptions oo;
      oo.kb_path = a.kb;
      oo.budget.max_evals = a.optimize_evals;
      oo.quiet = true;
      oo.eval = o.eval;  // the row may take the run's last evaluation (CandidateChoice::measured)
      const auto from = start ? std::optional<fs::path>(start->source) : std::nullopt;
      json r = a.llm.empty() ? optimize_with_builtin(p, t, from, oo) : optimize_with_llm(p, t, from, oo, a.llm);
      if (r.value("failed", false))  // its best is only the start: not a result of the policy
        throw OptimizeFailed(fmt::format("the optimize run {} failed: {}", r.value("run", std::string("?")),
                                         r.value("failure", std::string("no reason given"))));
      CandidateChoice c;
      c.source = r["candidate"].get<std::string>();
      c.origin = fmt::format("mblast optimize ({}, {} evaluations, run {}) from {}",
                             r.value("policy", std::string("builtin")), r["evaluations"].get<int>(),
                             r["run"].get<std::string>(), start ? start->origin : std::string("a generated kernel"));
      c.details = {{"optimize_run", r["run"]},
                   {"report", r["report"]["json"]},
                   {"speedup_vs_start", r["speedup"]},
                   {"improved", r["improved"]},
                   {"stop_reason", r["stop_reason"]},
                   {"spend", r.value("spend", json::object())},
                   {"seconds",
                    {{"optimize", r.value("elapsed_s", 0.0)},
                     {"evaluate", r.value("evaluate_s", 0.0)},
                     {"evaluate_split", r.value("evaluate_split", json::object())}}},
                   {"design",
                    {{"family", r.value("best_family", "")},
                     {"params", r.value("best_params", json::object())},
                     {"description", r.value("best_description", "")}}}};
      // The optimize run verified and timed this file last with these options: the row takes
      // that evaluation (its third of the file when the result was confirmed) instead of a fourth.
      if (r.contains("result_eval")) {
        c.measured = r["result_eval"];
        c.details["measured_by"] = "the optimize run's last evaluation of this file";
      }
      return c;
    };
  }
  json results = bench(o, provider);
  json comparison;
  if (!a.compare.empty()) {
    comparison =
        compare_bench(results, previous, CompareRule{a.threshold_pct, a.noise_k, a.compare_relative}, a.filter);
    comparison["previous"]["file"] = fs::absolute(a.compare).string();
    results["comparison"] = comparison;
  }
  write_file_atomically(out, dump(results));
  if (!a.junit.empty())
    write_file_atomically(a.junit, bench_junit_xml(results, comparison.is_null() ? nullptr : &comparison));

  std::string report = format_bench_table(results);
  if (!comparison.is_null()) report += format_bench_comparison(comparison);
  report += "results: " + fs::absolute(out).string() + "\n";
  if (!a.junit.empty()) report += "junit: " + fs::absolute(a.junit).string() + "\n";
  if (a.json) {
    std::cout << dump(results);
    if (a.table) std::cerr << report;
  } else {
    std::cout << report;
  }
  // An optimize run that failed (its LLM unreachable, say) makes the whole bench untrustworthy.
  int failed_runs = 0;
  for (const auto& r : results["problems"])
    if (r.value("failure_kind", json()) == "optimize_failed") ++failed_runs;
  if (failed_runs > 0) std::cerr << fmt::format("{} optimize run(s) failed: see their rows\n", failed_runs);
  return (!comparison.is_null() && comparison.value("regressions", 0) > 0) || failed_runs > 0 ? 1 : 0;
}

}  // namespace mblast
