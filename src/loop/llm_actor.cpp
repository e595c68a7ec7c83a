// The LLM as actor, critic and knowledge editor (include/mblast/loop/llm_actor.h).
#include "mblast/loop/llm_actor.h"

#include <cstdio>
#include <regex>
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
      "  struct mblast_tensor { const char* name; mblast_dtype dtype; int32_t ndim; int64_t shape[8]; void* data; size_t nbytes; }\n"
      "  Inputs and parameters arrive in the order the problem lists them.\n";
  if (backend == "cuda")
    return common +
           "  cuda: data are device pointers; launch on (cudaStream_t)ctx->cuda_stream; never synchronise the device;\n"
           "  the file is built by nvcc into a shared object (extern \"C\" entry points); cuBLAS/cuDNN may be used.\n";
  if (backend == "opencl")
    return common +
           "  opencl: data are cl_mem; enqueue on (cl_command_queue)ctx->cl_queue (in-order), never clFinish; host C++17\n"
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
    t += fmt::format("- {} {}: {} {}\n", what, i, ts[i].name, std::string(dtype_name(ts[i].dtype)) + join_shape(ts[i].shape));
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
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') s += static_cast<char>(std::tolower(c));
    else if (c == ' ' || c == '_') s += '-';
    if (s.size() >= 60) break;
  }
  if (s.empty()) return backend + ".llm-rewrite";
  if (!s.starts_with(backend + ".")) s = backend + ".llm-" + s;
  return s;
}

std::string outcome_text(const Measured& before, const Measured& after) {
  if (!after.correct) return fmt::format("{}: {}", after.failure_kind, after.reason);
  return fmt::format("correct; {} -> {} ({:.2f}x)", format_cost(before.cost, before.unit), format_cost(after.cost, after.unit),
                     before.cost / after.cost);
}

}  // namespace

std::string problem_text(const Problem& p) {
  std::string t = fmt::format("{} (op class {}): {}\n", p.name, p.op_class, p.description);
  t += tensors("input", p.inputs) + tensors("parameter", p.parameters) + tensors("output", p.outputs);
  for (const auto& [dtype, tol] : p.tolerance)
    t += fmt::format("- tolerance {}: atol {:g}, rtol {:g}, matched ratio >= {:g}\n", dtype_name(dtype), tol.atol, tol.rtol,
                     tol.min_match);
  if (p.flops > 0 || p.bytes > 0) t += fmt::format("- counted work: {:.4g} FLOPs, {:.4g} bytes\n", p.flops, p.bytes);
  return t;
}

std::string target_text(const Target& t) {
  std::string s = fmt::format("{} ({} backend): {}\n", t.name, t.backend, t.description);
  std::string spec = t.spec.dump();
  if (spec.size() > 1500) spec = spec.substr(0, 1500) + "...";
  return s + "description: " + spec + "\n";
}

std::string knowledge_text(const ActorContext& ctx, size_t max_actions, size_t max_states) {
  std::string t;
  size_t n = 0;
  for (const auto& a : ctx.ranked) {
    if (a.excluded) continue;
    if (n++ == max_actions) break;
    t += fmt::format("- {} ({}): {}. {} Expected {:.2f}x from {} tries ({} on this target, {} transferred).", a.id,
                     a.provenance, a.title, a.summary, a.expected_speedup(), a.tries, a.same_target_tries,
                     a.transferred_tries);
    for (const auto& c : a.constraints) t += fmt::format(" Constraint ({}): {}.", c.effect, c.text);
    t += "\n";
  }
  if (t.empty()) t = "(nothing ranked)\n";
  n = 0;
  for (const auto& s : ctx.nearest) {
    if (n++ == max_states) break;
    t += fmt::format("- a similar state seen before{} (distance {:.2f}): {}\n", s.same_target ? " on this target" : "",
                     s.distance, s.text);
  }
  return t;
}

LlmActor::LlmActor(llm::Client& client, bool progress) : client_(client), progress_(progress) {}

std::string LlmActor::name() const { return client_.config().spec; }

nlohmann::json LlmActor::spend() const {
  llm::Usage u = client_.total();
  return {{"calls", u.calls}, {"cached", u.cache_hits}, {"input_tokens", u.input_tokens},
          {"output_tokens", u.output_tokens}, {"usd", u.cost_usd}, {"price_known", u.price_known},
          {"llm_seconds", client_.seconds_waiting()}};
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
  std::string feedback;
  for (const auto& f : ctx.recent_feedback) feedback += "- " + f + "\n";
  if (feedback.empty()) feedback = "(none yet)\n";
  std::string knowledge = knowledge_text(ctx);
  std::vector<Proposal> out;
  std::vector<std::string> errors;
  for (int sample = 1; sample <= ctx.k; ++sample) {
    const Known* parent = ctx.beam.empty() ? ctx.start : ctx.beam[static_cast<size_t>(sample - 1) % ctx.beam.size()];
    auto p = render_prompt("actor", {{"backend", backend},
                                     {"target_name", ctx.target->name},
                                     {"abi_rules", abi_rules(backend)},
                                     {"step", std::to_string(ctx.step)},
                                     {"sample", std::to_string(sample)},
                                     {"samples", std::to_string(ctx.k)},
                                     {"problem", problem_text(*ctx.problem)},
                                     {"target", target_text(*ctx.target)},
                                     {"state", parent->state_text},
                                     {"parent_source", parent->source},
                                     {"analysis", analysed},
                                     {"knowledge", knowledge},
                                     {"feedback", feedback}});
    llm::Request r;
    r.messages = {{"system", p.system}, {"user", p.user}};
    r.purpose = "actor";
    r.sample = sample;
    llm::Response answer;
    try {
      answer = client_.complete(r);
    } catch (const llm::BudgetExceeded& e) {
      if (out.empty()) throw BudgetExhausted(e.what());
      break;
    } catch (const llm::LlmError& e) {
      errors.push_back(e.what());
      if (progress_) std::fprintf(stderr, "mblast:   sample %d: %s\n", sample, e.what());
      continue;
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
    } else {
      prop.source = *code;
      prop.abi_problem = llm::check_candidate_abi(*code, backend);
    }
    if (ctx.tried.count(content_hash_hex(std::as_bytes(std::span(prop.source.data(), prop.source.size()))))) continue;
    out.push_back(std::move(prop));
  }
  if (out.empty() && !errors.empty())
    throw ActorUnavailable(fmt::format("every LLM request of step {} failed; the last: {}", ctx.step, errors.back()));
  return out;
}

std::optional<Proposal> LlmActor::repair(const ActorContext& ctx, const Proposal& failed, const std::string& log) {
  if (failed.abi_problem.starts_with("the answer has no code")) return std::nullopt;
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

Critique LlmCritic::critique(const CriticInput& in) {
  Critique c = rules_.critique(in);
  auto p = render_prompt("critic", {{"step", std::to_string(++calls_)},
                                    {"problem", problem_text(*in.problem)},
                                    {"before_state", in.parent->state_text},
                                    {"after_state", in.after->correct ? describe_state(*in.problem, *in.target, *in.after,
                                                                                       in.after_signature)
                                                                      : "not correct"},
                                    {"action", in.proposal->actions.empty() ? "?" : in.proposal->actions[0]},
                                    {"plan", in.proposal->description},
                                    {"outcome", outcome_text(in.parent->measured, *in.after) + "\nfigures: " + c.text}});
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
    std::string outcome = m.value("correct", false) ? fmt::format("{:.2f}x vs parent", e.value("speedup_vs_parent", 1.0))
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
    if (!actions.count(action) || (field != "when_helps" && field != "when_hurts") || text.empty() || text.size() > 600) continue;
    if (!kb.action(action)) continue;
    kb.add_text_version("action", action, field, text, client.config().spec, prov);
    ++written;
  }
  if (note) *note = fmt::format("knowledge update: {} text versions written", written);
  return written;
}

}  // namespace mblast::loop
