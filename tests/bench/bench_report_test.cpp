// The rules of `mblast bench` that need no device: fast_p and the geomean over synthetic rows,
// the --compare regression rule, JUnit XML escaping, and where candidates are looked up.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "mblast/driver/bench_command.h"
#include "mblast/driver/bench_report.h"
#include "mblast/driver/import_command.h"
#include "mblast/error.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json eager(double us) { return {{"median_us", us}, {"spread_pct", 5.0}}; }

json row(const std::string& level, const std::string& name, const std::string& status, json speedup = nullptr,
         json fraction = nullptr) {
  json r = {{"level", level},
            {"name", name},
            {"key", level + "/" + name},
            {"status", status},
            {"correct", status == "correct"},
            {"eager", eager(100)},
            {"compile", {{"unavailable", "torch 1.13 has no torch.compile"}}},
            {"speedup_vs_eager", speedup},
            {"speedup_vs_compile", nullptr},
            {"compile_speedup_vs_eager", nullptr},
            {"fraction_of_peak", fraction}};
  if (status == "correct") r["time"] = {{"median", 100.0}, {"unit", "us"}, {"spread_pct", 10.0}};
  return r;
}

TEST(BenchSummary, FastPCountsEveryProblemAndIsStrict) {
  const json rows = json::array({row("level1", "a", "correct", 2.0, 0.5), row("level1", "b", "correct", 0.5, 0.1),
                                 row("level1", "c", "correct", 1.0, 0.3), row("level1", "d", "incorrect"),
                                 row("level2", "e", "no_candidate")});
  const json s = summarize_bench(rows);
  const json& all = s["overall"];
  EXPECT_EQ(all["problems"], 5);
  EXPECT_EQ(all["correct"], 3);
  const json& e = all["vs_eager"];
  EXPECT_DOUBLE_EQ(e["fast_0"].get<double>(), 3.0 / 5);
  EXPECT_DOUBLE_EQ(e["fast_1"].get<double>(), 1.0 / 5);  // 1.0 is not > 1
  EXPECT_DOUBLE_EQ(e["fast_1.5"].get<double>(), 1.0 / 5);
  EXPECT_NEAR(e["geomean_speedup"].get<double>(), 1.0, 1e-12);  // (2 * 0.5 * 1)^(1/3)
  EXPECT_EQ(e["n"], 3);
  EXPECT_DOUBLE_EQ(all["median_fraction_of_peak"].get<double>(), 0.3);
  EXPECT_TRUE(all["vs_compile"].contains("unavailable"));
  EXPECT_TRUE(all["vs_compile"]["fast_1"].is_null());

  const json& l2 = s["levels"]["level2"];
  EXPECT_EQ(l2["problems"], 1);
  EXPECT_DOUBLE_EQ(l2["vs_eager"]["fast_0"].get<double>(), 0.0);  // a baseline, no correct problem: 0, not unknown
  EXPECT_TRUE(l2["vs_eager"]["geomean_speedup"].is_null());
  EXPECT_EQ(l2["counts"]["no_candidate"], 1);
}

TEST(BenchSummary, CorrectWithoutBaselineIsNotFast) {
  json r = row("level1", "a", "correct", nullptr);
  r["eager"] = {{"failed", "forward raised"}};
  const json s = summarize_bench(json::array({r, row("level1", "b", "correct", 3.0)}));
  const json& e = s["overall"]["vs_eager"];
  EXPECT_DOUBLE_EQ(e["fast_0"].get<double>(), 0.5);
  EXPECT_EQ(e["correct_without_speedup"], 1);
  EXPECT_DOUBLE_EQ(e["geomean_speedup"].get<double>(), 3.0);
}

json results_of(json rows) {
  json r = {{"kind", "mblast-bench"},
            {"meta", {{"target", "pocl-cpu"}, {"size", "small"}, {"date", "2025-01-01T00:00:00Z"}}},
            {"problems", rows}};
  r["summary"] = summarize_bench(r["problems"]);
  return r;
}

json timed(const std::string& name, double median, double spread) {
  json r = row("level1", name, "correct", 1.0);
  r["time"] = {{"median", median}, {"unit", "us"}, {"spread_pct", spread}};
  return r;
}

TEST(BenchCompare, SlowerBeyondThresholdAndNoise) {
  const json prev = results_of({timed("a", 100, 10), timed("b", 100, 10), timed("c", 100, 1), timed("d", 100, 1)});
  // sqrt(10^2 + 10^2) = 14.14%: 15% slower is beyond, 14% is within; with spreads of 1% the
  // 10% threshold rules: 11% is beyond, 9% within.
  const json now = results_of({timed("a", 115, 10), timed("b", 114, 10), timed("c", 111, 1), timed("d", 109, 1)});
  const json c = compare_bench(now, prev, CompareRule{10, 1});
  EXPECT_EQ(c["regressions"], 2);
  EXPECT_EQ(c["problems"][0]["verdict"], "slower");
  EXPECT_NEAR(c["problems"][0]["allowed_pct"].get<double>(), std::sqrt(200.0), 1e-9);
  EXPECT_EQ(c["problems"][1]["verdict"], "unchanged");
  EXPECT_EQ(c["problems"][2]["verdict"], "slower");
  EXPECT_EQ(c["problems"][3]["verdict"], "unchanged");
  // k = 2 doubles the noise allowance: 15% is now within 28.3%
  EXPECT_EQ(compare_bench(now, prev, CompareRule{10, 2})["problems"][0]["verdict"], "unchanged");
  // a faster run is an improvement, never a regression
  EXPECT_EQ(compare_bench(prev, now, CompareRule{10, 1})["regressions"], 0);
  EXPECT_EQ(compare_bench(prev, now, CompareRule{10, 1})["problems"][0]["verdict"], "faster");
}

TEST(BenchCompare, RelativeToTheRunIgnoresAUniformlySlowerMachineButNotOneKernel) {
  const json prev = results_of({timed("a", 100, 5), timed("b", 200, 5), timed("c", 300, 5), timed("d", 400, 5),
                                timed("e", 500, 5), timed("f", 600, 5)});
  // The whole machine 1.5x slower (a busy CI host); f also 2x slower than the rest.
  const json now = results_of({timed("a", 150, 5), timed("b", 300, 5), timed("c", 450, 5), timed("d", 600, 5),
                               timed("e", 750, 5), timed("f", 1800, 5)});
  const json absolute = compare_bench(now, prev, CompareRule{25, 2});
  EXPECT_EQ(absolute["regressions"], 6);  // as measured, every problem looks slower
  EXPECT_FALSE(absolute.contains("speed_factor"));
  const json rel = compare_bench(now, prev, CompareRule{25, 2, true});
  EXPECT_EQ(rel["regressions"], 1);
  EXPECT_NEAR(rel["speed_factor"]["value"].get<double>(), 1.5, 1e-9);
  EXPECT_TRUE(rel["speed_factor"]["applied"].get<bool>());
  EXPECT_EQ(rel["problems"][5]["verdict"], "slower");
  EXPECT_NEAR(rel["problems"][5]["slower_pct"].get<double>(), 100, 1e-9);
  EXPECT_EQ(rel["problems"][0]["verdict"], "unchanged");
  EXPECT_NE(format_bench_comparison(rel).find("median ratio 1.5 over 6 problems"), std::string::npos);
  // With fewer problems than the estimate needs, times are compared as measured, and it says so.
  const json few_prev = results_of({timed("a", 100, 5), timed("b", 100, 5)});
  const json few_now = results_of({timed("a", 150, 5), timed("b", 150, 5)});
  const json few = compare_bench(few_now, few_prev, CompareRule{25, 2, true});
  EXPECT_FALSE(few["speed_factor"]["applied"].get<bool>());
  EXPECT_EQ(few["regressions"], 2);
}

TEST(BenchCompare, CorrectnessNewMissingAndFilter) {
  const json prev = results_of({timed("a", 100, 1), row("level1", "b", "incorrect"), row("level1", "c", "incorrect"),
                                timed("gone", 100, 1), row("level2", "x", "correct", 1.0)});
  json nb = row("level1", "b", "incorrect");
  const json now = results_of({row("level1", "a", "no_candidate"), nb, timed("c", 100, 1), timed("fresh", 1, 1)});
  const json c = compare_bench(now, prev, CompareRule{}, "level1/");
  EXPECT_EQ(c["regressions"], 1);
  EXPECT_EQ(c["problems"][0]["verdict"], "became_incorrect");  // a deleted candidate is a regression
  EXPECT_EQ(c["problems"][1]["verdict"], "still_incorrect");
  EXPECT_FALSE(c["problems"][1]["regressed"].get<bool>());
  EXPECT_EQ(c["problems"][2]["verdict"], "became_correct");
  EXPECT_EQ(c["problems"][3]["verdict"], "new");
  EXPECT_EQ(c["new"], json::array({"level1/fresh"}));
  ASSERT_EQ(c["missing"].size(), 1u);  // level2/x is outside the filter: not missing
  EXPECT_EQ(c["missing"][0]["key"], "level1/gone");
}

TEST(BenchCompare, RefusesOtherTargetSizeOrFile) {
  const json prev = results_of({timed("a", 100, 1)});
  json other = prev;
  other["meta"]["target"] = "h200";
  EXPECT_THROW(compare_bench(prev, other, CompareRule{}), UserError);
  other = prev;
  other["meta"]["size"] = "full";
  EXPECT_THROW(compare_bench(prev, other, CompareRule{}), UserError);
  EXPECT_THROW(compare_bench(prev, json{{"problems", json::array()}}, CompareRule{}), UserError);
}

TEST(BenchJunit, EscapesEverythingXmlCannotCarry) {
  EXPECT_EQ(xml_escape("a<b & c>\"d\" 'e'"), "a&lt;b &amp; c&gt;&quot;d&quot; &apos;e&apos;");
  EXPECT_EQ(xml_escape("tab\tnl\n"), "tab&#9;nl&#10;");
  EXPECT_EQ(xml_escape(std::string("nul\0bell\x07", 9)),
            "nul\xEF\xBF\xBD"
            "bell\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x98\x80"),
            "\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x98\x80");                            // é → 😀 kept
  EXPECT_EQ(xml_escape("\xFF"), "\xEF\xBF\xBD");                                  // not UTF-8
  EXPECT_EQ(xml_escape("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
  EXPECT_EQ(xml_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(xml_escape("\xE2\x86"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // truncated
}

TEST(BenchJunit, OneSuitePerLevelFailuresAndSkips) {
  json bad = row("level1", "b", "incorrect");
  bad["failure_kind"] = "wrong_output";
  bad["reason"] = std::string("got <1> & \x01 expected \"2\"");
  const json results = results_of({row("level1", "a", "correct", 2.0), bad, row("level2", "c", "no_candidate")});
  const std::string xml = bench_junit_xml(results, nullptr);
  EXPECT_NE(
      xml.find(
          "<testsuites name=\"mblast bench pocl-cpu small\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
      std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testsuite name=\"level1\" tests=\"2\" failures=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testsuite name=\"level2\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\""),
            std::string::npos);
  EXPECT_NE(xml.find("type=\"wrong_output\" message=\"got &lt;1&gt; &amp; \xEF\xBF\xBD expected &quot;2&quot;\""),
            std::string::npos)
      << xml;
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
  EXPECT_NE(xml.find("timestamp=\"2025-01-01T00:00:00\""), std::string::npos);

  // With a comparison only regressions fail; a problem incorrect in both runs is skipped.
  const json cmp = compare_bench(results, results, CompareRule{});
  const std::string again = bench_junit_xml(results, &cmp);
  EXPECT_NE(again.find("failures=\"0\""), std::string::npos) << again;
  EXPECT_EQ(again.find("<failure"), std::string::npos);
}

TEST(BenchTable, CompileColumnsOnlyWhenSomeProblemHasTheBaseline) {
  json r = row("level1", "a", "correct", 2.0, 0.5);
  json without = results_of({r});
  EXPECT_EQ(format_bench_table(without).find("GEOMEAN/COMPILE"), std::string::npos);
  EXPECT_NE(format_bench_table(without).find("torch.compile: torch 1.13 has no torch.compile"), std::string::npos);
  r["compile"] = eager(50);
  r["speedup_vs_compile"] = 0.5;
  r["compile_speedup_vs_eager"] = 2.0;
  const json with = results_of({r, row("level2", "b", "import_failed")});
  const std::string table = format_bench_table(with);
  EXPECT_NE(table.find("GEOMEAN/COMPILE"), std::string::npos) << table;
  EXPECT_NE(table.find("COMPILE/EAGER"), std::string::npos) << table;
  EXPECT_NE(table.find("level2/b"), std::string::npos) << table;
  const json& c = with["summary"]["overall"]["vs_compile"];
  EXPECT_DOUBLE_EQ(c["fast_0"].get<double>(), 0.5);  // 1 of 2 problems, the unimported one included
  EXPECT_DOUBLE_EQ(c["fast_1"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(with["summary"]["overall"]["compile_speedup_vs_eager"]["geomean"].get<double>(), 2.0);
}

TEST(BenchTable, SaysWhichDesignWonAndWhyAFractionPassesOne) {
  json fft = row("level1", "conv", "correct", 2.4, 1.55);
  fft["candidate"] = {{"details", {{"design", {{"family", "cuda.conv.cudnn"}, {"params", {{"math", "fp32-fft"}}}}}}}};
  json no_candidate = row("level2", "none", "no_candidate");
  no_candidate["candidate"] = nullptr;  // as bench writes a row without one
  const std::string table =
      format_bench_table(results_of({fft, row("level1", "relu", "correct", 1.1, 0.8), no_candidate}));
  EXPECT_NE(table.find("design: cuda.conv.cudnn {\"math\":\"fp32-fft\"}"), std::string::npos) << table;
  // one note, for the row above 100 %
  const size_t note = table.find("above 100% of peak");
  ASSERT_NE(note, std::string::npos) << table;
  EXPECT_EQ(table.find("above 100% of peak", note + 1), std::string::npos) << table;
  EXPECT_LT(note, table.find("level1/relu"));
}

TEST(BenchTable, SaysOnceWhyEagerIsWeak) {
  json a = row("level1", "mm", "correct", 40.0, 0.5), b = row("level2", "linear", "correct", 50.0, 0.5);
  for (json* r : {&a, &b})
    (*r)["baseline"] = {{"measured", "in this run"}, {"note", "PyTorch runs on the reference (netlib) BLAS"}};
  const std::string table = format_bench_table(results_of({a, b, row("level1", "relu", "correct", 1.1, 0.8)}));
  const size_t note = table.find("eager: PyTorch runs on the reference (netlib) BLAS");
  ASSERT_NE(note, std::string::npos) << table;
  EXPECT_EQ(table.find("eager: PyTorch runs", note + 1), std::string::npos) << table;
  EXPECT_EQ(format_bench_table(results_of({row("level1", "relu", "correct", 1.1, 0.8)})).find("netlib"),
            std::string::npos);
}

class CandidateLookup : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("mblast_bench_lookup_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "suite" / "level1");
    fs::create_directories(root_ / "suite" / "candidates" / "level1");
    fs::create_directories(root_ / "flat");
    touch(root_ / "suite" / "level1" / "relu.py");
    touch(root_ / "suite" / "candidates" / "level1" / "relu.opencl.cpp");
    touch(root_ / "flat" / "relu.cuda.cu");
    problem_.name = "relu";
    problem_.provenance = {{"source", (root_ / "suite" / "level1" / "relu.py").string()}};
  }
  void TearDown() override { fs::remove_all(root_); }
  static void touch(const fs::path& p) { std::ofstream(p) << "x"; }
  Target target(const std::string& backend) {
    Target t;
    t.name = "t";
    t.backend = backend;
    return t;
  }
  fs::path root_;
  Problem problem_;
};

TEST_F(CandidateLookup, SuiteDefaultLevelLayoutAndFlatFolder) {
  auto suite = file_candidate_provider("")(problem_, target("opencl"), "level1", "relu");
  ASSERT_TRUE(suite.has_value());
  EXPECT_EQ(suite->source, root_ / "suite" / "candidates" / "level1" / "relu.opencl.cpp");
  EXPECT_FALSE(file_candidate_provider("")(problem_, target("cuda"), "level1", "relu").has_value());
  auto flat = file_candidate_provider(root_ / "flat")(problem_, target("cuda"), "level1", "relu");
  ASSERT_TRUE(flat.has_value());
  EXPECT_EQ(flat->source, root_ / "flat" / "relu.cuda.cu");
  EXPECT_FALSE(file_candidate_provider(root_ / "flat")(problem_, target("rvv"), "level1", "relu").has_value());
  EXPECT_THROW(file_candidate_provider("")(problem_, target("metal"), "level1", "relu"), UserError);
  EXPECT_EQ(candidate_extension("rvv"), ".rvv.c");
}

TEST(BenchTable, SaysWhatWasScaledToFitMaxBytes) {
  json scaled = row("level1", "relu", "correct", 2.0, 0.5);
  scaled["scale"] = {{"max_bytes", 16777216},
                     {"bytes", 12582912},
                     {"constants", {{"batch_size", {4096, 1024}}, {"dim", {393216, 1536}}}}};
  json fits = row("level1", "small", "no_candidate");
  fits["reason"] = "no candidate file and no generator applies: op mish is not one the generators know";
  fits["scale"] = {{"max_bytes", 16777216}, {"bytes", 1024}, {"constants", json::object()}};
  json results = results_of({scaled, fits});
  results["meta"]["max_bytes"] = 16777216;
  const std::string table = format_bench_table(results);
  EXPECT_NE(table.find("scaled to fit --max-bytes 16M (1 of 2 problems scaled)"), std::string::npos) << table;
  EXPECT_NE(table.find("scaled: batch_size 4096 -> 1024, dim 393216 -> 1536"), std::string::npos) << table;
  EXPECT_NE(table.find("op mish is not one the generators know"), std::string::npos) << table;
}

TEST(MaxBytes, ParsesSizesWithBinaryUnits) {
  EXPECT_EQ(parse_byte_size("64M", "--max-bytes"), 64ull << 20);
  EXPECT_EQ(parse_byte_size("1G", "--max-bytes"), 1ull << 30);
  EXPECT_EQ(parse_byte_size("16MiB", "--max-bytes"), 16ull << 20);
  EXPECT_EQ(parse_byte_size("500k", "--max-bytes"), 500ull << 10);
  EXPECT_EQ(parse_byte_size("4096", "--max-bytes"), 4096u);
  for (const char* bad : {"", "M", "-1M", "0", "12X"})
    EXPECT_THROW(parse_byte_size(bad, "--max-bytes"), UserError) << bad;
  EXPECT_EQ(format_byte_size(16ull << 20), "16M");
  EXPECT_EQ(format_byte_size(1000), "1000");
}

}  // namespace
}  // namespace mblast
