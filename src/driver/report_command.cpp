#include "mblast/driver/report_command.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "mblast/driver/report_inputs.h"
#include "mblast/driver/report_page.h"
#include "mblast/error.h"
#include "mblast/files.h"

namespace mblast {

namespace fs = std::filesystem;

namespace {

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void add_report(CLI::App& app, ReportArgs& a) {
  auto* c = app.add_subcommand("report", "Write an HTML report (plots and tables) of runs, bench results and plans");
  c->footer(
      "Examples:\n"
      "  mblast report ~/.local/share/mblast/runs/20261207-113500-ab12 --html run.html\n"
      "  mblast report main.json branch.json --html compare.html\n"
      "  mblast report results.json RUN_COLD RUN_WARM model_dir --kb kb.sqlite --html all.html\n"
      "INPUT is a run folder of `mblast optimize` (or its report.json), a results file of `mblast bench`\n"
      "(--out), or a folder of `mblast optimize-model` (plan.json); several are shown side by side.\n"
      "The page has no outside references: plots are inline SVG. Plots: roofline, speedup per problem\n"
      "over eager and torch.compile, fast_p as p grows, each run's best cost against evaluations, and\n"
      "with --kb the knowledge base's experiences over time; each with the table behind it.\n"
      "Exit status: 0 written, 2 bad input (nothing written).");
  c->add_option("inputs", a.inputs, "Run folders, bench results files, optimize-model folders")->required();
  c->add_option("--html", a.html, "The HTML file to write")->required();
  c->add_option("--kb", a.kb, "A knowledge base (SQLite file) whose growth to plot");
  c->add_flag("--json", a.json, "Print {html, inputs: [{path, kind, name}], kb} as JSON");
}

int run_report(const ReportArgs& a) {
  std::vector<report::ReportInput> inputs;
  std::map<std::string, int> seen;
  for (const auto& p : a.inputs) {
    inputs.push_back(report::load_report_input(p));
    // Each input is a series of its own: two of one name (main/results.json, branch/results.json) are told apart.
    if (const int n = ++seen[inputs.back().label]; n > 1) inputs.back().label += fmt::format(" #{}", n);
  }
  std::optional<report::KbHistory> kb;
  if (!a.kb.empty()) {
    if (!fs::exists(a.kb)) throw UserError(a.kb + ": no such knowledge base");
    kb = report::load_kb_history(a.kb);
  }
  if (fs::is_directory(a.html)) throw UserError(a.html + ": is a folder (--html takes the file to write)");
  report::PageOptions o;
  o.kb = kb ? &*kb : nullptr;
  o.generated_at = utc_now();
  write_file_atomically(a.html, report::report_html(inputs, o));
  if (a.json) {
    nlohmann::json j = {{"html", fs::absolute(a.html).string()}, {"inputs", nlohmann::json::array()}};
    for (const auto& in : inputs)
      j["inputs"].push_back({{"path", in.path.string()}, {"kind", report::kind_name(in.kind)}, {"name", in.label}});
    j["kb"] = kb ? nlohmann::json(kb->path) : nlohmann::json();
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("wrote {} ({} input(s){})\n", a.html, inputs.size(), kb ? ", the KB's growth" : "");
  }
  return 0;
}

}  // namespace mblast
