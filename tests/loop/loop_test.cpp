// The loop's guarantees on a real target (rvv under QEMU: deterministic costs), with a scripted
// actor so every case is under the test's control: a wrong-but-fast candidate and one that
// does not build are recorded and never returned; a faster one is; the KB holds the
// experiences, statistics and the constraint from the failed build; a run resumes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <tuple>

#include "mblast/kb/knowledge_base.h"
#include "mblast/loop/builtin_actor.h"
#include "mblast/loop/optimizer.h"
#include "mblast/loop/run_store.h"
#include "mblast/tensor.h"
#include "test_env.h"

namespace fs = std::filesystem;

namespace mblast::loop {
namespace {

// relu kept scalar: the start the scripted actor improves on.
const char* kScalarRelu = R"(#include <mblast/abi.h>
int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)ctx, (void)state, (void)par, (void)n_par;
  if (n_in != 1 || n_out != 1) return 1;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  size_t n = out[0].nbytes / sizeof(float);
#pragma clang loop vectorize(disable) interleave(disable)
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}
)";

// Vectorised and right.
const char* kVectorRelu = R"(#include <mblast/abi.h>
#include <riscv_vector.h>
int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)ctx, (void)state, (void)par, (void)n_par;
  if (n_in != 1 || n_out != 1) return 1;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  for (size_t n = out[0].nbytes / sizeof(float), vl; n > 0; n -= vl, x += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    __riscv_vse32_v_f32m8(y, __riscv_vfmax_vf_f32m8(__riscv_vle32_v_f32m8(x, vl), 0.0f, vl), vl);
  }
  return 0;
}
)";

// Vectorised, fast, and wrong (clamps at 1 instead of 0).
const char* kWrongRelu = R"(#include <mblast/abi.h>
#include <riscv_vector.h>
int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)ctx, (void)state, (void)par, (void)n_par, (void)n_in, (void)n_out;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  for (size_t n = out[0].nbytes / sizeof(float), vl; n > 0; n -= vl, x += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    __riscv_vse32_v_f32m8(y, __riscv_vfmax_vf_f32m8(__riscv_vle32_v_f32m8(x, vl), 1.0f, vl), vl);
  }
  return 0;
}
)";

const char* kBroken = "#include <mblast/abi.h>\nint mblast_run(const mblast_context* ctx { return 0; }\n";

class ScriptedActor : public Actor {
 public:
  std::vector<std::vector<Proposal>> steps;
  int calls = 0;
  std::string name() const override { return "scripted"; }
  std::vector<Proposal> propose(const ActorContext& ctx) override {
    if (calls == 0) seen_tried = ctx.tried.size();
    saw_ranked = !ctx.ranked.empty();
    if (calls >= static_cast<int>(steps.size())) return {};
    return steps[calls++];
  }
  size_t seen_tried = 0;
  bool saw_ranked = false;
};

Proposal proposal(const char* source, const std::string& action, const std::string& what) {
  Proposal p;
  p.source = source;
  p.extension = ".rvv.c";
  p.actions = {action};
  p.family = "scripted";
  p.description = what;
  p.model = "scripted";
  return p;
}

class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto targets = testing::available_targets("rvv", &why);
    if (targets.empty()) GTEST_SKIP() << "no rvv target here: " << why;
    target_ = targets.front();
    for (const auto& t : targets)
      if (t.name == "rvv-qemu-128") target_ = t;
    dir_ = fs::temp_directory_path() / ("mblast-loop-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "start.rvv.c") << kScalarRelu;
    options_.kb_path = dir_ / "kb.sqlite";
    options_.runs_dir = dir_ / "runs";
    options_.quiet = true;
    options_.eval.min_repeats = 3;
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }
  OptimizeInput input() {
    return {load_problem(testing::source_dir() / "problems" / "relu"), target_, dir_ / "start.rvv.c", "problems/relu"};
  }
  Target target_;
  fs::path dir_;
  OptimizeOptions options_;
};

TEST_F(LoopTest, WrongAndBrokenAreRecordedNeverReturnedAndTheKbLearns) {
  ScriptedActor actor;
  actor.steps = {{proposal(kWrongRelu, "rvv.lmul-large-for-streaming", "wrong clamp"),
                  proposal(kBroken, "rvv.strip-mining-vsetvl", "does not compile"),
                  proposal(kVectorRelu, "rvv.lmul-large-for-streaming", "vectorised at m8")}};
  RuleCritic critic;
  nlohmann::json r = optimize(input(), actor, critic, options_);
  EXPECT_TRUE(r["correct"].get<bool>());
  EXPECT_TRUE(r["improved"].get<bool>()) << r.dump(2);
  EXPECT_GT(r["speedup"].get<double>(), 2.0) << r.dump(2);
  std::ifstream f(r["candidate"].get<std::string>());
  std::string returned((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(returned, kVectorRelu);
  EXPECT_EQ(r["evaluations"].get<int>(), 3);
  EXPECT_EQ(r["stop_reason"].get<std::string>(), "the actor has nothing more to propose");
  EXPECT_TRUE(actor.saw_ranked);

  kb::KnowledgeBase kb(options_.kb_path);
  auto& db = kb.db();
  EXPECT_EQ(db.query_int("SELECT count(*) FROM experiences"), 3);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM experiences WHERE correct = 1 AND speedup > 2"), 1);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM experiences WHERE failure_kind = 'wrong_output'"), 1);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM experiences WHERE failure_kind = 'build_failed' "
                         "AND action_id = 'rvv.strip-mining-vsetvl'"),
            1);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM experiences WHERE critic_text LIKE '%wrong answer%'"), 1);
  // the failed build became a learned constraint on that action for this target (the KB was
  // created with the seed, whose own constraints are not counted here)
  const char* learned =
      "SELECT count(*) FROM constraints c JOIN provenance p ON p.id = c.provenance_id "
      "WHERE p.kind = 'learned' AND c.action_id = ";
  EXPECT_EQ(db.query_int(std::string(learned) + "'rvv.strip-mining-vsetvl'"), 1);
  // the wrong answer became a demotion of its action for this target and op class, saying where
  // and how the output was wrong, with the experience as evidence
  EXPECT_EQ(db.query_int(std::string(learned) +
                         "'rvv.lmul-large-for-streaming' AND c.effect = 'demote' "
                         "AND c.text LIKE '%wrong answer on " +
                         target_.name +
                         "%elements%' "
                         "AND c.predicate LIKE '%op_class%'"),
            1);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM constraint_evidence ce JOIN experiences e ON e.id = ce.experience_id "
                         "WHERE e.failure_kind = 'wrong_output'"),
            1);
  EXPECT_EQ(r["knowledge"]["constraints_written"].get<int>(), 2);
  // statistics follow the experiences
  EXPECT_GE(db.query_int("SELECT sum(tries) FROM policy_stats WHERE action_id = 'rvv.lmul-large-for-streaming'"), 2);
  // start + the vectorised one are states; the wrong one is not
  EXPECT_EQ(db.query_int("SELECT count(*) FROM states"), 2);

  // the run folder: the events and the reports
  RunStore run = RunStore::open(options_.runs_dir, r["run"]);
  EXPECT_EQ(run.events().size(), 1u + 3u + 1u + 1u);  // start, 3 candidates, 1 step, stop
  EXPECT_TRUE(fs::exists(run.dir() / "report.md"));
  EXPECT_EQ(run.meta()["status"], "finished");
}

TEST_F(LoopTest, NothingFasterReturnsTheStartAndSaysSo) {
  ScriptedActor actor;
  actor.steps = {{proposal(kWrongRelu, "rvv.lmul-large-for-streaming", "wrong clamp")}};
  RuleCritic critic;
  nlohmann::json r = optimize(input(), actor, critic, options_);
  EXPECT_TRUE(r["correct"].get<bool>());
  EXPECT_FALSE(r["improved"].get<bool>());
  EXPECT_EQ(r["speedup"].get<double>(), 1.0);
  EXPECT_NE(r["note"].get<std::string>().find("start is returned"), std::string::npos);
  std::ifstream f(r["candidate"].get<std::string>());
  std::string returned((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(returned, kScalarRelu);
}

// What each failure teaches: a hang or a crash demotes the action that caused it; a refusal of the
// measurement (the clock disagreed, or a time beyond the speed of light) does not, since a loaded
// machine causes those too and the action would be blamed for the machine.
TEST(RuleCriticTest, AHangDemotesItsActionAMeasurementRefusalDoesNot) {
  Problem problem;
  problem.name = "relu";
  problem.op_class = "elementwise";
  Target target;
  target.name = "rvv-qemu-256";
  target.backend = "rvv";
  Known parent;
  parent.measured.correct = true;
  parent.measured.cost = 100;
  parent.measured.unit = "instructions";
  const Proposal p = proposal(kScalarRelu, "rvv.unroll-it", "unrolled");
  auto lessons = [&](const std::string& kind) {
    Measured after;
    after.correct = false;
    after.failure_kind = kind;
    after.reason = "what the runner said";
    CriticInput in;
    in.problem = &problem;
    in.target = &target;
    in.parent = &parent;
    in.proposal = &p;
    in.after = &after;
    return RuleCritic().critique(in).constraints;
  };
  for (const char* kind : {"timeout", "crashed", "wrong_output"}) {
    const auto c = lessons(kind);
    ASSERT_EQ(c.size(), 1u) << kind;
    EXPECT_EQ(c[0].effect, "demote");
    EXPECT_NE(c[0].text.find(kind), std::string::npos) << c[0].text;
    EXPECT_EQ(c[0].predicate.value("target", ""), "rvv-qemu-256");
  }
  for (const char* kind : {"timing_inconsistent", "implausible_speed", "runner_error", "unavailable", "build_failed"})
    EXPECT_TRUE(lessons(kind).empty()) << kind;
}

TEST_F(LoopTest, ASlowdownDemotesItsActionAndAnAnswerWithNoKernelTeachesNothing) {
  std::ofstream(dir_ / "vector.rvv.c") << kVectorRelu;
  OptimizeInput in = input();
  in.start = dir_ / "vector.rvv.c";
  Proposal nothing = proposal("I would unroll it, but here is no code.", "rvv.unroll-it", "no code");
  nothing.no_kernel = true;
  ScriptedActor actor;
  actor.steps = {{nothing, proposal(kScalarRelu, "rvv.scalar-again", "scalar loop")}};
  RuleCritic critic;
  nlohmann::json r = optimize(in, actor, critic, options_);
  EXPECT_FALSE(r["improved"].get<bool>());
  EXPECT_EQ(r["evaluations"].get<int>(), 1);  // the answer with no kernel was not evaluated
  kb::KnowledgeBase kb(options_.kb_path);
  auto& db = kb.db();
  EXPECT_EQ(db.query_int("SELECT count(*) FROM experiences"), 1);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM experiences WHERE action_id = 'rvv.unroll-it'"), 0);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM constraints WHERE action_id = 'rvv.unroll-it'"), 0);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM constraints WHERE action_id = 'rvv.scalar-again' AND effect = 'demote' "
                         "AND text LIKE '%slower on " +
                         target_.name + "%'"),
            1);
  RunStore run = RunStore::open(options_.runs_dir, r["run"]);
  int no_kernel = 0;
  for (const auto& e : run.events())
    if (e.value("type", "") == "candidate" && e["measured"].value("failure_kind", "") == "no_kernel") ++no_kernel;
  EXPECT_EQ(no_kernel, 1);
}

TEST_F(LoopTest, AWrongGeneratedStartGivesWayToTheNextOne) {
  std::ofstream(dir_ / "wrong.rvv.c") << kWrongRelu;
  std::ofstream(dir_ / "broken.rvv.c") << kBroken;
  OptimizeInput in = input();
  in.start = dir_ / "wrong.rvv.c";
  in.fallback_starts = {dir_ / "broken.rvv.c", dir_ / "start.rvv.c"};
  ScriptedActor actor;
  actor.steps = {{proposal(kVectorRelu, "rvv.lmul-large-for-streaming", "vectorised at m8")}};
  RuleCritic critic;
  nlohmann::json r = optimize(in, actor, critic, options_);
  EXPECT_TRUE(r["correct"].get<bool>());
  EXPECT_TRUE(r["improved"].get<bool>()) << r.dump(2);
  EXPECT_EQ(actor.seen_tried, 3u);  // the two rejected starts and the scalar one
  RunStore run = RunStore::open(options_.runs_dir, r["run"]);
  ASSERT_FALSE(run.events().empty());
  EXPECT_EQ(run.events().front()["type"], "start");
  EXPECT_NE(run.events().front()["description"].get<std::string>().find("start.rvv.c"), std::string::npos);
  kb::KnowledgeBase kb(options_.kb_path);
  // the rejected starts are runs in the KB, failed ones
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM runs WHERE correct = 0"), 2);

  // None correct: one line naming how many were tried and why the first failed.
  in.fallback_starts = {dir_ / "broken.rvv.c"};
  ScriptedActor idle;
  try {
    optimize(in, idle, critic, options_);
    ADD_FAILURE() << "no correct start, and no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("none of the 2 generated starting kernels is correct"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("wrong_output"), std::string::npos) << e.what();
  }
}

TEST_F(LoopTest, ResumeContinuesWhereTheRunStopped) {
  ScriptedActor first;
  first.steps = {{proposal(kWrongRelu, "rvv.lmul-large-for-streaming", "wrong clamp")}};
  RuleCritic critic;
  options_.budget.max_evals = 1;
  nlohmann::json r1 = optimize(input(), first, critic, options_);
  EXPECT_EQ(r1["evaluations"].get<int>(), 1);

  ScriptedActor second;
  second.steps = {{proposal(kWrongRelu, "rvv.lmul-large-for-streaming", "the same wrong clamp again"),
                   proposal(kVectorRelu, "rvv.lmul-large-for-streaming", "vectorised at m8")}};
  options_.budget.max_evals = 4;
  options_.resume = r1["run"];
  nlohmann::json r2 = optimize(input(), second, critic, options_);
  EXPECT_EQ(r2["run"], r1["run"]);
  EXPECT_EQ(second.seen_tried, 2u);            // the start and the wrong one, from the first session
  EXPECT_EQ(r2["evaluations"].get<int>(), 2);  // the repeat is skipped, not evaluated again
  EXPECT_TRUE(r2["improved"].get<bool>());
  kb::KnowledgeBase kb(options_.kb_path);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM experiences"), 2);
}

TEST_F(LoopTest, BuiltinPolicyMakesReluFasterThanScalar) {
  Problem p = load_problem(testing::source_dir() / "problems" / "relu");
  policy::KernelPlan plan = policy::plan_kernel(p);
  std::string note;
  auto variants = builtin_variants(p, target_, plan, kScalarRelu, ".rvv.c", &note);
  if (variants.empty()) GTEST_SKIP() << "the rvv generators make nothing for relu: " << note;
  BuiltinActor actor(std::move(variants));
  RuleCritic critic;
  options_.budget.max_evals = 3;
  nlohmann::json r = optimize(input(), actor, critic, options_);
  EXPECT_TRUE(r["correct"].get<bool>());
  EXPECT_TRUE(r["improved"].get<bool>()) << r.dump(2);
  EXPECT_GT(r["speedup"].get<double>(), 1.5);
  EXPECT_EQ(r["policy"], "builtin");
}

// Within a family, the builtin policy follows what each parameter value did: after LMUL m8 did
// well and m2 badly (at other unrolls), the next of (m2, u2), (m2, u4), (m8, u2) is m8 — though
// (m2, u4) is nearer the best so far (m4, u4) by one parameter.
TEST(BuiltinActorTest, FollowsWhatEachParameterValueDid) {
  auto variant = [](int lmul, int unroll) {
    policy::Variant v;
    v.family = "rvv.elementwise.strip";
    v.params = {{"lmul", lmul}, {"unroll", unroll}};
    v.source = "/* lmul " + std::to_string(lmul) + " unroll " + std::to_string(unroll) + " */";
    v.extension = ".rvv.c";
    return v;
  };
  // (lmul, unroll, cost) measured so far, against a start of cost 100
  const std::vector<std::tuple<int, int, double>> measured = {{1, 1, 340}, {4, 1, 85}, {4, 4, 41},
                                                              {8, 1, 43},  {4, 2, 46}, {2, 1, 172}};
  std::vector<policy::Variant> variants;
  std::vector<Known> history;
  ActorContext ctx;
  for (const auto& [l, u, cost] : measured) {
    variants.push_back(variant(l, u));
    Known k;
    k.id = content_hash_hex(variants.back().source);
    k.family = variants.back().family;
    k.params = variants.back().params;
    k.measured.correct = true;
    k.measured.cost = cost;
    history.push_back(k);
    ctx.tried.insert(k.id);
  }
  for (auto [l, u] : {std::pair{2, 2}, {2, 4}, {8, 2}}) variants.push_back(variant(l, u));
  Known start;
  start.measured.correct = true;
  start.measured.cost = 100;
  ctx.start = &start;
  ctx.history = &history;
  ctx.beam = {&history[2]};  // (m4, u4): 2.44x
  ctx.k = 1;
  BuiltinActor actor(variants);
  const auto proposals = actor.propose(ctx);
  ASSERT_EQ(proposals.size(), 1u);
  EXPECT_EQ(proposals[0].params, (nlohmann::json{{"lmul", 8}, {"unroll", 2}})) << proposals[0].params.dump();
}

// A step explores more than one family, but not one this run has measured twice and found more
// than 1.5x behind the leader: its share goes to the leader's untried variants. A family tried
// once keeps its share.
TEST(BuiltinActorTest, AStepGoesToTheLeaderOnceAFamilyHasClearlyLost) {
  auto variant = [](const std::string& family, int n) {
    policy::Variant v;
    v.family = family;
    v.params = {{"n", n}};
    v.source = "/* " + family + " " + std::to_string(n) + " */";
    v.extension = ".opencl.cpp";
    return v;
  };
  auto propose = [&](const std::vector<std::tuple<std::string, int, double>>& measured) {
    std::vector<policy::Variant> variants;
    for (const std::string f : {"item", "group"})
      for (int n = 0; n < 6; ++n) variants.push_back(variant(f, n));
    std::vector<Known> history;
    ActorContext ctx;
    for (const auto& [f, n, cost] : measured) {
      Known k;
      k.id = content_hash_hex(variant(f, n).source);
      k.family = f;
      k.params = {{"n", n}};
      k.measured.correct = true;
      k.measured.cost = cost;
      history.push_back(k);
      ctx.tried.insert(k.id);
    }
    static Known start;
    start.measured.correct = true;
    start.measured.cost = 100;
    ctx.start = &start;
    ctx.history = &history;
    ctx.beam = {&history[0]};
    ctx.k = 4;
    BuiltinActor actor(variants);
    std::map<std::string, int> by_family;
    for (const auto& p : actor.propose(ctx)) ++by_family[p.family];
    return by_family;
  };
  // item at 3.3x, group at 1.25x and 1.1x: all four from item
  auto lost = propose({{"item", 0, 30}, {"item", 1, 60}, {"group", 0, 80}, {"group", 1, 90}});
  EXPECT_EQ(lost["item"], 4);
  EXPECT_EQ(lost["group"], 0);
  // group tried once: it keeps its share of the step
  auto once = propose({{"item", 0, 30}, {"item", 1, 60}, {"group", 0, 80}});
  EXPECT_EQ(once["item"], 2);
  EXPECT_EQ(once["group"], 2);
}

}  // namespace
}  // namespace mblast::loop
