// `mblast bench SUITE... --target T`: a suite of KernelBench-format files measured end to end
// on one target. Each file is imported (cached in the work folder by content and size), PyTorch
// eager and torch.compile are re-measured on the target's device, and the problem's candidate
// is verified and timed by evaluate(); the rows are summarised as the field does (geometric-mean
// speedup over correct problems, fast_p) and can be compared with a previous run for CI
// (docs/bench.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/error.h"
#include "mblast/measure/evaluate.h"
#include "mblast/problem.h"
#include "mblast/target.h"

namespace CLI {
class App;
}

namespace mblast {

// The candidate chosen for one problem.
struct CandidateChoice {
  std::filesystem::path source;  // one source file implementing include/mblast/abi.h
  std::string origin;            // where it came from, one line for the report ("suite candidates", ...)
  nlohmann::json details;        // optional facts the provider wants kept in the row (null: none)
  // Optional: an evaluate() result of this very file, with the run's evaluation options, made in
  // this run (an optimize run's last evaluation of its result). The row uses it instead of
  // evaluating the file once more. Null: the row evaluates the file.
  nlohmann::json measured;
};

// Chooses the candidate of one problem, after its import. `problem.provenance["source"]` is the
// suite file this run read; `level` is the name of the folder holding it ("level1"), `stem` its
// file name without ".py". Returns nullopt when the problem has no candidate: the row says
// "no candidate" and still counts in the totals. Throwing UserError fails only this problem's
// row (status "candidate_error", the message as its reason); any other exception aborts the run.
// Called on the calling thread, once per problem, in suite order.
// A provider may throw this instead of returning nullopt to say why there is no candidate (the
// builtin policy has no generator for the problem): the row is "no_candidate" with that reason.
class NoCandidate : public UserError {
 public:
  using UserError::UserError;
};
// A provider that ran `mblast optimize` throws this when that run failed (its actor failed, or its
// target went away): the row is "error" with failure_kind "optimize_failed", never the start's
// figures, and `mblast bench` exits 1.
class OptimizeFailed : public UserError {
 public:
  using UserError::UserError;
};

using CandidateProvider = std::function<std::optional<CandidateChoice>(
    const Problem& problem, const Target& target, const std::string& level, const std::string& stem)>;

// The file name ending of a backend's candidates: ".cuda.cu", ".opencl.cpp", ".rvv.c"; "" for
// another backend.
std::string candidate_extension(const std::string& backend);

// Candidates from files: DIR/<level>/<stem><ext>, else DIR/<stem><ext>, with <ext> from the
// target's backend. With an empty `dir`, DIR is the `candidates` folder beside the level folder
// of each suite file (benchmarks/suite/level1/x.py -> benchmarks/suite/candidates/level1/x<ext>).
CandidateProvider file_candidate_provider(const std::filesystem::path& dir);

struct BenchOptions {
  std::vector<std::filesystem::path> suites;  // folders (searched recursively) or single .py files
  std::string target;                         // a target name (see `mblast targets`)
  std::string runner;                         // --runner: overrides the target's runner ("" = its own)
  std::string size = "small";                 // MBLAST_BENCH_SIZE while importing and timing PyTorch
  uint64_t max_bytes = 0;                     // > 0: each import's size constants scaled to fit (import --max-bytes)
  std::filesystem::path work;                 // import cache: WORK/imports/<level>/<stem>.<key>/<stem>/
  std::string python;                         // the helper's interpreter; "" = python_for_tools()
  std::string filter;                         // keep problems whose "<level>/<stem>" contains this
  bool measure_baselines = true;              // false: reuse the baselines stored by an earlier run
  bool compile = true;                        // also time torch.compile where this torch has it
  int baseline_warmup = 5, baseline_repeats = 50;
  double baseline_min_seconds = 0.3;  // timed work to collect per PyTorch baseline
  int seeds = 3, inits = 2;           // of each import
  double import_timeout_s = 900, baseline_timeout_s = 900;
  // Free space to keep on the work folder's disk before an import, in GiB; cached imports no run
  // is using go, least recently used first, to keep it. Negative: import_reserve()'s choice.
  double keep_free_gib = -1;
  EvalOptions eval;             // how each candidate is verified and timed
  std::string candidates_note;  // what the provider is, for the results' "meta"
  bool progress = true;         // one line per problem on stderr
  // When set, the results so far ("complete": false) are written here (atomically) after every
  // problem, so a long run that is stopped keeps what it measured.
  std::filesystem::path partial_out;
};

// Runs the suite and returns the results document (docs/bench.md "Results JSON"): "format",
// "meta", "problems" (one row per file, in suite order) and "summary" (per level and overall).
// A failure of one problem (import, baseline, candidate) is that problem's row. Throws
// UserError for bad input (no such suite, no .py files, two files giving one problem name, an
// unknown or unavailable target, an interpreter without torch) and Error when the measurement
// infrastructure fails (the runner cannot start or goes away). Sets MBLAST_BENCH_SIZE while it
// runs and restores it after. Not thread-safe (it changes the environment).
nlohmann::json bench(const BenchOptions& options, const CandidateProvider& provider);

struct BenchArgs {
  std::vector<std::string> suites;
  std::string target, size, candidates, work, out, compare, junit, filter, python, max_bytes, runner;
  double threshold_pct = 10, noise_k = 1, min_seconds = 0.3, keep_free_gib = -1;
  bool table = false, json = false, no_baseline = false, no_compile = false, compare_relative = false;
  bool quiet = false;     // no progress on stderr (neither the live line nor the per-problem lines)
  bool optimize = false;  // run the builtin policy per problem, from the file candidate
  int optimize_evals = 12;
  std::string optimize_from = "candidate";  // or "generated": start from the policy's first kernel
  std::string kb;
  std::string llm;  // with --optimize: the LLM that proposes ("" : the builtin policy)
};

void add_bench(CLI::App& app, BenchArgs& a);
// Exit status: 0 done (and, with --compare, nothing regressed); 1 a regression, or an
// infrastructure error; 2 bad input.
int run_bench(const BenchArgs& a);

}  // namespace mblast
