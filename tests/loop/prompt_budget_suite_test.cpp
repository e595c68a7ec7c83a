// Every actor and critic request over the benchmark suite stays within its token budgets (issue
// 41, second aim). Each problem of benchmarks/suite (levels 1-3, imported at the small size) is
// rendered for a CUDA, an OpenCL and an RVV target with every memory section full: the ranked
// actions of a seeded KB for the problem's state, with constraints on each, twelve recalled
// states, three earlier kernels and the current candidate taken from the builtin policy's
// largest real variants, six critic texts of feedback and a long analysis. The check reads the
// sections back out of the text that would be sent (by the prompt file's literal text between
// placeholders), so it judges what leaves mblast, not what the renderer meant to cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "mblast/driver/import_command.h"
#include "mblast/kb/knowledge_base.h"
#include "mblast/loop/critic.h"
#include "mblast/loop/llm_actor.h"
#include "mblast/loop/prompts.h"
#include "mblast/policy/kernel_plan.h"
#include "mblast/policy/variants.h"
#include "mblast/problem.h"
#include "mblast/target.h"
#include "test_env.h"

namespace fs = std::filesystem;

namespace mblast::loop {
namespace {

std::string prompt_file(const std::string& name) {
  std::ifstream in(testing::source_dir() / "prompts" / (name + ".md"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using Budget = std::function<size_t(const std::string&)>;

// The sections of one rendered part (system or user), read back by the template's literals.
// Returns false when the text does not follow the template.
bool read_sections(const std::string& tmpl, const std::string& text,
                   std::vector<std::pair<std::string, std::string>>* out) {
  static const std::regex placeholder(R"(\{\{(\w+)\}\})");
  std::vector<std::string> literals, names;
  size_t last = 0;
  for (auto it = std::sregex_iterator(tmpl.begin(), tmpl.end(), placeholder); it != std::sregex_iterator(); ++it) {
    literals.push_back(tmpl.substr(last, static_cast<size_t>(it->position()) - last));
    names.push_back((*it)[1].str());
    last = static_cast<size_t>(it->position() + it->length());
  }
  literals.push_back(tmpl.substr(last));
  if (!text.starts_with(literals[0]) || !text.ends_with(literals.back())) return false;
  size_t pos = literals[0].size();
  for (size_t i = 0; i < names.size(); ++i) {
    size_t end;
    if (i + 1 == names.size())
      end = text.size() - literals.back().size();
    else
      end = text.find(literals[i + 1], pos);
    if (end == std::string::npos || end < pos) return false;
    out->emplace_back(names[i], text.substr(pos, end - pos));
    pos = end + literals[i + 1].size();
  }
  return true;
}

// What exceeds its budget in a request made from prompts/<name>.md: one line per section over
// its budget, and one for the whole request.
std::vector<std::string> over_budget(const std::string& name, const RenderedPrompt& p, const Budget& section,
                                     size_t whole) {
  const std::string file = prompt_file(name);
  const size_t sys = file.find("### system\n"), user = file.find("### user\n");
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> out;
  if (!read_sections(file.substr(sys + 11, user - sys - 11), p.system, &values) ||
      !read_sections(file.substr(user + 9), p.user, &values))
    return {name + ": the request does not follow its prompt file"};
  for (const auto& [n, v] : values)
    if (estimate_tokens(v) > section(n))
      out.push_back(fmt::format("{}: section {}: {} tokens, budget {}", name, n, estimate_tokens(v), section(n)));
  const size_t total = estimate_tokens(p.system) + estimate_tokens(p.user);
  if (total > whole) out.push_back(fmt::format("{}: the whole request: {} tokens, budget {}", name, total, whole));
  return out;
}

std::string filler(const std::string& what, size_t chars) {
  std::string t;
  while (t.size() < chars) t += what + " " + std::to_string(t.size()) + "; ";
  return t;
}

class PromptBudgetsOverTheSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / fmt::format("mblast-prompt-budgets-{}", ::getpid()));
    fs::create_directories(*dir_);
    for (const char* level : {"level1", "level2", "level3"}) {
      ImportArgs a;
      a.source = (testing::source_dir() / "benchmarks" / "suite" / level).string();
      a.out = (*dir_ / level).string();
      a.seeds = 1;
      a.inits = 1;
      a.json = true;  // one summary, not a line per file
      run_import(a);
    }
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  static fs::path* dir_;
};
fs::path* PromptBudgetsOverTheSuite::dir_ = nullptr;

TEST_F(PromptBudgetsOverTheSuite, EveryActorAndCriticRequestStaysWithinItsBudgets) {
  // The budgets themselves: a prompt's sections and its own text fit its whole budget.
  for (const char* name : {"actor", "critic", "fix_compile", "state_analysis", "knowledge_update"}) {
    const std::string file = prompt_file(name);
    static const std::regex placeholder(R"(\{\{(\w+)\}\})");
    size_t sum = estimate_tokens(std::regex_replace(file, placeholder, ""));
    for (auto it = std::sregex_iterator(file.begin(), file.end(), placeholder); it != std::sregex_iterator(); ++it)
      sum += section_budget_tokens((*it)[1].str());
    EXPECT_LE(sum, prompt_budget_tokens(name)) << name << ": its sections' budgets add up to more than the whole's";
  }

  kb::KnowledgeBase kb(*dir_ / "kb.sqlite");  // seeded: the curated actions with their texts
  std::vector<fs::path> problems;
  for (const auto& level : fs::directory_iterator(*dir_))
    if (level.is_directory())
      for (const auto& p : fs::directory_iterator(level.path()))
        if (fs::exists(p.path() / "problem.json")) problems.push_back(p.path());
  std::sort(problems.begin(), problems.end());
  ASSERT_GE(problems.size(), 50u) << "the suite did not import";

  size_t requests = 0, largest_actor = 0, largest_critic = 0;
  bool checker_seen_to_fail = false;
  for (const auto& pdir : problems) {
    const Problem problem = load_problem(pdir);
    const policy::KernelPlan plan = policy::plan_kernel(problem);
    for (const char* target_name : {"h100", "pocl-cpu", "rvv-qemu-256"}) {
      SCOPED_TRACE(problem.name + " on " + target_name);
      const Target target = find_target(target_name);
      std::vector<policy::Variant> variants = policy::generate_variants(plan, problem, target);
      if (variants.empty())
        if (auto v = policy::lowered_variant(problem, target)) variants.push_back(*v);
      std::sort(variants.begin(), variants.end(),
                [](const auto& a, const auto& b) { return a.source.size() > b.source.size(); });
      auto source_of = [&](size_t i) {
        return i < variants.size() ? variants[i].source : filler("// a kernel line", 30000 + 1000 * i);
      };

      Known start;
      start.id = "start";
      start.source = source_of(0);
      start.measured.correct = true;
      start.measured.cost = 1234.5;
      start.measured.unit = "us";
      start.measured.bandwidth_fraction = 0.31;
      start.measured.compute_fraction = 0.07;
      start.measured.eval = {{"device",
                              {{"name", "a device with a long name " + filler("x", 200)},
                               {"compute_units", 132},
                               {"preferred_vector_width_float", 8},
                               {"native_vector_width_float", 8},
                               {"global_mem_bytes", 85899345920.0},
                               {"cache_bytes", 52428800.0}}},
                             {"peak", {{"peak_bandwidth_bytes_per_s", 3.35e12}, {"peak_fp32_flops_per_s", 6.7e13}}}};
      const kb::StateSignature sig = signature_of(problem, target, start.measured);
      start.state_text = describe_state(problem, target, start.measured, sig);

      ActorContext ctx;
      ctx.problem = &problem;
      ctx.target = &target;
      ctx.plan = &plan;
      ctx.start = &start;
      ctx.beam = {&start};
      ctx.k = 4;
      ctx.step = 12;
      kb::RetrievalOptions ro;
      ro.limit = 0;
      ctx.ranked = kb.ranked_actions(sig, ro);
      ASSERT_FALSE(ctx.ranked.empty());
      for (size_t i = 0; i < ctx.ranked.size(); ++i) {
        auto& a = ctx.ranked[i];
        a.tries = 40, a.correct = 31, a.wins = 17;
        if (a.when_helps.empty()) a.when_helps = filler("it helped when", 500);
        if (a.when_hurts.empty()) a.when_hurts = filler("it hurt when", 500);
        a.constraints.push_back(
            {fmt::format("c{}a", i), filler(a.id + " gave a wrong answer", 380), "demote", "learned", 3});
        a.constraints.push_back(
            {fmt::format("c{}b", i), filler(a.id + " made it slower", 380), "demote", "learned", 2});
      }
      ctx.ranked.back().excluded = true;
      ctx.ranked.back().excluded_reason = filler("the target lacks the feature", 300);
      for (int i = 0; i < 12; ++i)
        ctx.recalled.push_back({filler("a memory-bound state", 300 + 10 * i), "problem" + std::to_string(i % 5),
                                target.name, ctx.ranked[static_cast<size_t>(i) % ctx.ranked.size()].id,
                                i % 3 ? "correct, 1.73x its parent" : "failed: wrong_output", 0.9 - 0.05 * i, i == 0,
                                i % 2 == 0});
      for (size_t i = 1; i <= 3; ++i) {
        ActorContext::PastKernel k;
        k.problem = "a-near-problem-" + std::to_string(i);
        k.target = target.name;
        k.source = source_of(i);
        k.cost = "812 us";
        k.bandwidth_fraction = 0.62;
        k.compute_fraction = 0.11;
        k.action = ctx.ranked[i % ctx.ranked.size()].id;
        ctx.past_kernels.push_back(k);
      }
      for (int i = 0; i < 6; ++i) ctx.recent_feedback.push_back(filler("the critic's text", 400));

      const RenderedPrompt actor =
          actor_prompt(ctx, start, 4, filler("the analysis", 3000),
                       feedback_text(ctx) + filler("- Your answer repeated a candidate", 600), memory_sections(ctx));
      // Every memory section has content (none is the "(none)" of an empty KB).
      for (const char* empty : {"(nothing ranked)", "(no rules learned yet)", "(no earlier state is near this one)",
                                "(none yet on this backend)", "(not measured)", "(none yet)"})
        EXPECT_EQ(actor.user.find(empty), std::string::npos) << empty;
      for (const auto& v : over_budget("actor", actor, section_budget_tokens, prompt_budget_tokens("actor")))
        ADD_FAILURE() << v;
      largest_actor = std::max(largest_actor, estimate_tokens(actor.system) + estimate_tokens(actor.user));

      // The critic on the largest rewrite: the second-largest variant replacing the largest.
      Proposal prop;
      prop.source = source_of(1);
      prop.actions = {ctx.ranked.front().id};
      prop.description = filler("the plan", 800);
      Measured after = start.measured;
      after.cost = 777.7;
      after.bandwidth_fraction = 0.52;
      CriticInput in;
      in.problem = &problem;
      in.target = &target;
      in.parent = &start;
      in.proposal = &prop;
      in.after = &after;
      in.before = sig;
      in.after_signature = signature_of(problem, target, after);
      Critique rules = RuleCritic().critique(in);
      rules.text += filler(" and more figures", 3000);
      const RenderedPrompt critic = critic_prompt(in, rules, 12);
      EXPECT_EQ(critic.user.find("(no change)"), std::string::npos) << "the critic sees no diff";
      for (const auto& v : over_budget("critic", critic, section_budget_tokens, prompt_budget_tokens("critic")))
        ADD_FAILURE() << v;
      largest_critic = std::max(largest_critic, estimate_tokens(critic.system) + estimate_tokens(critic.user));
      requests += 2;

      // The check can fail: the same requests against one lowered budget each.
      if (!checker_seen_to_fail) {
        auto lower_code = [](const std::string& n) { return n == "parent_source" ? 100 : section_budget_tokens(n); };
        auto lower_diff = [](const std::string& n) { return n == "diff" ? 50 : section_budget_tokens(n); };
        EXPECT_FALSE(over_budget("actor", actor, lower_code, prompt_budget_tokens("actor")).empty());
        EXPECT_FALSE(over_budget("actor", actor, section_budget_tokens, 1000).empty());
        EXPECT_FALSE(over_budget("critic", critic, lower_diff, prompt_budget_tokens("critic")).empty());
        checker_seen_to_fail = true;
      }
    }
  }
  std::printf(
      "%zu requests over %zu problems; the largest actor request %zu tokens (budget %zu), "
      "critic %zu (budget %zu)\n",
      requests, problems.size(), largest_actor, prompt_budget_tokens("actor"), largest_critic,
      prompt_budget_tokens("critic"));
}

}  // namespace
}  // namespace mblast::loop
