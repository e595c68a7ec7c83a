// Shared by the knowledge-base tests: scratch folders and crafted knowledge.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "mblast/kb/knowledge_base.h"

namespace mblast::kb::testing {

// A fresh folder under the system temp dir, removed on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mblast-kb-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline TargetRecord target(const std::string& name, const std::string& backend, const std::string& arch) {
  TargetRecord t;
  t.name = name;
  t.backend = backend;
  t.arch = arch;
  t.spec = {{"name", name}};
  t.provenance = {"learned", "test"};
  t.created_at = "2025-01-01T00:00:00.000Z";
  return t;
}

inline ActionRecord action(const std::string& id, const std::string& backend, double prior = 0.05) {
  ActionRecord a;
  a.id = id;
  a.title = "title of " + id;
  a.summary = "summary of " + id;
  a.when_helps = "helps";
  a.when_hurts = "hurts";
  a.backends = {backend};
  a.prior_log_speedup = prior;
  a.source = "test";
  a.provenance = {"seed", "test seed"};
  a.created_at = "2025-01-01T00:00:00.000Z";
  return a;
}

inline StateSignature signature(const std::string& backend, const std::string& arch, const std::string& target,
                                const std::string& op, const std::string& bottleneck, double ai, double bw, double cf) {
  StateSignature s;
  s.backend = backend;
  s.arch = arch;
  s.target = target;
  s.op_class = op;
  s.bottleneck = bottleneck;
  s.arithmetic_intensity = ai;
  s.bandwidth_fraction = bw;
  s.compute_fraction = cf;
  s.utilisation = 0.5;
  return s;
}

inline std::string add_state(KnowledgeBase& kb, const StateSignature& s, const std::string& text = "") {
  StateRecord r;
  r.signature = s;
  r.text = text;
  r.provenance = {"learned", "test"};
  return kb.add_state(r);
}

// An experience of `action` in `state` on `target`; a candidate is made from `code` when given.
inline std::string add_experience(KnowledgeBase& kb, const std::string& state, const std::string& action_id,
                                  const std::string& target_name, bool correct, double speedup,
                                  const std::string& failure = "", const std::string& code = "") {
  ExperienceRecord e;
  e.state_id = state;
  e.action_id = action_id;
  e.target = target_name;
  e.correct = correct;
  if (correct) e.speedup = speedup;
  e.failure_kind = failure;
  e.critic_text = "critic on " + action_id;
  e.provenance = {"learned", "test"};
  if (!code.empty()) {
    CandidateRecord c;
    c.backend = "cuda";
    c.source = code;
    c.provenance = {"learned", "test"};
    e.candidate_id = kb.add_candidate(c);
  }
  return kb.add_experience(e);
}

}  // namespace mblast::kb::testing
