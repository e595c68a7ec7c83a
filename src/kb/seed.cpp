#include "mblast/kb/seed.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedded_files.h"
#include "mblast/kb/knowledge_base.h"

namespace mblast::kb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::set<std::string> kBackends = {"cuda", "opencl", "rvv"};
const std::set<std::string> kKeys = {"id",         "backends",          "title",      "summary",
                                     "when_helps", "when_hurts",        "source",     "parameters",
                                     "applies_to", "prior_log_speedup", "constraints"};
const std::set<std::string> kApplyKeys = {"op_classes", "bottlenecks", "archs"};

std::string required_text(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
    throw UserError(fmt::format("'{}' must be a non-empty string", key));
  return j[key].get<std::string>();
}

SeedEntry parse_entry(const json& j) {
  if (!j.is_object()) throw UserError("each line must be a JSON object");
  for (const auto& [k, v] : j.items())
    if (!kKeys.count(k)) throw UserError(fmt::format("unknown field '{}'", k));
  SeedEntry e;
  ActionRecord& a = e.action;
  a.id = required_text(j, "id");
  a.title = required_text(j, "title");
  a.summary = required_text(j, "summary");
  a.when_helps = required_text(j, "when_helps");
  a.when_hurts = required_text(j, "when_hurts");
  a.source = required_text(j, "source");
  if (!j.contains("backends") || !j["backends"].is_array() || j["backends"].empty())
    throw UserError("'backends' must be a non-empty list");
  for (const auto& b : j["backends"]) {
    if (!b.is_string() || !kBackends.count(b.get<std::string>()))
      throw UserError(fmt::format("unknown backend {} (cuda, opencl, rvv)", b.dump()));
    a.backends.push_back(b.get<std::string>());
  }
  std::sort(a.backends.begin(), a.backends.end());
  const bool prefixed = std::any_of(a.backends.begin(), a.backends.end(),
                                    [&](const std::string& b) { return a.id.rfind(b + ".", 0) == 0; });
  if (!prefixed && a.id.rfind("any.", 0) != 0)
    throw UserError(fmt::format("id '{}' must start with one of its backends and a dot (cuda.xxx)", a.id));
  if (!std::all_of(a.id.begin(), a.id.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
               c == '-';
      }))
    throw UserError(fmt::format("id '{}' may use only a-z, 0-9, '.' and '-'", a.id));
  a.parameters = j.value("parameters", json::object());
  if (!a.parameters.is_object()) throw UserError("'parameters' must be an object");
  a.applies_to = j.value("applies_to", json::object());
  if (!a.applies_to.is_object()) throw UserError("'applies_to' must be an object");
  for (const auto& [k, v] : a.applies_to.items()) {
    if (!kApplyKeys.count(k))
      throw UserError(fmt::format("unknown applies_to key '{}' (op_classes, bottlenecks, archs)", k));
    if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); }))
      throw UserError(fmt::format("applies_to.{} must be a list of strings", k));
  }
  if (j.contains("prior_log_speedup")) {
    if (!j["prior_log_speedup"].is_number()) throw UserError("'prior_log_speedup' must be a number");
    a.prior_log_speedup = j["prior_log_speedup"].get<double>();
  }
  a.provenance = {"seed", a.source};
  for (const auto& c : j.value("constraints", json::array())) {
    ConstraintRecord r;
    r.action_id = a.id;
    r.backend = a.backends.front();
    r.text = required_text(c, "text");
    r.predicate = c.value("predicate", json::object());
    validate_predicate(r.predicate);
    r.effect = c.value("effect", std::string("exclude"));
    if (r.effect != "exclude" && r.effect != "demote") throw UserError("constraint effect must be exclude or demote");
    r.provenance = a.provenance;
    e.constraints.push_back(std::move(r));
  }
  return e;
}

void check_unique(const std::vector<SeedEntry>& all) {
  std::set<std::string> ids;
  for (const auto& e : all)
    if (!ids.insert(e.action.id).second) throw UserError(fmt::format("seed action '{}' is defined twice", e.action.id));
}

}  // namespace

std::vector<SeedEntry> parse_seed(std::string_view name, std::string_view content) {
  std::vector<SeedEntry> out;
  std::istringstream in{std::string(content)};
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      json j = json::parse(line);
      out.push_back(parse_entry(j));
    } catch (const json::exception& e) {
      throw UserError(fmt::format("{}:{}: not valid JSON: {}", name, n, e.what()));
    } catch (const UserError& e) {
      throw UserError(fmt::format("{}:{}: {}", name, n, e.what()));
    }
  }
  return out;
}

std::vector<SeedEntry> embedded_seed() {
  std::vector<SeedEntry> all;
  for (const auto& f : embedded_files()) {
    if (f.path.substr(0, 5) != "seed/" || !f.path.ends_with(".jsonl")) continue;
    auto part = parse_seed(f.path, f.content);
    all.insert(all.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  check_unique(all);
  return all;
}

std::vector<SeedEntry> seed_from_dir(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw UserError(fmt::format("seed folder {} does not exist", dir.string()));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jsonl") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<SeedEntry> all;
  for (const auto& p : files) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    auto part = parse_seed(p.string(), ss.str());
    all.insert(all.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  check_unique(all);
  return all;
}

namespace {

SeedReport load_seed_once(KnowledgeBase& kb, const std::vector<SeedEntry>& entries) {
  SeedReport r;
  Transaction tx(kb.db());
  const int64_t versions_before = kb.db().query_int("SELECT count(*) FROM text_versions");
  for (const auto& e : entries) {
    const auto existing = kb.action(e.action.id);
    const bool known = existing.has_value();
    if (known && existing->provenance.kind != "seed") {
      // A seed id a run created as "learned" (a KB made before the seed was loaded): the seed's
      // priors, parameters and provenance are attached to it; its texts follow below as new
      // versions. What was measured for it (experiences) is untouched.
      Statement fix(kb.db(),
                    "UPDATE actions SET parameters = ?, applies_to = ?, prior_log_speedup = ?, source = ?, "
                    "provenance_id = ? WHERE id = ?");
      fix.bind(1, e.action.parameters.dump()).bind(2, e.action.applies_to.dump()).bind(3, e.action.prior_log_speedup);
      fix.bind(4, e.action.source).bind(5, kb.provenance_row(e.action.provenance)).bind(6, e.action.id).run();
      ++r.actions_repaired;
    }
    kb.add_action(e.action);
    (known ? r.actions_known : r.actions_added)++;
    for (const auto& b : e.action.backends) r.actions_per_backend[b]++;
    for (const auto& c : e.constraints) {
      const int64_t before = kb.db().query_int("SELECT count(*) FROM constraints");
      kb.add_constraint(c);
      r.constraints_added += static_cast<int>(kb.db().query_int("SELECT count(*) FROM constraints") - before);
    }
  }
  r.text_versions_added = static_cast<int>(kb.db().query_int("SELECT count(*) FROM text_versions") - versions_before);
  tx.commit();
  return r;
}

}  // namespace

SeedReport load_seed(KnowledgeBase& kb, const std::vector<SeedEntry>& entries) {
  SeedReport r;
  retry_on_conflict(kb.db(), [&] { r = load_seed_once(kb, entries); });
  return r;
}

}  // namespace mblast::kb
