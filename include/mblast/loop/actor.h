// The actor of the loop: proposes candidate rewrites for the current state. Two kinds: an
// LLM (llm_actor.h) and the builtin policy (builtin_actor.h); the loop treats them alike.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/error.h"
#include "mblast/kb/retrieval.h"
#include "mblast/loop/state.h"
#include "mblast/policy/kernel_plan.h"
#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast::kb {
class KnowledgeBase;
}

namespace mblast::loop {

struct Proposal {
  std::string source;                // the candidate file's text
  std::string extension;             // ".opencl.cpp", ".cuda.cu", ".rvv.c"
  std::vector<std::string> actions;  // KB action ids applied, the main one first
  std::string family;                // generator family or "llm"
  nlohmann::json params = nlohmann::json::object();
  std::string description;  // one line
  std::string parent_id;    // content hash of the candidate it rewrites
  std::string model;        // "builtin" or the LLM's model
  std::string prompt_hash;  // the prompt it answered ("" for builtin)
  std::string abi_problem;  // "" or why the code cannot be a candidate (not compiled then)
  bool no_kernel = false;   // the answer held no kernel at all (nothing to evaluate or learn from)
};

// One candidate the loop knows: its source and how it measured.
struct Known {
  std::string id;  // content hash of the source
  std::string source, extension, description, family;
  nlohmann::json params = nlohmann::json::object();
  Measured measured;
  std::string state_id;  // its state in the KB (correct candidates)
  std::string state_text;
};

struct ActorContext {
  const Problem* problem = nullptr;
  const Target* target = nullptr;
  const policy::KernelPlan* plan = nullptr;
  const Known* start = nullptr;
  std::vector<const Known*> beam;               // best first
  std::vector<kb::RankedAction> ranked;         // actions ranked by the KB for the best's state
  std::vector<kb::NearestState> nearest;        // the nearest known states
  std::set<std::string> tried;                  // content hashes already evaluated in this run
  std::vector<std::string> recent_feedback;     // the critic's latest texts, newest last
  const std::vector<Known>* history = nullptr;  // every candidate evaluated in this run, in order
  // Generated variants that won in the nearest known states (other problems and targets
  // included): family, params, the speedup they gave there and how much that state counts.
  struct PastWinner {
    std::string family;
    nlohmann::json params;
    double speedup = 1, weight = 0;
    bool same_problem = false;
  };
  std::vector<PastWinner> past_winners;
  // What earlier runs did from the nearest states: the action taken there and its measured
  // outcome (the memory the LLM's prompt carries).
  struct Recalled {
    std::string state_text, problem, target, action, outcome;
    double weight = 0;
    bool same_problem = false, same_target = false;
  };
  std::vector<Recalled> recalled;
  // The best earlier kernel (correct, nearest the peak) of each of the nearest problems on this
  // backend, heaviest state first.
  struct PastKernel {
    std::string problem, target, source, cost;
    std::string action;  // the action whose experience made it ("" for a start or an unknown one)
    std::optional<double> bandwidth_fraction, compute_fraction;
    double weight = 0;
    bool same_problem = false;
  };
  std::vector<PastKernel> past_kernels;
  int k = 4;  // proposals wanted
  int step = 0;
};

// Thrown by an actor whose budget (LLM calls, tokens, money) is spent: the loop stops there.
class BudgetExhausted : public Error {
 public:
  using Error::Error;
};

// Thrown by an actor that cannot propose at all (every LLM request of a step failed): the loop
// stops there with this reason and still returns its best result.
class ActorUnavailable : public Error {
 public:
  using Error::Error;
};

class Actor {
 public:
  virtual ~Actor() = default;
  virtual std::string name() const = 0;  // "builtin" or "openai:gpt-4o"
  // Up to ctx.k new proposals (fewer when it has no more ideas; none ends the search).
  virtual std::vector<Proposal> propose(const ActorContext& ctx) = 0;
  // A repaired proposal after `failed` did not build (LLM actors); nullopt: no repair.
  virtual std::optional<Proposal> repair(const ActorContext&, const Proposal&, const std::string& /*log*/) {
    return std::nullopt;
  }
  // After the search of a run that did not fail, before its reports are written: what the run
  // taught, in the actor's own words, written to the KB (the LLM's knowledge update). Returns
  // {"text_versions_written": n, "note": "..."}, or {} when the actor has nothing to add.
  virtual nlohmann::json learn(kb::KnowledgeBase&, const Problem&, const Target&,
                               const std::vector<nlohmann::json>& /*events*/) {
    return nlohmann::json::object();
  }
  // What it spent so far: {"calls", "input_tokens", "output_tokens", "usd", "cached"}; {} for none.
  virtual nlohmann::json spend() const { return nlohmann::json::object(); }
};

}  // namespace mblast::loop
