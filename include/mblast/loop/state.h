// The performance state of a measured candidate (DESIGN.md "Knowledge base": states): its
// cost, the signature retrieval ranks by, and a one-line text for prompts and reports.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "mblast/kb/signature.h"
#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast::loop {

struct Measured {
  bool correct = false;
  std::string failure_kind;  // "" when correct
  std::string reason;        // one line when not correct
  double cost = 0;           // median time (unit "us") or instruction count (unit "instructions")
  double spread_pct = 0;
  double p25 = 0, p75 = 0;  // the middle half of the samples (noise band)
  std::string unit;
  bool deterministic = false;  // instruction counts: the same candidate always costs the same
  std::optional<double> bandwidth_fraction, compute_fraction, vector_fraction;
  nlohmann::json eval;  // the whole evaluate() result
};

// Reads the figures the loop uses out of an evaluate() result.
Measured measured_from_eval(const nlohmann::json& eval);

// The state signature of a measured candidate of `problem` on `target`.
kb::StateSignature signature_of(const Problem& problem, const Target& target, const Measured& m);

// "softmax on pocl-cpu: 5.56 ms (spread 3.1%); 5.2% of peak bandwidth, 6.9% of peak FP32; latency-bound"
std::string describe_state(const Problem& problem, const Target& target, const Measured& m,
                           const kb::StateSignature& s);

// "5.56 ms", "1.72 M instructions".
std::string format_cost(double cost, const std::string& unit);

// Is `after` faster than `before` beyond measurement noise? Deterministic costs: strictly
// lower. Timed costs: the median is lower and the middle halves of the samples do not overlap.
bool clearly_faster(const Measured& after, const Measured& before);

}  // namespace mblast::loop
