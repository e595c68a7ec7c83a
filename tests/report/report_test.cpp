// `mblast report` without a browser: the plot maths (scales, ticks, fast_p, the roof, peaks), the
// figures read from results, the HTML escaping of names wherever they land (tables, plot titles,
// tooltips), and bad input refused with exit status 2 and nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <unistd.h>

#include "cli_capture.h"
#include "mblast/driver/bench_report.h"
#include "mblast/driver/html_page.h"
#include "mblast/driver/plot_scale.h"
#include "mblast/driver/report_figures.h"
#include "mblast/driver/report_inputs.h"
#include "mblast/driver/report_page.h"
#include "mblast/driver/svg_plot.h"
#include "mblast/error.h"

namespace mblast::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- scales ----

TEST(ReportTicks, NiceStepsCoverTheRange) {
  EXPECT_EQ(nice_ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  const auto t = nice_ticks(0.3, 7.3, 6);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 0.3);
  EXPECT_GE(t.back(), 7.3);
  EXPECT_LE(t.size(), 7u);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 2.0);  // 7 / 6 rounds up to a step of 2
  // A single value is widened around itself, not divided by zero.
  const auto one = nice_ticks(5, 5, 4);
  EXPECT_LT(one.front(), 5);
  EXPECT_GT(one.back(), 5);
  // Reversed bounds are swapped; negative ranges work.
  EXPECT_EQ(nice_ticks(10, 0, 2), (std::vector<double>{0, 5, 10}));
  EXPECT_EQ(nice_ticks(-3, 3, 3), (std::vector<double>{-5, 0, 5}));  // a step of 2 would need 4 intervals
}

TEST(ReportScale, LinearMapsTheWidenedRangeOntoThePixels) {
  const Scale y = Scale::linear(0.1, 0.9, 300, 20);  // a y axis: pixels grow downwards
  EXPECT_DOUBLE_EQ(y.lo(), 0);
  EXPECT_DOUBLE_EQ(y.hi(), 1);
  EXPECT_DOUBLE_EQ(y(0), 300);
  EXPECT_DOUBLE_EQ(y(1), 20);
  EXPECT_DOUBLE_EQ(y(0.5), 160);
  EXPECT_FALSE(y.is_log());
}

TEST(ReportScale, LogUsesWholeDecades) {
  const Scale x = Scale::log10(3, 4000, 0, 400);
  EXPECT_DOUBLE_EQ(x.lo(), 1);
  EXPECT_DOUBLE_EQ(x.hi(), 1e4);
  EXPECT_EQ(x.ticks(), (std::vector<double>{1, 10, 100, 1000, 10000}));
  EXPECT_NEAR(x(100), 200, 1e-9);
  EXPECT_NEAR(x(10), 100, 1e-9);
  EXPECT_DOUBLE_EQ(x(0), 0);   // no place on a log axis: the lower end
  EXPECT_DOUBLE_EQ(x(-5), 0);  // likewise
  // Two decades or fewer: bounds and ticks at 1, 2 and 5 times a power of ten.
  const Scale s = Scale::log10(2, 3, 0, 1);
  EXPECT_DOUBLE_EQ(s.lo(), 2);
  EXPECT_DOUBLE_EQ(s.hi(), 5);
  EXPECT_EQ(s.ticks(), (std::vector<double>{2, 5}));
  const Scale r = Scale::log10(399, 1210, 0, 1);  // a run's best cost: 200 to 2000
  EXPECT_DOUBLE_EQ(r.lo(), 200);
  EXPECT_DOUBLE_EQ(r.hi(), 2000);
  EXPECT_EQ(r.ticks(), (std::vector<double>{200, 500, 1000, 2000}));
  EXPECT_NEAR(r(std::sqrt(200.0 * 2000)), 0.5, 1e-12);
  const Scale one = Scale::log10(100, 100, 0, 1);  // a single value still has a range
  EXPECT_LT(one.lo(), one.hi());
  EXPECT_THROW(Scale::log10(0, 10, 0, 1), std::invalid_argument);
  EXPECT_THROW(Scale::log10(-1, 10, 0, 1), std::invalid_argument);
  EXPECT_THROW(Scale::log10(1, NAN, 0, 1), std::invalid_argument);
  // Many decades: ticks thin out so labels do not collide.
  EXPECT_LE(Scale::log10(1e-3, 1e15, 0, 1).ticks().size(), 10u);
}

TEST(ReportShortNumber, SiPrefixesAndSmallValues) {
  EXPECT_EQ(short_number(0), "0");
  EXPECT_EQ(short_number(0.5), "0.5");
  EXPECT_EQ(short_number(12), "12");
  EXPECT_EQ(short_number(1500), "1.5k");
  EXPECT_EQ(short_number(2e9), "2G");
  EXPECT_EQ(short_number(999950), "1M");  // not "1e+03k"
  EXPECT_EQ(short_number(-3.2e6), "-3.2M");
  EXPECT_EQ(short_number(1e-5), "1e-05");
  EXPECT_EQ(short_number(NAN), "n/a");
}

// ---- fast_p ----

TEST(ReportFastP, CountsEveryProblemAndIsStrict) {
  const std::vector<std::optional<double>> s{2.0, 0.5, std::nullopt, 1.5, 1.0};
  EXPECT_DOUBLE_EQ(fast_p(s, 0), 4.0 / 5);
  EXPECT_DOUBLE_EQ(fast_p(s, 1), 2.0 / 5);    // 1.0 is not faster than 1x
  EXPECT_DOUBLE_EQ(fast_p(s, 1.5), 1.0 / 5);  // nor 1.5 than 1.5x
  EXPECT_DOUBLE_EQ(fast_p(s, 2), 0);
  EXPECT_DOUBLE_EQ(fast_p({}, 1), 0);
}

TEST(ReportFastP, AgreesWithTheBenchSummary) {
  // The same rows through `mblast bench`'s summary: the report must not count another way.
  json rows = json::array();
  const std::vector<std::optional<double>> speedups{2.0, 0.5, std::nullopt, 1.5, 1.0, 3.0};
  for (size_t i = 0; i < speedups.size(); ++i) {
    const bool ok = speedups[i].has_value();
    json r = {{"level", "l"},
              {"name", "p" + std::to_string(i)},
              {"key", "l/p" + std::to_string(i)},
              {"status", ok ? "correct" : "incorrect"},
              {"correct", ok},
              {"eager", {{"median_us", 100.0}}},
              {"compile", {{"unavailable", "none"}}},
              {"speedup_vs_eager", ok ? json(*speedups[i]) : json()},
              {"speedup_vs_compile", nullptr},
              {"fraction_of_peak", nullptr}};
    if (ok) r["time"] = {{"median", 100.0 / *speedups[i]}, {"unit", "us"}, {"spread_pct", 1.0}};
    rows.push_back(r);
  }
  const json e = summarize_bench(rows)["overall"]["vs_eager"];
  for (double p : kFastP) EXPECT_DOUBLE_EQ(fast_p(speedups, p), e[fmt::format("fast_{}", p)].get<double>()) << p;
}

TEST(ReportFastP, CurveIsTheExactStepFunction) {
  const std::vector<std::optional<double>> s{2.0, 0.5, std::nullopt, 1.5, 1.5};
  const auto c = fast_p_curve(s, 3);
  const std::vector<std::pair<double, double>> want{{0, 0.8}, {0.5, 0.6}, {1.5, 0.2}, {2.0, 0}, {3, 0}};
  EXPECT_EQ(c, want);
  // Every point is fast_p at its p, and the curve never rises.
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_DOUBLE_EQ(c[i].second, fast_p(s, c[i].first));
    if (i) {
      EXPECT_LE(c[i].second, c[i - 1].second);
    }
  }
  // Speedups beyond p_max end the curve at p_max with what is still above it.
  const auto cut = fast_p_curve({10.0, 0.5}, 2);
  EXPECT_EQ(cut.back(), (std::pair<double, double>{2, 0.5}));
}

// ---- roofline ----

TEST(ReportRoofline, RoofAndPeaksFromFractions) {
  Peaks p;
  p.bandwidth = 100e9;
  p.flops = 1e12;
  EXPECT_DOUBLE_EQ(roof(p, 1), 100e9);  // memory-bound side
  EXPECT_DOUBLE_EQ(roof(p, 10), 1e12);  // the ridge
  EXPECT_DOUBLE_EQ(roof(p, 100), 1e12);
  p.flops = NAN;
  EXPECT_DOUBLE_EQ(roof(p, 100), 1e13);  // only the bandwidth line is known
  EXPECT_TRUE(std::isnan(roof(Peaks{}, 1)));
  EXPECT_DOUBLE_EQ(peak_from(50, 0.5), 100);
  EXPECT_TRUE(std::isnan(peak_from(50, 0)));
  EXPECT_TRUE(std::isnan(peak_from(NAN, 0.5)));
}

ReportInput bench_input() {
  ReportInput in;
  in.kind = InputKind::bench;
  in.label = "bench t";
  in.doc = {
      {"kind", "mblast-bench"},
      {"meta", {{"target", "t"}}},
      {"problems", json::array({
                       // 1 MB in 10 us = 100 GB/s at half the peak bandwidth; 1 MFLOP in 10 us at a tenth of the peak
                       {{"key", "l1/a"},
                        {"correct", true},
                        {"flops", 1e6},
                        {"bytes", 1e6},
                        {"time", {{"median", 10.0}, {"unit", "us"}}},
                        {"bandwidth_fraction", 0.5},
                        {"compute_fraction", 0.1}},
                       // stated peaks win over derived ones
                       {{"key", "l1/b"},
                        {"correct", true},
                        {"flops", 0},
                        {"bytes", 4e6},
                        {"time", {{"median", 20.0}, {"unit", "us"}}},
                        {"bandwidth_fraction", 0.5},
                        {"peak_bandwidth_bytes_per_s", 4e11}},
                       {{"key", "l1/c"}, {"correct", false}, {"status", "incorrect"}},
                   })}};
  return in;
}

TEST(ReportRoofline, BenchRowsGivePointsAndPeaks) {
  const auto pts = kernel_points(bench_input());
  ASSERT_EQ(pts.size(), 2u);  // the incorrect row has no time
  EXPECT_EQ(pts[0].name, "l1/a");
  EXPECT_DOUBLE_EQ(pts[0].intensity(), 1);
  EXPECT_DOUBLE_EQ(pts[0].flops_per_s(), 1e11);
  EXPECT_DOUBLE_EQ(pts[0].peak_bandwidth, 2e11);
  EXPECT_DOUBLE_EQ(pts[0].peak_flops, 1e12);
  EXPECT_DOUBLE_EQ(pts[1].peak_bandwidth, 4e11);
  EXPECT_TRUE(std::isnan(pts[1].peak_flops));  // no FLOPs counted: nothing to derive from
  const auto peaks = peaks_by_target(pts);
  ASSERT_EQ(peaks.count("t"), 1u);
  EXPECT_DOUBLE_EQ(peaks.at("t").bandwidth, 3e11);  // the median of 2e11 and 4e11
  EXPECT_EQ(peaks.at("t").bandwidth_from, 2);
  EXPECT_DOUBLE_EQ(peaks.at("t").flops, 1e12);
  EXPECT_EQ(peaks.at("t").flops_from, 1);
}

// ---- runs ----

json cand(const char* type, bool correct, double cost) {
  return {{"type", type}, {"measured", {{"correct", correct}, {"cost", cost}, {"unit", "us"}}}, {"description", type}};
}

TEST(ReportRuns, BestSoFarCountsEveryEvaluation) {
  const std::vector<json> events{cand("candidate", false, 0),  // nothing correct yet: no point
                                 cand("start", true, 100),    {{"type", "step"}, {"step", 1}},
                                 cand("candidate", false, 5), cand("candidate", true, 80),
                                 cand("candidate", true, 90)};
  const auto b = best_so_far(events);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].evaluation, 2);
  EXPECT_DOUBLE_EQ(b[0].cost, 100);
  EXPECT_TRUE(b[0].improved);
  EXPECT_DOUBLE_EQ(b[1].cost, 100);  // a wrong candidate's 5 us is no best
  EXPECT_FALSE(b[1].improved);
  EXPECT_DOUBLE_EQ(b[2].cost, 80);
  EXPECT_TRUE(b[2].improved);
  EXPECT_EQ(b[3].evaluation, 5);
  EXPECT_DOUBLE_EQ(b[3].cost, 80);
}

TEST(ReportRuns, KbWarmthFromTheKnowledgeUsed) {
  ReportInput r;
  r.doc = {{"knowledge", {{"used", json::array({{{"tries", 0}}, {{"tries", 0}}})}}}};
  EXPECT_EQ(kb_warmth(r).first, "cold");
  r.doc["knowledge"]["used"].push_back({{"tries", 3}, {"same_target_tries", 2}});
  EXPECT_EQ(kb_warmth(r).first, "warm");
  EXPECT_NE(kb_warmth(r).second.find("3 earlier tries"), std::string::npos);
  r.doc = json::object();
  EXPECT_EQ(kb_warmth(r).first, "unknown");
}

TEST(ReportInputs, IsoSeconds) {
  EXPECT_DOUBLE_EQ(iso_seconds("1970-01-01T00:01:00Z"), 60);
  EXPECT_DOUBLE_EQ(iso_seconds("2026-12-07T11:35:07.250Z") - iso_seconds("2026-12-07T11:35:07Z"), 0.25);
  EXPECT_TRUE(std::isnan(iso_seconds("yesterday")));
}

// ---- escaping ----

const std::string kNasty = "<script>alert('x')</script> & \"q\"";

TEST(ReportEscape, HtmlSpecialsInvalidUtf8AndControls) {
  EXPECT_EQ(html_escape(kNasty), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
  EXPECT_EQ(html_escape("a\xff"
                        "b"),
            "a\xEF\xBF\xBD"
            "b");                                                                  // not UTF-8
  EXPECT_EQ(html_escape("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
  EXPECT_EQ(html_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(html_escape("x\x01y\x7f"), "x\xEF\xBF\xBDy\xEF\xBF\xBD");              // controls
  EXPECT_EQ(html_escape("tab\tnl\n"), "tab\tnl\n");
  EXPECT_EQ(html_escape("\xC2\xB5s \xE2\x86\x92 \xF0\x9F\x9A\x80"), "\xC2\xB5s \xE2\x86\x92 \xF0\x9F\x9A\x80");
  EXPECT_EQ(html_escape("abc\xE2\x86"), "abc\xEF\xBF\xBD\xEF\xBF\xBD");  // cut short
}

TEST(ReportEscape, NamesInTablesPlotsAndTooltips) {
  HtmlPage page(kNasty);
  page.heading(kNasty);
  page.table({kNasty}, {{kNasty}});
  XYPlot plot;
  plot.title = kNasty;
  plot.x.label = kNasty;
  plot.series.push_back({kNasty, {{1, 2, kNasty}}, SeriesStyle::markers});
  page.raw(render_xy(plot));
  BarPlot bars;
  bars.title = kNasty;
  bars.series = {kNasty};
  bars.groups.push_back({kNasty, {2.0}, {kNasty}});
  page.raw(render_bars(bars));
  page.raw(render_missing(kNasty, kNasty));
  const std::string html = page.str();
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("alert('x')"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)"), std::string::npos);
}

// ---- plots say what is missing ----

TEST(ReportPlots, NothingToDrawSaysWhy) {
  XYPlot plot;
  plot.title = "t";
  plot.missing = "no runs given";
  EXPECT_NE(render_xy(plot).find("No data: no runs given"), std::string::npos);
  plot.y.log = true;
  plot.series.push_back({"s", {{1, 0, ""}, {2, -1, ""}}, SeriesStyle::line});  // nothing positive on a log axis
  EXPECT_NE(render_xy(plot).find("No data: no runs given"), std::string::npos);
  plot.series[0].points.push_back({3, 5, ""});
  const std::string svg = render_xy(plot);
  EXPECT_EQ(svg.find("No data"), std::string::npos);
  EXPECT_NE(svg.find("2 point(s) not drawn"), std::string::npos);
  BarPlot bars;
  bars.title = "b";
  bars.missing = "no speedups";
  bars.series = {"s"};
  bars.groups.push_back({"p", {NAN}, {"p: incorrect"}});
  EXPECT_NE(render_bars(bars).find("No data: no speedups"), std::string::npos);
}

TEST(ReportPage, EverySectionSaysWhatIsMissing) {
  const std::string html = report_html({bench_input()}, {});
  for (const char* why : {"no optimize run among the inputs", "no --kb FILE given", "No torch.compile speedups"})
    EXPECT_NE(html.find(why), std::string::npos) << why;
  EXPECT_NE(html.find("Roofline on t"), std::string::npos);
  // Nothing fetched at view time: the only URL is the SVG namespace, which is a name, not a fetch.
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_GT(count("<svg"), 0u);
  EXPECT_EQ(count("http://"), count("http://www.w3.org/2000/svg"));
  EXPECT_EQ(count("https://"), 0u);
  EXPECT_EQ(count("src="), 0u);
}

// ---- bad input ----

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("mblast-report-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
};

void write(const fs::path& f, const std::string& text) { std::ofstream(f) << text; }

TEST(ReportInputs, RecognisedByContents) {
  TempDir t;
  write(t.dir / "b.json", bench_input().doc.dump());
  EXPECT_EQ(load_report_input(t.dir / "b.json").kind, InputKind::bench);
  fs::create_directories(t.dir / "run");
  write(t.dir / "run" / "events.jsonl", cand("start", true, 10).dump() + "\n" + cand("candidate", true, 5).dump() +
                                            "\n{\"type\": \"cand");  // a line cut short by a kill
  const ReportInput run = load_report_input(t.dir / "run");
  EXPECT_EQ(run.kind, InputKind::run);
  EXPECT_EQ(run.events.size(), 2u);
  fs::create_directories(t.dir / "model");
  write(t.dir / "model" / "plan.json", R"({"model": {"name": "m"}, "groups": [], "end_to_end": {}})");
  EXPECT_EQ(load_report_input(t.dir / "model").kind, InputKind::model);
  EXPECT_EQ(load_report_input(t.dir / "model").label, "m");
}

TEST(ReportInputs, BadInputIsOneLineAndExitTwoWithNothingWritten) {
  TempDir t;
  write(t.dir / "other.json", R"({"hello": "world"})");
  write(t.dir / "broken.json", R"({"kind": "mblast-bench", "problems": [)");
  fs::create_directories(t.dir / "empty");
  const fs::path out = t.dir / "out.html";
  for (const auto& [input, why] :
       std::vector<std::pair<fs::path, std::string>>{{t.dir / "missing.json", "no such file or folder"},
                                                     {t.dir / "other.json", "not a results file of mblast bench"},
                                                     {t.dir / "broken.json", "is not valid JSON"},
                                                     {t.dir / "empty", "not a run folder of mblast optimize"}}) {
    EXPECT_THROW(load_report_input(input), UserError);
    const auto r = mblast::testing::run_cli({"report", input.string(), "--html", out.string()});
    EXPECT_EQ(r.rc, 2) << input;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  // A report already there stays as it was when an input is bad.
  write(t.dir / "b.json", bench_input().doc.dump());
  ASSERT_EQ(mblast::testing::run_cli({"report", (t.dir / "b.json").string(), "--html", out.string()}).rc, 0);
  const auto before = fs::file_size(out);
  EXPECT_EQ(mblast::testing::run_cli(
                {"report", (t.dir / "b.json").string(), (t.dir / "other.json").string(), "--html", out.string()})
                .rc,
            2);
  EXPECT_EQ(fs::file_size(out), before);
  // A missing knowledge base is bad input too.
  EXPECT_EQ(mblast::testing::run_cli(
                {"report", (t.dir / "b.json").string(), "--kb", (t.dir / "no.sqlite").string(), "--html", out.string()})
                .rc,
            2);
  // No temporary file is left beside OUT.
  for (const auto& e : fs::directory_iterator(t.dir))
    EXPECT_EQ(e.path().filename().string().find(".out.html.tmp"), std::string::npos);
}

}  // namespace
}  // namespace mblast::report
