// Run reports (include/mblast/loop/report.h).
#include "mblast/loop/report.h"

#include <fmt/format.h>

#include "mblast/files.h"
#include "mblast/loop/run_store.h"
#include "mblast/loop/state.h"

namespace fs = std::filesystem;

namespace mblast::loop {

namespace {

std::string cell(std::string s) {
  for (auto& c : s)
    if (c == '|' || c == '\n') c = ' ';
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

std::string cost_of(const nlohmann::json& m) {
  if (!m.value("correct", false)) return "-";
  return format_cost(m.value("cost", 0.0), m.value("unit", ""));
}

}  // namespace

std::string report_markdown(const nlohmann::json& r, const std::vector<nlohmann::json>& events) {
  std::string md = fmt::format("# mblast optimize: {} on {}\n\n", r.value("problem", "?"), r.value("target", "?"));
  md += fmt::format("- run: `{}` (policy {})\n", r.value("run", ""), r.value("policy", ""));
  if (r.value("failed", false)) md += "- **FAILED**: " + r.value("failure", std::string("?")) + "\n";
  md += fmt::format("- result: **{}**, {:.3f}x the start ({} -> {})\n",
                    r.value("improved", false) ? "faster candidate found" : "the start is kept",
                    r.value("speedup", 1.0), cost_of(r.value("start", nlohmann::json::object())),
                    cost_of(r.value("best", nlohmann::json::object())));
  if (r.contains("note")) md += "- note: " + r["note"].get<std::string>() + "\n";
  md += fmt::format("- candidate: `{}`\n", r.value("candidate", ""));
  md += fmt::format("- {} evaluations in {} steps, {:.1f} s; stopped: {}\n", r.value("evaluations", 0),
                    r.value("steps", 0), r.value("elapsed_s", 0.0), r.value("stop_reason", ""));
  if (r.contains("kernel_plan")) {
    const auto& kp = r["kernel_plan"];
    md += "- kernel recognised: " +
          (kp.contains("summary") ? kp["summary"].get<std::string>() : "none (" + kp.value("reason", "") + ")") + "\n";
  }
  if (r.contains("spend") && r["spend"].is_object() && !r["spend"].empty())
    md += fmt::format("- LLM spend: ${:.4f}, {} calls ({} from the cache), {} input / {} output tokens\n",
                      r["spend"].value("usd", 0.0), r["spend"].value("calls", 0), r["spend"].value("cached", 0),
                      r["spend"].value("input_tokens", 0), r["spend"].value("output_tokens", 0));

  md += "\n## Trajectory\n\n| step | best speedup | evaluations | steps without gain |\n|---|---|---|---|\n";
  for (const auto& e : events)
    if (e.value("type", "") == "step")
      md += fmt::format("| {} | {:.3f}x | {} | {} |\n", e.value("step", 0), e.value("best_speedup", 1.0),
                        e.value("evaluations", 0), e.value("steps_without_gain", 0));

  md += "\n## Candidates\n\n| # | step | candidate | outcome | vs start | critic |\n|---|---|---|---|---|---|\n";
  int n = 0;
  for (const auto& e : events) {
    std::string type = e.value("type", "");
    if (type != "candidate" && type != "start") continue;
    const auto& m = e.value("measured", nlohmann::json::object());
    std::string outcome = m.value("correct", false)
                              ? cost_of(m)
                              : m.value("failure_kind", std::string("failed")) + ": " + m.value("reason", "");
    std::string vs = e.contains("speedup_vs_start") ? fmt::format("{:.2f}x", e["speedup_vs_start"].get<double>())
                     : type == "start"              ? "1.00x"
                                                    : "-";
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", n++, e.value("step", 0), cell(e.value("description", "")),
                      cell(outcome), vs, cell(e.value("critic", "")));
  }

  md += "\n## Knowledge\n\n";
  const auto& k = r.value("knowledge", nlohmann::json::object());
  md += fmt::format("Used (KB actions behind the proposals, with what the KB expected of them):\n\n");
  for (const auto& u : k.value("used", nlohmann::json::array()))
    md += fmt::format("- step {}: `{}` ({}) expected {:.2f}x from {} tries ({} on this target, {} transferred)\n",
                      u.value("step", 0), u.value("action", ""), u.value("provenance", ""),
                      u.value("expected_speedup", 1.0), u.value("tries", 0), u.value("same_target_tries", 0),
                      u.value("transferred_tries", 0));
  md += fmt::format("\nLearned: {} experiences, {} constraints and {} text versions written to `{}`.\n",
                    k.value("experiences_written", 0), k.value("constraints_written", 0),
                    k.value("text_versions_written", 0), k.value("kb", ""));
  return md;
}

ReportPaths write_reports(const nlohmann::json& result, const std::vector<nlohmann::json>& events,
                          const fs::path& run_dir, const fs::path& out_dir) {
  std::string md = report_markdown(result, events);
  nlohmann::json j = {{"result", result}, {"events", events}};
  std::string js = j.dump(2) + "\n";
  ReportPaths p{run_dir / "report.md", run_dir / "report.json"};
  write_file_atomically(p.markdown, md);
  write_file_atomically(p.json, js);
  if (!out_dir.empty()) {
    p = {out_dir / "report.md", out_dir / "report.json"};
    write_file_atomically(p.markdown, md);
    write_file_atomically(p.json, js);
  }
  return p;
}

}  // namespace mblast::loop
