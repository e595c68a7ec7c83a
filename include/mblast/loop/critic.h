// The critic: turns one before/after comparison into the textual gradient the KB keeps with
// the experience, and into constraints when an action failed in a way worth remembering.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mblast/kb/records.h"
#include "mblast/loop/actor.h"

namespace mblast::loop {

struct CriticInput {
  const Problem* problem = nullptr;
  const Target* target = nullptr;
  const Known* parent = nullptr;  // what the proposal rewrote (measured, correct)
  const Proposal* proposal = nullptr;
  const Measured* after = nullptr;
  kb::StateSignature before, after_signature;  // after_signature only for correct candidates
};

struct Critique {
  std::string text;                               // the textual gradient
  std::string model;                              // "rules" or the critic LLM's model
  std::vector<kb::ConstraintRecord> constraints;  // beyond the KB's own build-failure rule
};

class Critic {
 public:
  virtual ~Critic() = default;
  virtual Critique critique(const CriticInput& in) = 0;
};

// The rule-based critic: figures only (speedup, speed-of-light fractions, bottleneck moves,
// instruction mix, the failure and its first log line). Deterministic.
class RuleCritic : public Critic {
 public:
  Critique critique(const CriticInput& in) override;
};

// A build log without the per-build temporary folder in its paths ("/.../tmp-123-456/candidate.c:3:
// error" -> "candidate.c:3: error"), so that the same failure reads the same in every run (the
// LLM response cache is keyed by the prompt's content).
std::string scrub_build_paths(const std::string& log);

// The first line of a build log that looks like an error ("error:"), else its first line.
std::string first_error_line(const std::string& log);

}  // namespace mblast::loop
