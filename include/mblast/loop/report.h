// The report of an optimization run: Markdown for people, JSON for tools. Both hold the
// result, the trajectory (every step's best), every candidate's outcome with the critic's
// text, and the knowledge used (KB actions and their expected speedups) and learned.
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

namespace mblast::loop {

struct ReportPaths {
  std::filesystem::path markdown, json;
};

// Writes report.md and report.json into run_dir (and copies them into out_dir when not empty;
// the returned paths are the out_dir ones then).
ReportPaths write_reports(const nlohmann::json& result, const std::vector<nlohmann::json>& events,
                          const std::filesystem::path& run_dir, const std::filesystem::path& out_dir);

// The Markdown text alone (for `mblast runs show`).
std::string report_markdown(const nlohmann::json& result, const std::vector<nlohmann::json>& events);

}  // namespace mblast::loop
