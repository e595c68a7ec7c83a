#include "mblast/driver/report_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/kb/knowledge_base.h"

namespace mblast::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void refuse(const fs::path& p, const std::string& why) { throw UserError(p.string() + ": " + why); }

json parse_json_file(const fs::path& file, const fs::path& shown) {
  const auto text = try_read_file(file);
  if (!text) refuse(shown, "cannot read " + file.filename().string());
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) refuse(shown, file.filename().string() + " is not valid JSON");
  return j;
}

std::string str(const json& j, const char* key, const std::string& fallback = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

bool is_run_report(const json& j) { return j.is_object() && j.contains("result") && j.contains("events"); }
bool is_bench(const json& j) { return j.is_object() && str(j, "kind") == "mblast-bench" && j.contains("problems"); }
bool is_plan(const json& j) { return j.is_object() && j.contains("groups") && j.contains("end_to_end"); }

// events.jsonl: one JSON object a line. A line cut short by a kill (the last one) is skipped: the
// loop fsyncs each whole line, so only the tail can be partial.
std::vector<json> read_events(const fs::path& file, const fs::path& shown) {
  std::ifstream in(file);
  if (!in) refuse(shown, "cannot read events.jsonl");
  std::vector<json> out;
  std::string line;
  size_t n = 0, bad = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    json e = json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object()) {
      ++bad;
      continue;
    }
    out.push_back(std::move(e));
  }
  if (bad > 1 || (bad == 1 && out.empty() && n > 0))
    refuse(shown, fmt::format("events.jsonl has {} lines that are not JSON objects (not an mblast run?)", bad));
  return out;
}

ReportInput run_input(const fs::path& shown, const json& report, json meta, std::vector<json> events) {
  ReportInput in;
  in.kind = InputKind::run;
  in.path = shown;
  in.doc = report.is_object() && report.contains("result") ? report["result"] : json::object();
  in.meta = std::move(meta);
  in.events = std::move(events);
  const std::string id = str(in.doc, "run", str(in.meta, "id", shown.filename().string()));
  in.label = id.empty() ? shown.string() : id;
  const std::string pdir = str(in.meta, "problem_dir");
  if (!pdir.empty())
    if (auto t = try_read_file(fs::path(pdir) / "problem.json")) {
      json p = json::parse(*t, nullptr, false);
      if (!p.is_discarded()) in.problem = std::move(p);
    }
  return in;
}

}  // namespace

const char* kind_name(InputKind k) {
  switch (k) {
    case InputKind::run:
      return "optimize run";
    case InputKind::bench:
      return "bench results";
    case InputKind::model:
      return "optimize-model plan";
  }
  return "?";
}

ReportInput load_report_input(const fs::path& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) refuse(path, "no such file or folder");
  if (fs::is_directory(st)) {
    if (fs::exists(path / "plan.json")) {
      json plan = parse_json_file(path / "plan.json", path);
      if (!is_plan(plan)) refuse(path, "plan.json is not an optimize-model plan (no groups and end_to_end)");
      ReportInput in;
      in.kind = InputKind::model;
      in.path = path;
      in.doc = std::move(plan);
      in.label =
          in.doc.contains("model") ? str(in.doc["model"], "name", path.filename().string()) : path.filename().string();
      return in;
    }
    const bool has_report = fs::exists(path / "report.json"), has_events = fs::exists(path / "events.jsonl");
    if (!has_report && !has_events)
      refuse(path,
             "not a run folder of mblast optimize (no report.json or events.jsonl) nor an optimize-model folder "
             "(no plan.json)");
    json report = json::object();
    if (has_report) {
      report = parse_json_file(path / "report.json", path);
      if (!is_run_report(report)) refuse(path, "report.json is not an mblast optimize report (no result and events)");
    }
    json meta = json::object();
    if (fs::exists(path / "run.json")) {
      meta = parse_json_file(path / "run.json", path);
      if (!meta.is_object()) refuse(path, "run.json is not a JSON object");
    }
    std::vector<json> events;
    if (has_events)
      events = read_events(path / "events.jsonl", path);
    else
      for (const auto& e : report["events"]) events.push_back(e);
    return run_input(path, report, std::move(meta), std::move(events));
  }
  json j = parse_json_file(path, path);
  if (is_bench(j)) {
    ReportInput in;
    in.kind = InputKind::bench;
    in.path = path;
    const json meta = j.value("meta", json::object());
    in.label = fmt::format("{} ({})", path.stem().string(), str(meta, "target", "?"));
    in.doc = std::move(j);
    return in;
  }
  if (is_plan(j)) return load_report_input(path.parent_path().empty() ? fs::path(".") : path.parent_path());
  if (is_run_report(j)) {
    std::vector<json> events(j["events"].begin(), j["events"].end());
    json meta = json::object();
    // The report inside a run folder: run.json beside it gives the problem's folder.
    if (fs::exists(path.parent_path() / "run.json")) {
      meta = json::parse(try_read_file(path.parent_path() / "run.json").value_or(""), nullptr, false);
      if (meta.is_discarded()) meta = json::object();
    }
    return run_input(path, j, std::move(meta), std::move(events));
  }
  refuse(path,
         "not a results file of mblast bench (\"kind\": \"mblast-bench\"), a report.json of mblast optimize, or a "
         "plan.json of mblast optimize-model");
}

double iso_seconds(const std::string& iso) {
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double s = 0;
  if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%lf", &y, &mo, &d, &h, &mi, &s) != 6) return NAN;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = 0;
  const std::time_t t = timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return NAN;
  return static_cast<double>(t) + s;
}

KbHistory load_kb_history(const fs::path& file) {
  kb::OpenOptions o;
  o.read_only = true;
  kb::KnowledgeBase base(file, o);
  KbHistory h;
  h.path = base.file().string();
  kb::Statement q(base.db(),
                  "SELECT e.created_at, e.target, e.correct, e.speedup, p.kind FROM experiences e "
                  "JOIN provenance p ON p.id = e.provenance_id ORDER BY e.created_at, e.id");
  while (q.step()) {
    KbExperience x;
    x.created_at = q.get_text(0);
    x.target = q.get_text(1);
    x.correct = q.get_int(2) != 0;
    x.speedup = q.get_opt_double(3).value_or(0);
    x.learned = q.get_text(4) != "seed";
    h.experiences.push_back(std::move(x));
  }
  // Model-level experiences came with schema 3; an older KB read without migrating has none.
  kb::Statement m(base.db(), base.schema_version() >= 3
                                 ? "SELECT created_at, target, correct, speedup FROM model_experiences"
                                 : "SELECT '', '', 0, NULL WHERE 0");
  while (m.step()) {
    KbExperience x;
    x.created_at = m.get_text(0);
    x.target = m.get_text(1);
    x.correct = m.get_int(2) != 0;
    x.speedup = m.get_opt_double(3).value_or(0);
    x.model = true;
    h.experiences.push_back(std::move(x));
  }
  std::stable_sort(h.experiences.begin(), h.experiences.end(),
                   [](const KbExperience& a, const KbExperience& b) { return a.created_at < b.created_at; });
  h.states = base.db().query_int("SELECT count(*) FROM states");
  h.actions = base.db().query_int("SELECT count(*) FROM actions");
  h.constraints = base.db().query_int("SELECT count(*) FROM constraints");
  return h;
}

}  // namespace mblast::report
