// The figures behind `mblast report`'s plots, computed from the inputs: fast_p as p grows, each
// kernel's place on the roofline and the target's peaks, the best cost against evaluations of a run,
// and whether a run started from a cold or a warm knowledge base. Pure functions; no drawing.
#pragma once

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/driver/report_inputs.h"

namespace mblast::report {

// KernelBench's fast_p: the problems that are correct and faster than p x the baseline (speedup > p,
// strictly) over ALL problems; a problem without a speedup (incorrect, no candidate, no baseline)
// stays in the denominator. 0 for no problems.
double fast_p(const std::vector<std::optional<double>>& speedups, double p);

// fast_p as p grows from 0 to p_max, exactly: a step function that falls just after each speedup.
// Returns (p, value) pairs, the value holding from that p to the next pair's: (0, fast_p(0)), then
// (s, fast_p(s)) for each distinct speedup s < p_max in increasing order, and (p_max, fast_p(p_max)).
std::vector<std::pair<double, double>> fast_p_curve(const std::vector<std::optional<double>>& speedups, double p_max);

// A target's peaks as the results state them or imply them (bytes/s, FLOP/s); NaN where unknown.
struct Peaks {
  double bandwidth = NAN, flops = NAN;
  int bandwidth_from = 0, flops_from = 0;  // how many measurements each figure is the median of
};

// The rate a fraction of peak is of: achieved / fraction (a result's fraction is achieved / peak).
// NaN when either is missing, not finite or <= 0.
double peak_from(double achieved, double fraction);

// The roofline: attainable FLOP/s at an intensity of `flops_per_byte`, min(peak FLOP/s,
// intensity x peak bandwidth); NaN when a peak it needs is unknown.
double roof(const Peaks& peaks, double flops_per_byte);

// One measured kernel: a bench row, a run's start or best, an optimize-model group.
struct KernelPoint {
  std::string target, source, name, role;  // role: "bench", "run start", "run best", "model group"
  double flops = 0, bytes = 0;             // counted by the problem
  double seconds = NAN;                    // the median time; NaN for instruction counts
  double bandwidth_fraction = NAN, compute_fraction = NAN;
  double peak_bandwidth = NAN, peak_flops = NAN;  // stated by the result, else derived from the fractions
  double fraction_of_peak = NAN;
  double intensity() const { return bytes > 0 ? flops / bytes : NAN; }
  double flops_per_s() const { return seconds > 0 ? flops / seconds : NAN; }
  double bytes_per_s() const { return seconds > 0 ? bytes / seconds : NAN; }
};

// The correct, timed kernels of an input (a run's start and best; a model's groups, placed by their
// time alone: plan.json keeps no per-group fractions).
std::vector<KernelPoint> kernel_points(const ReportInput& in);

// Each target's peaks: the median over the points of the peaks they state or imply.
std::map<std::string, Peaks> peaks_by_target(const std::vector<KernelPoint>& points);

// A run's best correct cost after each evaluation (the start is evaluation 1): nothing before the
// first correct one. From events.jsonl's "start" and "candidate" lines in order.
struct BestSoFar {
  int evaluation = 0;
  double cost = NAN;
  bool improved = false;  // this evaluation set the best
  std::string description;
};
std::vector<BestSoFar> best_so_far(const std::vector<nlohmann::json>& events);

// The unit of a run's costs ("us", "instructions", ...), from its events; "" when none was measured.
std::string run_unit(const ReportInput& run);

// Whether a run began from a cold or a warm knowledge base, with the evidence: warm when the actions
// it used had been tried before (report.json's knowledge.used), cold when none had, unknown when the
// run recorded no knowledge used. Returns {"cold" | "warm" | "unknown", one line of evidence}.
std::pair<std::string, std::string> kb_warmth(const ReportInput& run);

}  // namespace mblast::report
