// Export, import, merge and diff: the round trip is exact, merging never duplicates rows or
// double counts statistics, conflicting texts survive as versions, a bad file imports nothing.
#include <gtest/gtest.h>

#include <sstream>

#include "kb_test_support.h"
#include "mblast/kb/exchange.h"
#include "mblast/kb/seed.h"

namespace mblast::kb {
namespace {

using testing::ScratchDir;

std::string as_text(const std::vector<nlohmann::json>& records) {
  std::ostringstream out;
  write_jsonl(records, out);
  return out.str();
}

// Seed, targets, a problem, candidates, runs, states, experiences (one build failure, so a
// learned constraint), and a text edit: every kind of row.
void fill(KnowledgeBase& kb, const std::string& tag) {
  load_seed(kb, embedded_seed());
  kb.add_target(testing::target("h100", "cuda", "sm_90"));
  kb.add_target(testing::target("a100", "cuda", "sm_80"));
  ProblemRecord p;
  p.name = "softmax";
  p.op_class = "softmax";
  p.spec = {{"rows", 4096}};
  p.provenance = {"learned", "test"};
  const auto problem = kb.add_problem(p);
  CandidateRecord c;
  c.backend = "cuda";
  c.problem_id = problem;
  c.source = "__global__ void k() {} // " + tag;
  c.provenance = {"learned", "test"};
  const auto cand = kb.add_candidate(c);
  RunRecord r;
  r.candidate_id = cand;
  r.problem_id = problem;
  r.target = "h100";
  r.correct = true;
  r.median_s = 1.25e-5;
  r.bandwidth_fraction = 0.61;
  r.build_log = "nvcc: ok " + tag;
  r.result = {{"correct", true}, {"tag", tag}};
  r.provenance = {"learned", "test"};
  const auto run = kb.add_run(r);
  StateRecord s;
  s.signature = testing::signature("cuda", "sm_90", "h100", "softmax", "memory", 0.31, 0.61, 0.02);
  s.problem_id = problem;
  s.candidate_id = cand;
  s.run_id = run;
  s.text = "state " + tag;
  s.provenance = {"learned", "test"};
  const auto state = kb.add_state(s);
  testing::add_experience(kb, state, "cuda.online-softmax", "h100", true, 1.37, "", "online " + tag);
  testing::add_experience(kb, state, "cuda.hopper-wgmma", "h100", false, 0, "build_failed");
  kb.add_text_version("action", "cuda.online-softmax", "when_hurts", "also hurts when " + tag, "critic",
                      {"learned", "critic"});
}

TEST(KbExchange, ExportImportExportGivesTheSameLines) {
  KnowledgeBase a = KnowledgeBase::in_memory();
  fill(a, "a");
  const auto first = export_records(a);
  ASSERT_EQ(first.front()["kind"], "header");
  std::map<std::string, int> kinds;
  for (const auto& r : first) kinds[r["kind"]]++;
  for (const char* k : {"target", "problem", "build_log", "candidate", "action", "run", "state", "experience",
                        "constraint", "constraint_evidence", "text_version"})
    EXPECT_GT(kinds[k], 0) << k;

  KnowledgeBase b = KnowledgeBase::in_memory();
  std::istringstream in(as_text(first));
  const ImportReport rep = import_records(b, read_jsonl(in, "a.jsonl"));
  EXPECT_EQ(rep.total_added(), static_cast<int>(first.size()) - 1);
  EXPECT_TRUE(rep.conflicts.empty());
  EXPECT_EQ(as_text(export_records(b)), as_text(first));
  // Statistics are rebuilt by the importing KB, identical to the source's.
  EXPECT_EQ(b.db().query_int("SELECT sum(tries) FROM policy_stats"),
            a.db().query_int("SELECT sum(tries) FROM policy_stats"));
  EXPECT_EQ(b.integrity_check(), "ok");
}

TEST(KbExchange, ImportingTheSameFileTwiceAddsNothing) {
  KnowledgeBase a = KnowledgeBase::in_memory();
  fill(a, "a");
  const auto recs = export_records(a);
  KnowledgeBase b = KnowledgeBase::in_memory();
  import_records(b, recs);
  const ImportReport again = import_records(b, recs);
  EXPECT_EQ(again.total_added(), 0);
  EXPECT_EQ(b.db().query_int("SELECT count(*) FROM experiences"), 2);
  EXPECT_EQ(b.db().query_int("SELECT sum(tries) FROM policy_stats"), 2);
}

TEST(KbExchange, MergeCombinesStatisticsWithoutDoubleCounting) {
  ScratchDir dir;
  const auto fa = dir / "a.sqlite", fb = dir / "b.sqlite";
  std::string shared_state;
  {
    KnowledgeBase a(fa);
    fill(a, "a");
  }
  {
    // Team B started from a copy of A, then learned more on its own.
    KnowledgeBase b(fb);
    merge_from(b, fa);
    Statement st(b.db(), "SELECT id FROM states LIMIT 1");
    ASSERT_TRUE(st.step());
    shared_state = st.get_text(0);
    testing::add_experience(b, shared_state, "cuda.online-softmax", "h100", true, 1.5, "", "b's better kernel");
    testing::add_experience(b, shared_state, "cuda.online-softmax", "h100", false, 0, "wrong_output");
  }
  {
    KnowledgeBase a(fa);
    testing::add_experience(a, shared_state, "cuda.online-softmax", "h100", true, 1.1);  // A learned too
  }
  KnowledgeBase a(fa);
  const ImportReport rep = merge_from(a, fb);
  EXPECT_EQ(rep.added.at("experience"), 2) << "only B's own experiences are new";
  EXPECT_EQ(rep.present.at("experience"), 2) << "the shared history is not copied again";
  EXPECT_EQ(rep.added.count("candidate") ? rep.added.at("candidate") : 0, 1) << "one new candidate, no duplicates";
  EXPECT_EQ(a.db().query_int("SELECT count(*) FROM experiences"), 5);
  EXPECT_EQ(a.db().query_int("SELECT count(*) FROM candidates"), 3);
  // Statistics of (cluster, online-softmax, cuda:sm_90): A's 2 + B's 2 on top of the shared 1.
  Statement st(a.db(), "SELECT tries, correct, wins FROM policy_stats WHERE action_id = 'cuda.online-softmax'");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.get_int(0), 4);
  EXPECT_EQ(st.get_int(1), 3);
  EXPECT_EQ(st.get_int(2), 3);  // 1.37, 1.5 and 1.1 are all above 1.02
  st.reset();
  const int64_t sum_tries = a.db().query_int("SELECT sum(tries) FROM policy_stats");
  a.rebuild_policy_stats();
  EXPECT_EQ(a.db().query_int("SELECT sum(tries) FROM policy_stats"), sum_tries) << "incremental equals recomputed";
  // Merging again changes nothing.
  EXPECT_EQ(merge_from(a, fb).total_added(), 0);
  EXPECT_EQ(a.db().query_int("SELECT sum(tries) FROM policy_stats"), sum_tries);
  // The other file was only read.
  KnowledgeBase b(fb);
  EXPECT_EQ(b.db().query_int("SELECT count(*) FROM experiences"), 4);
}

TEST(KbExchange, ConflictingTextsAreBothKept) {
  ScratchDir dir;
  const auto fa = dir / "a.sqlite", fb = dir / "b.sqlite";
  {
    KnowledgeBase a(fa);
    load_seed(a, embedded_seed());
    a.add_text_version("action", "cuda.online-softmax", "summary", "A's wording", "critic A", {"learned", "A"});
    auto learned = testing::action("cuda.team-trick", "cuda");
    learned.provenance = {"learned", "A"};
    a.add_action(learned);
  }
  {
    KnowledgeBase b(fb);
    load_seed(b, embedded_seed());
    b.add_text_version("action", "cuda.online-softmax", "summary", "B's wording", "critic B", {"learned", "B"});
    auto learned = testing::action("cuda.team-trick", "cuda");
    learned.summary = "B describes the trick differently";
    learned.provenance = {"learned", "B"};
    b.add_action(learned);
  }
  KnowledgeBase a(fa);
  const ImportReport rep = merge_from(a, fb);
  EXPECT_EQ(rep.texts_kept_as_versions, 1);  // the learned action's differing summary
  const auto heads = a.text_conflicts("action", "cuda.online-softmax");
  ASSERT_EQ(heads.count("summary"), 1u);
  std::set<std::string> bodies;
  for (const auto& v : heads.at("summary")) bodies.insert(v.body);
  EXPECT_EQ(bodies, (std::set<std::string>{"A's wording", "B's wording"}));
  std::set<std::string> trick;
  for (const auto& v : a.text_versions("action", "cuda.team-trick")) trick.insert(v.body);
  EXPECT_TRUE(trick.count("B describes the trick differently"));
  EXPECT_EQ(a.db().query_int("SELECT summary = 'summary of cuda.team-trick' FROM actions WHERE id = 'cuda.team-trick'"),
            1);
}

TEST(KbExchange, DiffShowsWhatEachSideHasAlone) {
  ScratchDir dir;
  const auto fa = dir / "a.sqlite", fb = dir / "b.sqlite";
  {
    KnowledgeBase a(fa);
    fill(a, "a");
  }
  {
    KnowledgeBase b(fb);
    merge_from(b, fa);
    auto extra = testing::action("cuda.only-in-b", "cuda");
    b.add_action(extra);
  }
  KnowledgeBase a(fa), b(fb);
  const DiffReport d = diff_records(export_records(a), export_records(b));
  EXPECT_TRUE(d.only_here.empty());
  ASSERT_EQ(d.only_there.count("action"), 1u);
  EXPECT_EQ(d.only_there.at("action"), std::vector<std::string>{"cuda.only-in-b"});
  EXPECT_TRUE(d.different.empty());
  EXPECT_TRUE(diff_records(export_records(a), export_records(a)).empty());
  // Two KBs seeded at different times hold the same seed: no difference.
  KnowledgeBase x = KnowledgeBase::in_memory(), y = KnowledgeBase::in_memory();
  load_seed(x, embedded_seed());
  load_seed(y, embedded_seed());
  EXPECT_TRUE(diff_records(export_records(x), export_records(y)).empty());
}

TEST(KbExchange, ABadFileImportsNothing) {
  KnowledgeBase a = KnowledgeBase::in_memory();
  fill(a, "a");
  auto recs = export_records(a);
  KnowledgeBase b = KnowledgeBase::in_memory();
  // A record missing a field, late in the file: the rows before it are not kept either.
  auto broken = recs;
  broken.back().erase("body");
  EXPECT_THROW(import_records(b, broken), UserError);
  EXPECT_EQ(b.db().query_int("SELECT count(*) FROM actions"), 0);
  EXPECT_FALSE(b.db().in_transaction());
  // An experience whose state the file lacks.
  auto dangling = recs;
  std::erase_if(dangling, [](const nlohmann::json& r) { return r["kind"] == "state"; });
  try {
    import_records(b, dangling);
    FAIL() << "imported experiences without their states";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing was imported"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.db().query_int("SELECT count(*) FROM experiences"), 0);
  // Not an export at all.
  std::istringstream junk("{\"kind\": \"action\"}\n");
  EXPECT_THROW(read_jsonl(junk, "junk.jsonl"), UserError);
  std::istringstream newer("{\"kind\": \"header\", \"format\": \"mblast-kb\", \"format_version\": 99}\n");
  EXPECT_THROW(read_jsonl(newer, "newer.jsonl"), UserError);
}

}  // namespace
}  // namespace mblast::kb
