// The rule-based critic (include/mblast/loop/critic.h): the textual gradient from figures.
#include "mblast/loop/critic.h"

#include <regex>

#include <fmt/format.h>

namespace mblast::loop {

namespace {

std::string fraction_move(const char* what, const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b) return "";
  return fmt::format("{} {:.2f} -> {:.2f}", what, *a, *b);
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string r;
  for (const auto& p : parts)
    if (!p.empty()) r += (r.empty() ? "" : sep) + p;
  return r;
}

std::string what_was_done(const Proposal& p) {
  std::string t = p.description.empty() ? p.family : p.description;
  if (!p.actions.empty()) t += " [" + join(p.actions, ", ") + "]";
  return t;
}

bool wrong_answer(const std::string& kind) {
  return kind == "wrong_output" || kind == "nan_or_inf" || kind == "input_modified" || kind == "nondeterministic" ||
         kind == "unwritten_output" || kind == "out_of_bounds_write";
}

// What an outcome teaches about the action that caused it, as a demotion on this target for
// problems of this op class (a slowdown: of this bottleneck too). Build failures are the KB's
// own rule (KnowledgeBase::add_experience); failures of the machinery teach nothing.
std::optional<kb::ConstraintRecord> lesson(const CriticInput& in, const std::string& what_happened) {
  const Measured& after = *in.after;
  kb::ConstraintRecord c;
  c.effect = "demote";
  c.predicate = {{"target", in.target->name}};
  if (!in.problem->op_class.empty()) c.predicate["op_class"] = in.problem->op_class;
  if (after.correct) {
    if (!clearly_faster(in.parent->measured, after)) return std::nullopt;
    if (!in.before.bottleneck.empty()) c.predicate["bottleneck"] = in.before.bottleneck;
  } else if (after.failure_kind.empty() || after.failure_kind == "build_failed" || after.failure_kind == "abi_error" ||
             after.failure_kind == "no_kernel" || after.failure_kind == "unavailable" ||
             after.failure_kind == "runner_error" || after.failure_kind == "timing_inconsistent" ||
             after.failure_kind == "implausible_speed") {
    // The measurement refused a time (the runner's clock disagreed, or faster than the speed of
    // light): a loaded machine or stale peaks cause that too, so the action is not blamed.
    return std::nullopt;
  }
  c.text = what_happened;
  if (c.text.size() > 400) c.text = c.text.substr(0, 397) + "...";
  return c;
}

}  // namespace

std::string scrub_build_paths(const std::string& log) {
  static const std::regex tmp_dir(R"((/[^\s:'"]*)?/tmp-[0-9]+-[0-9]+/)");
  return std::regex_replace(log, tmp_dir, "");
}

std::string first_error_line(const std::string& raw) {
  const std::string log = scrub_build_paths(raw);
  size_t pos = 0;
  std::string first;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    std::string line = log.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (first.empty() && line.find_first_not_of(" \t\r") != std::string::npos) first = line;
    if (line.find("error") != std::string::npos) {
      first = line;
      break;
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  if (first.size() > 300) first = first.substr(0, 300) + "...";
  return first;
}

Critique RuleCritic::critique(const CriticInput& in) {
  Critique c;
  c.model = "rules";
  const Measured& before = in.parent->measured;
  const Measured& after = *in.after;
  const std::string done = what_was_done(*in.proposal);
  if (!after.correct) {
    std::string detail = after.reason;
    if (after.failure_kind == "build_failed" || after.failure_kind == "abi_error") {
      std::string log = after.eval.contains("build") ? after.eval["build"].value("log", "") : "";
      std::string line = first_error_line(log.empty() ? after.reason : log);
      if (!line.empty()) detail = line;
      c.text = fmt::format(
          "{} did not build on {} ({}): {}. Avoid this construct on this target or fix it before "
          "retrying.",
          done, in.target->name, after.failure_kind, detail);
    } else if (wrong_answer(after.failure_kind)) {
      c.text = fmt::format(
          "{} gave a wrong answer on {} ({}): {}. Correctness comes first: the rewrite changed the "
          "result; check index math, reductions' order and precision.",
          done, in.target->name, after.failure_kind, detail);
      if (auto l = lesson(in, fmt::format("gave a wrong answer on {} for {} ({}): {}", in.target->name,
                                          in.problem->op_class, after.failure_kind, first_error_line(detail))))
        c.constraints.push_back(*l);
    } else {
      c.text = fmt::format("{} failed on {} ({}): {}.", done, in.target->name,
                           after.failure_kind.empty() ? "failed" : after.failure_kind, detail);
      if (auto l = lesson(in, fmt::format("failed on {} for {} ({}): {}", in.target->name, in.problem->op_class,
                                          after.failure_kind, first_error_line(detail))))
        c.constraints.push_back(*l);
    }
    return c;
  }
  const double speedup = before.cost / after.cost;
  std::vector<std::string> moves = {
      fraction_move("bandwidth fraction", before.bandwidth_fraction, after.bandwidth_fraction),
      fraction_move("compute fraction", before.compute_fraction, after.compute_fraction),
      fraction_move("vector-instruction fraction", before.vector_fraction, after.vector_fraction)};
  std::string verdict;
  if (clearly_faster(after, before))
    verdict = fmt::format("{:.2f}x faster", speedup);
  else if (clearly_faster(before, after)) {
    verdict = fmt::format("{:.2f}x slower", 1 / speedup);
    if (auto l = lesson(in, fmt::format("made a {}{} kernel {:.2f}x slower on {} ({} -> {})",
                                        in.before.bottleneck.empty() ? "" : in.before.bottleneck + "-bound ",
                                        in.problem->op_class, 1 / speedup, in.target->name,
                                        format_cost(before.cost, before.unit), format_cost(after.cost, after.unit))))
      c.constraints.push_back(*l);
  } else
    verdict = fmt::format("no clear change ({:.2f}x, within noise)", speedup);
  c.text = fmt::format("{}: {} ({} -> {})", done, verdict, format_cost(before.cost, before.unit),
                       format_cost(after.cost, after.unit));
  std::string m = join(moves, "; ");
  if (!m.empty()) c.text += "; " + m;
  if (!in.before.bottleneck.empty() && !in.after_signature.bottleneck.empty() &&
      in.before.bottleneck != in.after_signature.bottleneck)
    c.text += fmt::format("; bottleneck {} -> {}", in.before.bottleneck, in.after_signature.bottleneck);
  if (after.bandwidth_fraction || after.compute_fraction) {
    double sol = std::max(after.bandwidth_fraction.value_or(0), after.compute_fraction.value_or(0));
    std::string b = in.after_signature.bottleneck;
    if (sol >= 0.8)
      c.text += fmt::format("; at {:.0f}% of peak: little left to gain", 100 * sol);
    else if (b == "latency")
      c.text += fmt::format(
          "; remaining gap: both fractions low ({:.0f}% of peak) - launch overhead, too little "
          "parallelism or serial dependences",
          100 * sol);
    else if (!b.empty())
      c.text += fmt::format("; remaining gap: {:.0f}% of peak, still {}-bound", 100 * (1 - sol), b);
  }
  if (after.deterministic && before.eval.contains("time") && after.eval.contains("time")) {
    auto vec = [](const Measured& x) {
      const auto& cost = x.eval["time"].value("cost", nlohmann::json::object());
      return cost.value("vector_insns_median", 0.0);
    };
    if (vec(before) > 0 && vec(after) > 0)
      c.text += fmt::format("; vector instructions {:.3g} M -> {:.3g} M", vec(before) / 1e6, vec(after) / 1e6);
  }
  return c;
}

}  // namespace mblast::loop
