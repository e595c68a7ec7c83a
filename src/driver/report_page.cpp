#include "mblast/driver/report_page.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "mblast/driver/html_page.h"
#include "mblast/driver/json_fields.h"
#include "mblast/driver/plot_scale.h"
#include "mblast/driver/report_figures.h"
#include "mblast/driver/svg_plot.h"
#include "mblast/version.h"

namespace mblast::report {

using nlohmann::json;

namespace {

using json_fields::number_or_nan;
using json_fields::text;

std::string g3(double v) { return std::isfinite(v) ? fmt::format("{:.3g}", v) : "-"; }
std::string g4(double v) { return std::isfinite(v) ? fmt::format("{:.4g}", v) : "-"; }
std::string times(double v) { return std::isfinite(v) ? fmt::format("{:.2f}x", v) : "-"; }
std::string pct(double v) { return std::isfinite(v) ? fmt::format("{:.1f}%", 100 * v) : "-"; }
std::string giga(double v) { return std::isfinite(v) ? fmt::format("{:.3g}", v / 1e9) : "-"; }

std::string one_line(std::string s, size_t max) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > max) {
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "...";
  }
  return s;
}

std::vector<const ReportInput*> of_kind(const std::vector<ReportInput>& inputs, InputKind k) {
  std::vector<const ReportInput*> out;
  for (const auto& in : inputs)
    if (in.kind == k) out.push_back(&in);
  return out;
}

// ---- the inputs ----

std::string input_summary(const ReportInput& in) {
  if (in.kind == InputKind::bench) {
    const json overall = in.doc.value("summary", json::object()).value("overall", json::object());
    const json eager = overall.value("vs_eager", json::object());
    std::string s = fmt::format("{} problems, {} correct", overall.value("problems", 0), overall.value("correct", 0));
    if (eager.value("geomean_speedup", json()).is_number())
      s += fmt::format(", geomean {:.2f}x over eager ({} problems)", eager["geomean_speedup"].get<double>(),
                       eager.value("n", 0));
    if (!in.doc.value("complete", true)) s += "; incomplete (the run was stopped)";
    return s;
  }
  if (in.kind == InputKind::model) {
    const json e2e = in.doc.value("end_to_end", json::object());
    return fmt::format("{} groups; end to end {}{}", in.doc.value("groups", json::array()).size(),
                       e2e.value("correct", false) ? "correct" : "not correct",
                       std::isfinite(number_or_nan(e2e, "speedup_vs_eager"))
                           ? fmt::format(", {:.2f}x over eager", number_or_nan(e2e, "speedup_vs_eager"))
                           : "");
  }
  const auto [warmth, why] = kb_warmth(in);
  if (in.doc.empty())
    return fmt::format("problem {}; {} events; no report.json (still going, or stopped)", text(in.meta, "problem", "?"),
                       in.events.size());
  return fmt::format(
      "problem {}; {} evaluations; {}; stop: {}; KB {}", text(in.doc, "problem", "?"), in.doc.value("evaluations", 0),
      in.doc.value("improved", false) ? fmt::format("{:.2f}x over the start", number_or_nan(in.doc, "speedup"))
                                      : "the start kept",
      text(in.doc, "stop_reason", "?"), warmth);
}

std::string input_target(const ReportInput& in) {
  if (in.kind == InputKind::bench) return text(in.doc.value("meta", json::object()), "target", "?");
  if (in.kind == InputKind::model) return text(in.doc.value("target", json::object()), "name", "?");
  return text(in.doc, "target", text(in.meta, "target", "?"));
}

std::string input_date(const ReportInput& in) {
  if (in.kind == InputKind::bench) return text(in.doc.value("meta", json::object()), "date");
  if (in.kind == InputKind::run) return text(in.meta, "created_at");
  return "";
}

void inputs_section(HtmlPage& page, const std::vector<ReportInput>& inputs) {
  page.heading("Inputs", 2, "inputs");
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    rows.push_back({std::to_string(i + 1), kind_name(in.kind), in.label, input_target(in), input_date(in),
                    input_summary(in), in.path.string()});
  }
  page.table({"#", "kind", "name", "target", "date", "summary", "path"}, rows);
}

// ---- roofline ----

void roofline_section(HtmlPage& page, const std::vector<ReportInput>& inputs) {
  page.heading("Roofline", 2, "roofline");
  page.paragraph(
      "Each correct, timed kernel at its arithmetic intensity (counted FLOPs over counted bytes) and its achieved "
      "FLOP rate, under the target's roof: min(peak FLOP/s, intensity x peak bandwidth). The peaks are those the "
      "results were measured against: stated in a result where it keeps them, else implied by its fractions of peak "
      "(achieved rate / fraction); the median over the kernels of a target.",
      "note");
  std::vector<KernelPoint> all;
  for (const auto& in : inputs) {
    auto k = kernel_points(in);
    all.insert(all.end(), k.begin(), k.end());
  }
  if (all.empty()) {
    page.raw(render_missing("Roofline",
                            "no correct kernel with a measured time in the inputs (a bench needs correct rows; a run "
                            "under QEMU counts instructions, which have no time)"));
    return;
  }
  const auto peaks = peaks_by_target(all);
  std::vector<std::vector<std::string>> peak_rows;
  for (const auto& [target, p] : peaks) {
    const double ridge = std::isfinite(p.flops) && std::isfinite(p.bandwidth) ? p.flops / p.bandwidth : NAN;
    peak_rows.push_back({target, giga(p.bandwidth), std::to_string(p.bandwidth_from), giga(p.flops),
                         std::to_string(p.flops_from), g3(ridge)});
  }
  for (const auto& [target, p] : peaks) {
    std::vector<const KernelPoint*> pts;
    size_t no_flops = 0;
    for (const auto& k : all)
      if (k.target == target) {
        if (k.flops > 0 && k.bytes > 0)
          pts.push_back(&k);
        else
          ++no_flops;
      }
    XYPlot plot;
    plot.title = "Roofline on " + target;
    plot.x = {"arithmetic intensity (FLOP/byte)", true, {}, {}};
    plot.y = {"achieved FLOP/s", true, {}, {}};
    plot.height = 480;
    plot.missing = fmt::format(
        "none of the {} kernel(s) on {} counts both FLOPs and bytes (pure data movement has no "
        "place on a FLOP/s roofline; see the table)",
        no_flops, target);
    double imin = INFINITY, imax = 0;
    for (const auto* k : pts) imin = std::min(imin, k->intensity()), imax = std::max(imax, k->intensity());
    const double ridge = p.flops / p.bandwidth;
    if (std::isfinite(ridge)) imin = std::min(imin, ridge), imax = std::max(imax, ridge);
    if (!pts.empty() && (std::isfinite(p.bandwidth) || std::isfinite(p.flops))) {
      PlotSeries r;
      r.name = fmt::format("roof: {} GB/s, {} GFLOP/s", giga(p.bandwidth), giga(p.flops));
      r.style = SeriesStyle::line;
      r.color = 7;
      const double lo = imin / 4, hi = imax * 4;
      std::vector<double> xs{lo};
      if (std::isfinite(ridge) && ridge > lo && ridge < hi) xs.push_back(ridge);
      xs.push_back(hi);
      for (double x : xs)
        r.points.push_back({x, roof(p, x), fmt::format("roof at {} FLOP/byte: {} GFLOP/s", g3(x), giga(roof(p, x)))});
      plot.series.push_back(std::move(r));
    }
    std::map<std::string, PlotSeries> by_series;
    std::vector<std::string> order;
    for (const auto* k : pts) {
      const std::string name = k->source + " · " + k->role;
      if (!by_series.count(name)) {
        order.push_back(name);
        by_series[name].name = name;
        by_series[name].style = SeriesStyle::markers;
        by_series[name].color = static_cast<int>(order.size() - 1);
      }
      by_series[name].points.push_back(
          {k->intensity(), k->flops_per_s(),
           fmt::format("{} ({}): {} FLOP/byte, {} GFLOP/s, {} GB/s, {} of peak", k->name, k->role, g3(k->intensity()),
                       giga(k->flops_per_s()), giga(k->bytes_per_s()), pct(k->fraction_of_peak))});
    }
    for (const auto& n : order) plot.series.push_back(by_series[n]);
    page.raw(render_xy(plot));
    if (!std::isfinite(p.bandwidth) && !std::isfinite(p.flops))
      page.paragraph("No roof for " + target +
                         ": no result states its peaks or a fraction of peak to derive them from (peaks not measured "
                         "on this target?).",
                     "missing");
    if (no_flops > 0 && !pts.empty())
      page.paragraph(
          fmt::format("{} kernel(s) on {} count no FLOPs or no bytes and are in the table only.", no_flops, target),
          "note");
  }
  page.table({"target", "peak bandwidth (GB/s)", "from", "peak FP32 (GFLOP/s)", "from", "ridge (FLOP/byte)"}, peak_rows,
             "The peaks each roof is drawn from (\"from\": how many results give the figure).");
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : all)
    rows.push_back({k.target, k.source, k.name, k.role, g4(k.flops), g4(k.bytes), g3(k.intensity()),
                    g4(k.seconds * 1e6), giga(k.flops_per_s()), giga(k.bytes_per_s()), pct(k.bandwidth_fraction),
                    pct(k.compute_fraction), pct(k.fraction_of_peak)});
  page.table({"target", "input", "kernel", "role", "FLOPs", "bytes", "FLOP/byte", "time (us)", "GFLOP/s", "GB/s",
              "of peak bandwidth", "of peak FP32", "fraction of peak"},
             rows, "The kernels behind the roofline.");
}

// ---- speedups and fast_p ----

struct SpeedupSet {
  std::string name;                                 // "<input> vs eager"
  std::map<std::string, std::optional<double>> by;  // problem -> speedup (NaN: in the input, no speedup)
  std::map<std::string, std::string> why;           // problem -> why there is none
  std::vector<std::optional<double>> all;           // every problem of the input, for fast_p
  bool compile = false;
  int input = 0;
};

std::string no_speedup_reason(const json& row, const char* baseline) {
  if (!row.value("correct", false)) {
    std::string r = text(row, "status", "?");
    if (row.value("reason", json()).is_string()) r += ": " + one_line(row["reason"].get<std::string>(), 100);
    return r;
  }
  const json b = row.value(baseline, json::object());
  if (!text(b, "unavailable").empty()) return "no baseline: " + text(b, "unavailable");
  if (!text(b, "failed").empty()) return "baseline failed: " + text(b, "failed");
  return "no speedup";
}

std::vector<SpeedupSet> speedup_sets(const std::vector<ReportInput>& inputs) {
  std::vector<SpeedupSet> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    if (in.kind != InputKind::bench) continue;
    for (const bool compile : {false, true}) {
      SpeedupSet s;
      s.name = in.label + (compile ? " vs torch.compile" : " vs eager");
      s.compile = compile;
      s.input = static_cast<int>(i);
      bool any = false;
      for (const json& r : in.doc.value("problems", json::array())) {
        const std::string key = text(r, "key", text(r, "name", "?"));
        const double v = number_or_nan(r, compile ? "speedup_vs_compile" : "speedup_vs_eager");
        s.by[key] = v;
        if (!std::isfinite(v)) s.why[key] = no_speedup_reason(r, compile ? "compile" : "eager");
        s.all.push_back(std::isfinite(v) ? std::optional<double>(v) : std::nullopt);
        any = any || std::isfinite(v);
      }
      if (compile && !any) continue;  // said in the section instead
      out.push_back(std::move(s));
    }
  }
  // optimize-model plans: one "problem" each, end to end over eager.
  SpeedupSet m;
  m.name = "optimize-model vs eager";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    if (in.kind != InputKind::model) continue;
    const json e2e = in.doc.value("end_to_end", json::object());
    const double v = e2e.value("correct", false) ? number_or_nan(e2e, "speedup_vs_eager") : NAN;
    m.by[in.label] = v;
    if (!std::isfinite(v))
      m.why[in.label] = e2e.value("correct", false) ? text(e2e, "eager_note", "no eager time")
                                                    : "not correct end to end: " + text(e2e, "reason", "?");
    m.all.push_back(std::isfinite(v) ? std::optional<double>(v) : std::nullopt);
    m.input = static_cast<int>(i);
  }
  if (!m.by.empty()) out.push_back(std::move(m));
  return out;
}

// Why no input has torch.compile figures, from the bench summaries.
std::string compile_absent(const std::vector<ReportInput>& inputs) {
  std::set<std::string> why;
  for (const auto& in : inputs) {
    if (in.kind != InputKind::bench) continue;
    const json vc =
        in.doc.value("summary", json::object()).value("overall", json::object()).value("vs_compile", json());
    bool any = false;
    for (const json& r : in.doc.value("problems", json::array()))
      any = any || std::isfinite(number_or_nan(r, "speedup_vs_compile"));
    if (!any) why.insert(in.label + ": " + text(vc, "unavailable", "no problem has a torch.compile speedup"));
  }
  std::string s;
  for (const auto& w : why) s += (s.empty() ? "" : "; ") + w;
  return s;
}

void speedup_section(HtmlPage& page, const std::vector<ReportInput>& inputs) {
  page.heading("Speedup per problem", 2, "speedup");
  page.paragraph(
      "The candidate's median time against PyTorch's, measured in the same run by the same rules (docs/bench.md); "
      "above the 1x line is faster. A hollow mark on the line: the problem is in that input without a speedup (the "
      "tooltip and the table say why).",
      "note");
  const auto sets = speedup_sets(inputs);
  const std::string no_compile = compile_absent(inputs);
  if (sets.empty()) {
    page.raw(render_missing("Speedup per problem",
                            "no bench results or optimize-model plan among the inputs: an optimize run is measured "
                            "against its start, not against PyTorch (see \"Best cost against evaluations\")"));
    return;
  }
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const auto& s : sets)
    for (const auto& [k, v] : s.by)
      if (seen.insert(k).second) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  BarPlot plot;
  plot.title = "Speedup per problem";
  plot.y_label = "speedup (x baseline)";
  plot.ref = 1;
  plot.ref_label = "1x";
  plot.missing = "no problem has a speedup: none is correct with a baseline (the table says why)";
  for (const auto& s : sets) plot.series.push_back(s.name);
  for (const auto& k : keys) {
    BarGroup g;
    g.category = k;
    for (const auto& s : sets) {
      auto it = s.by.find(k);
      if (it == s.by.end()) {
        g.values.push_back(std::nullopt);
        g.tips.push_back("");
      } else {
        g.values.push_back(it->second);
        g.tips.push_back(k + " · " + s.name + ": " +
                         (it->second && std::isfinite(*it->second) ? times(*it->second) : s.why.at(k)));
      }
    }
    plot.groups.push_back(std::move(g));
  }
  page.raw(render_bars(plot));
  if (!no_compile.empty()) page.paragraph("No torch.compile speedups: " + no_compile + ".", "missing");
  std::vector<std::string> header{"problem"};
  for (const auto& s : sets) header.push_back(s.name);
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : keys) {
    std::vector<std::string> r{k};
    for (const auto& s : sets) {
      auto it = s.by.find(k);
      if (it == s.by.end())
        r.push_back("");
      else if (it->second && std::isfinite(*it->second))
        r.push_back(times(*it->second));
      else
        r.push_back("- (" + s.why.at(k) + ")");
    }
    rows.push_back(std::move(r));
  }
  page.table(header, rows, "The speedups behind the bars (empty: the problem is not in that input).");
  // The bench rows themselves: times and baselines.
  for (const auto& in : inputs) {
    if (in.kind != InputKind::bench) continue;
    std::vector<std::vector<std::string>> br;
    for (const json& r : in.doc.value("problems", json::array())) {
      const json t = r.value("time", json());
      br.push_back({text(r, "key", "?"), text(r, "status", "?"),
                    t.is_object() ? g4(number_or_nan(t, "median")) + " " + text(t, "unit") : "-",
                    g4(number_or_nan(r.value("eager", json::object()), "median_us")),
                    g4(number_or_nan(r.value("compile", json::object()), "median_us")),
                    times(number_or_nan(r, "speedup_vs_eager")), times(number_or_nan(r, "speedup_vs_compile")),
                    pct(number_or_nan(r, "fraction_of_peak")),
                    r.value("reason", json()).is_string() ? one_line(r["reason"].get<std::string>(), 160) : ""});
    }
    page.table({"problem", "status", "candidate", "eager (us)", "torch.compile (us)", "x eager", "x torch.compile",
                "of peak", "reason"},
               br, in.label + ": every row.");
  }
}

void fast_p_section(HtmlPage& page, const std::vector<ReportInput>& inputs) {
  page.heading("fast_p as p grows", 2, "fast_p");
  page.paragraph(
      "KernelBench's fast_p: the fraction of ALL problems that are correct and faster than p x the baseline "
      "(incorrect problems, problems without a candidate and problems without that baseline count as not fast). "
      "fast_0 is the fraction correct (with a baseline).",
      "note");
  const auto sets = speedup_sets(inputs);
  if (sets.empty()) {
    page.raw(render_missing("fast_p", "no bench results or optimize-model plan among the inputs"));
    return;
  }
  double smax = 0;
  for (const auto& s : sets)
    for (const auto& v : s.all)
      if (v) smax = std::max(smax, *v);
  const double p_max = std::max(2.0, std::ceil(smax * 1.1 * 10) / 10);
  // Speedups far above 1 would squash the region around p = 1 on a linear axis: a log axis from
  // p = 0.1 then (fast_0 is in the table).
  const bool log_p = p_max > 10;
  const double p_min = log_p ? 0.1 : 0.0;
  XYPlot plot;
  plot.title = "fast_p against p";
  plot.x = {"p (speedup threshold, x baseline)", log_p, p_min, p_max};
  plot.y = {"fraction of problems correct and faster than p", false, 0.0, 1.0};
  plot.refs.push_back({false, 1.0, "p = 1"});
  plot.missing = "no problems";
  int color = 0;
  std::map<int, int> color_of_input;
  for (const auto& s : sets) {
    PlotSeries ps;
    ps.name = fmt::format("{} ({} problems)", s.name, s.all.size());
    ps.style = SeriesStyle::step;
    ps.dashed = s.compile;
    if (!color_of_input.count(s.input)) color_of_input[s.input] = color++;
    ps.color = color_of_input[s.input];
    for (auto [p, v] : fast_p_curve(s.all, p_max)) {
      if (p < p_min && p != 0) continue;  // within [0, p_min): the step at p_min holds fast_p(p_min)
      if (p == 0 && p_min > 0) p = p_min, v = fast_p(s.all, p_min);
      ps.points.push_back({p, v, fmt::format("{}: fast_{} = {:.3f}", s.name, g3(p), v)});
    }
    plot.series.push_back(std::move(ps));
  }
  page.raw(render_xy(plot));
  if (log_p)
    page.paragraph(
        fmt::format("p on a log axis from {} (speedups up to {:.3g}x); fast_0 is in the table.", p_min, smax), "note");
  std::vector<std::string> header{"p"};
  for (const auto& s : sets) header.push_back(s.name);
  std::vector<std::vector<std::string>> rows;
  for (double p : {0.0, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 100.0}) {
    if (p > p_max && p > 2) break;
    std::vector<std::string> r{g3(p)};
    for (const auto& s : sets) r.push_back(fmt::format("{:.3f}", fast_p(s.all, p)));
    rows.push_back(std::move(r));
  }
  page.table(header, rows, "fast_p at a few p (the curve is exact: it falls just after each problem's speedup).");
}

// ---- runs ----

void runs_section(HtmlPage& page, const std::vector<ReportInput>& inputs) {
  page.heading("Best cost against evaluations", 2, "convergence");
  page.paragraph(
      "Per optimize run, the best correct cost after each evaluation (the start is evaluation 1). Runs of one "
      "problem share a plot, so a run from a cold knowledge base and one from a warm one lie side by side; whether a "
      "run's KB was warm is read from the actions it used (report.json's knowledge.used: tried before or not).",
      "note");
  const auto runs = of_kind(inputs, InputKind::run);
  if (runs.empty()) {
    page.raw(render_missing("Best cost against evaluations",
                            "no optimize run among the inputs (give a run folder: `mblast runs list` shows them)"));
    return;
  }
  // One plot per problem and unit, in the order the runs were given.
  std::vector<std::string> groups;
  std::map<std::string, std::vector<const ReportInput*>> by_group;
  for (const auto* r : runs) {
    const std::string problem = text(r->doc, "problem", text(r->meta, "problem", "?"));
    const std::string key = problem + " on " + text(r->doc, "target", text(r->meta, "target", "?")) + " (" +
                            (run_unit(*r).empty() ? "no correct evaluation" : run_unit(*r)) + ")";
    if (!by_group.count(key)) groups.push_back(key);
    by_group[key].push_back(r);
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& key : groups) {
    XYPlot plot;
    plot.title = "Best cost against evaluations: " + key;
    plot.x = {"evaluation", false, 1.0, {}, true};
    plot.y = {"best cost so far", true, {}, {}};
    plot.missing = "no run of " + key + " has a correct evaluation yet";
    int c = 0;
    for (const auto* r : by_group[key]) {
      const auto best = best_so_far(r->events);
      const auto [warmth, why] = kb_warmth(*r);
      PlotSeries line, marks;
      line.name = r->label + " · " + warmth + " KB";
      line.style = SeriesStyle::step;
      line.color = c;
      line.dashed = warmth == "warm";
      marks.style = SeriesStyle::markers;
      marks.color = c++;
      const std::string unit = run_unit(*r);
      for (const auto& b : best) {
        line.points.push_back({static_cast<double>(b.evaluation), b.cost, ""});
        if (b.improved)
          marks.points.push_back({static_cast<double>(b.evaluation), b.cost,
                                  fmt::format("{} evaluation {}: {} {} ({})", r->label, b.evaluation, g4(b.cost), unit,
                                              one_line(b.description, 80))});
      }
      // Evaluations after the last improvement keep the line going to the run's end.
      plot.series.push_back(std::move(line));
      plot.series.push_back(std::move(marks));
      const int evals = best.empty() ? 0 : best.back().evaluation;
      int to_best = 0;
      for (const auto& b : best)
        if (b.improved) to_best = b.evaluation;
      rows.push_back({r->label, key, warmth + ": " + why, std::to_string(evals),
                      best.empty() ? "-" : g4(best.front().cost) + " " + unit,
                      best.empty() ? "-" : g4(best.back().cost) + " " + unit,
                      best.empty() ? "-" : times(best.front().cost / best.back().cost), std::to_string(to_best),
                      r->doc.empty() ? "(no report.json)"
                                     : text(r->doc, "stop_reason", "?") +
                                           (r->doc.value("improved", false) ? "" : "; " + text(r->doc, "note", ""))});
    }
    page.raw(render_xy(plot));
  }
  page.table({"run", "problem", "knowledge base", "evaluations", "first correct", "best", "best / first",
              "evaluation of the best", "stopped / returned"},
             rows,
             "Per run (\"best / first\" is over the first correct evaluation as measured in the loop; the returned "
             "speedup in the inputs table rests on the start and the best timed again back to back).");
}

// ---- the knowledge base ----

void kb_section(HtmlPage& page, const PageOptions& o) {
  page.heading("Knowledge base growth", 2, "kb");
  if (!o.kb) {
    page.raw(render_missing("Knowledge base growth",
                            "no --kb FILE given: pass the KB the runs used (`mblast report ... --kb ~/.local/share/"
                            "mblast/kb.sqlite`) to see its experiences over time"));
    return;
  }
  const KbHistory& h = *o.kb;
  page.paragraph(fmt::format("{}: {} experiences, {} states, {} actions, {} constraints. Each experience is one "
                             "candidate tried in a state (kernel level) or one decision of optimize-model (model "
                             "level), counted by the time it was written.",
                             h.path, h.experiences.size(), h.states, h.actions, h.constraints),
                 "note");
  double t0 = NAN;
  for (const auto& x : h.experiences)
    if (const double t = iso_seconds(x.created_at); std::isfinite(t)) {
      t0 = t;
      break;
    }
  double span = 0;
  for (const auto& x : h.experiences)
    if (const double t = iso_seconds(x.created_at); std::isfinite(t)) span = std::max(span, t - t0);
  const char* unit_name = span > 3 * 3600 ? "hours" : span > 180 ? "minutes" : "seconds";
  const double unit_s = span > 3 * 3600 ? 3600 : span > 180 ? 60 : 1;
  XYPlot plot;
  plot.title = "Experiences in the knowledge base over time";
  plot.x = {std::string(unit_name) + " since the first experience" +
                (h.experiences.empty() ? "" : " (" + h.experiences.front().created_at + ")"),
            false,
            0.0,
            {}};
  plot.y = {"experiences (cumulative)", false, 0.0, {}};
  plot.missing = "the knowledge base " + h.path + " has no experiences yet (no run has written to it)";
  PlotSeries all, correct, faster, model;
  all.name = "all";
  correct.name = "correct";
  faster.name = "faster than their parent";
  model.name = "model level";
  for (auto* s : {&all, &correct, &faster, &model}) s->style = SeriesStyle::step;
  correct.dashed = true;  // often on the line of "all": both stay visible
  size_t n_all = 0, n_ok = 0, n_fast = 0, n_model = 0;
  std::map<std::string, std::array<size_t, 3>> per_target;
  for (const auto& x : h.experiences) {
    const double t = iso_seconds(x.created_at);
    if (!std::isfinite(t)) continue;
    const double xv = (t - t0) / unit_s;
    ++n_all;
    all.points.push_back({xv, static_cast<double>(n_all), x.created_at + ": " + std::to_string(n_all)});
    auto& pt = per_target[x.target];
    ++pt[0];
    if (x.model) {
      model.points.push_back({xv, static_cast<double>(++n_model), ""});
      continue;
    }
    if (x.correct) correct.points.push_back({xv, static_cast<double>(++n_ok), ""}), ++pt[1];
    if (x.correct && x.speedup > 1) faster.points.push_back({xv, static_cast<double>(++n_fast), ""}), ++pt[2];
  }
  for (auto* s : {&all, &correct, &faster, &model})
    if (!s->points.empty()) plot.series.push_back(*s);
  page.raw(render_xy(plot));
  std::vector<std::vector<std::string>> rows;
  for (const auto& [target, c] : per_target)
    rows.push_back({target, std::to_string(c[0]), std::to_string(c[1]), std::to_string(c[2])});
  std::string first = h.experiences.empty() ? "" : h.experiences.front().created_at;
  std::string last = h.experiences.empty() ? "" : h.experiences.back().created_at;
  page.table({"target", "experiences", "correct (kernel level)", "faster than their parent"}, rows,
             first.empty() ? "No experiences." : "From " + first + " to " + last + ".");
}

// ---- model plans ----

void models_section(HtmlPage& page, const std::vector<ReportInput>& inputs) {
  const auto models = of_kind(inputs, InputKind::model);
  if (models.empty()) return;
  page.heading("Model plans", 2, "models");
  for (const auto* m : models) {
    const json e2e = m->doc.value("end_to_end", json::object());
    page.heading(m->label, 3);
    page.paragraph(fmt::format(
        "End to end: {}, {} {} (generic lowering {}), eager {} us, {} over eager; kernel from {}.",
        e2e.value("correct", false) ? "correct" : "not correct", g4(number_or_nan(e2e, "median")),
        text(e2e, "unit", "us"), g4(number_or_nan(e2e, "generic_median")), g4(number_or_nan(e2e, "eager_us")),
        times(number_or_nan(e2e, "speedup_vs_eager")), text(e2e, "origin", "?")));
    std::vector<std::vector<std::string>> rows;
    for (const json& g : m->doc.value("groups", json::array())) {
      std::string ops;
      for (const json& o : g.value("ops", json::array()))
        if (o.is_string()) ops += (ops.empty() ? "" : ", ") + o.get<std::string>();
      rows.push_back({text(g, "name", "?"), text(g, "kind", "?"), ops, g4(number_or_nan(g, "before")),
                      g4(number_or_nan(g, "after")), text(g, "unit", ""), pct(number_or_nan(g, "share")),
                      pct(number_or_nan(g, "fraction_of_peak")), one_line(text(g, "outcome", ""), 160)});
    }
    page.table({"group", "kind", "ops", "before", "after", "unit", "share", "of peak", "outcome"}, rows);
  }
}

}  // namespace

std::string report_html(const std::vector<ReportInput>& inputs, const PageOptions& o) {
  HtmlPage page("mblast report");
  page.heading("mblast report", 1);
  page.paragraph(fmt::format("{} input(s); written {} by mblast {}. Hover over a mark for its figures.", inputs.size(),
                             o.generated_at, kMblastVersion),
                 "note");
  page.raw(
      "<nav><a href=\"#inputs\">Inputs</a><a href=\"#roofline\">Roofline</a><a href=\"#speedup\">Speedup</a>"
      "<a href=\"#fast_p\">fast_p</a><a href=\"#convergence\">Best cost against evaluations</a>"
      "<a href=\"#kb\">Knowledge base</a>" +
      std::string(of_kind(inputs, InputKind::model).empty() ? "" : "<a href=\"#models\">Model plans</a>") + "</nav>");
  inputs_section(page, inputs);
  roofline_section(page, inputs);
  speedup_section(page, inputs);
  fast_p_section(page, inputs);
  runs_section(page, inputs);
  kb_section(page, o);
  models_section(page, inputs);
  return page.str();
}

}  // namespace mblast::report
