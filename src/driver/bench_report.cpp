#include "mblast/driver/bench_report.h"
#include "mblast/driver/import_command.h"
#include "mblast/driver/json_fields.h"
#include "mblast/driver/markup.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "mblast/error.h"

namespace mblast {

using nlohmann::json;

namespace {

using json_fields::number;
using json_fields::text;

const char* const kStatuses[] = {"correct", "incorrect", "no_candidate", "import_failed", "candidate_error", "error"};

// The optimized candidate's design (candidate.details.design), or null: rows without a
// candidate, or with one from a file, have none (the keys may be missing or null).
const json* design_of(const json& row) {
  const json* at = &row;
  for (const char* key : {"candidate", "details", "design"}) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
  }
  return at->is_object() ? at : nullptr;
}

json geomean(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

json median(std::vector<double> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string p_key(double p) { return fmt::format("fast_{}", p); }  // fast_0, fast_1, fast_1.5

// The speedup figures against one baseline: geomean over correct problems that have it, and
// fast_p over all `total` problems (a problem without this baseline cannot count as fast).
// `unavailable` (the first reason seen) is reported instead when no problem has the baseline.
json against(const std::vector<double>& speedups, size_t total, size_t correct, size_t with_baseline,
             const std::string& unavailable) {
  json j;
  if (with_baseline == 0) {
    j["unavailable"] = unavailable;
    j["geomean_speedup"] = nullptr;
    j["n"] = 0;
    for (double p : kFastP) j[p_key(p)] = nullptr;
    return j;
  }
  j["geomean_speedup"] = geomean(speedups);
  j["n"] = speedups.size();
  j["problems_with_baseline"] = with_baseline;
  j["correct_without_speedup"] = correct - speedups.size();
  for (double p : kFastP) {
    const auto fast = std::count_if(speedups.begin(), speedups.end(), [p](double s) { return s > p; });
    j[p_key(p)] = total ? static_cast<double>(fast) / static_cast<double>(total) : 0.0;
  }
  return j;
}

json summarize_group(const std::vector<const json*>& rows) {
  json counts = json::object();
  for (const char* s : kStatuses) counts[s] = 0;
  std::vector<double> vs_eager, vs_compile, compile_vs_eager, fractions;
  std::string eager_why, compile_why;
  size_t correct = 0, with_eager = 0, with_compile = 0;
  auto why_not = [](const json& b) { return text(b, "unavailable", text(b, "failed")); };
  for (const json* r : rows) {
    const std::string status = text(*r, "status", "error");
    counts[status] = counts.value(status, 0) + 1;
    if (auto c = number(*r, "compile_speedup_vs_eager")) compile_vs_eager.push_back(*c);
    const json eager = r->value("eager", json()), compile = r->value("compile", json());
    with_eager += number(eager, "median_us") ? 1 : 0;
    with_compile += number(compile, "median_us") ? 1 : 0;
    if (text(*r, "status") != "import_failed") {  // "not imported" says nothing about the baseline
      if (eager_why.empty()) eager_why = why_not(eager);
      if (compile_why.empty()) compile_why = why_not(compile);
    }
    if (!r->value("correct", false)) continue;
    ++correct;
    if (auto s = number(*r, "speedup_vs_eager")) vs_eager.push_back(*s);
    if (auto s = number(*r, "speedup_vs_compile")) vs_compile.push_back(*s);
    if (auto f = number(*r, "fraction_of_peak")) fractions.push_back(*f);
  }
  json g;
  g["problems"] = rows.size();
  g["counts"] = counts;
  g["correct"] = correct;
  g["correct_fraction"] = rows.empty() ? 0.0 : static_cast<double>(correct) / static_cast<double>(rows.size());
  g["vs_eager"] =
      against(vs_eager, rows.size(), correct, with_eager, eager_why.empty() ? "no eager baseline" : eager_why);
  g["vs_compile"] = against(vs_compile, rows.size(), correct, with_compile,
                            compile_why.empty() ? "no torch.compile baseline" : compile_why);
  g["compile_speedup_vs_eager"] = {{"geomean", geomean(compile_vs_eager)}, {"n", compile_vs_eager.size()}};
  g["median_fraction_of_peak"] = median(fractions);
  g["n_fraction_of_peak"] = fractions.size();
  return g;
}

// ---- table ----

std::string fixed(const json& row_or_null, const char* key, int decimals) {
  auto v = number(row_or_null, key);
  return v ? fmt::format("{:.{}f}", *v, decimals) : "-";
}

std::string times(const json& v) { return v.is_number() ? fmt::format("{:.2f}x", v.get<double>()) : "-"; }

std::string percent(const json& v) { return v.is_number() ? fmt::format("{:.1f}%", 100 * v.get<double>()) : "-"; }

std::string fraction(const json& v) { return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "-"; }

std::string one_line(std::string s, size_t max) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

// One summary row; the torch.compile columns only when some problem has that baseline.
void summary_line(std::ostringstream& o, const std::string& name, const json& g, size_t width, bool compile) {
  auto with_n = [](const json& against) {
    return against["geomean_speedup"].is_number()
               ? fmt::format("{} ({})", times(against["geomean_speedup"]), against["n"].get<size_t>())
               : std::string("-");
  };
  auto block = [&](const json& against) {
    return fmt::format("  {:>13} {:>6} {:>6} {:>8}", with_n(against), fraction(against["fast_0"]),
                       fraction(against["fast_1"]), fraction(against["fast_1.5"]));
  };
  o << fmt::format("{:<{}} {:>8} {:>7}", name, width, g["problems"].get<size_t>(), g["correct"].get<size_t>())
    << block(g["vs_eager"]);
  if (compile) o << block(g["vs_compile"]) << fmt::format("  {:>13}", times(g["compile_speedup_vs_eager"]["geomean"]));
  o << fmt::format("  {:>11}\n", percent(g["median_fraction_of_peak"]));
}

// ---- JUnit ----

bool xml_char_allowed(uint32_t cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) ||
         (cp >= 0x10000 && cp <= 0x10FFFF);
}

std::string attr(const std::string& name, const std::string& value) {
  return " " + name + "=\"" + xml_escape(value) + "\"";
}

struct Case {
  std::string name, classname, outcome, kind, message, detail;  // outcome: pass | failure | skipped
  double seconds = 0;
};

std::string row_summary(const json& r) {
  std::string s = "status " + text(r, "status", "?");
  if (r.value("time", json()).is_object())
    s += fmt::format(", median {:.4g} {} (spread {:.1f}%)", r["time"].value("median", 0.0), r["time"].value("unit", ""),
                     r["time"].value("spread_pct", 0.0));
  if (r.value("speedup_vs_eager", json()).is_number()) s += ", " + times(r["speedup_vs_eager"]) + " vs eager";
  if (r.value("speedup_vs_compile", json()).is_number())
    s += ", " + times(r["speedup_vs_compile"]) + " vs torch.compile";
  if (r.value("reason", json()).is_string()) s += "\nreason: " + r["reason"].get<std::string>();
  return s;
}

}  // namespace

json summarize_bench(const json& rows) {
  std::map<std::string, std::vector<const json*>> by_level;
  std::vector<const json*> all;
  for (const json& r : rows) {
    by_level[text(r, "level")].push_back(&r);
    all.push_back(&r);
  }
  json levels = json::object();
  for (const auto& [level, rs] : by_level) levels[level] = summarize_group(rs);
  return {{"levels", levels}, {"overall", summarize_group(all)}};
}

std::string format_bench_table(const json& results) {
  std::ostringstream o;
  const json& meta = results.value("meta", json::object());
  const json& rows = results.value("problems", json::array());
  o << fmt::format("mblast bench: {} problem{} on {} ({}), size {}, torch {}, baselines {}\n", rows.size(),
                   rows.size() == 1 ? "" : "s", text(meta, "target", "?"), text(meta, "backend", "?"),
                   text(meta, "size", "?"), text(meta, "torch", "?"), text(meta, "baselines"));
  if (const json& mb = meta.value("max_bytes", json()); mb.is_number_integer() && mb.get<int64_t>() > 0) {
    size_t scaled = 0;
    for (const json& r : rows) scaled += r.contains("scale") && !r["scale"].value("constants", json::object()).empty();
    o << fmt::format("sizes: each file's size constants scaled to fit --max-bytes {} ({} of {} problems scaled)\n",
                     format_byte_size(mb.get<uint64_t>()), scaled, rows.size());
  }
  size_t width = 8;
  for (const json& r : rows) width = std::max(width, text(r, "key").size());
  o << fmt::format("\n{:<{}} {:<15} {:>10} {:>6}  {:>10} {:>6}  {:>10} {:>6}  {:>8} {:>10}  {:>6}\n", "PROBLEM", width,
                   "STATUS", "TIME us", "±%", "EAGER us", "±%", "COMPILE us", "±%", "vs EAGER", "vs COMPILE", "PEAK");
  for (const json& r : rows) {
    const json& t = r.value("time", json());
    const std::string time = t.is_object() ? fmt::format("{:.2f}{}", t.value("median", 0.0),
                                                         t.value("unit", "") == "us" ? "" : " " + text(t, "unit"))
                                           : "-";
    o << fmt::format("{:<{}} {:<15} {:>10} {:>6}  {:>10} {:>6}  {:>10} {:>6}  {:>8} {:>10}  {:>6}\n", text(r, "key"),
                     width, text(r, "status"), time, fixed(t, "spread_pct", 1),
                     fixed(r.value("eager", json()), "median_us", 2), fixed(r.value("eager", json()), "spread_pct", 1),
                     fixed(r.value("compile", json()), "median_us", 2),
                     fixed(r.value("compile", json()), "spread_pct", 1), times(r.value("speedup_vs_eager", json())),
                     times(r.value("speedup_vs_compile", json())), percent(r.value("fraction_of_peak", json())));
    if (text(r, "status") != "correct" && r.value("reason", json()).is_string() && text(r, "reason") != "no candidate")
      o << "    " << one_line(r["reason"].get<std::string>(), 160) << "\n";
    if (const json& sc = r.value("scale", json()); sc.is_object() && !sc.value("constants", json::object()).empty()) {
      std::string what;
      for (const auto& [name, v] : sc["constants"].items())
        if (v.is_array() && v.size() == 2)
          what += fmt::format("{}{} {} -> {}", what.empty() ? "" : ", ", name, v[0].dump(), v[1].dump());
      o << "    scaled: " << one_line(what, 140) << "\n";
    }
    if (const json& sol = r.value("sol_time_us", json()); sol.is_number()) {
      const json& f = r.value("fraction_of_sol", json());
      o << fmt::format("    speed of light: {:.4g} us{}\n", sol.get<double>(),
                       f.is_number() ? fmt::format(", {:.3g}% of SOL reached", 100 * f.get<double>()) : "");
    }
    if (const json& f = r.value("fraction_of_peak", json()); f.is_number() && f.get<double>() > 1.0)
      o << "    above 100% of peak (the FP32 peak without tensor cores): the kernel does less arithmetic than the "
           "problem's counted FLOPs\n"
           "    (FFT and Winograd convolutions) or runs it on tensor cores (3xTF32 products)\n";
    if (const json* d = design_of(r); d && !text(*d, "family").empty())
      o << fmt::format("    design: {} {}\n", text(*d, "family"), d->value("params", json::object()).dump());
    for (const char* which : {"eager", "compile"}) {
      const json& b = r.value(which, json());
      if (b.is_object() && b.contains("failed") && text(r, "status") != "import_failed")
        o << fmt::format("    {} baseline failed: {}\n", which, one_line(text(b, "failed"), 150));
      if (b.is_object() && !b.value("within_tolerance", true))
        o << fmt::format("    {} output is outside the problem's tolerance (its time is still shown)\n", which);
      if (b.is_object() && b.contains("tf32_off"))
        o << fmt::format("    {} timed with TF32 off: PyTorch's default (TF32 convolutions) is outside the tolerance\n",
                         which);
    }
  }
  const json& sum = results.value("summary", json::object());
  const json overall = sum.value("overall", json::object());
  const bool compile = overall.contains("vs_compile") && !overall["vs_compile"].contains("unavailable");
  auto heads = [](const char* vs) {
    return fmt::format("  {:>13} {:>6} {:>6} {:>8}", vs, "fast_0", "fast_1", "fast_1.5");
  };
  o << fmt::format("\n{:<{}} {:>8} {:>7}", "SUMMARY", width, "PROBLEMS", "CORRECT") << heads("GEOMEAN/EAGER");
  if (compile) o << heads("GEOMEAN/COMPILE") << fmt::format("  {:>13}", "COMPILE/EAGER");
  o << fmt::format("  {:>11}\n", "MEDIAN PEAK");
  const json levels = sum.value("levels", json::object());
  for (const auto& [level, g] : levels.items()) summary_line(o, level, g, width, compile);
  if (!overall.empty()) summary_line(o, "all", overall, width, compile);
  o << "\nGEOMEAN: speedup over correct problems with that baseline (how many in brackets). fast_p: share of ALL\n"
       "problems that are correct and more than p times faster than the baseline (KernelBench's definition).\n";
  if (compile) o << "COMPILE/EAGER: torch.compile's own speedup over eager (problems with both).\n";
  if (sum.contains("overall")) {
    const json& c = sum["overall"]["vs_compile"];
    if (c.contains("unavailable")) o << "torch.compile: " << text(c, "unavailable") << "\n";
    std::set<std::string> notes;
    for (const auto& row : results.value("problems", json::array()))
      if (row.contains("baseline") && row["baseline"].is_object() && row["baseline"].contains("note"))
        notes.insert(row["baseline"]["note"].get<std::string>());
    for (const auto& n : notes) o << "eager: " << n << "\n";
    const json& counts = sum["overall"]["counts"];
    std::string line;
    for (const auto& [k, v] : counts.items())
      if (v.get<int>() > 0) line += fmt::format("{}{} {}", line.empty() ? "" : ", ", v.get<int>(), k);
    o << "problems: " << line << "\n";
  }
  int evicted = 0;
  double evicted_bytes = 0;
  for (const auto& row : results.value("problems", json::array())) {
    const json e = row.value("import", json::object()).value("evicted", json::object());
    evicted += e.value("imports", 0);
    evicted_bytes += e.value("bytes", 0.0);
  }
  if (evicted > 0)
    o << fmt::format("import cache: {} cached imports removed ({:.2f} GiB) to keep room on the disk (--keep-free)\n",
                     evicted, evicted_bytes / 1073741824.0);
  return o.str();
}

json compare_bench(const json& current, const json& previous, const CompareRule& rule, const std::string& filter) {
  if (!previous.is_object() || previous.value("kind", "") != "mblast-bench" || !previous.contains("problems") ||
      !previous["problems"].is_array())
    throw UserError("the previous results are not an `mblast bench` results file");
  const json& pm = previous.value("meta", json::object());
  const json& cm = current.value("meta", json::object());
  if (text(pm, "target") != text(cm, "target"))
    throw UserError("the previous results were measured on target " + text(pm, "target", "?") + ", this run on " +
                    text(cm, "target", "?") + ": compare runs on one target");
  if (text(pm, "size") != text(cm, "size"))
    throw UserError("the previous results are of size " + text(pm, "size", "?") + ", this run of size " +
                    text(cm, "size", "?"));

  std::map<std::string, const json*> prev;
  for (const json& r : previous["problems"])
    if (filter.empty() || text(r, "key").find(filter) != std::string::npos) prev[text(r, "key")] = &r;

  // Both runs' medians of a problem correct in both, when they can be compared at all.
  auto medians = [](const json& p, const json& r) -> std::optional<std::pair<double, double>> {
    if (!p.value("correct", false) || !r.value("correct", false)) return std::nullopt;
    const json& pt = p.value("time", json());
    const json& nt = r.value("time", json());
    const auto pmed = number(pt, "median"), nmed = number(nt, "median");
    if (!pmed || !nmed || *pmed <= 0 || *nmed <= 0 || text(pt, "unit") != text(nt, "unit")) return std::nullopt;
    return std::pair{*pmed, *nmed};
  };
  // The run's speed factor: the median now/before ratio over the comparable problems.
  double factor = 1;
  json speed_factor;
  if (rule.relative) {
    std::vector<double> ratios;
    for (const json& r : current.value("problems", json::array()))
      if (auto it = prev.find(text(r, "key")); it != prev.end())
        if (auto m = medians(*it->second, r)) ratios.push_back(m->second / m->first);
    std::sort(ratios.begin(), ratios.end());
    const size_t n = ratios.size();
    const bool applied = n >= static_cast<size_t>(kMinProblemsForRelative);
    if (applied) factor = n % 2 ? ratios[n / 2] : std::sqrt(ratios[n / 2 - 1] * ratios[n / 2]);
    speed_factor = {
        {"value", factor},
        {"problems", n},
        {"applied", applied},
        {"text", applied ? fmt::format("times compared relative to the run: each now/before ratio divided by "
                                       "the median ratio {:.3g} over {} problems correct in both",
                                       factor, n)
                         : fmt::format("times compared as measured: {} problems correct in both, fewer than "
                                       "the {} needed to estimate the run's speed",
                                       n, kMinProblemsForRelative)}};
  }

  json problems = json::array(), fresh = json::array(), missing = json::array();
  std::map<std::string, int> counts;
  std::map<std::string, bool> seen;
  for (const json& r : current.value("problems", json::array())) {
    const std::string key = text(r, "key");
    seen[key] = true;
    json c = {{"key", key}, {"level", text(r, "level")}, {"name", text(r, "name")}, {"status", text(r, "status")}};
    auto it = prev.find(key);
    const bool now_ok = r.value("correct", false);
    if (it == prev.end()) {
      c["verdict"] = "new";
      c["message"] = "new problem (not in the previous results), " + text(r, "status");
      fresh.push_back(key);
    } else {
      const json& p = *it->second;
      const bool was_ok = p.value("correct", false);
      c["previous_status"] = text(p, "status");
      if (p.contains("candidate") && r.contains("candidate") && p["candidate"].is_object() &&
          r["candidate"].is_object())
        c["candidate_changed"] = text(p["candidate"], "hash") != text(r["candidate"], "hash");
      if (was_ok && !now_ok) {
        c["verdict"] = "became_incorrect";
        c["message"] = "was correct, now " + text(r, "status") +
                       (r.value("reason", json()).is_string() ? ": " + r["reason"].get<std::string>() : "");
      } else if (!was_ok && now_ok) {
        c["verdict"] = "became_correct";
        c["message"] = "was " + text(p, "status") + ", now correct";
      } else if (!was_ok && !now_ok) {
        c["verdict"] = "still_incorrect";
        c["message"] = "not correct in either run (now " + text(r, "status") +
                       (r.value("reason", json()).is_string() ? ": " + r["reason"].get<std::string>() : "") + ")";
      } else {
        const json& pt = p.value("time", json());
        const json& nt = r.value("time", json());
        const auto m = medians(p, r);
        if (!m) {
          c["verdict"] = "not_comparable";
          c["message"] = "the two times cannot be compared (missing, or in other units)";
        } else {
          const auto [pmed, nmed] = *m;
          const double sp = number(pt, "spread_pct").value_or(0), sn = number(nt, "spread_pct").value_or(0);
          const double combined = std::sqrt(sp * sp + sn * sn);
          const double allowed = std::max(rule.threshold_pct, rule.noise_k * combined);
          const double ratio = nmed / pmed / factor;
          const double slower = (ratio - 1) * 100, faster = (1 / ratio - 1) * 100;
          c["previous_median"] = pmed;
          c["median"] = nmed;
          c["unit"] = text(nt, "unit");
          c["slower_pct"] = slower;
          c["combined_spread_pct"] = combined;
          c["allowed_pct"] = allowed;
          std::string change = fmt::format("{:.4g} -> {:.4g} {}", pmed, nmed, text(nt, "unit"));
          if (factor != 1) change += fmt::format(", relative to the run's factor {:.3g}", factor);
          const std::string limit =
              fmt::format("allowed {:.1f}% = max(threshold {:.1f}%, {:g} x combined spread {:.1f}%)", allowed,
                          rule.threshold_pct, rule.noise_k, combined);
          if (slower > allowed) {
            c["verdict"] = "slower";
            c["message"] = fmt::format("slower by {:.1f}% ({}); {}", slower, change, limit);
          } else if (faster > allowed) {
            c["verdict"] = "faster";
            c["message"] = fmt::format("faster by {:.1f}% ({}); {}", faster, change, limit);
          } else {
            c["verdict"] = "unchanged";
            c["message"] = fmt::format("within noise: {:+.1f}% ({}); {}", slower, change, limit);
          }
        }
      }
    }
    const std::string v = c["verdict"];
    c["regressed"] = v == "became_incorrect" || v == "slower";
    ++counts[v];
    problems.push_back(std::move(c));
  }
  for (const auto& [key, p] : prev)
    if (!seen.count(key)) missing.push_back({{"key", key}, {"level", text(*p, "level")}, {"name", text(*p, "name")}});

  int regressions = 0;
  for (const char* v : {"became_incorrect", "slower"})
    if (auto it = counts.find(v); it != counts.end()) regressions += it->second;
  json out = {
      {"rule",
       {{"threshold_pct", rule.threshold_pct},
        {"noise_k", rule.noise_k},
        {"relative", rule.relative},
        {"text",
         "regressed: correct before and not now, or both correct and the candidate's median slower by more than "
         "max(threshold_pct, noise_k * sqrt(spread_prev^2 + spread_now^2)) percent"}}},
      {"previous",
       {{"date", text(pm, "date")},
        {"target", text(pm, "target")},
        {"size", text(pm, "size")},
        {"mblast_version", text(pm, "mblast_version")}}},
      {"problems", problems},
      {"new", fresh},
      {"missing", missing},
      {"counts", counts},
      {"regressions", regressions}};
  if (rule.relative) out["speed_factor"] = speed_factor;
  return out;
}

std::string format_bench_comparison(const json& cmp) {
  std::ostringstream o;
  const json& rule = cmp["rule"];
  o << fmt::format("\ncompared with the run of {} ({}, size {}): threshold {:g}%, noise k {:g}\n",
                   text(cmp["previous"], "date", "?"), text(cmp["previous"], "target", "?"),
                   text(cmp["previous"], "size", "?"), rule.value("threshold_pct", 0.0), rule.value("noise_k", 0.0));
  if (cmp.contains("speed_factor")) o << text(cmp["speed_factor"], "text") << "\n";
  static const std::map<std::string, std::string> label = {{"became_incorrect", "REGRESSED"},
                                                           {"slower", "REGRESSED"},
                                                           {"became_correct", "improved"},
                                                           {"faster", "improved"},
                                                           {"new", "new"},
                                                           {"not_comparable", "not comparable"}};
  for (const json& c : cmp["problems"]) {
    auto it = label.find(text(c, "verdict"));
    if (it != label.end()) o << fmt::format("  {:<10} {}: {}\n", it->second, text(c, "key"), text(c, "message"));
  }
  for (const json& m : cmp["missing"])
    o << fmt::format("  {:<10} {}: in the previous results, not in this run\n", "missing", text(m, "key"));
  std::string line;
  for (const auto& [k, v] : cmp["counts"].items())
    line += fmt::format("{}{} {}", line.empty() ? "" : ", ", v.get<int>(), k);
  o << fmt::format("{} regression(s); {}{}\n", cmp.value("regressions", 0), line,
                   cmp["missing"].empty() ? "" : fmt::format(", {} missing", cmp["missing"].size()));
  return o.str();
}

std::string xml_escape(std::string_view s) {
  // \r, \n and \t as references: kept in attributes too.
  return escape_markup(
      s, {"&apos;", xml_char_allowed, [](uint32_t cp) { return cp == '\r' || cp == '\n' || cp == '\t'; }});
}

std::string bench_junit_xml(const json& results, const json* comparison) {
  std::map<std::string, const json*> verdicts;
  if (comparison)
    for (const json& c : (*comparison)["problems"]) verdicts[text(c, "key")] = &c;

  std::vector<std::string> level_order;
  std::map<std::string, std::vector<Case>> cases;
  auto level_of = [&](const std::string& level) -> std::vector<Case>& {
    if (!cases.count(level)) level_order.push_back(level);
    return cases[level];
  };
  for (const json& r : results.value("problems", json::array())) {
    Case k;
    k.name = text(r, "name");
    k.classname = "mblast.bench." + text(r, "level");
    k.seconds = r.value("seconds", 0.0);
    k.detail = row_summary(r);
    const std::string status = text(r, "status");
    const std::string reason = r.value("reason", json()).is_string() ? r["reason"].get<std::string>() : status;
    if (!comparison) {
      if (status == "correct") {
        k.outcome = "pass";
      } else if (status == "no_candidate") {
        k.outcome = "skipped";
        k.message = "no candidate";
      } else {
        k.outcome = "failure";
        k.kind = text(r, "failure_kind", status);
        k.message = reason;
      }
    } else {
      auto it = verdicts.find(text(r, "key"));
      const json* c = it == verdicts.end() ? nullptr : it->second;
      const std::string verdict = c ? text(*c, "verdict") : "new";
      const std::string message = c ? text(*c, "message") : "not compared";
      if (verdict == "became_incorrect" || verdict == "slower") {
        k.outcome = "failure";
        k.kind = verdict;
        k.message = message;
      } else if (status == "correct") {
        k.outcome = "pass";
        k.detail = message + "\n" + k.detail;
      } else {
        k.outcome = "skipped";
        k.message = message;
      }
    }
    level_of(text(r, "level")).push_back(std::move(k));
  }
  if (comparison)
    for (const json& m : (*comparison)["missing"]) {
      Case k;
      k.name = text(m, "name");
      k.classname = "mblast.bench." + text(m, "level");
      k.outcome = "skipped";
      k.message = "in the previous results, missing from this run";
      level_of(text(m, "level")).push_back(std::move(k));
    }

  auto count = [](const std::vector<Case>& v, const char* outcome) {
    return std::count_if(v.begin(), v.end(), [&](const Case& k) { return k.outcome == outcome; });
  };
  size_t tests = 0, failures = 0, skipped = 0;
  double seconds = 0;
  for (const auto& [level, v] : cases) {
    tests += v.size();
    failures += count(v, "failure");
    skipped += count(v, "skipped");
    for (const Case& k : v) seconds += k.seconds;
  }
  const json& meta = results.value("meta", json::object());
  std::string timestamp = text(meta, "date");  // JUnit's schema wants no time zone designator
  if (!timestamp.empty() && timestamp.back() == 'Z') timestamp.pop_back();
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites" << attr("name", "mblast bench " + text(meta, "target") + " " + text(meta, "size"))
    << fmt::format(" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3f}\">\n", tests, failures,
                   skipped, seconds);
  for (const std::string& level : level_order) {
    const auto& v = cases[level];
    double t = 0;
    for (const Case& k : v) t += k.seconds;
    o << "  <testsuite" << attr("name", level)
      << fmt::format(" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3f}\"", v.size(),
                     count(v, "failure"), count(v, "skipped"), t)
      << attr("timestamp", timestamp) << attr("hostname", text(meta.value("machine", json::object()), "hostname"))
      << ">\n";
    for (const Case& k : v) {
      o << "    <testcase" << attr("classname", k.classname) << attr("name", k.name)
        << fmt::format(" time=\"{:.3f}\"", k.seconds);
      if (k.outcome == "pass" && k.detail.empty()) {
        o << "/>\n";
        continue;
      }
      o << ">\n";
      if (k.outcome == "failure")
        o << "      <failure" << attr("type", k.kind) << attr("message", k.message) << ">" << xml_escape(k.detail)
          << "</failure>\n";
      else if (k.outcome == "skipped")
        o << "      <skipped" << attr("message", k.message) << "/>\n";
      if (k.outcome != "failure" && !k.detail.empty())
        o << "      <system-out>" << xml_escape(k.detail) << "</system-out>\n";
      o << "    </testcase>\n";
    }
    o << "  </testsuite>\n";
  }
  o << "</testsuites>\n";
  return o.str();
}

}  // namespace mblast
