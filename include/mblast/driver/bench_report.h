// What `mblast bench` makes of its rows: the summary the field uses, the table, the comparison
// with a previous run and JUnit XML (docs/bench.md). Pure functions of the results document;
// nothing here measures or touches files.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mblast {

// The speedup thresholds p of fast_p that the summary reports.
inline constexpr double kFastP[] = {0.0, 1.0, 1.5};

// Per level and overall: counts by status, geometric-mean speedup over correct problems vs eager
// and vs torch.compile, torch.compile's own speedup over eager, fast_p (KernelBench's definition:
// correct and speedup > p, over ALL problems) and the median fraction of peak.
// Returns {"levels": {<level>: group}, "overall": group}.
nlohmann::json summarize_bench(const nlohmann::json& rows);

// The readable table of a results document: one line per problem (the reason under a failed
// one), then the summary per level and overall.
std::string format_bench_table(const nlohmann::json& results);

// How --compare decides that a problem regressed.
struct CompareRule {
  double threshold_pct = 10;  // never flag a slowdown of this much or less
  double noise_k = 1;         // ... nor one within k x the combined spread of the two medians
  // Compare each problem's time relative to the run: divide every now/before ratio by the median
  // ratio over the problems correct in both (the machine's speed, or its load, in this run), so a
  // machine that is uniformly slower or busier flags nothing and one kernel that slowed against the
  // others still does. A change that slows every kernel alike is not seen in this mode.
  bool relative = false;
};

// The fewest problems with comparable times from which --compare-relative estimates the run's
// speed factor; with fewer, times are compared as measured.
inline constexpr int kMinProblemsForRelative = 5;

// Compares `current` with `previous` (both results documents) problem by problem, keyed by
// "<level>/<name>". A problem regressed when it was correct and is not any more, or when both
// runs are correct and its median grew by more than
// max(threshold_pct, noise_k * sqrt(spread_prev^2 + spread_now^2)) percent. Problems of
// `previous` that do not contain `filter` are ignored; new and missing problems are listed, not
// failures. Throws UserError when `previous` is not a bench result or was measured on another
// target or size. Returns {"rule", "previous", "problems": [...], "new", "missing", "counts",
// "regressions"}, and with rule.relative {"speed_factor": {"value", "problems", "applied", "text"}}.
nlohmann::json compare_bench(const nlohmann::json& current, const nlohmann::json& previous, const CompareRule& rule,
                             const std::string& filter = "");

// The readable comparison report.
std::string format_bench_comparison(const nlohmann::json& comparison);

// JUnit XML: one <testsuite> per level, one <testcase> per problem. Without a comparison a
// problem that is not correct is a <failure> (no candidate: <skipped>); with one, only a
// regression is a <failure>, and a problem incorrect in both runs, new and incorrect, or missing
// from this run is <skipped> with the reason.
std::string bench_junit_xml(const nlohmann::json& results, const nlohmann::json* comparison);

// Text made safe for XML character data and attribute values: & < > " ' escaped, invalid UTF-8
// and characters XML 1.0 forbids (controls other than tab, LF, CR) replaced by U+FFFD.
std::string xml_escape(std::string_view text);

}  // namespace mblast
