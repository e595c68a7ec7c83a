// Seed knowledge: counts per backend, every entry complete and sourced, loading idempotent,
// seed and learned rows told apart.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "kb_test_support.h"
#include "mblast/kb/exchange.h"
#include "mblast/kb/seed.h"
#include "mblast/kb/summary.h"

namespace mblast::kb {
namespace {

TEST(KbSeed, HasEnoughActionsPerBackend) {
  const auto seed = embedded_seed();
  std::map<std::string, int> per_backend;
  for (const auto& e : seed)
    for (const auto& b : e.action.backends) per_backend[b]++;
  EXPECT_GE(per_backend["cuda"], 40);
  EXPECT_GE(per_backend["opencl"], 25);
  EXPECT_GE(per_backend["rvv"], 25);
}

TEST(KbSeed, EveryEntryIsCompleteSourcedAndSeed) {
  std::set<std::string> ids;
  for (const auto& e : embedded_seed()) {
    const ActionRecord& a = e.action;
    EXPECT_TRUE(ids.insert(a.id).second) << a.id;
    EXPECT_FALSE(a.title.empty()) << a.id;
    EXPECT_FALSE(a.summary.empty()) << a.id;
    EXPECT_FALSE(a.when_helps.empty()) << a.id;
    EXPECT_FALSE(a.when_hurts.empty()) << a.id;
    EXPECT_GE(a.source.size(), 10u) << a.id;
    EXPECT_EQ(a.provenance.kind, "seed") << a.id;
    EXPECT_EQ(a.provenance.source, a.source) << a.id;
    for (const auto& c : e.constraints) {
      EXPECT_EQ(c.provenance.kind, "seed");
      EXPECT_NO_THROW(validate_predicate(c.predicate)) << a.id;
    }
  }
}

TEST(KbSeed, HopperAndBlackwellSpecificsArePresent) {
  std::set<std::string> ids;
  for (const auto& e : embedded_seed()) ids.insert(e.action.id);
  for (const char* id :
       {"cuda.hopper-wgmma", "cuda.hopper-tma-tensor-copy", "cuda.hopper-thread-block-clusters",
        "cuda.hopper-distributed-shared-memory", "cuda.hopper-fp8", "cuda.blackwell-tcgen05-mma",
        "cuda.blackwell-tensor-memory", "cuda.blackwell-2cta-mma", "cuda.blackwell-fp4-fp6-block-scaled",
        "opencl.adreno-image-objects", "opencl.subgroup-reduce", "opencl.adreno-local-memory-only-for-reuse",
        "opencl.vector-load-store-128bit", "rvv.strip-mining-vsetvl", "rvv.lmul-large-for-streaming",
        "rvv.segment-loads-aos", "rvv.widening-fma", "rvv.unordered-float-reduction"})
    EXPECT_TRUE(ids.count(id)) << id;
}

TEST(KbSeed, LoadingIsIdempotentAndMarkedSeedEverywhere) {
  KnowledgeBase kb = KnowledgeBase::in_memory();
  const auto seed = embedded_seed();
  const SeedReport first = load_seed(kb, seed);
  EXPECT_EQ(first.actions_added, static_cast<int>(seed.size()));
  EXPECT_GT(first.constraints_added, 0);
  const SeedReport second = load_seed(kb, seed);
  EXPECT_EQ(second.actions_added, 0);
  EXPECT_EQ(second.actions_known, static_cast<int>(seed.size()));
  EXPECT_EQ(second.constraints_added, 0);
  EXPECT_EQ(second.text_versions_added, 0);
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM actions a JOIN provenance p ON p.id = a.provenance_id "
                              "WHERE p.kind <> 'seed'"),
            0);
  const KbSummary s = summarize_kb(kb);
  EXPECT_GE(s.per_backend.at("cuda").at("actions").seed, 40);
  EXPECT_EQ(s.per_backend.at("cuda").at("actions").learned, 0);
  EXPECT_GT(s.per_backend.at("cuda").at("constraints").seed, 0);
}

TEST(KbSeed, AKbFileIsCreatedWithTheSeed) {
  testing::ScratchDir dir;
  const auto seed = embedded_seed();
  {
    KnowledgeBase kb(dir / "kb.sqlite");
    EXPECT_TRUE(kb.created());
    EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM actions a JOIN provenance p ON p.id = a.provenance_id "
                                "WHERE p.kind = 'seed'"),
              static_cast<int64_t>(seed.size()));
    EXPECT_GT(kb.db().query_int("SELECT count(*) FROM constraints"), 0);
  }
  KnowledgeBase again(dir / "kb.sqlite");  // opened, not created: nothing is loaded twice
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.db().query_int("SELECT count(*) FROM text_versions"), 0);
  OpenOptions bare;
  bare.seed = false;
  KnowledgeBase empty(dir / "bare.sqlite", bare);
  EXPECT_EQ(empty.db().query_int("SELECT count(*) FROM actions"), 0);
}

TEST(KbSeed, LoadingRepairsSeedIdsARunMadeBeforeTheSeedWasThere) {
  testing::ScratchDir dir;
  const auto seed = embedded_seed();
  const SeedEntry* with_prior = nullptr;
  for (const auto& e : seed)
    if (e.action.prior_log_speedup && !e.action.applies_to.empty()) with_prior = &e;
  ASSERT_NE(with_prior, nullptr);
  OpenOptions bare;
  bare.seed = false;
  KnowledgeBase old(dir / "old.sqlite", bare);
  // What a run did to a KB made before it got the seed: the id as a learned action, no priors.
  ActionRecord learned;
  learned.id = with_prior->action.id;
  learned.title = "Learned at run time: " + learned.id;
  learned.summary = learned.title;
  learned.backends = with_prior->action.backends;
  learned.provenance = {"learned", "mblast loop, run 1"};
  old.add_action(learned);
  const SeedReport r = load_seed(old, seed);
  EXPECT_EQ(r.actions_repaired, 1);
  EXPECT_EQ(r.actions_known, 1);
  const auto a = old.action(learned.id);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->provenance.kind, "seed");
  ASSERT_TRUE(a->prior_log_speedup);
  EXPECT_DOUBLE_EQ(*a->prior_log_speedup, *with_prior->action.prior_log_speedup);
  EXPECT_EQ(a->applies_to, with_prior->action.applies_to);
  EXPECT_EQ(old.current_text("action", learned.id, "title"), with_prior->action.title);
  EXPECT_EQ(load_seed(old, seed).actions_repaired, 0);  // once
  // Merging a KB created with the seed finds no conflict on it any more.
  KnowledgeBase fresh(dir / "fresh.sqlite");
  fresh.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
  const ImportReport m = merge_from(old, dir / "fresh.sqlite");
  EXPECT_TRUE(m.conflicts.empty()) << m.conflicts.front();
}

TEST(KbSeed, AChangedSeedTextBecomesANewVersion) {
  KnowledgeBase kb = KnowledgeBase::in_memory();
  auto seed = embedded_seed();
  load_seed(kb, seed);
  seed[0].action.when_hurts = "an improved explanation";
  const SeedReport r = load_seed(kb, seed);
  EXPECT_EQ(r.text_versions_added, 1);
  EXPECT_EQ(kb.current_text("action", seed[0].action.id, "when_hurts"), "an improved explanation");
  EXPECT_EQ(kb.db().query_int("SELECT count(*) FROM actions WHERE when_hurts = 'an improved explanation'"), 0)
      << "the first version stays in the row";
}

TEST(KbSeed, MalformedSeedLinesAreRejectedWithFileAndLine) {
  const auto expect_error = [](const std::string& line, const std::string& needle) {
    try {
      parse_seed("x.jsonl", "\n" + line + "\n");
      ADD_FAILURE() << "accepted: " << line;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("x.jsonl:2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::string ok = R"("title": "t", "summary": "s", "when_helps": "h", "when_hurts": "x", "source": "a guide")";
  expect_error("{not json", "JSON");
  expect_error(R"({"id": "cuda.a", "backends": ["cuda"], )" + ok + R"(, "colour": 1})", "unknown field");
  expect_error(R"({"id": "cuda.a", "backends": ["metal"], )" + ok + "}", "unknown backend");
  expect_error(R"({"id": "a", "backends": ["cuda"], )" + ok + "}", "must start with");
  expect_error(R"({"id": "cuda.a", "backends": ["cuda"], "title": "t"})", "summary");
  expect_error(R"({"id": "cuda.a", "backends": ["cuda"], )" + ok +
                   R"(, "constraints": [{"text": "t", "predicate": {"sm_bellow": 90}}]})",
               "unknown constraint predicate key");
  EXPECT_EQ(parse_seed("x.jsonl", R"({"id": "cuda.a", "backends": ["cuda"], )" + ok + "}").size(), 1u);
}

TEST(KbSeed, PredicatesMatchTheQueryFields) {
  const auto s = testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 1, 0.5, 0.1);
  EXPECT_TRUE(predicate_matches({{"backend", "cuda"}, {"sm_below", 100}}, s));
  EXPECT_FALSE(predicate_matches({{"backend", "cuda"}, {"sm_below", 90}}, s));
  EXPECT_TRUE(predicate_matches({{"sm_at_least", 90}}, s));
  EXPECT_TRUE(predicate_matches({{"arch_not", {"sm_80"}}}, s));
  EXPECT_FALSE(predicate_matches({{"arch_not", {"sm_90"}}}, s));
  EXPECT_TRUE(predicate_matches({{"target", "h100"}, {"op_class", {"softmax", "norm"}}}, s));
  EXPECT_FALSE(predicate_matches({{"bottleneck", "compute"}}, s));
  const auto r = testing::signature("rvv", "rv64gcv-vlen128", "rvv-qemu-128", "", "", 1, 0.1, 0.1);
  EXPECT_TRUE(predicate_matches({{"arch_lacks", "zvfh"}}, r));
  EXPECT_TRUE(predicate_matches({{"vlen_below", 256}}, r));
  StateSignature unknown;
  unknown.backend = "cuda";
  EXPECT_FALSE(predicate_matches({{"sm_below", 90}}, unknown)) << "an unknown arch never excludes";
  EXPECT_THROW(validate_predicate({{"sm_below", "ninety"}}), UserError);
  EXPECT_THROW(validate_predicate(nlohmann::json::array()), UserError);
}

}  // namespace
}  // namespace mblast::kb
