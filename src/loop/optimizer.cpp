// The AC-TGD loop (include/mblast/loop/optimizer.h).
#include "mblast/loop/optimizer.h"

#include "mblast/candidate_file.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/kb/knowledge_base.h"
#include "mblast/loop/report.h"
#include "mblast/loop/run_store.h"
#include "mblast/measure/runner_client.h"
#include "mblast/progress.h"
#include "mblast/target.h"
#include "mblast/tensor.h"
#include "mblast/version.h"

namespace fs = std::filesystem;

namespace mblast::loop {

namespace {

std::string extension_of(const fs::path& f) {
  std::string name = f.filename().string();
  for (const char* e : {".opencl.cpp", ".cuda.cu", ".rvv.c"})
    if (name.ends_with(e)) return e;
  return f.extension().string();
}

nlohmann::json measured_summary(const Measured& m) {
  nlohmann::json j = {{"correct", m.correct},
                      {"cost", m.cost},
                      {"unit", m.unit},
                      {"spread_pct", m.spread_pct},
                      {"p25", m.p25},
                      {"p75", m.p75},
                      {"deterministic", m.deterministic}};
  if (!m.failure_kind.empty()) j["failure_kind"] = m.failure_kind;
  if (!m.reason.empty()) j["reason"] = m.reason;
  if (m.bandwidth_fraction) j["bandwidth_fraction"] = *m.bandwidth_fraction;
  if (m.compute_fraction) j["compute_fraction"] = *m.compute_fraction;
  if (m.vector_fraction) j["vector_fraction"] = *m.vector_fraction;
  if (m.eval.contains("phases")) j["phases"] = m.eval["phases"];
  return j;
}

Measured measured_from_summary(const nlohmann::json& j) {
  Measured m;
  m.correct = j.value("correct", false);
  m.cost = j.value("cost", 0.0);
  m.unit = j.value("unit", "");
  m.spread_pct = j.value("spread_pct", 0.0);
  m.p25 = j.value("p25", m.cost);
  m.p75 = j.value("p75", m.cost);
  m.deterministic = j.value("deterministic", false);
  m.failure_kind = j.value("failure_kind", "");
  m.reason = j.value("reason", "");
  if (j.contains("bandwidth_fraction")) m.bandwidth_fraction = j["bandwidth_fraction"].get<double>();
  if (j.contains("compute_fraction")) m.compute_fraction = j["compute_fraction"].get<double>();
  if (j.contains("vector_fraction")) m.vector_fraction = j["vector_fraction"].get<double>();
  return m;
}

double sol_of(const Measured& m) { return std::max(m.bandwidth_fraction.value_or(0), m.compute_fraction.value_or(0)); }

// Everything the loop keeps while it runs.
class Loop {
 public:
  Loop(const OptimizeInput& in, Actor& actor, Critic& critic, const OptimizeOptions& o)
      : in_(in),
        actor_(actor),
        critic_(critic),
        o_(o),
        kb_(o.kb_path.empty() ? kb::default_kb_path() : o.kb_path),
        store_(o.resume.empty() ? RunStore::create(o.runs_dir.empty() ? runs_root() : o.runs_dir, initial_meta())
                                : RunStore::open(o.runs_dir.empty() ? runs_root() : o.runs_dir, o.resume)),
        t0_(std::chrono::steady_clock::now()) {
    plan_ = policy::plan_kernel(in_.problem);
    provenance_ = kb::Provenance{"learned", std::string("mblast ") + kMblastVersion + " loop, run " + store_.id()};
  }

  nlohmann::json run() {
    EvalOptions eo = o_.eval;
    eo.quiet = true;
    eval_options_ = eo;
    client_ = std::make_unique<RunnerClient>(eo.runner ? *eo.runner : in_.target.runner);
    // The live line counts evaluations against the budget's; each evaluation's phase comes from evaluate().
    if (!o_.quiet) live_ = std::make_unique<Progress>("optimize", o_.budget.max_evals, stderr_progress_output());
    progress(fmt::format("run {} · {} on {} · actor {} · kb {}", store_.id(), in_.problem.name, in_.target.name,
                         actor_.name(), kb_.file().string()));
    try {
      if (!o_.resume.empty())
        restore();
      else
        start();
      if (!o_.resume.empty()) progress(fmt::format("resumed at step {} with {} evaluations done", step_, evals_));
      std::string stop = search();
      nlohmann::json r = finish(stop);
      live_.reset();  // the line is cleared before the command prints its result
      return r;
    } catch (const std::exception& e) {
      // A wrong start, an unavailable target, a runner or KB failure: the run is failed, on
      // disk too, so that no run stays "running" once this process has given up on it.
      mark_failed(e.what());
      throw;
    }
  }

 private:
  const OptimizeInput& in_;
  Actor& actor_;
  Critic& critic_;
  const OptimizeOptions& o_;
  kb::KnowledgeBase kb_;
  RunStore store_;
  std::chrono::steady_clock::time_point t0_;
  policy::KernelPlan plan_;
  kb::Provenance provenance_;
  EvalOptions eval_options_;
  std::unique_ptr<RunnerClient> client_;
  std::unique_ptr<Progress> live_;  // the live progress line (not with quiet)
  std::string problem_id_;
  std::vector<Known> history_;  // every evaluated candidate, the start first
  std::set<std::string> tried_;
  std::vector<std::string> feedback_;
  std::vector<std::string> learned_;   // experience ids written by this run
  std::set<std::string> constraints_;  // constraint ids this run's experiences are evidence of
  std::string failure_;                // why the run failed ("" : it did not)
  nlohmann::json knowledge_used_ = nlohmann::json::array();
  int step_ = 0, evals_ = 0, steps_without_gain_ = 0;
  double eval_seconds_ = 0;                               // wall time inside evaluate(), for the steps' timing
  nlohmann::json eval_split_ = nlohmann::json::object();  // build_s / verify_s / timing_s summed over evaluations

  nlohmann::json initial_meta() const {
    return {{"problem", in_.problem.name},
            {"problem_dir", fs::absolute(in_.problem.dir).string()},
            {"problem_source", in_.problem_source},
            {"target", in_.target.name},
            {"backend", in_.target.backend},
            {"actor", actor_.name()},
            {"start", fs::absolute(in_.start).string()},
            {"kb", kb::redact_kb_location((o_.kb_path.empty() ? kb::default_kb_path() : o_.kb_path).string())},
            {"options",
             {{"max_evals", o_.budget.max_evals},
              {"max_steps", o_.budget.max_steps},
              {"max_wall_s", o_.budget.max_wall_s},
              {"patience", o_.budget.patience},
              {"sol_fraction", o_.budget.sol_fraction},
              {"samples", o_.samples},
              {"beam", o_.beam},
              {"seed", o_.seed}}},
            {"status", "running"},
            {"pid", static_cast<long>(::getpid())},
            {"host", this_host()},
            {"created_at", kb::utc_now_iso()},
            {"mblast", kMblastVersion}};
  }

  kb::ProblemRecord problem_record() const {
    kb::ProblemRecord p;
    p.name = in_.problem.name;
    p.op_class = in_.problem.op_class;
    p.spec = nlohmann::json::parse(try_read_file(in_.problem.dir / "problem.json").value_or(""), nullptr, false);
    if (p.spec.is_discarded()) p.spec = {{"name", p.name}};
    p.provenance = provenance_;
    return p;
  }

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  void progress(const std::string& line) const {
    if (live_)
      live_->print("mblast: " + line);
    else if (!o_.quiet)
      std::fprintf(stderr, "mblast: %s\n", line.c_str());
  }

  const Known& start_known() const { return history_.front(); }

  void mark_failed(const std::string& why) {
    try {
      store_.append_event(
          {{"type", "stop"}, {"reason", why}, {"failed", true}, {"step", step_}, {"evaluations", evals_}});
      store_.meta()["status"] = "failed";
      store_.meta()["failure"] = why;
      store_.meta()["finished_at"] = kb::utc_now_iso();
      store_.save_meta();
    } catch (const std::exception&) {
      // the runs folder itself failed; the caller reports the first error
    }
  }

  // Failures of the machinery, not of the candidate: the target went away, or the runner did.
  static bool infrastructure_failure(const Measured& m) {
    return !m.correct && (m.failure_kind == "unavailable" || m.failure_kind == "runner_error");
  }

  // Correct candidates, best first (the beam is the first o_.beam of them).
  std::vector<const Known*> ranking() const {
    std::vector<const Known*> r;
    for (const auto& k : history_)
      if (k.measured.correct) r.push_back(&k);
    std::stable_sort(r.begin(), r.end(),
                     [](const Known* a, const Known* b) { return a->measured.cost < b->measured.cost; });
    return r;
  }

  // Where a step's wall time went: the runner (evaluate_s), the LLM (llm_s: requests, retries,
  // waits) and the loop itself (loop_s: retrieval, prompt building, critic rules, KB writes).
  nlohmann::json step_timing(std::chrono::steady_clock::time_point t0, double eval_s0, double llm_s0) {
    const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double eval_s = eval_seconds_ - eval_s0, llm_s = actor_.spend().value("llm_seconds", 0.0) - llm_s0;
    return {{"step_s", step_s}, {"evaluate_s", eval_s}, {"llm_s", llm_s}, {"loop_s", step_s - eval_s - llm_s}};
  }

  Measured evaluate_file(const fs::path& file) {
    const auto t0 = std::chrono::steady_clock::now();
    struct Count {
      double& total;
      std::chrono::steady_clock::time_point t0;
      ~Count() { total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
    } count{eval_seconds_, t0};
    if (live_)  // past the budget: the start and the best timed again (confirm)
      live_->start(evals_ < o_.budget.max_evals ? fmt::format("evaluation {}", evals_ + 1) : std::string("re-timing"));
    try {
      Measured m = measured_from_eval(evaluate(in_.problem, in_.target, file, eval_options_, client_.get()));
      if (m.eval.contains("phases"))
        for (const char* k : {"build_s", "verify_s", "timing_s"})
          eval_split_[k] = eval_split_.value(k, 0.0) + m.eval["phases"].value(k, 0.0);
      return m;
    } catch (const NotSourceError& e) {
      // A candidate the actor wrote that holds no source text (control bytes, say): its failure.
      Measured m;
      m.failure_kind = "build_failed";
      m.reason = e.what();
      return m;
    } catch (const UserError&) {
      throw;
    } catch (const Error& e) {
      // The runner went away: start a fresh one; the candidate gets the failure.
      progress(fmt::format("the runner failed ({}); starting a new one", e.what()));
      client_ = std::make_unique<RunnerClient>(eval_options_.runner ? *eval_options_.runner : in_.target.runner);
      Measured m;
      m.failure_kind = "runner_error";
      m.reason = e.what();
      return m;
    }
  }

  // KB rows for one measured candidate: candidate, run and (correct) state.
  void record_candidate(Known& k, const std::string& model) {
    if (problem_id_.empty()) {
      // The target and the problem enter the KB with the first thing measured on them (an
      // unavailable target, for one, leaves no trace).
      kb_.add_target(kb::target_record(in_.target));
      problem_id_ = kb_.add_problem(problem_record());
    }
    kb::CandidateRecord c;
    c.backend = in_.target.backend;
    c.problem_id = problem_id_;
    c.source = k.source;
    c.provenance = provenance_;
    if (!model.empty()) c.provenance.source += ", " + model;
    k.id = kb_.add_candidate(c);
    kb::RunRecord r;
    r.candidate_id = k.id;
    r.problem_id = problem_id_;
    r.target = in_.target.name;
    r.correct = k.measured.correct;
    r.failure_kind = k.measured.failure_kind;
    if (k.measured.correct && k.measured.unit == "us") r.median_s = k.measured.cost * 1e-6;
    if (k.measured.correct) r.spread_pct = k.measured.spread_pct;
    r.bandwidth_fraction = k.measured.bandwidth_fraction;
    r.compute_fraction = k.measured.compute_fraction;
    if (k.measured.eval.contains("build") && k.measured.eval["build"].is_object())
      r.build_log = k.measured.eval["build"].value("log", "");
    r.result = k.measured.eval.is_object() ? k.measured.eval : nlohmann::json::object();
    // Which generated variant this was, so later runs can start from the parameters that won.
    if (!k.family.empty() && k.family != "start") r.result["variant"] = {{"family", k.family}, {"params", k.params}};
    r.provenance = provenance_;
    k.measured.eval["kb_run"] = kb_.add_run(r);
    if (k.measured.correct) {
      kb::StateRecord s;
      s.signature = signature_of(in_.problem, in_.target, k.measured);
      s.problem_id = problem_id_;
      s.candidate_id = k.id;
      s.run_id = k.measured.eval["kb_run"];
      s.text = describe_state(in_.problem, in_.target, k.measured, s.signature);
      s.provenance = provenance_;
      k.state_id = kb_.add_state(s);
      k.state_text = s.text;
    }
  }

  nlohmann::json known_event(const Known& k, const std::string& type) const {
    return {{"type", type},
            {"step", step_},
            {"id", k.id},
            {"file", store_.candidate_path(k.id, k.extension).string()},
            {"extension", k.extension},
            {"family", k.family},
            {"params", k.params},
            {"description", k.description},
            {"measured", measured_summary(k.measured)},
            {"state_id", k.state_id},
            {"state_text", k.state_text}};
  }

  void start() {
    std::vector<fs::path> files{in_.start};
    files.insert(files.end(), in_.fallback_starts.begin(), in_.fallback_starts.end());
    std::string first_failure;
    for (size_t i = 0; i < files.size(); ++i) {
      Known s;
      s.source = read_file(files[i]);
      s.extension = extension_of(files[i]);
      s.family = "start";
      s.description = "the starting candidate (" + files[i].filename().string() + ")";
      progress("measuring the starting candidate " + files[i].string());
      s.measured = evaluate_file(files[i]);
      // An unavailable target measured nothing: nothing of it goes to the KB.
      if (s.measured.failure_kind == "unavailable")
        throw UserError(fmt::format("target {} is unavailable: {}{}", in_.target.name,
                                    first_error_line(s.measured.reason), unavailable_hint(in_.target)));
      record_candidate(s, "");  // a failed start is knowledge too
      tried_.insert(s.id);
      if (!s.measured.correct) {
        const std::string why =
            fmt::format("the starting candidate {} is not correct on {} ({}): {}", files[i].string(), in_.target.name,
                        s.measured.failure_kind, s.measured.reason);
        if (first_failure.empty()) first_failure = why;
        if (i + 1 < files.size()) {
          progress(why + "; trying the next generated kernel as the start");
          continue;
        }
        if (i == 0) throw UserError(why);
        throw UserError(fmt::format("none of the {} generated starting kernels is correct on {}; the first: {}",
                                    files.size(), in_.target.name, first_failure));
      }
      store_.save_candidate(s.id, s.extension, s.source);
      history_.push_back(s);
      store_.append_event(known_event(history_.back(), "start"));
      progress(fmt::format("start: {}", history_.back().state_text));
      return;
    }
  }

  void restore() {
    for (const auto& e : store_.events()) {
      std::string type = e.value("type", "");
      if (type == "start" || type == "candidate") {
        Known k;
        k.id = e.value("id", "");
        k.extension = e.value("extension", "");
        k.family = e.value("family", "");
        k.params = e.value("params", nlohmann::json::object());
        k.description = e.value("description", "");
        k.state_id = e.value("state_id", "");
        k.state_text = e.value("state_text", "");
        k.measured = measured_from_summary(e.value("measured", nlohmann::json::object()));
        std::error_code ec;
        fs::path f = e.value("file", "");
        k.source = fs::exists(f, ec) ? read_file(f) : "";
        tried_.insert(k.id);
        if (type == "candidate") {
          if (k.measured.failure_kind != "no_kernel") ++evals_;
          if (e.contains("experience_id")) learned_.push_back(e["experience_id"]);
          if (e.contains("critic")) feedback_.push_back(e["critic"]);
        }
        history_.push_back(std::move(k));
      } else if (type == "step") {
        step_ = e.value("step", step_);
        steps_without_gain_ = e.value("steps_without_gain", 0);
      } else if (type == "stop") {
        // A finished run continues: the budgets are counted from where it stopped.
      }
    }
    if (history_.empty() || history_.front().family != "start")
      throw UserError("run " + store_.id() + " has no measured start to resume from");
    kb_.add_target(kb::target_record(in_.target));
    problem_id_ = kb_.add_problem(problem_record());
    store_.meta()["status"] = "running";
    store_.save_meta();
  }

  // The action ids the KB knows, creating a learned action for an id it does not (an LLM's).
  std::string known_action(const Proposal& p) {
    std::string id = p.actions.empty() ? in_.target.backend + ".unnamed-rewrite" : p.actions[0];
    if (kb_.action(id)) return id;
    kb::ActionRecord a;
    a.id = id;
    a.title = p.description.empty() ? id : p.description;
    a.summary = "Learned at run time: " + (p.description.empty() ? id : p.description);
    a.backends = {in_.target.backend};
    a.source = provenance_.source;
    a.provenance = provenance_;
    return kb_.add_action(a);
  }

  // Evaluates one proposal and writes what it taught: KB rows, the event, the feedback.
  void try_proposal(Proposal p, const Known& parent) {
    Known k;
    k.source = p.source;
    k.extension = p.extension.empty() ? parent.extension : p.extension;
    k.family = p.family;
    k.params = p.params;
    k.description = p.description;
    std::string id = content_hash_hex(p.source);
    tried_.insert(id);
    fs::path file = store_.save_candidate(id, k.extension, k.source);
    if (p.no_kernel) {
      // An answer with no kernel in it: nothing was tried, so no action is to blame.
      k.measured.failure_kind = "no_kernel";
      k.measured.reason = p.abi_problem.empty() ? "the answer holds no kernel" : p.abi_problem;
      record_unmeasured(k, p, parent, "the answer held no kernel; nothing was evaluated");
      return;
    }
    if (!p.abi_problem.empty()) {
      k.measured.failure_kind = "abi_error";
      k.measured.reason = p.abi_problem;
    } else {
      k.measured = evaluate_file(file);
    }
    ++evals_;
    if (infrastructure_failure(k.measured)) {
      if (k.measured.failure_kind == "unavailable")
        throw Error(
            fmt::format("target {} became unavailable: {}", in_.target.name, first_error_line(k.measured.reason)));
      // The runner failed, not the candidate: nothing for the KB to learn about the action.
      record_unmeasured(k, p, parent, "the runner failed; this is not the candidate's outcome and is not learned from");
      return;
    }
    record_candidate(k, p.model);
    CriticInput ci;
    ci.problem = &in_.problem;
    ci.target = &in_.target;
    ci.parent = &parent;
    ci.proposal = &p;
    ci.after = &k.measured;
    ci.before = signature_of(in_.problem, in_.target, parent.measured);
    if (k.measured.correct) ci.after_signature = signature_of(in_.problem, in_.target, k.measured);
    Critique c = critic_.critique(ci);
    kb::ExperienceRecord x;
    x.state_id = parent.state_id;
    x.action_id = known_action(p);
    x.problem_id = problem_id_;
    x.target = in_.target.name;
    x.parent_candidate_id = parent.id;
    x.candidate_id = k.id;
    x.run_id = k.measured.eval.value("kb_run", "");
    x.after_state_id = k.state_id;
    x.correct = k.measured.correct;
    x.failure_kind = k.measured.failure_kind;
    if (k.measured.correct) x.speedup = parent.measured.cost / k.measured.cost;
    x.critic_text = c.text;
    x.model = p.model + (c.model.empty() ? "" : "; critic " + c.model);
    x.prompt_hash = p.prompt_hash;
    x.provenance = provenance_;
    std::string exp_id = kb_.add_experience(x);
    learned_.push_back(exp_id);
    note_constraints(exp_id);
    for (auto cons : c.constraints) {
      cons.provenance = provenance_;
      if (cons.action_id.empty()) cons.action_id = x.action_id;
      if (!cons.text.starts_with(cons.action_id)) cons.text = cons.action_id + " " + cons.text;
      if (cons.backend.empty()) cons.backend = in_.target.backend;
      constraints_.insert(kb_.add_constraint(cons, exp_id));
    }
    feedback_.push_back(c.text);
    nlohmann::json e = known_event(k, "candidate");
    e["actions"] = p.actions;
    e["model"] = p.model;
    e["prompt_hash"] = p.prompt_hash;
    e["parent"] = parent.id;
    e["critic"] = c.text;
    e["critic_model"] = c.model;
    e["experience_id"] = exp_id;
    if (k.measured.correct) {
      e["speedup_vs_parent"] = parent.measured.cost / k.measured.cost;
      e["speedup_vs_start"] = start_known().measured.cost / k.measured.cost;
    }
    store_.append_event(e);
    std::string outcome = k.measured.correct
                              ? fmt::format("{:.2f}x vs start ({})", start_known().measured.cost / k.measured.cost,
                                            format_cost(k.measured.cost, k.measured.unit))
                              : fmt::format("{}: {}", k.measured.failure_kind, first_error_line(k.measured.reason));
    const std::string line =
        fmt::format("  [{}] {} -> {}", evals_, p.description.empty() ? p.family : p.description, outcome);
    if (live_)
      live_->done("mblast: " + line);  // one evaluation of the budget done: the live line counts it
    else
      progress(line);
    history_.push_back(std::move(k));
  }

  // Every constraint the experience is evidence of (the KB adds some itself, for build failures).
  void note_constraints(const std::string& experience_id) {
    kb::Statement q(kb_.db(), "SELECT constraint_id FROM constraint_evidence WHERE experience_id = ?1");
    q.bind(1, experience_id);
    while (q.step()) constraints_.insert(q.get_text(0));
  }

  // A proposal with no measured outcome (no kernel in the answer, a runner failure): in the run's
  // events and the actor's feedback, not in the KB.
  void record_unmeasured(Known& k, const Proposal& p, const Known& parent, const std::string& why) {
    k.id = content_hash_hex(p.source);
    const std::string what = p.description.empty() ? p.family : p.description;
    const std::string text = fmt::format("{} [{}]: {}: {}", what, p.actions.empty() ? std::string("?") : p.actions[0],
                                         k.measured.failure_kind, why);
    feedback_.push_back(text);
    nlohmann::json e = known_event(k, "candidate");
    e["actions"] = p.actions;
    e["model"] = p.model;
    e["prompt_hash"] = p.prompt_hash;
    e["parent"] = parent.id;
    e["critic"] = text;
    e["not_learned"] = why;
    store_.append_event(e);
    progress(fmt::format("  [-] {} -> {}: {}", what, k.measured.failure_kind, first_error_line(k.measured.reason)));
    history_.push_back(std::move(k));
  }

  std::string search() {
    const Budget& b = o_.budget;
    while (true) {
      if (evals_ >= b.max_evals) return fmt::format("evaluation budget spent ({} evaluations)", evals_);
      if (step_ >= b.max_steps) return fmt::format("step budget spent ({} steps)", step_);
      if (elapsed() >= b.max_wall_s) return fmt::format("wall-time budget spent ({:.0f} s)", elapsed());
      if (steps_without_gain_ >= b.patience) return fmt::format("no gain in {} steps", steps_without_gain_);
      auto rank = ranking();
      const Known& best = *rank.front();
      double sol = sol_of(best.measured);
      if (!best.measured.deterministic && sol >= b.sol_fraction)
        return fmt::format(
            "reached {:.0f}% of peak{}", 100 * sol,
            sol > 1 ? fmt::format(" (of the problem's counted FLOPs: the kernel does less arithmetic than counted, "
                                  "as FFT and Winograd convolutions do, or the peaks were measured low: "
                                  "`mblast targets --measure-peaks {}` on a quiet machine)",
                                  in_.target.name)
                    : "");

      const auto step_t0 = std::chrono::steady_clock::now();
      const double eval_s0 = eval_seconds_, llm_s0 = actor_.spend().value("llm_seconds", 0.0);
      ActorContext ctx;
      ctx.problem = &in_.problem;
      ctx.target = &in_.target;
      ctx.plan = &plan_;
      ctx.start = &start_known();
      for (size_t i = 0; i < rank.size() && static_cast<int>(i) < std::max(1, o_.beam); ++i)
        ctx.beam.push_back(rank[i]);
      kb::StateSignature sig = signature_of(in_.problem, in_.target, best.measured);
      kb::RetrievalOptions ro;
      ro.limit = 0;
      ctx.ranked = kb_.ranked_actions(sig, ro);
      ctx.nearest = kb_.nearest_states(sig, 8);
      ctx.past_winners = past_winners(ctx.nearest);
      ctx.recalled = recall(ctx.nearest);
      ctx.past_kernels = past_kernels(ctx.nearest, ctx.beam);
      ctx.tried = tried_;
      size_t keep = std::min<size_t>(feedback_.size(), 6);
      ctx.recent_feedback.assign(feedback_.end() - static_cast<long>(keep), feedback_.end());
      ctx.history = &history_;
      ctx.k = std::min(o_.samples, b.max_evals - evals_);
      ctx.step = step_ + 1;

      std::vector<Proposal> proposals;
      if (live_) live_->start(fmt::format("step {}", step_ + 1), "propose");  // the actor (an LLM: minutes)
      try {
        proposals = actor_.propose(ctx);
      } catch (const BudgetExhausted& e) {
        return std::string("actor budget spent: ") + e.what();
      } catch (const ActorUnavailable& e) {
        failure_ = std::string("the actor failed: ") + e.what();
        return failure_;
      }
      if (proposals.empty()) return "the actor has nothing more to propose";
      ++step_;
      note_knowledge(ctx, proposals);
      const double best_cost_before = best.measured.cost;
      const Known best_before = best;  // history_ grows below; keep a copy
      progress(fmt::format("step {} · {} proposals · best {:.2f}x ({})", step_, proposals.size(),
                           start_known().measured.cost / best_cost_before, best_before.description));
      for (auto& p : proposals) {
        if (evals_ >= b.max_evals || elapsed() >= b.max_wall_s) break;
        const Known* parent = &best_before;
        for (const auto& h : history_)
          if (!p.parent_id.empty() && h.id == p.parent_id && h.measured.correct) parent = &h;
        Known parent_copy = *parent;
        if (tried_.count(content_hash_hex(p.source))) continue;
        try_proposal(p, parent_copy);
        const Known& last = history_.back();
        if (!last.measured.correct &&
            (last.measured.failure_kind == "build_failed" || last.measured.failure_kind == "abi_error")) {
          std::optional<Proposal> fixed;
          if (live_) live_->phase("repair");
          try {
            fixed = actor_.repair(ctx, p,
                                  last.measured.eval.contains("build") ? last.measured.eval["build"].value("log", "")
                                                                       : last.measured.reason);
          } catch (const BudgetExhausted& e) {
            return std::string("actor budget spent: ") + e.what();
          } catch (const ActorUnavailable& e) {
            progress(std::string("no repair: ") + e.what());
          }
          if (fixed && evals_ < b.max_evals && !tried_.count(content_hash_hex(fixed->source)))
            try_proposal(*fixed, parent_copy);
        }
      }
      const Known& new_best = *ranking().front();
      bool gain = new_best.measured.cost < best_cost_before &&
                  (new_best.measured.deterministic || clearly_faster(new_best.measured, best_before.measured));
      steps_without_gain_ = gain ? 0 : steps_without_gain_ + 1;
      store_.append_event({{"type", "step"},
                           {"step", step_},
                           {"best", new_best.id},
                           {"best_speedup", start_known().measured.cost / new_best.measured.cost},
                           {"steps_without_gain", steps_without_gain_},
                           {"evaluations", evals_},
                           {"spend", actor_.spend()},
                           {"elapsed_s", elapsed()},
                           {"timing", step_timing(step_t0, eval_s0, llm_s0)}});
      progress(fmt::format("step {} done · best {:.2f}x · {} evaluations · {}{}", step_,
                           start_known().measured.cost / new_best.measured.cost, evals_, spend_text(),
                           gain ? "" : " · no gain"));
    }
  }

  // Variants that made their parent faster in the nearest states, with the state's weight.
  std::vector<ActorContext::PastWinner> past_winners(const std::vector<kb::NearestState>& nearest) {
    std::vector<ActorContext::PastWinner> out;
    kb::Statement q(kb_.db(),
                    "SELECT json_extract(r.result, '$.variant.family'), json_extract(r.result, '$.variant.params'), "
                    "e.speedup, e.problem_id FROM experiences e JOIN runs r ON r.id = e.run_id "
                    "WHERE e.state_id = ?1 AND e.correct = 1 AND e.speedup > 1 "
                    "AND json_extract(r.result, '$.variant.family') IS NOT NULL");
    for (const auto& n : nearest) {
      q.reset();
      q.bind(1, n.id);
      while (q.step()) {
        ActorContext::PastWinner w;
        w.family = q.get_text(0);
        w.params = nlohmann::json::parse(q.get_text(1), nullptr, false);
        if (w.params.is_discarded()) continue;
        w.speedup = q.get_double(2);
        w.weight = n.weight;
        w.same_problem = q.get_text(3) == problem_id_;
        out.push_back(std::move(w));
      }
    }
    return out;
  }

  // The actions taken from the nearest states and what they measured, newest first per state.
  std::vector<ActorContext::Recalled> recall(const std::vector<kb::NearestState>& nearest) {
    std::vector<ActorContext::Recalled> out;
    kb::Statement q(kb_.db(),
                    "SELECT e.action_id, e.correct, e.speedup, coalesce(e.failure_kind, ''), e.target, "
                    "coalesce(p.name, ''), coalesce(e.problem_id, '') FROM experiences e "
                    "LEFT JOIN problems p ON p.id = e.problem_id WHERE e.state_id = ?1 "
                    "ORDER BY e.created_at DESC LIMIT 4");
    for (const auto& n : nearest) {
      q.reset();
      q.bind(1, n.id);
      while (q.step()) {
        ActorContext::Recalled r;
        r.state_text = n.text;
        r.weight = n.weight;
        r.same_target = n.same_target;
        r.action = q.get_text(0);
        r.outcome =
            q.get_int(1) ? fmt::format("correct, {:.2f}x its parent", q.get_double(2)) : "failed: " + q.get_text(3);
        r.target = q.get_text(4);
        r.problem = q.get_text(5);
        r.same_problem = q.get_text(6) == problem_id_;
        out.push_back(std::move(r));
      }
    }
    return out;
  }

  // The best earlier kernel of each of the nearest problems on this backend (the current
  // problem's too, unless it is already in the beam).
  std::vector<ActorContext::PastKernel> past_kernels(const std::vector<kb::NearestState>& nearest,
                                                     const std::vector<const Known*>& beam) {
    std::vector<ActorContext::PastKernel> out;
    std::set<std::string> problems;
    kb::Statement problem_of(kb_.db(), "SELECT coalesce(problem_id, '') FROM states WHERE id = ?1");
    kb::Statement best(kb_.db(),
                       "SELECT c.id, c.source, r.bandwidth_fraction, r.compute_fraction, r.median_s, r.target, "
                       "coalesce(p.name, ''), (SELECT e.action_id FROM experiences e WHERE e.candidate_id = c.id "
                       "ORDER BY e.created_at LIMIT 1), CASE WHEN json_extract(r.result, '$.time.unit') = "
                       "'instructions' THEN json_extract(r.result, '$.time.median') END AS insns "
                       "FROM runs r JOIN candidates c ON c.id = r.candidate_id "
                       "JOIN targets t ON t.name = r.target LEFT JOIN problems p ON p.id = r.problem_id "
                       "WHERE r.problem_id = ?1 AND r.correct = 1 AND t.backend = ?2 "
                       // Instruction-count targets (rvv-qemu) have no time and no fractions: without
                       // their count, "best" was any correct kernel, often the start.
                       "ORDER BY max(coalesce(r.bandwidth_fraction, 0), coalesce(r.compute_fraction, 0)) DESC, "
                       "coalesce(r.median_s, insns) ASC LIMIT 4");
    for (const auto& n : nearest) {
      if (out.size() >= 3) break;
      problem_of.reset();
      problem_of.bind(1, n.id);
      if (!problem_of.step()) continue;
      const std::string pid = problem_of.get_text(0);
      if (pid.empty() || !problems.insert(pid).second) continue;
      best.reset();
      best.bind(1, pid).bind(2, in_.target.backend);
      // The best one not already in the beam: this problem's best from another target (whose
      // count is not comparable with this one's) is still worth showing.
      bool found = false;
      while (!found && best.step()) {
        const std::string cid = best.get_text(0);
        found = std::none_of(beam.begin(), beam.end(), [&](const Known* k) { return k->id == cid; });
      }
      if (!found) continue;
      ActorContext::PastKernel k;
      k.source = best.get_text(1);
      if (!best.is_null(2)) k.bandwidth_fraction = best.get_double(2);
      if (!best.is_null(3)) k.compute_fraction = best.get_double(3);
      if (!best.is_null(4))
        k.cost = format_cost(best.get_double(4) * 1e6, "us");
      else if (!best.is_null(8))
        k.cost = format_cost(best.get_double(8), "instructions");
      k.target = best.get_text(5);
      k.problem = best.get_text(6);
      if (!best.is_null(7)) k.action = best.get_text(7);
      k.weight = n.weight;
      k.same_problem = pid == problem_id_;
      out.push_back(std::move(k));
    }
    return out;
  }

  std::string spend_text() const {
    nlohmann::json s = actor_.spend();
    if (!s.is_object() || s.empty()) return "spend $0 (no LLM)";
    return fmt::format("spend ${:.4f}, {} LLM calls ({} cached)", s.value("usd", 0.0), s.value("calls", 0),
                       s.value("cached", 0));
  }

  void note_knowledge(const ActorContext& ctx, const std::vector<Proposal>& proposals) {
    for (const auto& p : proposals) {
      if (p.actions.empty()) continue;
      for (const auto& r : ctx.ranked)
        if (r.id == p.actions[0]) {
          knowledge_used_.push_back({{"step", step_},
                                     {"action", r.id},
                                     {"provenance", r.provenance},
                                     {"expected_speedup", r.expected_speedup()},
                                     {"tries", r.tries},
                                     {"same_target_tries", r.same_target_tries},
                                     {"transferred_tries", r.transferred_tries}});
          break;
        }
    }
  }

  // Re-times the start and the best back to back, so drift between them cannot make a speedup.
  std::pair<Measured, Measured> confirm(const Known& best) {
    fs::path sf = store_.candidate_path(start_known().id, start_known().extension);
    fs::path bf = store_.candidate_path(best.id, best.extension);
    progress("confirming: the start and the best, timed again back to back");
    Measured s = evaluate_file(sf);
    Measured b = evaluate_file(bf);
    return {s, b};
  }

  nlohmann::json finish(const std::string& stop) {
    nlohmann::json stop_event = {{"type", "stop"}, {"reason", stop}, {"step", step_}, {"evaluations", evals_}};
    if (!failure_.empty()) stop_event["failed"] = true;
    store_.append_event(stop_event);
    progress("stopped: " + stop);
    // What the actor makes of the run, in its own words: only from a run that did not fail, and
    // before the reports, so that they count its LLM call and its text versions.
    nlohmann::json learned_texts = nlohmann::json::object();
    if (failure_.empty()) learned_texts = actor_.learn(kb_, in_.problem, in_.target, store_.events());
    if (!learned_texts.value("note", std::string()).empty()) progress(learned_texts["note"].get<std::string>());
    const Known& start = start_known();
    const Known* best = ranking().front();
    Measured start_m = start.measured, best_m = best->measured;
    std::string verdict;
    bool improved = best != &start && clearly_faster(best_m, start_m);
    if (improved && o_.confirm && !best_m.deterministic) {
      auto [s2, b2] = confirm(*best);
      if (!s2.correct || !b2.correct)
        throw Error("re-measuring the start or the best failed: " + s2.reason + b2.reason);
      start_m = s2, best_m = b2;
      improved = clearly_faster(best_m, start_m);
      if (!improved)
        verdict =
            "the best candidate was not faster beyond noise when re-timed next to the start; the start is returned";
    } else if (!improved) {
      verdict = best == &start
                    ? "no candidate was faster than the start; the start is returned"
                    : "the fastest candidate is not faster than the start beyond noise; the start is returned";
    }
    const Known& result = improved ? *best : start;
    const double speedup = improved ? start_m.cost / best_m.cost : 1.0;
    fs::path result_file = store_.candidate_path(result.id, result.extension);
    nlohmann::json r = {{"run", store_.id()},
                        {"run_dir", store_.dir().string()},
                        {"problem", in_.problem.name},
                        {"target", in_.target.name},
                        {"policy", actor_.name()},
                        {"correct", result.measured.correct},
                        {"improved", improved},
                        {"speedup", speedup},
                        {"candidate", result_file.string()},
                        {"unit", start_m.unit},
                        {"start", measured_summary(start_m)},
                        {"best", measured_summary(improved ? best_m : start_m)},
                        {"best_description", result.description},
                        {"best_family", result.family},
                        {"best_params", result.params},
                        {"evaluations", evals_},
                        {"steps", step_},
                        {"stop_reason", stop},
                        {"spend", actor_.spend()},
                        {"elapsed_s", elapsed()},
                        {"evaluate_s", eval_seconds_},
                        {"evaluate_split", eval_split_},
                        {"kernel_plan", plan_.kind == "unsupported"
                                            ? nlohmann::json{{"kind", "unsupported"}, {"reason", plan_.reason}}
                                            : nlohmann::json{{"kind", plan_.kind}, {"summary", plan_.summary()}}},
                        {"knowledge",
                         {{"used", knowledge_used_},
                          {"experiences_written", learned_.size()},
                          {"constraints_written", constraints_.size()},
                          {"text_versions_written", learned_texts.value("text_versions_written", 0)},
                          {"kb", kb_.file().string()}}}};
    if (!verdict.empty()) r["note"] = verdict;
    r["failed"] = !failure_.empty();
    if (!failure_.empty()) r["failure"] = failure_;
    if (!o_.out_dir.empty()) {
      fs::create_directories(o_.out_dir);
      fs::path dest = o_.out_dir / ("best" + result.extension);
      write_file_atomically(dest, result.source);
      r["candidate"] = dest.string();
    }
    std::vector<nlohmann::json> events = store_.events();
    ReportPaths paths = write_reports(r, events, store_.dir(), o_.out_dir);
    r["report"] = {{"markdown", paths.markdown.string()}, {"json", paths.json.string()}};
    store_.meta()["status"] = failure_.empty() ? "finished" : "failed";
    if (!failure_.empty()) store_.meta()["failure"] = failure_;
    store_.meta()["result"] = {{"improved", improved},
                               {"speedup", speedup},
                               {"stop_reason", stop},
                               {"evaluations", evals_},
                               {"candidate", r["candidate"]}};
    store_.meta()["finished_at"] = kb::utc_now_iso();
    store_.save_meta();
    // The returned file's latest evaluation in full (verified and timed in this run), for a caller
    // that would otherwise evaluate it once more (mblast bench --optimize); not in the reports.
    if (const Measured& m = improved ? best_m : start_m; m.eval.is_object() && m.eval.value("correct", false))
      r["result_eval"] = m.eval;
    progress(improved ? fmt::format("result: {:.2f}x faster than the start ({} -> {}) · {}", speedup,
                                    format_cost(start_m.cost, start_m.unit), format_cost(best_m.cost, best_m.unit),
                                    r["candidate"].get<std::string>())
                      : "result: " + verdict);
    return r;
  }
};

}  // namespace

fs::path runs_root() {
  if (const char* d = std::getenv("MBLAST_RUNS_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return fs::path(x) / "mblast" / "runs";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".local" / "share" / "mblast" / "runs";
}

nlohmann::json optimize(const OptimizeInput& in, Actor& actor, Critic& critic, const OptimizeOptions& o) {
  Loop loop(in, actor, critic, o);
  return loop.run();
}

}  // namespace mblast::loop
