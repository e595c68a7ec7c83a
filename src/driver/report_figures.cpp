#include "mblast/driver/report_figures.h"
#include "mblast/driver/json_fields.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace mblast::report {

using nlohmann::json;

namespace {

using json_fields::number_or_nan;
using json_fields::text;

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Seconds of a cost in a unit; NaN for a count (instructions under QEMU are not a time).
double seconds_of(double cost, const std::string& unit) {
  if (!(cost > 0)) return NAN;
  if (unit == "us") return cost * 1e-6;
  if (unit == "ms") return cost * 1e-3;
  if (unit == "ns") return cost * 1e-9;
  if (unit == "s") return cost;
  return NAN;
}

void fill_peaks(KernelPoint& k, const json& row) {
  k.peak_bandwidth = number_or_nan(row, "peak_bandwidth_bytes_per_s");
  k.peak_flops = number_or_nan(row, "peak_fp32_flops_per_s");
  if (!std::isfinite(k.peak_bandwidth)) k.peak_bandwidth = peak_from(k.bytes_per_s(), k.bandwidth_fraction);
  if (!std::isfinite(k.peak_flops)) k.peak_flops = peak_from(k.flops_per_s(), k.compute_fraction);
}

KernelPoint from_measured(const ReportInput& in, const json& m, const std::string& role) {
  KernelPoint k;
  k.target = text(in.doc, "target", text(in.meta, "target", "?"));
  k.source = in.label;
  k.name = text(in.doc, "problem", text(in.meta, "problem", "?"));
  k.role = role;
  k.flops = number_or_nan(in.problem, "flops");
  k.bytes = number_or_nan(in.problem, "bytes");
  if (!std::isfinite(k.flops)) k.flops = 0;
  if (!std::isfinite(k.bytes)) k.bytes = 0;
  k.seconds = seconds_of(number_or_nan(m, "cost"), text(m, "unit"));
  k.bandwidth_fraction = number_or_nan(m, "bandwidth_fraction");
  k.compute_fraction = number_or_nan(m, "compute_fraction");
  k.fraction_of_peak = std::max(std::isfinite(k.bandwidth_fraction) ? k.bandwidth_fraction : 0.0,
                                std::isfinite(k.compute_fraction) ? k.compute_fraction : 0.0);
  if (!std::isfinite(k.bandwidth_fraction) && !std::isfinite(k.compute_fraction)) k.fraction_of_peak = NAN;
  fill_peaks(k, m);
  return k;
}

}  // namespace

double fast_p(const std::vector<std::optional<double>>& speedups, double p) {
  if (speedups.empty()) return 0;
  const auto n = std::count_if(speedups.begin(), speedups.end(), [p](const auto& s) { return s && *s > p; });
  return static_cast<double>(n) / static_cast<double>(speedups.size());
}

std::vector<std::pair<double, double>> fast_p_curve(const std::vector<std::optional<double>>& speedups, double p_max) {
  std::vector<double> s;
  for (const auto& v : speedups)
    if (v && std::isfinite(*v) && *v > 0 && *v < p_max) s.push_back(*v);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::vector<std::pair<double, double>> out{{0.0, fast_p(speedups, 0)}};
  for (double x : s) out.emplace_back(x, fast_p(speedups, x));
  if (p_max > 0) out.emplace_back(p_max, fast_p(speedups, p_max));
  return out;
}

double peak_from(double achieved, double fraction) {
  if (!std::isfinite(achieved) || !std::isfinite(fraction) || achieved <= 0 || fraction <= 0) return NAN;
  return achieved / fraction;
}

double roof(const Peaks& p, double intensity) {
  if (!std::isfinite(intensity) || intensity < 0) return NAN;
  const double by_bandwidth = std::isfinite(p.bandwidth) ? intensity * p.bandwidth : NAN;
  if (!std::isfinite(p.flops)) return by_bandwidth;
  if (!std::isfinite(by_bandwidth)) return p.flops;
  return std::min(p.flops, by_bandwidth);
}

std::vector<KernelPoint> kernel_points(const ReportInput& in) {
  std::vector<KernelPoint> out;
  if (in.kind == InputKind::bench) {
    const std::string target = text(in.doc.value("meta", json::object()), "target", "?");
    for (const json& r : in.doc.value("problems", json::array())) {
      if (!r.value("correct", false) || !r.value("time", json()).is_object()) continue;
      KernelPoint k;
      k.target = target;
      k.source = in.label;
      k.name = text(r, "key", text(r, "name", "?"));
      k.role = "bench";
      k.flops = std::isfinite(number_or_nan(r, "flops")) ? number_or_nan(r, "flops") : 0;
      k.bytes = std::isfinite(number_or_nan(r, "bytes")) ? number_or_nan(r, "bytes") : 0;
      k.seconds = seconds_of(number_or_nan(r["time"], "median"), text(r["time"], "unit"));
      k.bandwidth_fraction = number_or_nan(r, "bandwidth_fraction");
      k.compute_fraction = number_or_nan(r, "compute_fraction");
      k.fraction_of_peak = number_or_nan(r, "fraction_of_peak");
      fill_peaks(k, r);
      out.push_back(std::move(k));
    }
  } else if (in.kind == InputKind::run) {
    json start, best;
    if (in.doc.contains("start")) {
      start = in.doc["start"];
      if (in.doc.value("improved", false)) best = in.doc.value("best", json());
    } else {  // a run still going: its start, and the best so far
      double best_cost = INFINITY;
      for (const json& e : in.events) {
        const std::string t = text(e, "type");
        if (t != "start" && t != "candidate") continue;
        const json m = e.value("measured", json::object());
        if (!m.value("correct", false)) continue;
        if (t == "start" && start.is_null()) start = m;
        if (t == "candidate" && number_or_nan(m, "cost") < best_cost) best_cost = number_or_nan(m, "cost"), best = m;
      }
      if (best.is_object() && start.is_object() && !(number_or_nan(best, "cost") < number_or_nan(start, "cost")))
        best = json();
    }
    if (start.is_object() && start.value("correct", false)) out.push_back(from_measured(in, start, "run start"));
    if (best.is_object() && best.value("correct", false)) out.push_back(from_measured(in, best, "run best"));
  } else {
    const std::string target = text(in.doc.value("target", json::object()), "name", "?");
    for (const json& g : in.doc.value("groups", json::array())) {
      KernelPoint k;
      k.target = target;
      k.source = in.label;
      k.name = text(g, "name", "?");
      k.role = "model group";
      k.flops = std::isfinite(number_or_nan(g, "flops")) ? number_or_nan(g, "flops") : 0;
      k.bytes = std::isfinite(number_or_nan(g, "bytes")) ? number_or_nan(g, "bytes") : 0;
      k.seconds = seconds_of(number_or_nan(g, "before"), text(g, "unit", "us"));
      k.fraction_of_peak = number_or_nan(g, "fraction_of_peak");
      if (!std::isfinite(k.seconds)) continue;
      out.push_back(std::move(k));
    }
  }
  return out;
}

std::map<std::string, Peaks> peaks_by_target(const std::vector<KernelPoint>& points) {
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> seen;
  for (const auto& k : points) {
    auto& [bw, fl] = seen[k.target];
    if (std::isfinite(k.peak_bandwidth) && k.peak_bandwidth > 0) bw.push_back(k.peak_bandwidth);
    if (std::isfinite(k.peak_flops) && k.peak_flops > 0) fl.push_back(k.peak_flops);
  }
  std::map<std::string, Peaks> out;
  for (const auto& [target, v] : seen) {
    Peaks p;
    p.bandwidth = median_of(v.first);
    p.flops = median_of(v.second);
    p.bandwidth_from = static_cast<int>(v.first.size());
    p.flops_from = static_cast<int>(v.second.size());
    out[target] = p;
  }
  return out;
}

std::vector<BestSoFar> best_so_far(const std::vector<json>& events) {
  std::vector<BestSoFar> out;
  int n = 0;
  double best = INFINITY;
  for (const json& e : events) {
    const std::string t = text(e, "type");
    if (t != "start" && t != "candidate") continue;
    ++n;
    const json m = e.value("measured", json::object());
    const double cost = number_or_nan(m, "cost");
    bool improved = false;
    if (m.value("correct", false) && cost > 0 && cost < best) {
      best = cost;
      improved = true;
    }
    if (!std::isfinite(best)) continue;
    out.push_back({n, best, improved, text(e, "description", text(e, "family"))});
  }
  return out;
}

std::string run_unit(const ReportInput& run) {
  for (const json& e : run.events) {
    const json m = e.value("measured", json::object());
    if (m.value("correct", false) && !text(m, "unit").empty()) return text(m, "unit");
  }
  return text(run.doc, "unit");
}

std::pair<std::string, std::string> kb_warmth(const ReportInput& run) {
  const json used = run.doc.value("knowledge", json::object()).value("used", json::array());
  if (!used.is_array() || used.empty())
    return {"unknown", run.doc.contains("knowledge") ? "the run used no action the KB ranked"
                                                     : "the run has no report.json yet (still going, or stopped)"};
  long long tries = 0, same = 0;
  for (const json& u : used) {
    tries += u.value("tries", 0LL);
    same += u.value("same_target_tries", 0LL);
  }
  if (tries == 0)
    return {"cold", fmt::format("none of the {} action(s) it used had been tried before in the KB", used.size())};
  return {"warm", fmt::format("the {} action(s) it used had {} earlier tries in the KB ({} on this target)",
                              used.size(), tries, same)};
}

}  // namespace mblast::report
