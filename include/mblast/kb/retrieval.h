// What retrieval returns: the nearest known states for a measured state, and the actions ranked
// for it with their statistics, constraints and best example candidates.
// The method is documented in docs/knowledge-base.md "Retrieval"; every knob is here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mblast/kb/records.h"
#include "mblast/kb/signature.h"

namespace mblast::kb {

struct RetrievalOptions {
  int k = 32;                            // nearest states whose experiences count as evidence
  double temperature = 1.0;              // similarity = exp(-distance / temperature)
  double transfer_discount = 0.5;        // evidence from another target of the same backend
  double cross_backend_discount = 0.25;  // further factor when the backend differs as well
  bool same_backend_only = false;        // ignore states of other backends entirely
  double prior_strength = 2.0;           // pseudo-tries the prior is worth
  double default_prior = 0.02;           // ln-speedup prior of an action without one (learned ones)
  // The prior is scaled by how well the action's tags (applies_to) fit the state; untagged
  // actions and unknown state fields keep factor 1.
  double op_group_factor = 0.6;             // tags name another op class of the same group
  double op_mismatch_factor = 0.15;         // tags name only op classes of other groups
  double bottleneck_mismatch_factor = 0.4;  // tags name other bottlenecks (balanced: halfway)
  double arch_mismatch_factor = 0.3;        // tags name arch prefixes, none of them the state's
  double failure_log_speedup = -0.693;      // a failed try counts as halving the speed (ln 0.5)
  double demote_penalty = 0.5;              // subtracted from the score per matching 'demote' constraint
  int exclude_after_failures = 3;           // learned build failures on this target, none correct -> excluded
  double exploration = 0.0;                 // + exploration / sqrt(prior_strength + evidence weight)
  int limit = 20;                           // actions returned (0: all)
  int examples = 3;                         // best example candidates per action
  bool include_excluded = false;            // return excluded actions too (marked)
  std::string text;                         // words that must all appear in the action's text (any case)
  DistanceWeights weights;
};

struct NearestState {
  std::string id;
  StateSignature signature;
  std::string text;  // current text (latest version)
  double distance = 0;
  double weight = 0;  // similarity x transfer discount: how much its experiences count
  bool same_target = false;
  int experiences = 0;
};

struct ConstraintHit {
  std::string id, text, effect;  // effect as applied: demote | exclude
  std::string provenance;        // seed | learned
  int evidence = 0;              // experiences behind a learned constraint
};

struct ExampleCandidate {
  std::string experience_id, candidate_id, target;
  double speedup = 0;
  bool same_target = false;
};

struct ClusterStats {  // policy_stats of the query's cluster on the query's target family
  int tries = 0, correct = 0, wins = 0;
  double mean_log_speedup = 0;  // over correct tries
  std::optional<double> best_speedup;
};

struct RankedAction {
  std::string id, title, summary, when_helps, when_hurts, source;
  std::vector<std::string> backends;
  std::string provenance;                // seed | learned
  double score = 0;                      // what the ranking sorts by
  double prior_log_speedup = 0;          // after tag adjustment
  double mean_log_speedup = 0;           // posterior mean (prior + weighted evidence)
  double evidence_weight = 0;            // sum of evidence weights
  int tries = 0, correct = 0, wins = 0;  // raw counts among the neighbours' experiences
  int same_target_tries = 0, transferred_tries = 0;
  std::vector<ConstraintHit> constraints;
  bool excluded = false;
  std::string excluded_reason;
  std::vector<ExampleCandidate> examples;
  ClusterStats cluster_stats;

  double expected_speedup() const;  // exp(mean_log_speedup)
};

}  // namespace mblast::kb
