// The LLM as actor, critic and knowledge editor (include/mblast/loop/llm_actor.h).
#include "mblast/loop/llm_actor.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "mblast/kb/records.h"
#include "mblast/llm/extract.h"
#include "mblast/loop/prompts.h"
#include "mblast/tensor.h"

namespace mblast::loop {

namespace {

std::string abi_rules(const std::string& backend) {
  std::string common =
      "  int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,\n"
      "                 const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs);\n"
      "  optional: int mblast_prepare(const mblast_context*, const mblast_tensor* params, int32_t, void** state)\n"
      "            (parameters only, never inputs), void mblast_release(const mblast_context*, void*),\n"
      "            const char* mblast_last_error(void). Return 0 on success. Tensors are dense row-major:\n"
      "  struct mblast_tensor { const char* name; mblast_dtype dtype; int32_t ndim; int64_t shape[8]; void* data; "
      "size_t nbytes; }\n"
      "  Inputs and parameters arrive in the order the problem lists them.\n";
  if (backend == "cuda")
    return common +
           "  cuda: data are device pointers; launch on (cudaStream_t)ctx->cuda_stream; never synchronise the device;\n"
           "  the file is built by nvcc into a shared object (extern \"C\" entry points); cuBLAS/cuDNN may be used.\n";
  if (backend == "opencl")
    return common +
           "  opencl: data are cl_mem; enqueue on (cl_command_queue)ctx->cl_queue (in-order), never clFinish; host "
           "C++17\n"
           "  built into a shared object (extern \"C\" entry points). #include <mblast/opencl_candidate.h> gives\n"
           "  MBLAST_OPENCL_CANDIDATE(kSource, \"kernel_name\", enqueue) which defines the entry points around your\n"
           "  OpenCL C source string and an enqueue(ctx, kernel, in, n_in, par, n_par, out, n_out) function.\n";
  return common +
         "  rvv: data are host pointers (64-byte aligned); C11 with RVV 1.0 intrinsics (#include <riscv_vector.h>,\n"
         "  __riscv_ prefixed), built by clang for rv64gcv; the cost is the dynamic instruction count under QEMU.\n";
}

std::string join_shape(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return "[" + t + "]";
}

std::string tensors(const char* what, const std::vector<TensorSpec>& ts) {
  std::string t;
  for (size_t i = 0; i < ts.size(); ++i)
    t += fmt::format("- {} {}: {} {}\n", what, i, ts[i].name,
                     std::string(dtype_name(ts[i].dtype)) + join_shape(ts[i].shape));
  return t;
}

// ACTION: and PLAN: lines of an actor's answer.
std::string line_after(const std::string& text, const std::string& key) {
  std::regex re("(^|\\n)\\s*\\**" + key + "\\**\\s*:\\s*([^\\n]+)", std::regex::icase);
  std::smatch m;
  if (!std::regex_search(text, m, re)) return "";
  std::string v = m[2];
  while (!v.empty() && (v.back() == ' ' || v.back() == '\r' || v.back() == '*' || v.back() == '`')) v.pop_back();
  while (!v.empty() && (v.front() == '`' || v.front() == ' ')) v.erase(v.begin());
  return v;
}

// A KB action id from the model's ACTION line: a known id, else a slug in the backend's namespace.
std::string action_slug(const std::string& raw, const std::string& backend) {
  std::string s;
  for (char c : raw) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')
      s += static_cast<char>(std::tolower(c));
    else if (c == ' ' || c == '_')
      s += '-';
    if (s.size() >= 60) break;
  }
  if (s.empty()) return backend + ".llm-rewrite";
  if (!s.starts_with(backend + ".")) s = backend + ".llm-" + s;
  return s;
}

std::string outcome_text(const Measured& before, const Measured& after) {
  if (!after.correct) return fmt::format("{}: {}", after.failure_kind, after.reason);
  return fmt::format("correct; {} -> {} ({:.2f}x)", format_cost(before.cost, before.unit),
                     format_cost(after.cost, after.unit), before.cost / after.cost);
}

}  // namespace

std::string problem_text(const Problem& p) {
  std::string t = fmt::format("{} (op class {}): {}\n", p.name, p.op_class, p.description);
  t += tensors("input", p.inputs) + tensors("parameter", p.parameters) + tensors("output", p.outputs);
  for (const auto& [dtype, tol] : p.tolerance)
    t += fmt::format("- tolerance {}: atol {:g}, rtol {:g}, matched ratio >= {:g}\n", dtype_name(dtype), tol.atol,
                     tol.rtol, tol.min_match);
  if (p.flops > 0 || p.bytes > 0) t += fmt::format("- counted work: {:.4g} FLOPs, {:.4g} bytes\n", p.flops, p.bytes);
  return t;
}

std::string target_text(const Target& t) {
  std::string s = fmt::format("{} ({} backend): {}\n", t.name, t.backend, t.description);
  std::string spec = t.spec.dump();
  if (spec.size() > 1500) spec = spec.substr(0, 1500) + "...";
  return s + "description: " + spec + "\n";
}

std::string knowledge_text(const ActorContext& ctx, size_t max_actions) {
  std::string t;
  size_t n = 0;
  for (const auto& a : ctx.ranked) {
    if (a.excluded) continue;
    if (n++ == max_actions) break;
    t += fmt::format("- {} ({}): {}. {} Expected {:.2f}x from {} tries ({} on this target, {} transferred).\n", a.id,
                     a.provenance, a.title, a.summary, a.expected_speedup(), a.tries, a.same_target_tries,
                     a.transferred_tries);
  }
  return t.empty() ? "(nothing ranked)\n" : t;
}

std::string rules_text(const ActorContext& ctx, size_t max_actions) {
  std::string t;
  size_t n = 0;
  for (const auto& a : ctx.ranked) {
    if (a.excluded) continue;
    if (n++ == max_actions) break;
    t += fmt::format("- {}: helps when {} | hurts when {} | evidence: {} tries, {} correct, {} wins", a.id,
                     a.when_helps.empty() ? "(not known)" : a.when_helps,
                     a.when_hurts.empty() ? "(not known)" : a.when_hurts, a.tries, a.correct, a.wins);
    if (a.cluster_stats.tries > 0)
      t +=
          fmt::format("; in states like this one on this target family: {} tries, {} wins{}", a.cluster_stats.tries,
                      a.cluster_stats.wins,
                      a.cluster_stats.best_speedup ? fmt::format(", best {:.2f}x", *a.cluster_stats.best_speedup) : "");
    t += "\n";
  }
  return t.empty() ? "(no rules learned yet)\n" : t;
}

std::string constraints_text(const ActorContext& ctx) {
  std::string t;
  std::set<std::string> seen;
  for (const auto& a : ctx.ranked) {
    if (a.excluded) {
      t += fmt::format("- {} is excluded here: {}\n", a.id, a.excluded_reason);
      continue;
    }
    for (const auto& c : a.constraints)
      if (seen.insert(c.id).second)
        t += fmt::format("- {} ({}, {}{}): {}\n", a.id, c.effect, c.provenance,
                         c.evidence ? fmt::format(", {} experiences", c.evidence) : "", c.text);
  }
  return t.empty() ? "(none)\n" : t;
}

std::string memory_text(const ActorContext& ctx, size_t max_items) {
  // Grouped by the state's text: the same state measured in several runs is one entry, with
  // every action taken from it.
  std::vector<std::pair<const ActorContext::Recalled*, std::vector<std::string>>> groups;
  size_t n = 0;
  for (const auto& r : ctx.recalled) {
    if (n++ == max_items) break;
    auto g =
        std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first->state_text == r.state_text; });
    if (g == groups.end()) g = groups.insert(groups.end(), {&r, {}});
    const std::string line = fmt::format("    {} -> {}{}\n", r.action, r.outcome,
                                         r.target == g->first->target ? "" : " (on " + r.target + ")");
    if (std::find(g->second.begin(), g->second.end(), line) == g->second.end()) g->second.push_back(line);
  }
  std::string t;
  for (const auto& [r, lines] : groups) {
    t += fmt::format("- from a state{}{} (weight {:.2f}): {}\n",
                     r->same_problem      ? " of this problem"
                     : r->problem.empty() ? ""
                                          : " of " + r->problem,
                     r->same_target ? " on this target" : " on " + r->target, r->weight, r->state_text);
    for (const auto& l : lines) t += l;
  }
  return t.empty() ? "(no earlier state is near this one)\n" : t;
}

std::string past_kernels_text(const ActorContext& ctx) {
  // Each kernel gets an equal share of the section's budget, so the nearest is not the only one.
  if (ctx.past_kernels.empty()) return "(none yet on this backend)\n";
  const size_t share = section_budget_tokens("past_kernels") / ctx.past_kernels.size();
  std::string t;
  for (const auto& k : ctx.past_kernels) {
    std::string fractions;
    if (k.bandwidth_fraction) fractions += fmt::format("{:.2f} of peak bandwidth", *k.bandwidth_fraction);
    if (k.compute_fraction)
      fractions += fmt::format("{}{:.2f} of peak compute", fractions.empty() ? "" : ", ", *k.compute_fraction);
    // The action that made it: what the actor can apply to this problem when the code is another's.
    std::string head =
        fmt::format("### {}{} on {}{}{}{}\n", k.problem, k.same_problem ? " (this problem, an earlier run)" : "",
                    k.target, k.cost.empty() ? "" : ", " + k.cost, fractions.empty() ? "" : " (" + fractions + ")",
                    k.action.empty() ? "" : ", made by " + k.action);
    const size_t head_tokens = estimate_tokens(head) + 4;
    t += head + "```\n" + fit_tokens(k.source, share > head_tokens ? share - head_tokens : 0) + "\n```\n";
  }
  return t;
}

std::string target_facts_text(const ActorContext& ctx) {
  const Known* k = ctx.beam.empty() ? ctx.start : ctx.beam.front();
  if (!k || !k->measured.eval.is_object()) return "(not measured)\n";
  const nlohmann::json& e = k->measured.eval;
  std::string t;
  if (e.contains("device") && e["device"].is_object()) {
    const auto& d = e["device"];
    if (d.contains("name")) t += fmt::format("- device: {}\n", d.value("name", std::string()));
    if (d.contains("compute_units")) t += fmt::format("- compute units: {}\n", d["compute_units"].dump());
    if (d.contains("preferred_vector_width_float"))
      t += fmt::format("- preferred float vector width: {}\n", d["preferred_vector_width_float"].dump());
    if (d.contains("native_vector_width_float"))
      t += fmt::format("- native float vector width: {}\n", d["native_vector_width_float"].dump());
    if (d.contains("global_mem_bytes"))
      t += fmt::format("- global memory: {:.1f} GiB\n", d["global_mem_bytes"].get<double>() / (1u << 30));
    if (d.contains("cache_bytes") && d["cache_bytes"].is_number())
      t += fmt::format("- last-level cache: {:.1f} MiB\n", d["cache_bytes"].get<double>() / (1u << 20));
    // CUDA's runner reports these names
    if (d.contains("compute_capability"))
      t += fmt::format("- compute capability: {}\n", d.value("compute_capability", std::string()));
    if (d.contains("sm_count")) t += fmt::format("- streaming multiprocessors: {}\n", d["sm_count"].dump());
    if (d.contains("memory_bytes") && d["memory_bytes"].is_number())
      t += fmt::format("- device memory: {:.1f} GiB\n", d["memory_bytes"].get<double>() / (1u << 30));
    if (d.contains("l2_bytes") && d["l2_bytes"].is_number())
      t += fmt::format("- L2 cache: {:.1f} MiB\n", d["l2_bytes"].get<double>() / (1u << 20));
    // RVV's
    if (d.contains("vlen_bits")) t += fmt::format("- vector register length (VLEN): {} bits\n", d["vlen_bits"].dump());
    if (d.contains("march")) t += fmt::format("- -march: {}\n", d.value("march", std::string()));
    if (d.contains("cpus")) t += fmt::format("- harts: {}\n", d["cpus"].dump());
    if (d.contains("timing")) t += fmt::format("- timing: {}\n", d.value("timing", std::string()));
  }
  if (e.contains("peak") && e["peak"].is_object() && e["peak"].contains("peak_bandwidth_bytes_per_s"))
    t += fmt::format("- peaks: {:.1f} GB/s memory bandwidth, {:.1f} GFLOP/s fp32\n",
                     e["peak"].value("peak_bandwidth_bytes_per_s", 0.0) / 1e9,
                     e["peak"].value("peak_fp32_flops_per_s", 0.0) / 1e9);
  return t.empty() ? "(the runner reported no device facts)\n" : t;
}

std::string measured_text(const Measured& m) {
  if (!m.correct) return fmt::format("not correct ({}): {}", m.failure_kind, first_error_line(m.reason));
  std::string t = fmt::format("{} (spread {:.1f}%)", format_cost(m.cost, m.unit), m.spread_pct);
  if (m.bandwidth_fraction) t += fmt::format(", bandwidth fraction {:.2f}", *m.bandwidth_fraction);
  if (m.compute_fraction) t += fmt::format(", compute fraction {:.2f}", *m.compute_fraction);
  if (m.vector_fraction) t += fmt::format(", vector-instruction fraction {:.2f}", *m.vector_fraction);
  return t;
}

std::string line_diff(const std::string& before, const std::string& after, int context) {
  auto lines = [](const std::string& s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  };
  const auto a = lines(before), b = lines(after);
  const size_t n = a.size(), m = b.size();
  if (n * m > 4'000'000) return fmt::format("(too large to compare: {} and {} lines)\n", n, m);
  // Longest common subsequence table, from the end, so the walk below goes forward.
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  struct Line {
    char tag;
    std::string text;
  };
  std::vector<Line> all;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j])
      all.push_back({' ', a[i++]}), ++j;
    else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]))
      all.push_back({'-', a[i++]});
    else
      all.push_back({'+', b[j++]});
  }
  std::vector<bool> show(all.size(), false);
  for (size_t k = 0; k < all.size(); ++k)
    if (all[k].tag != ' ')
      for (long d = -context; d <= context; ++d) {
        const long x = static_cast<long>(k) + d;
        if (x >= 0 && x < static_cast<long>(all.size())) show[static_cast<size_t>(x)] = true;
      }
  std::string out;
  bool gap = false;
  for (size_t k = 0; k < all.size(); ++k) {
    if (!show[k]) {
      gap = true;
      continue;
    }
    if (gap && !out.empty()) out += "@@\n";
    gap = false;
    out += all[k].tag + all[k].text + "\n";
  }
  return out.empty() ? "(no change)\n" : out;
}

std::map<std::string, std::string> memory_sections(const ActorContext& ctx) {
  return {{"knowledge", knowledge_text(ctx)},       {"rules", rules_text(ctx)},
          {"constraints", constraints_text(ctx)},   {"memory", memory_text(ctx)},
          {"past_kernels", past_kernels_text(ctx)}, {"target_facts", target_facts_text(ctx)}};
}

std::string feedback_text(const ActorContext& ctx) {
  std::string feedback;
  for (const auto& f : ctx.recent_feedback) feedback += "- " + f + "\n";
  return feedback.empty() ? "(none yet)\n" : feedback;
}

RenderedPrompt actor_prompt(const ActorContext& ctx, const Known& parent, int sample, const std::string& analysis,
                            const std::string& feedback, const std::map<std::string, std::string>& memory) {
  const std::string& backend = ctx.target->backend;
  std::map<std::string, std::string> v = memory;
  v.insert({{"backend", backend},
            {"target_name", ctx.target->name},
            {"abi_rules", abi_rules(backend)},
            {"step", std::to_string(ctx.step)},
            {"sample", std::to_string(sample)},
            {"samples", std::to_string(ctx.k)},
            {"problem", problem_text(*ctx.problem)},
            {"target", target_text(*ctx.target)},
            {"state", parent.state_text},
            {"parent_source", parent.source},
            {"analysis", analysis},
            {"feedback", feedback}});
  return render_prompt("actor", v);
}

std::vector<Proposal> PromptPreview::propose(const ActorContext& ctx) {
  const Known* parent = ctx.beam.empty() ? ctx.start : ctx.beam.front();
  RenderedPrompt p = actor_prompt(ctx, *parent, 1, "(the state analysis is asked of the LLM when the run starts)",
                                  feedback_text(ctx), memory_sections(ctx));
  prompt_ = "### system\n" + p.system + "\n### user\n" + p.user;
  return {};
}

LlmActor::LlmActor(llm::Client& client, bool progress) : client_(client), progress_(progress) {}

std::string LlmActor::name() const { return client_.config().spec; }

nlohmann::json LlmActor::spend() const {
  llm::Usage u = client_.total();
  nlohmann::json by_role = nlohmann::json::object();
  for (const char* role : {"actor", "critic", "analysis", "repair", "knowledge"}) {
    const llm::Usage r = client_.total_for(role);
    if (r.calls == 0 && r.cache_hits == 0) continue;
    by_role[role] = {{"calls", r.calls},
                     {"cached", r.cache_hits},
                     {"input_tokens", r.input_tokens},
                     {"output_tokens", r.output_tokens},
                     {"usd", r.cost_usd}};
  }
  return {{"calls", u.calls},
          {"cached", u.cache_hits},
          {"input_tokens", u.input_tokens},
          {"output_tokens", u.output_tokens},
          {"usd", u.cost_usd},
          {"price_known", u.price_known},
          {"llm_seconds", client_.seconds_waiting()},
          {"model", client_.config().spec},
          {"by_role", by_role}};
}

nlohmann::json LlmActor::learn(kb::KnowledgeBase& kb, const Problem& problem, const Target& target,
                               const std::vector<nlohmann::json>& events) {
  std::string note;
  const int written = llm_knowledge_update(client_, kb, problem, target, events, &note);
  return {{"text_versions_written", written}, {"note", note}};
}

std::string LlmActor::analysis(const ActorContext& ctx) {
  const Known* best = ctx.beam.empty() ? ctx.start : ctx.beam.front();
  if (!best || best->id == analysed_id_) return analysis_text_;
  auto p = render_prompt("state_analysis", {{"step", std::to_string(ctx.step)},
                                            {"problem", problem_text(*ctx.problem)},
                                            {"target", target_text(*ctx.target)},
                                            {"state", best->state_text},
                                            {"source", best->source}});
  llm::Request r;
  r.messages = {{"system", p.system}, {"user", p.user}};
  r.max_tokens = 400;
  r.purpose = "analysis";
  try {
    analysis_text_ = client_.complete(r).text;
  } catch (const llm::BudgetExceeded& e) {
    throw BudgetExhausted(e.what());
  } catch (const llm::LlmError& e) {
    analysis_text_ = std::string("(no analysis: ") + e.what() + ")";
  }
  analysed_id_ = best->id;
  return analysis_text_;
}

std::vector<Proposal> LlmActor::propose(const ActorContext& ctx) {
  const std::string backend = ctx.target->backend;
  std::string analysed = analysis(ctx);
  const std::string feedback = feedback_text(ctx);
  const std::map<std::string, std::string> memory = memory_sections(ctx);
  std::vector<Proposal> out;
  std::vector<std::string> errors;
  std::set<std::string> seen = ctx.tried;  // this step's proposals join what the run has tried
  int repeated = 0;                        // samples the LLM answered only with repeats
  for (int sample = 1; sample <= ctx.k; ++sample) {
    const Known* parent = ctx.beam.empty() ? ctx.start : ctx.beam[static_cast<size_t>(sample - 1) % ctx.beam.size()];
    std::string repeats;  // the repeated answers, named in the second ask
    bool budget_spent = false;
    for (int ask = 1; ask <= 2; ++ask) {
      // The note goes first: the section's token budget keeps the beginning of the feedback.
      auto p = actor_prompt(ctx, *parent, sample, analysed,
                            repeats.empty()
                                ? feedback
                                : "- Your answer repeated a candidate this run has already evaluated (" + repeats +
                                      "). Propose a different rewrite: another action, or other "
                                      "parameters.\n" +
                                      feedback,
                            memory);
      llm::Request r;
      r.messages = {{"system", p.system}, {"user", p.user}};
      r.purpose = "actor";
      r.sample = sample;
      llm::Response answer;
      try {
        answer = client_.complete(r);
      } catch (const llm::BudgetExceeded& e) {
        if (out.empty()) throw BudgetExhausted(e.what());
        budget_spent = true;
        break;
      } catch (const llm::LlmError& e) {
        errors.push_back(e.what());
        if (progress_) std::fprintf(stderr, "mblast:   sample %d: %s\n", sample, e.what());
        break;
      }
      Proposal prop;
      prop.extension = parent->extension;
      prop.parent_id = parent->id;
      prop.model = answer.model.empty() ? client_.config().provider.model : answer.model;
      prop.prompt_hash = p.hash;
      prop.family = "llm";
      prop.actions = {action_slug(line_after(answer.text, "ACTION"), backend)};
      prop.description = line_after(answer.text, "PLAN");
      if (prop.description.empty()) prop.description = "LLM rewrite (" + prop.actions[0] + ")";
      auto code = llm::extract_candidate_code(answer.text, backend);
      if (!code) {
        prop.source = answer.text;
        prop.abi_problem = "the answer has no code block that defines the candidate's entry point";
        prop.no_kernel = true;
      } else {
        prop.source = *code;
        prop.abi_problem = llm::check_candidate_abi(*code, backend);
      }
      if (seen.insert(content_hash_hex(std::as_bytes(std::span(prop.source.data(), prop.source.size())))).second) {
        out.push_back(std::move(prop));
        break;
      }
      repeats += (repeats.empty() ? "" : "; ") + fmt::format("ACTION {}, PLAN {}", prop.actions[0], prop.description);
      if (progress_)
        std::fprintf(stderr, "mblast:   sample %d repeated an evaluated candidate (%s)%s\n", sample,
                     prop.actions[0].c_str(), ask == 1 ? "; asking again" : "");
      if (ask == 2) ++repeated;
    }
    if (budget_spent) break;
  }
  if (out.empty() && repeated == 0 && !errors.empty())
    throw ActorUnavailable(fmt::format("every LLM request of step {} failed; the last: {}", ctx.step, errors.back()));
  if (repeated > 0 && fallback_) {
    // The LLM has nothing new for these samples: the builtin policy's next untried variants
    // take their places, so a run ends on its budget, its patience or the speed of light.
    ActorContext c = ctx;
    c.tried = seen;
    c.k = repeated;
    for (auto& p : fallback_->propose(c)) {
      p.description = "the LLM repeated itself; builtin policy: " + p.description;
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::optional<Proposal> LlmActor::repair(const ActorContext& ctx, const Proposal& failed, const std::string& log) {
  if (failed.no_kernel) return std::nullopt;
  std::string first_lines;
  std::istringstream in(scrub_build_paths(log));
  int n = 0;
  for (std::string line; std::getline(in, line) && n < 40; ++n) first_lines += line + "\n";
  auto p = render_prompt("fix_compile", {{"backend", ctx.target->backend},
                                         {"target_name", ctx.target->name},
                                         {"abi_rules", abi_rules(ctx.target->backend)},
                                         {"step", std::to_string(ctx.step)},
                                         {"source", failed.source},
                                         {"log", first_lines.empty() ? failed.abi_problem : first_lines}});
  llm::Request r;
  r.messages = {{"system", p.system}, {"user", p.user}};
  r.purpose = "repair";
  llm::Response answer;
  try {
    answer = client_.complete(r);
  } catch (const llm::BudgetExceeded& e) {
    throw BudgetExhausted(e.what());
  } catch (const llm::LlmError& e) {
    throw ActorUnavailable(e.what());
  }
  auto code = llm::extract_candidate_code(answer.text, ctx.target->backend);
  if (!code) return std::nullopt;
  Proposal fixed = failed;
  fixed.source = *code;
  fixed.abi_problem = llm::check_candidate_abi(*code, ctx.target->backend);
  fixed.prompt_hash = p.hash;
  fixed.description = "repaired: " + failed.description;
  return fixed;
}

RenderedPrompt critic_prompt(const CriticInput& in, const Critique& rules, int step) {
  const Critique& c = rules;
  return render_prompt(
      "critic",
      {{"step", std::to_string(step)},
       {"problem", problem_text(*in.problem)},
       {"before_measured", measured_text(in.parent->measured)},
       {"after_measured", measured_text(*in.after)},
       {"diff",
        in.proposal->no_kernel ? "(the answer held no kernel)\n" : line_diff(in.parent->source, in.proposal->source)},
       {"before_state", in.parent->state_text},
       {"after_state",
        in.after->correct ? describe_state(*in.problem, *in.target, *in.after, in.after_signature) : "not correct"},
       {"action", in.proposal->actions.empty() ? "?" : in.proposal->actions[0]},
       {"plan", in.proposal->description},
       {"outcome", outcome_text(in.parent->measured, *in.after) + "\nfigures: " + c.text}});
}

Critique LlmCritic::critique(const CriticInput& in) {
  Critique c = rules_.critique(in);
  const RenderedPrompt p = critic_prompt(in, c, ++calls_);
  llm::Request r;
  r.messages = {{"system", p.system}, {"user", p.user}};
  r.max_tokens = 500;
  r.purpose = "critic";
  try {
    llm::Response a = client_.complete(r);
    std::string text = a.text;
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    if (!text.empty()) c.text += "\nCritic: " + text;
    c.model = a.model.empty() ? client_.config().provider.model : a.model;
  } catch (const llm::LlmError& e) {
    c.text += std::string("\n(critic LLM unavailable: ") + e.what() + ")";
  }
  return c;
}

int llm_knowledge_update(llm::Client& client, kb::KnowledgeBase& kb, const Problem& problem, const Target& target,
                         const std::vector<nlohmann::json>& events, std::string* note) {
  std::string experiences, texts;
  std::set<std::string> actions;
  for (const auto& e : events) {
    if (e.value("type", "") != "candidate") continue;
    auto acts = e.value("actions", std::vector<std::string>{});
    if (acts.empty()) continue;
    const auto& m = e.value("measured", nlohmann::json::object());
    std::string outcome = m.value("correct", false)
                              ? fmt::format("{:.2f}x vs parent", e.value("speedup_vs_parent", 1.0))
                              : m.value("failure_kind", std::string("failed"));
    experiences += fmt::format("- {}: {}; {}\n", acts[0], outcome, e.value("critic", ""));
    actions.insert(acts[0]);
  }
  if (actions.empty()) return 0;
  for (const auto& a : actions)
    if (auto rec = kb.action(a))
      texts += fmt::format("- {}: when_helps: {} | when_hurts: {}\n", a, rec->when_helps, rec->when_hurts);
  auto p = render_prompt("knowledge_update", {{"problem", problem_text(problem)},
                                              {"target_name", target.name},
                                              {"experiences", experiences},
                                              {"action_texts", texts.empty() ? "(none)" : texts}});
  llm::Request r;
  r.messages = {{"system", p.system}, {"user", p.user}};
  r.max_tokens = 600;
  r.purpose = "knowledge";
  llm::Response a;
  try {
    a = client.complete(r);
  } catch (const llm::LlmError& e) {
    if (note) *note = std::string("no knowledge update: ") + e.what();
    return 0;
  }
  int written = 0;
  std::istringstream lines(a.text);
  kb::Provenance prov{"learned", "knowledge update by " + client.config().spec};
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    std::string action = j.value("action", ""), field = j.value("field", ""), text = j.value("text", "");
    if (!actions.count(action) || (field != "when_helps" && field != "when_hurts") || text.empty() || text.size() > 600)
      continue;
    if (!kb.action(action)) continue;
    kb.add_text_version("action", action, field, text, client.config().spec, prov);
    ++written;
  }
  if (note) *note = fmt::format("knowledge update: {} text versions written", written);
  return written;
}

}  // namespace mblast::loop
