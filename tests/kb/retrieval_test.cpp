// Retrieval on crafted data: signature distance, nearest states with the same-target preference,
// transfer from other targets with a discount, constraints, text filter, examples, priors.
#include <gtest/gtest.h>

#include <cmath>

#include "kb_test_support.h"
#include "mblast/kb/seed.h"

namespace mblast::kb {
namespace {

using testing::add_experience;
using testing::add_state;
using testing::signature;

const RankedAction* find(const std::vector<RankedAction>& v, const std::string& id) {
  for (const auto& r : v)
    if (r.id == id) return &r;
  return nullptr;
}

int rank_of(const std::vector<RankedAction>& v, const std::string& id) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].id == id) return static_cast<int>(i);
  return -1;
}

class KbRetrieval : public ::testing::Test {
 protected:
  void SetUp() override {
    kb.add_target(testing::target("h100", "cuda", "sm_90"));
    kb.add_target(testing::target("h200", "cuda", "sm_90"));
    kb.add_target(testing::target("a100", "cuda", "sm_80"));
    kb.add_target(testing::target("adreno-740", "opencl", "adreno-a7xx"));
    for (const char* id : {"cuda.vec", "cuda.tile", "cuda.shuffle", "cuda.fancy"})
      kb.add_action(testing::action(id, "cuda", 0.05));
    kb.add_action(testing::action("opencl.vec", "opencl", 0.05));
  }
  KnowledgeBase kb = KnowledgeBase::in_memory();
};

TEST(KbSignature, DistanceIsZeroForIdenticalAndGrowsWithEachDifference) {
  const auto a = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.5, 0.4, 0.05);
  EXPECT_DOUBLE_EQ(signature_distance(a, a), 0.0);
  auto b = a;
  b.bandwidth_fraction = 0.9;
  EXPECT_NEAR(signature_distance(a, b), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(signature_distance(a, b), signature_distance(b, a));
  auto c = a;
  c.op_class = "norm";  // same group: half the op weight
  EXPECT_NEAR(signature_distance(a, c), 0.5, 1e-12);
  c.op_class = "matmul";
  EXPECT_NEAR(signature_distance(a, c), 1.0, 1e-12);
  auto d = a;
  d.arch = "sm_80";
  EXPECT_NEAR(signature_distance(a, d), 0.5, 1e-12);
  d.backend = "opencl";
  EXPECT_NEAR(signature_distance(a, d), 2.0, 1e-12);
  auto e = a;
  e.arithmetic_intensity = 50;  // two decades
  EXPECT_NEAR(signature_distance(a, e), 1.0, 1e-12);
  auto f = a;
  f.bandwidth_fraction.reset();  // unknown: a fixed half share
  EXPECT_NEAR(signature_distance(a, f), 0.5, 1e-12);
}

TEST(KbSignature, ClusterAndBottleneck) {
  EXPECT_EQ(signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.55, 0.02).cluster(),
            "reduction/softmax|memory|ai-2|sol2");
  EXPECT_EQ(signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.55, 0.02).target_family(), "cuda:sm_90");
  StateSignature unknown;
  unknown.backend = "rvv";
  EXPECT_EQ(unknown.cluster(), "?|?|ai?|sol?");
  EXPECT_EQ(classify_bottleneck(0.8, 0.1), "memory");
  EXPECT_EQ(classify_bottleneck(0.2, 0.7), "compute");
  EXPECT_EQ(classify_bottleneck(0.1, 0.1), "latency");
  EXPECT_EQ(classify_bottleneck(0.7, 0.65), "balanced");
  EXPECT_EQ(arch_of_target_spec("cuda", R"({"arch": {"sm": "90"}})"), "sm_90");
  EXPECT_EQ(arch_of_target_spec("rvv", R"({"arch": {"march": "rv64gcv", "vlen": 256, "zvfh": true}})"),
            "rv64gcv_zvfh-vlen256");
  EXPECT_EQ(arch_of_target_spec("opencl", R"({"arch": {"family": "adreno", "generation": "a7xx"}})"), "adreno-a7xx");
  EXPECT_EQ(arch_of_target_spec("opencl", R"({"name": "pocl-cpu"})"), "generic");
}

TEST_F(KbRetrieval, NearestStatesPreferTheSameTargetAndOrderByWeight) {
  const auto q = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.4, 0.02);
  const auto same = add_state(kb, q, "same target, same signature");
  const auto other_target = add_state(kb, signature("cuda", "sm_90", "h200", "softmax", "memory", 0.3, 0.4, 0.02));
  const auto far_same = add_state(kb, signature("cuda", "sm_90", "h100", "matmul", "compute", 60, 0.1, 0.8));
  const auto other_backend =
      add_state(kb, signature("opencl", "adreno-a7xx", "adreno-740", "softmax", "memory", 0.3, 0.4, 0.02));
  RetrievalOptions o;
  const auto near = kb.nearest_states(q, 10, o);
  ASSERT_EQ(near.size(), 4u);
  EXPECT_EQ(near[0].id, same);
  EXPECT_TRUE(near[0].same_target);
  EXPECT_DOUBLE_EQ(near[0].weight, 1.0);
  EXPECT_EQ(near[0].text, "same target, same signature");
  EXPECT_EQ(near[1].id, other_target);
  EXPECT_DOUBLE_EQ(near[1].weight, o.transfer_discount);  // identical signature, another target
  EXPECT_FALSE(near[1].same_target);
  // The cross-backend state has the same op and numbers but pays the backend term and both discounts.
  const auto& ob = near[2].id == other_backend ? near[2] : near[3];
  EXPECT_NEAR(ob.weight, std::exp(-(o.weights.backend)) * o.transfer_discount * o.cross_backend_discount, 1e-12);
  EXPECT_EQ(kb.nearest_states(q, 2, o).size(), 2u);
  o.same_backend_only = true;
  for (const auto& n : kb.nearest_states(q, 10, o)) EXPECT_NE(n.id, other_backend);
  (void)far_same;
}

TEST_F(KbRetrieval, TheCachedSignaturesFollowNewAndRolledBackStates) {
  const auto q = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.4, 0.02);
  EXPECT_TRUE(kb.nearest_states(q, 5).empty());
  const auto first = add_state(kb, q);
  ASSERT_EQ(kb.nearest_states(q, 5).size(), 1u);
  {
    Transaction tx(kb.db());
    add_state(kb, q);
    EXPECT_EQ(kb.nearest_states(q, 5).size(), 2u);  // seen inside the transaction
  }                                                 // rolled back
  const auto after = kb.nearest_states(q, 5);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].id, first);
  const auto second = add_state(kb, signature("cuda", "sm_90", "h100", "matmul", "compute", 60, 0.1, 0.8));
  const auto both = kb.nearest_states(q, 5);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].id, first);
  EXPECT_EQ(both[1].id, second);
}

TEST(KbRetrievalFile, StatesWrittenByAnotherProcessAreSeen) {
  testing::ScratchDir dir;
  KnowledgeBase reader(dir / "kb.sqlite");
  reader.add_target(testing::target("h100", "cuda", "sm_90"));
  const auto q = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.4, 0.02);
  EXPECT_TRUE(reader.nearest_states(q, 5).empty());
  {
    KnowledgeBase writer(dir / "kb.sqlite");
    add_state(writer, q);
  }
  EXPECT_EQ(reader.nearest_states(q, 5).size(), 1u);
}

TEST_F(KbRetrieval, WithoutEvidenceActionsRankByTheirPriors) {
  kb.add_action([] {
    auto a = testing::action("cuda.big", "cuda", 0.3);
    a.applies_to = {{"op_classes", {"matmul"}}, {"bottlenecks", {"compute"}}};
    return a;
  }());
  const auto q = signature("cuda", "sm_90", "h100", "matmul", "compute", 60, 0.1, 0.7);
  const auto ranked = kb.ranked_actions(q);
  ASSERT_FALSE(ranked.empty());
  EXPECT_EQ(ranked[0].id, "cuda.big");
  EXPECT_DOUBLE_EQ(ranked[0].mean_log_speedup, 0.3);
  EXPECT_EQ(find(ranked, "opencl.vec"), nullptr) << "only actions of the query's backend";
  // Tags that name another op class and bottleneck scale the prior down.
  const auto q2 = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.5, 0.02);
  const auto r2 = kb.ranked_actions(q2);
  const RetrievalOptions o;
  EXPECT_NEAR(find(r2, "cuda.big")->prior_log_speedup, 0.3 * o.op_mismatch_factor * o.bottleneck_mismatch_factor,
              1e-12);
  EXPECT_LT(rank_of(r2, "cuda.vec"), rank_of(r2, "cuda.big"));
}

TEST_F(KbRetrieval, EvidenceOnTheSameTargetOutweighsThePrior) {
  const auto q = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.4, 0.02);
  const auto s = add_state(kb, q);
  for (int i = 0; i < 4; ++i)
    add_experience(kb, s, "cuda.shuffle", "h100", true, 1.8, "", "shuffle v" + std::to_string(i));
  add_experience(kb, s, "cuda.fancy", "h100", false, 0, "wrong_output");
  add_experience(kb, s, "cuda.fancy", "h100", false, 0, "wrong_output");
  const auto ranked = kb.ranked_actions(q);
  ASSERT_EQ(ranked[0].id, "cuda.shuffle");
  const RankedAction& r = ranked[0];
  EXPECT_EQ(r.tries, 4);
  EXPECT_EQ(r.wins, 4);
  EXPECT_EQ(r.same_target_tries, 4);
  EXPECT_EQ(r.transferred_tries, 0);
  const RetrievalOptions o;
  const double expect = (o.prior_strength * 0.05 + 4 * std::log(1.8)) / (o.prior_strength + 4);
  EXPECT_NEAR(r.mean_log_speedup, expect, 1e-9);
  EXPECT_EQ(r.examples.size(), 3u) << "at most `examples` distinct candidates";
  for (const auto& e : r.examples) EXPECT_DOUBLE_EQ(e.speedup, 1.8);
  EXPECT_EQ(r.cluster_stats.tries, 4);
  EXPECT_EQ(r.cluster_stats.wins, 4);
  EXPECT_NEAR(r.cluster_stats.mean_log_speedup, std::log(1.8), 1e-9);
  // Failures pull an action below the untried ones.
  EXPECT_GT(rank_of(ranked, "cuda.fancy"), rank_of(ranked, "cuda.vec"));
  EXPECT_LT(find(ranked, "cuda.fancy")->mean_log_speedup, 0);
}

TEST_F(KbRetrieval, EvidenceFromAnotherTargetTransfersWithADiscount) {
  // What won on a100 (sm_80) is all we know; the query is on h100 (sm_90).
  const auto on_a100 = signature("cuda", "sm_80", "a100", "softmax", "memory", 0.3, 0.4, 0.02);
  const auto s = add_state(kb, on_a100);
  for (int i = 0; i < 3; ++i) add_experience(kb, s, "cuda.tile", "a100", true, 2.0, "", "tile " + std::to_string(i));
  const auto q = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.4, 0.02);
  RetrievalOptions o;
  const auto ranked = kb.ranked_actions(q, o);
  ASSERT_EQ(ranked[0].id, "cuda.tile") << "transferred evidence still ranks the action first";
  const RankedAction& r = ranked[0];
  EXPECT_EQ(r.transferred_tries, 3);
  EXPECT_EQ(r.same_target_tries, 0);
  const double w = std::exp(-o.weights.arch) * o.transfer_discount;  // arch differs, other target
  EXPECT_NEAR(r.evidence_weight, 3 * w, 1e-9);
  EXPECT_NEAR(r.mean_log_speedup, (o.prior_strength * 0.05 + 3 * w * std::log(2.0)) / (o.prior_strength + 3 * w), 1e-9);
  ASSERT_FALSE(r.examples.empty());
  EXPECT_FALSE(r.examples[0].same_target);
  EXPECT_EQ(r.examples[0].target, "a100");
  EXPECT_EQ(r.cluster_stats.tries, 0) << "no statistics yet on the query's own target family";
  // The same evidence on the query's own target counts fully: a higher posterior.
  const auto s2 = add_state(kb, q);
  for (int i = 0; i < 3; ++i) add_experience(kb, s2, "cuda.vec", "h100", true, 2.0);
  const auto again = kb.ranked_actions(q, o);
  EXPECT_EQ(again[0].id, "cuda.vec");
  EXPECT_GT(find(again, "cuda.vec")->mean_log_speedup, find(again, "cuda.tile")->mean_log_speedup);
  // A smaller discount makes transferred evidence count less.
  o.transfer_discount = 0.1;
  EXPECT_LT(find(kb.ranked_actions(q, o), "cuda.tile")->evidence_weight, r.evidence_weight);
}

TEST_F(KbRetrieval, ASeedConstraintExcludesAnActionWhereItCannotWork) {
  ConstraintRecord c;
  c.action_id = "cuda.fancy";
  c.backend = "cuda";
  c.text = "needs sm_90";
  c.predicate = {{"backend", "cuda"}, {"sm_below", 90}};
  c.effect = "exclude";
  c.provenance = {"seed", "test"};
  kb.add_constraint(c);
  const auto on_a100 = signature("cuda", "sm_80", "a100", "matmul", "compute", 60, 0.1, 0.7);
  EXPECT_EQ(find(kb.ranked_actions(on_a100), "cuda.fancy"), nullptr);
  RetrievalOptions o;
  o.include_excluded = true;
  const auto all = kb.ranked_actions(on_a100, o);
  const RankedAction* f = find(all, "cuda.fancy");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->excluded);
  EXPECT_EQ(f->excluded_reason, "needs sm_90");
  EXPECT_EQ(all.back().id, "cuda.fancy") << "excluded actions come last";
  // On sm_90 the constraint does not hold.
  const auto on_h100 = signature("cuda", "sm_90", "h100", "matmul", "compute", 60, 0.1, 0.7);
  const RankedAction* g = find(kb.ranked_actions(on_h100), "cuda.fancy");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->constraints.empty());
}

TEST_F(KbRetrieval, ABuildFailureDemotesTheActionOnThatTargetAndRepeatedOnesExcludeIt) {
  const auto q = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.4, 0.02);
  const auto s = add_state(kb, q);
  add_experience(kb, s, "cuda.fancy", "h100", false, 0, "build_failed");
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM constraints WHERE action_id = 'cuda.fancy'"), 1);
  RetrievalOptions o;
  auto ranked = kb.ranked_actions(q, o);
  const RankedAction* f = find(ranked, "cuda.fancy");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->constraints.size(), 1u);
  EXPECT_EQ(f->constraints[0].effect, "demote");
  EXPECT_EQ(f->constraints[0].provenance, "learned");
  EXPECT_NEAR(f->score, f->mean_log_speedup - o.demote_penalty, 1e-12);
  EXPECT_EQ(ranked.back().id, "cuda.fancy");
  // Another target is not affected by what failed on h100.
  const auto on_h200 = signature("cuda", "sm_90", "h200", "softmax", "memory", 0.3, 0.4, 0.02);
  EXPECT_TRUE(find(kb.ranked_actions(on_h200, o), "cuda.fancy")->constraints.empty());
  // Two more build failures (same constraint, more evidence) and never a success: excluded on h100.
  add_experience(kb, s, "cuda.fancy", "h100", false, 0, "build_failed");
  add_experience(kb, s, "cuda.fancy", "h100", false, 0, "abi_error");
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM constraints WHERE action_id = 'cuda.fancy'"), 1);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM constraint_evidence"), 3);
  EXPECT_EQ(find(kb.ranked_actions(q, o), "cuda.fancy"), nullptr);
  o.include_excluded = true;
  const RankedAction* x = find(kb.ranked_actions(q, o), "cuda.fancy");
  ASSERT_NE(x, nullptr);
  EXPECT_TRUE(x->excluded);
  // One correct run on h100 shows it can build there: back to merely demoted.
  add_experience(kb, s, "cuda.fancy", "h100", true, 1.01);
  o.include_excluded = false;
  EXPECT_NE(find(kb.ranked_actions(q, o), "cuda.fancy"), nullptr);
}

TEST_F(KbRetrieval, TextFilterMatchesActionTextAndEvidence) {
  const auto q = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.4, 0.02);
  RetrievalOptions o;
  o.text = "summary CUDA.VEC";
  auto r = kb.ranked_actions(q, o);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, "cuda.vec");
  const auto s = add_state(kb, q, "rows of 4096 floats");
  add_experience(kb, s, "cuda.tile", "h100", true, 1.3);
  o.text = "critic";  // in the experience's critic text only
  r = kb.ranked_actions(q, o);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, "cuda.tile");
  o.text = "4096 floats";  // in the neighbour state's text
  EXPECT_EQ(kb.ranked_actions(q, o).size(), 1u);
}

TEST_F(KbRetrieval, TextEditsAreVersionedAndRetrievalShowsTheNewest) {
  kb.add_text_version("action", "cuda.vec", "summary", "better summary", "critic", {"learned", "critic test"});
  kb.add_text_version("action", "cuda.vec", "summary", "best summary", "critic", {"learned", "critic test"});
  EXPECT_EQ(kb.current_text("action", "cuda.vec", "summary"), "best summary");
  const auto versions = kb.text_versions("action", "cuda.vec");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].version, 1);
  EXPECT_EQ(versions[1].version, 2);
  EXPECT_EQ(versions[1].parent_id, versions[0].id);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM actions WHERE summary = 'summary of cuda.vec'"), 1)
      << "the original text is kept";
  const auto r = kb.ranked_actions(signature("cuda", "sm_90", "h100", "", "", 1, 0.5, 0.5));
  EXPECT_EQ(find(r, "cuda.vec")->summary, "best summary");
  EXPECT_THROW(kb.add_text_version("action", "cuda.vec", "nonsense", "x", "critic", {"learned", "t"}), UserError);
  EXPECT_THROW(kb.add_text_version("action", "no.such", "summary", "x", "critic", {"learned", "t"}), UserError);
}

TEST(KbRetrievalSeed, SeedRankingIsSensibleForCommonStates) {
  KnowledgeBase kb = KnowledgeBase::in_memory();
  load_seed(kb, embedded_seed());
  // wgmma is excluded on sm_80 and tcgen05 on sm_90, by seed constraints.
  const auto a100 = signature("cuda", "sm_80", "a100", "matmul", "compute", 100, 0.2, 0.6);
  const auto r80 = kb.ranked_actions(a100, RetrievalOptions{.limit = 0});
  EXPECT_EQ(find(r80, "cuda.hopper-wgmma"), nullptr);
  EXPECT_EQ(find(r80, "cuda.blackwell-tcgen05-mma"), nullptr);
  ASSERT_NE(find(r80, "cuda.tensor-core-mma"), nullptr);
  const auto h100 = signature("cuda", "sm_90", "h100", "matmul", "compute", 100, 0.2, 0.6);
  const auto r90 = kb.ranked_actions(h100, RetrievalOptions{.limit = 0});
  EXPECT_NE(find(r90, "cuda.hopper-wgmma"), nullptr);
  EXPECT_EQ(find(r90, "cuda.blackwell-tcgen05-mma"), nullptr);
  const auto b200 = signature("cuda", "sm_100", "b200", "matmul", "compute", 100, 0.2, 0.6);
  const auto r100 = kb.ranked_actions(b200, RetrievalOptions{.limit = 0});
  EXPECT_EQ(find(r100, "cuda.hopper-wgmma"), nullptr);
  EXPECT_NE(find(r100, "cuda.blackwell-tcgen05-mma"), nullptr);
  // Zvfh-only actions are excluded on a core without Zvfh.
  const auto rvv = signature("rvv", "rv64gcv-vlen256", "rvv-qemu-256", "elementwise", "memory", 0.1, 0.3, 0.01);
  EXPECT_EQ(find(kb.ranked_actions(rvv, RetrievalOptions{.limit = 0}), "rvv.fp16-needs-zvfh"), nullptr);
  // Memory-bound softmax on h100: softmax/reduction techniques before tensor-core ones.
  const auto soft = signature("cuda", "sm_90", "h100", "softmax", "memory", 0.3, 0.5, 0.02);
  const auto rs = kb.ranked_actions(soft, RetrievalOptions{.limit = 0});
  EXPECT_LT(rank_of(rs, "cuda.online-softmax"), rank_of(rs, "cuda.hopper-wgmma"));
  EXPECT_LT(rank_of(rs, "cuda.online-softmax"), 5);
}

}  // namespace
}  // namespace mblast::kb
