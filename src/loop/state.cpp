// Performance states of measured candidates (include/mblast/loop/state.h).
#include "mblast/loop/state.h"

#include <cmath>

#include <fmt/format.h>

namespace mblast::loop {

namespace {

std::optional<double> number_at(const nlohmann::json& j, const char* a, const char* b) {
  if (!j.contains(a) || !j[a].is_object()) return std::nullopt;
  const auto& o = j[a];
  if (!o.contains(b) || !o[b].is_number()) return std::nullopt;
  return o[b].get<double>();
}

std::string percent(double f) { return fmt::format("{:.1f}%", 100 * f); }

}  // namespace

Measured measured_from_eval(const nlohmann::json& eval) {
  Measured m;
  m.eval = eval;
  m.correct = eval.value("correct", false);
  if (eval.contains("failure_kind") && eval["failure_kind"].is_string()) m.failure_kind = eval["failure_kind"];
  if (eval.contains("reason") && eval["reason"].is_string()) m.reason = eval["reason"];
  if (const auto& t = eval.contains("time") ? eval["time"] : nlohmann::json(); t.is_object()) {
    m.cost = t.value("median", 0.0);
    m.spread_pct = t.value("spread_pct", 0.0);
    m.p25 = t.value("p25", m.cost);
    m.p75 = t.value("p75", m.cost);
    m.unit = t.value("unit", "");
    m.deterministic = m.unit == "instructions";
    if (t.contains("cost") && t["cost"].contains("vector_fraction") && t["cost"]["vector_fraction"].is_number())
      m.vector_fraction = t["cost"]["vector_fraction"].get<double>();
  }
  m.bandwidth_fraction = number_at(eval, "peak", "bandwidth_fraction");
  m.compute_fraction = number_at(eval, "peak", "compute_fraction");
  if (m.correct && !(m.cost > 0)) {
    m.correct = false;
    m.failure_kind = "not_timed";
    m.reason = "the candidate was verified but not timed";
  }
  return m;
}

kb::StateSignature signature_of(const Problem& problem, const Target& target, const Measured& m) {
  kb::StateSignature s;
  s.backend = target.backend;
  s.arch = kb::arch_of_target_spec(target.backend, target.spec.dump());
  s.target = target.name;
  s.op_class = problem.op_class;
  if (problem.flops > 0 && problem.bytes > 0) s.arithmetic_intensity = problem.flops / problem.bytes;
  s.bandwidth_fraction = m.bandwidth_fraction;
  s.compute_fraction = m.compute_fraction;
  s.utilisation = m.vector_fraction;
  if (m.bandwidth_fraction && m.compute_fraction)
    s.bottleneck = kb::classify_bottleneck(*m.bandwidth_fraction, *m.compute_fraction);
  return s;
}

std::string format_cost(double cost, const std::string& unit) {
  if (unit == "instructions") {
    if (cost >= 1e6) return fmt::format("{:.3g} M instructions", cost / 1e6);
    if (cost >= 1e3) return fmt::format("{:.3g} k instructions", cost / 1e3);
    return fmt::format("{:.0f} instructions", cost);
  }
  if (unit == "us") {
    if (cost >= 1e6) return fmt::format("{:.3g} s", cost / 1e6);
    if (cost >= 1e3) return fmt::format("{:.3g} ms", cost / 1e3);
    return fmt::format("{:.3g} us", cost);
  }
  return fmt::format("{:.4g} {}", cost, unit);
}

std::string describe_state(const Problem& problem, const Target& target, const Measured& m,
                           const kb::StateSignature& s) {
  std::string t =
      fmt::format("{} ({}) on {}: {}", problem.name, problem.op_class, target.name, format_cost(m.cost, m.unit));
  if (!m.deterministic) t += fmt::format(" (spread {:.1f}%)", m.spread_pct);
  if (m.bandwidth_fraction) t += "; " + percent(*m.bandwidth_fraction) + " of peak bandwidth";
  if (m.compute_fraction) t += ", " + percent(*m.compute_fraction) + " of peak FP32";
  if (m.vector_fraction) t += "; " + percent(*m.vector_fraction) + " of instructions are vector";
  if (s.arithmetic_intensity) t += fmt::format("; {:.3g} FLOP/byte", *s.arithmetic_intensity);
  if (!s.bottleneck.empty()) t += "; " + s.bottleneck + "-bound";
  return t;
}

bool clearly_faster(const Measured& after, const Measured& before) {
  if (!after.correct || !before.correct || after.unit != before.unit) return false;
  if (after.deterministic) return after.cost < before.cost;
  return after.cost < before.cost && after.p75 < before.p25;
}

}  // namespace mblast::loop
