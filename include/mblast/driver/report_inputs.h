// What `mblast report` reads: a run folder of `mblast optimize`, a `mblast bench` results file, a
// `mblast optimize-model` folder, and the knowledge base's history. Each is recognised by its
// contents, not its name; anything else is refused with one line (UserError). Nothing is written.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mblast::report {

enum class InputKind { run, bench, model };

const char* kind_name(InputKind k);  // "optimize run", "bench results", "optimize-model plan"

struct ReportInput {
  InputKind kind = InputKind::run;
  std::filesystem::path path;  // as given
  std::string label;           // how the page names it: the run id, "<file stem> (<target>)", the model's name
  // run: report.json's "result" ({} for a run still going); bench: the results document; model: plan.json
  nlohmann::json doc;
  nlohmann::json meta;                 // run: run.json ({} when only report.json was given)
  std::vector<nlohmann::json> events;  // run: events.jsonl, else report.json's "events"
  nlohmann::json problem;              // run: the problem's problem.json (null when its folder is gone)
};

// A folder with report.json or events.jsonl (a run), a folder or file plan.json (a model), a run's
// report.json, or a bench results file. Throws UserError("PATH: why") when it is none of these, is
// missing, or is not valid JSON.
ReportInput load_report_input(const std::filesystem::path& path);

// One experience of the knowledge base, in the order they were written.
struct KbExperience {
  std::string created_at;  // ISO 8601, UTC
  std::string target;
  bool correct = false;
  double speedup = 0;   // 0 when not correct
  bool learned = true;  // false for seed knowledge
  bool model = false;   // a model-level experience (optimize-model)
};

struct KbHistory {
  std::string path;
  std::vector<KbExperience> experiences;
  long long states = 0, actions = 0, constraints = 0;
};

// The KB's experiences (kernel and model level) by creation time. Opens the file read-only; a
// missing file or one that is not an mblast KB is a UserError (KbFileError).
KbHistory load_kb_history(const std::filesystem::path& kb);

// Seconds since 1970 of an ISO 8601 UTC time ("2026-12-07T11:35:07Z", fractions and "+00:00"
// accepted); NaN when it cannot be read.
double iso_seconds(const std::string& iso);

}  // namespace mblast::report
