// What the LLM is shown (issue 41): the actor prompt carries the KB's memory (ranked actions,
// learned rules with evidence, constraints, nearest states with action and outcome, the best
// earlier kernels, the device facts); the critic sees the change as a diff; every section and
// every prompt stays within its token budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "mblast/loop/llm_actor.h"
#include "mblast/loop/prompts.h"
#include "test_env.h"

namespace mblast::loop {
namespace {

std::string prompt_file(const std::string& name) {
  std::ifstream in(testing::source_dir() / "prompts" / (name + ".md"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::set<std::string> placeholders(const std::string& text) {
  static const std::regex re(R"(\{\{(\w+)\}\})");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1].str());
  return names;
}

TEST(Prompts, EverySectionAndEveryPromptStaysWithinItsTokenBudget) {
  for (const char* name : {"actor", "critic", "fix_compile", "state_analysis", "knowledge_update"}) {
    const std::string text = prompt_file(name);
    ASSERT_FALSE(text.empty()) << name;
    const auto names = placeholders(text);
    std::map<std::string, std::string> huge;
    size_t budget = estimate_tokens(text);
    for (const auto& n : names) {
      huge[n] = std::string(200000, 'x') + "\nEND-OF-" + n;
      budget += section_budget_tokens(n);
    }
    // A placeholder used twice counts twice.
    for (const auto& n : names) {
      size_t uses = 0;
      for (size_t pos = text.find("{{" + n + "}}"); pos != std::string::npos; pos = text.find("{{" + n + "}}", pos + 1))
        ++uses;
      budget += section_budget_tokens(n) * (uses - 1);
    }
    const RenderedPrompt p = render_prompt(name, huge);
    EXPECT_LE(estimate_tokens(p.system) + estimate_tokens(p.user), budget) << name;
    for (const auto& n : names) {
      EXPECT_EQ(p.user.find("END-OF-" + n), std::string::npos) << name << ": " << n << " was not cut";
      EXPECT_LE(estimate_tokens(fit_tokens(huge[n], section_budget_tokens(n))), section_budget_tokens(n)) << n;
    }
    EXPECT_NE(p.user.find("more characters not shown"), std::string::npos) << name;
  }
  // Within its budget a value is not touched.
  EXPECT_EQ(fit_tokens("short", 10), "short");
}

TEST(Prompts, TheActorPromptCarriesTheMemory) {
  const Problem problem = load_problem(testing::source_dir() / "problems" / "relu");
  Target target;
  target.name = "pocl-cpu";
  target.backend = "opencl";
  target.description = "a CPU";
  target.spec = {{"name", "pocl-cpu"}};
  Known start;
  start.id = "start";
  start.source = "__kernel void relu_start() {}";
  start.state_text = "memory-bound relu at 0.10 of peak bandwidth";
  start.measured.correct = true;
  start.measured.cost = 120;
  start.measured.unit = "us";
  start.measured.eval = {{"device",
                          {{"name", "pthread-cpu"},
                           {"compute_units", 8},
                           {"preferred_vector_width_float", 8},
                           {"global_mem_bytes", 17179869184.0}}},
                         {"peak", {{"peak_bandwidth_bytes_per_s", 2.0e10}, {"peak_fp32_flops_per_s", 3.0e11}}}};
  ActorContext ctx;
  ctx.problem = &problem;
  ctx.target = &target;
  ctx.start = &start;
  ctx.beam = {&start};
  ctx.k = 1;
  ctx.step = 1;
  kb::RankedAction a;
  a.id = "opencl.thread-coarsening";
  a.title = "coarsen";
  a.when_helps = "elementwise kernels with tiny work items";
  a.when_hurts = "kernels that already saturate the cores";
  a.tries = 5;
  a.correct = 4;
  a.wins = 3;
  a.constraints.push_back({"c1", "opencl.thread-coarsening gave a wrong answer on pocl-cpu", "demote", "learned", 2});
  ctx.ranked.push_back(a);
  kb::RankedAction excluded;
  excluded.id = "opencl.images";
  excluded.excluded = true;
  excluded.excluded_reason = "no image support on this device";
  ctx.ranked.push_back(excluded);
  ctx.recalled.push_back({"memory-bound gelu at 0.12 of peak", "gelu", "pocl-cpu", "opencl.vector-load-store-128bit",
                          "correct, 1.80x its parent", 0.7, false, true});
  ActorContext::PastKernel k;
  k.problem = "gelu";
  k.target = "pocl-cpu";
  k.source = "__kernel void gelu_best(__global const float* x) { /* the fastest gelu */ }";
  k.bandwidth_fraction = 0.62;
  k.cost = "40 us";
  ctx.past_kernels.push_back(k);
  ctx.recent_feedback = {"the last rewrite was 1.2x slower"};

  const RenderedPrompt p = actor_prompt(ctx, start, 1, "memory-bound", feedback_text(ctx), memory_sections(ctx));
  for (const char* needle :
       {"elementwise kernels with tiny work items", "kernels that already saturate the cores",
        "5 tries, 4 correct, 3 wins", "gave a wrong answer on pocl-cpu", "2 experiences",
        "opencl.images is excluded here: no image support", "memory-bound gelu at 0.12 of peak",
        "opencl.vector-load-store-128bit -> correct, 1.80x its parent", "gelu_best", "0.62 of peak bandwidth",
        "compute units: 8", "preferred float vector width: 8", "20.0 GB/s memory bandwidth", "300.0 GFLOP/s",
        "global memory: 16.0 GiB", "1.2x slower", "relu_start"})
    EXPECT_NE(p.user.find(needle), std::string::npos) << needle << "\n" << p.user;
  // The nearest state appears once, with the action taken from it, not once per neighbour.
  EXPECT_EQ(p.user.find("memory-bound gelu at 0.12 of peak"), p.user.rfind("memory-bound gelu at 0.12 of peak"));

  // --show-prompt prints the same prompt.
  PromptPreview preview;
  EXPECT_TRUE(preview.propose(ctx).empty());
  EXPECT_NE(preview.prompt().find("gelu_best"), std::string::npos);
  EXPECT_NE(preview.prompt().find("### system"), std::string::npos);

  // The facts of the other backends' runners, under their own names.
  start.measured.eval["device"] = {{"name", "NVIDIA H100"},
                                   {"compute_capability", "9.0"},
                                   {"sm_count", 132},
                                   {"memory_bytes", 85899345920.0},
                                   {"l2_bytes", 52428800}};
  const RenderedPrompt cuda = actor_prompt(ctx, start, 1, "", feedback_text(ctx), memory_sections(ctx));
  for (const char* needle :
       {"compute capability: 9.0", "streaming multiprocessors: 132", "device memory: 80.0 GiB", "L2 cache: 50.0 MiB"})
    EXPECT_NE(cuda.user.find(needle), std::string::npos) << needle << "\n" << cuda.user;
  start.measured.eval["device"] = {{"name", "qemu-riscv64 rv64 V 1.0, VLEN 256"},
                                   {"vlen_bits", 256},
                                   {"march", "rv64gcv"},
                                   {"timing", "dynamic instruction counts (QEMU TCG plugin)"}};
  const RenderedPrompt rvv = actor_prompt(ctx, start, 1, "", feedback_text(ctx), memory_sections(ctx));
  for (const char* needle :
       {"vector register length (VLEN): 256 bits", "-march: rv64gcv", "dynamic instruction counts"})
    EXPECT_NE(rvv.user.find(needle), std::string::npos) << needle << "\n" << rvv.user;
}

TEST(Prompts, TheCriticSeesTheChangeAsALineDiff) {
  const std::string before = "a\nb\nc\nd\ne\nf\ng\nh\n";
  const std::string after = "a\nb\nc\nD\ne\nf\ng\nh\ni\n";
  const std::string d = line_diff(before, after, 1);
  EXPECT_NE(d.find("-d\n+D\n"), std::string::npos) << d;
  EXPECT_NE(d.find("+i\n"), std::string::npos) << d;
  EXPECT_NE(d.find(" c\n"), std::string::npos) << d;  // context
  EXPECT_EQ(d.find(" a\n"), std::string::npos) << d;  // beyond the context
  EXPECT_NE(d.find("@@"), std::string::npos) << d;
  EXPECT_EQ(line_diff(before, before), "(no change)\n");
}

}  // namespace
}  // namespace mblast::loop
