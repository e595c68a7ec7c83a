#include "mblast/driver/kb_command.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <system_error>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "mblast/error.h"
#include "mblast/kb/exchange.h"
#include "mblast/kb/knowledge_base.h"
#include "mblast/kb/model_experience.h"
#include "mblast/kb/seed.h"
#include "mblast/kb/summary.h"
#include "mblast/target.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "…"; }

fs::path kb_path(const KbArgs& a) { return a.kb.empty() ? kb::default_kb_path() : fs::path(a.kb); }

CLI::App* sub(CLI::App& kb, KbArgs& a, const std::string& name, const std::string& help, const std::string& example) {
  auto* c = kb.add_subcommand(name, help);
  c->footer("Example:\n  " + example);
  c->add_option("--kb", a.kb,
                "Knowledge base file or postgresql://USER@HOST[:PORT]/DB (default: $MBLAST_KB, else "
                "~/.local/share/mblast/kb.sqlite; created on first use)");
  c->add_flag("--json", a.json, "Print JSON for scripts");
  c->callback([&a, name] { a.command = name; });
  return c;
}

std::string report_line(const kb::ImportReport& r) {
  std::string added, present;
  for (const auto& [k, n] : r.added) added += fmt::format("{}{} {}", added.empty() ? "" : ", ", n, k);
  for (const auto& [k, n] : r.present) present += fmt::format("{}{} {}", present.empty() ? "" : ", ", n, k);
  return fmt::format("added: {}\nalready present: {}\n", added.empty() ? "nothing" : added,
                     present.empty() ? "nothing" : present);
}

json report_json(const kb::ImportReport& r) {
  return {{"added", r.added},
          {"present", r.present},
          {"conflicts", r.conflicts},
          {"texts_kept_as_versions", r.texts_kept_as_versions},
          {"total_added", r.total_added()}};
}

void print_report(const kb::ImportReport& r, const std::string& what, const KbArgs& a) {
  if (a.json) {
    json j = report_json(r);
    j["kb"] = kb::redact_kb_location(kb_path(a).string());
    j["from"] = what;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{} -> {}\n", what, kb::redact_kb_location(kb_path(a).string())) << report_line(r);
  if (r.texts_kept_as_versions)
    std::cout << fmt::format("differing action texts kept as text versions: {}\n", r.texts_kept_as_versions);
  for (const auto& c : r.conflicts) std::cout << "conflict: " << c << "\n";
}

// ---- init ----

int kb_init(const KbArgs& a) {
  kb::OpenOptions no_auto_seed;
  no_auto_seed.seed = false;  // loaded below, as asked (--no-seed, --seed-dir), and reported
  kb::KnowledgeBase base(kb_path(a), no_auto_seed);
  json out = {{"kb", base.file().string()},
              {"schema_version", base.schema_version()},
              {"created", base.created()},
              {"migrated_from", base.migrated_from()}};
  if (!a.no_seed) {
    const auto entries = a.seed_dir.empty() ? kb::embedded_seed() : kb::seed_from_dir(a.seed_dir);
    const kb::SeedReport r = kb::load_seed(base, entries);
    out["seed"] = {{"actions_added", r.actions_added},
                   {"actions_known", r.actions_known},
                   {"actions_repaired", r.actions_repaired},
                   {"constraints_added", r.constraints_added},
                   {"text_versions_added", r.text_versions_added},
                   {"actions_per_backend", r.actions_per_backend}};
  }
  const std::string integrity = base.integrity_check();
  out["integrity"] = integrity;
  if (a.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    const std::string how = base.created() ? "created"
                            : base.migrated_from() < base.schema_version()
                                ? fmt::format("migrated from schema {}", base.migrated_from())
                                : "up to date";
    std::cout << fmt::format("knowledge base {} (schema {}, {})\n", base.file().string(), base.schema_version(), how);
    if (out.contains("seed")) {
      const json& s = out["seed"];
      std::string per;
      for (const auto& [b, n] : s["actions_per_backend"].items())
        per += fmt::format("{}{} {}", per.empty() ? "" : ", ", n.get<int>(), b);
      std::cout << fmt::format(
          "seed: {} actions ({}); {} new, {} already known; {} new constraints; {} text versions\n",
          s["actions_added"].get<int>() + s["actions_known"].get<int>(), per, s["actions_added"].get<int>(),
          s["actions_known"].get<int>(), s["constraints_added"].get<int>(), s["text_versions_added"].get<int>());
      if (s["actions_repaired"].get<int>() > 0)
        std::cout << fmt::format("seed: {} actions a run had created without the seed's priors now have them\n",
                                 s["actions_repaired"].get<int>());
    }
    std::cout << "integrity: " << integrity << "\n";
  }
  return integrity == "ok" ? 0 : 1;
}

// ---- query ----

kb::StateSignature query_signature(kb::KnowledgeBase& base, const KbArgs& a) {
  kb::StateSignature s;
  s.backend = a.backend;
  s.op_class = a.op_class;
  s.bottleneck = a.bottleneck;
  s.arithmetic_intensity = a.intensity;
  s.bandwidth_fraction = a.bandwidth_fraction;
  s.compute_fraction = a.compute_fraction;
  s.utilisation = a.utilisation;
  if (a.target.empty()) return s;
  std::string backend, arch, target;
  {
    kb::Statement st(base.db(), "SELECT backend, arch FROM targets WHERE name = ?");
    st.bind(1, a.target);
    if (st.step()) {
      target = a.target;
      backend = st.get_text(0);
      arch = st.get_text(1);
    }
  }
  if (target.empty()) {
    try {
      const kb::TargetRecord r = kb::target_record(find_target(a.target));
      target = r.name;
      backend = r.backend;
      arch = r.arch;
    } catch (const UserError&) {
      // not a target name: maybe an arch
    }
  }
  if (target.empty()) {
    kb::Statement st(
        base.db(),
        "SELECT backend FROM targets WHERE arch = ? UNION SELECT backend FROM states WHERE arch = ? LIMIT 1");
    st.bind_all(a.target, a.target);
    if (st.step())
      backend = st.get_text(0);
    else if (a.target.rfind("sm_", 0) == 0)
      backend = "cuda";
    else if (a.target.rfind("rv", 0) == 0)
      backend = "rvv";
    else if (a.target.rfind("adreno", 0) == 0)
      backend = "opencl";
    else
      throw UserError(
          fmt::format("'{}' is neither a target (see `mblast targets`) nor an arch such as sm_90, "
                      "adreno-a7xx or rv64gcv-vlen256",
                      a.target));
    arch = a.target;
  }
  if (!a.backend.empty() && a.backend != backend)
    throw UserError(fmt::format("--target {} is a {} target, but --backend says {}", a.target, backend, a.backend));
  s.backend = backend;
  s.arch = arch;
  s.target = target;
  return s;
}

json signature_json(const kb::StateSignature& s) {
  const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"backend", s.backend},
          {"arch", s.arch},
          {"target", s.target},
          {"op_class", s.op_class},
          {"arithmetic_intensity", opt(s.arithmetic_intensity)},
          {"bandwidth_fraction", opt(s.bandwidth_fraction)},
          {"compute_fraction", opt(s.compute_fraction)},
          {"utilisation", opt(s.utilisation)},
          {"bottleneck", s.bottleneck},
          {"cluster", s.cluster()}};
}

json ranked_json(const kb::RankedAction& r) {
  json constraints = json::array();
  for (const auto& c : r.constraints)
    constraints.push_back(
        {{"id", c.id}, {"text", c.text}, {"effect", c.effect}, {"provenance", c.provenance}, {"evidence", c.evidence}});
  json examples = json::array();
  for (const auto& e : r.examples)
    examples.push_back({{"experience_id", e.experience_id},
                        {"candidate_id", e.candidate_id},
                        {"target", e.target},
                        {"speedup", e.speedup},
                        {"same_target", e.same_target}});
  const auto& c = r.cluster_stats;
  return {{"id", r.id},
          {"title", r.title},
          {"summary", r.summary},
          {"when_helps", r.when_helps},
          {"when_hurts", r.when_hurts},
          {"backends", r.backends},
          {"source", r.source},
          {"provenance", r.provenance},
          {"score", r.score},
          {"prior_log_speedup", r.prior_log_speedup},
          {"mean_log_speedup", r.mean_log_speedup},
          {"expected_speedup", r.expected_speedup()},
          {"evidence_weight", r.evidence_weight},
          {"tries", r.tries},
          {"correct", r.correct},
          {"wins", r.wins},
          {"same_target_tries", r.same_target_tries},
          {"transferred_tries", r.transferred_tries},
          {"constraints", constraints},
          {"excluded", r.excluded},
          {"excluded_reason", r.excluded_reason},
          {"examples", examples},
          {"cluster_stats",
           {{"tries", c.tries},
            {"correct", c.correct},
            {"wins", c.wins},
            {"mean_log_speedup", c.mean_log_speedup},
            {"best_speedup", c.best_speedup ? json(*c.best_speedup) : json(nullptr)}}}};
}

// `kb query --level model`: optimize-model's decisions and outcomes, newest first.
int kb_query_models(const KbArgs& a) {
  kb::KnowledgeBase base(kb_path(a));
  const auto rows = kb::model_experiences(base, a.target, a.op_class, a.limit);
  if (a.json) {
    std::cout << json{{"kb", base.file().string()}, {"level", "model"}, {"experiences", rows}}.dump(2) << "\n";
    return 0;
  }
  if (rows.empty()) std::cout << "no model-level experiences" << (a.target.empty() ? "" : " for " + a.target) << "\n";
  for (const auto& r : rows) {
    std::string speed = r["speedup"].is_number() ? fmt::format(" {:.2f}x", r["speedup"].get<double>()) : "";
    std::string share = r["share"].is_number() ? fmt::format(" share {:.0f}%", 100 * r["share"].get<double>()) : "";
    auto s = [&](const char* k) { return r[k].get<std::string>(); };
    std::cout << fmt::format("{} {} on {} ({}): {} {} [{}]{}{}, {} evals: {}\n", s("created_at"), s("model"),
                             s("target"), s("target_family"), s("decision"), s("group"), s("op_class"), share, speed,
                             r["evaluations"].get<int64_t>(), s("outcome"));
  }
  return 0;
}

int kb_query(const KbArgs& a) {
  if (a.level == "model") return kb_query_models(a);
  kb::KnowledgeBase base(kb_path(a));
  const kb::StateSignature q = query_signature(base, a);
  kb::RetrievalOptions o;
  o.k = a.k;
  o.limit = a.limit;
  o.text = a.text;
  o.transfer_discount = a.transfer_discount;
  o.include_excluded = a.include_excluded;
  const auto near = base.nearest_states(q, o.k, o);
  const auto ranked = base.ranked_actions(q, o);
  if (a.json) {
    json states = json::array();
    for (const auto& n : near)
      states.push_back({{"id", n.id},
                        {"signature", signature_json(n.signature)},
                        {"distance", n.distance},
                        {"weight", n.weight},
                        {"same_target", n.same_target},
                        {"experiences", n.experiences},
                        {"text", n.text}});
    json actions = json::array();
    for (const auto& r : ranked) actions.push_back(ranked_json(r));
    std::cout << json{{"kb", base.file().string()},
                      {"query", signature_json(q)},
                      {"nearest_states", states},
                      {"actions", actions}}
                     .dump(2)
              << "\n";
    return 0;
  }
  int same = 0, with_exp = 0;
  for (const auto& n : near) {
    same += n.same_target;
    with_exp += n.experiences > 0;
  }
  std::string what = q.backend.empty() ? std::string("any backend") : q.backend;
  if (!q.arch.empty()) what += " " + q.arch;
  if (!q.target.empty()) what += " (target " + q.target + ")";
  if (!q.op_class.empty()) what += ", op class " + q.op_class;
  if (!q.bottleneck.empty()) what += ", " + q.bottleneck + "-bound";
  if (!a.text.empty()) what += ", text \"" + a.text + "\"";
  std::cout << fmt::format("Actions for {}\n", what);
  std::cout << fmt::format("Evidence: {} nearest states ({} on the same target, {} with experiences){}\n\n",
                           near.size(), same, with_exp, near.empty() ? "; ranking by seed priors only" : "");
  if (ranked.empty()) {
    std::cout << (base.db().query_int("SELECT count(*) FROM actions") == 0
                      ? "The knowledge base has no actions yet: run `mblast kb init` to load the seed knowledge.\n"
                      : "No action matches.\n");
    return 0;
  }
  std::cout << fmt::format("{:>3}  {:<40} {:>7} {:>7} {:>11} {:<8} {}\n", "#", "ACTION", "SCORE", "E[x]", "TRIES W/T",
                           "ORIGIN", "TITLE");
  int i = 0;
  for (const auto& r : ranked) {
    std::cout << fmt::format("{:>3}  {:<40} {:>+7.3f} {:>6.2f}x {:>5}/{:<5} {:<8} {}\n", ++i, clip(r.id, 40), r.score,
                             r.expected_speedup(), r.wins, r.tries, r.provenance, clip(r.title, 60));
    if (r.tries)
      std::cout << fmt::format("       evidence: {} on this target, {} transferred\n", r.same_target_tries,
                               r.transferred_tries);
    for (const auto& c : r.constraints)
      std::cout << fmt::format("       {}: {}\n", c.effect == "exclude" ? "EXCLUDED" : "demoted", c.text);
    for (const auto& e : r.examples)
      std::cout << fmt::format("       example: candidate {} {:.2f}x on {}\n", e.candidate_id.substr(0, 12), e.speedup,
                               e.target);
  }
  return 0;
}

// ---- show ----

int kb_show(const KbArgs& a) {
  kb::KnowledgeBase base(kb_path(a));
  const auto matches = kb::find_records(base, a.id);
  if (matches.empty())
    throw UserError(fmt::format("nothing in {} has the id '{}' (or starts with it)", base.file().string(), a.id));
  if (matches.size() > 1) {
    std::string list;
    for (const auto& [k, id] : matches) list += fmt::format(" {} {};", k, id);
    throw UserError(fmt::format("'{}' is ambiguous:{} give more of the id", a.id, list));
  }
  const auto& [kind, key] = matches.front();
  json rec = *kb::fetch_record(base, kind, key);
  json extra = json::object();
  if (kind == "action" || kind == "state" || kind == "constraint") {
    json versions = json::array();
    for (const auto& v : base.text_versions(kind, key))
      versions.push_back({{"id", v.id},
                          {"field", v.field},
                          {"version", v.version},
                          {"parent_id", v.parent_id},
                          {"body", v.body},
                          {"author", v.author},
                          {"provenance", v.provenance.kind},
                          {"source", v.provenance.source},
                          {"created_at", v.created_at}});
    extra["text_versions"] = versions;
    json conflicts = json::object();
    for (const auto& [field, heads] : base.text_conflicts(kind, key))
      for (const auto& h : heads) conflicts[field].push_back(h.body);
    extra["text_conflicts"] = conflicts;
  }
  if (kind == "action") {
    const auto act = base.action(key);
    extra["current"] = {{"title", act->title},
                        {"summary", act->summary},
                        {"when_helps", act->when_helps},
                        {"when_hurts", act->when_hurts}};
    json cons = json::array();
    for (const auto& c : base.constraints_of(key))
      cons.push_back({{"id", c.id},
                      {"text", c.text},
                      {"predicate", c.predicate},
                      {"effect", c.effect},
                      {"provenance", c.provenance.kind}});
    extra["constraints"] = cons;
    json stats = json::array();
    kb::Statement st(base.db(),
                     "SELECT cluster, target_family, tries, correct, wins, sum_log_speedup, best_speedup "
                     "FROM policy_stats WHERE action_id = ? ORDER BY tries DESC, cluster LIMIT 50");
    st.bind(1, key);
    while (st.step()) {
      const int64_t correct = st.get_int(3);
      stats.push_back({{"cluster", st.get_text(0)},
                       {"target_family", st.get_text(1)},
                       {"tries", st.get_int(2)},
                       {"correct", correct},
                       {"wins", st.get_int(4)},
                       {"mean_speedup", correct ? std::exp(st.get_double(5) / static_cast<double>(correct)) : 1.0},
                       {"best_speedup", st.is_null(6) ? json(nullptr) : json(st.get_double(6))}});
    }
    extra["policy_stats"] = stats;
    json best = json::array();
    kb::Statement bx(base.db(),
                     "SELECT id, candidate_id, target, speedup FROM experiences WHERE action_id = ? AND "
                     "correct = 1 AND speedup IS NOT NULL AND candidate_id IS NOT NULL ORDER BY speedup DESC LIMIT 5");
    bx.bind(1, key);
    while (bx.step())
      best.push_back({{"experience_id", bx.get_text(0)},
                      {"candidate_id", bx.get_text(1)},
                      {"target", bx.get_text(2)},
                      {"speedup", bx.get_double(3)}});
    extra["best_candidates"] = best;
  }
  if (a.json) {
    std::cout << json{{"kind", kind}, {"record", rec}, {"details", extra}}.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{} {}\n", kind, key);
  if (extra.contains("current"))
    for (auto& [k, v] : extra["current"].items()) rec[k] = v;  // show the current texts
  for (const auto& [k, v] : rec.items()) {
    if (k == "kind" || k == "id" || k == "name") continue;
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    std::cout << fmt::format("  {:<20} {}\n", k, text);
  }
  if (extra.contains("constraints") && !extra["constraints"].empty()) {
    std::cout << "constraints:\n";
    for (const auto& c : extra["constraints"])
      std::cout << fmt::format("  [{} {}] {}  when {}\n", c["provenance"].get<std::string>(),
                               c["effect"].get<std::string>(), c["text"].get<std::string>(), c["predicate"].dump());
  }
  if (extra.contains("policy_stats") && !extra["policy_stats"].empty()) {
    std::cout << fmt::format("policy statistics:\n  {:<40} {:<28} {:>6} {:>6} {:>9}\n", "CLUSTER", "TARGET FAMILY",
                             "TRIES", "WINS", "MEAN x");
    for (const auto& s : extra["policy_stats"])
      std::cout << fmt::format("  {:<40} {:<28} {:>6} {:>6} {:>8.2f}x\n", clip(s["cluster"].get<std::string>(), 40),
                               s["target_family"].get<std::string>(), s["tries"].get<int64_t>(),
                               s["wins"].get<int64_t>(), s["mean_speedup"].get<double>());
  }
  if (extra.contains("best_candidates") && !extra["best_candidates"].empty()) {
    std::cout << "best candidates:\n";
    for (const auto& b : extra["best_candidates"])
      std::cout << fmt::format("  {} {:.2f}x on {}\n", b["candidate_id"].get<std::string>(), b["speedup"].get<double>(),
                               b["target"].get<std::string>());
  }
  if (extra.contains("text_versions") && !extra["text_versions"].empty()) {
    std::cout << "text versions:\n";
    for (const auto& v : extra["text_versions"])
      std::cout << fmt::format("  {} v{} by {} ({}, {}): {}\n", v["field"].get<std::string>(), v["version"].get<int>(),
                               v["author"].get<std::string>(), v["provenance"].get<std::string>(),
                               v["created_at"].get<std::string>(), clip(v["body"].get<std::string>(), 100));
  }
  for (const auto& [field, bodies] : extra.value("text_conflicts", json::object()).items())
    std::cout << fmt::format("CONFLICT: {} has {} current versions (kept from a merge); newest shown above\n", field,
                             bodies.size());
  return 0;
}

// ---- stats ----

int kb_stats(const KbArgs& a) {
  kb::KnowledgeBase base(kb_path(a));
  const kb::KbSummary s = kb::summarize_kb(base);
  if (a.json) {
    std::cout << kb::to_json(s).dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("knowledge base {} (schema {}, {:.1f} KiB)\n\n", s.path, s.schema_version, s.bytes / 1024.0);
  std::cout << fmt::format("{:<8} {:>15} {:>15} {:>15} {:>15}\n", "BACKEND", "ACTIONS", "STATES", "EXPERIENCES",
                           "CONSTRAINTS");
  std::cout << fmt::format("{:<8} {:>15} {:>15} {:>15} {:>15}\n", "", "seed/learned", "seed/learned", "seed/learned",
                           "seed/learned");
  for (const auto& [b, kinds] : s.per_backend) {
    std::string row = fmt::format("{:<8}", b);
    for (const char* what : {"actions", "states", "experiences", "constraints"}) {
      const auto it = kinds.find(what);
      const kb::OriginCounts c = it == kinds.end() ? kb::OriginCounts{} : it->second;
      row += fmt::format(" {:>15}", fmt::format("{}/{}", c.seed, c.learned));
    }
    std::cout << row << "\n";
  }
  std::cout << "\n";
  for (const auto& [k, n] : s.totals) std::cout << fmt::format("{:<14} {}\n", k, n);
  return 0;
}

// ---- export / import / merge / diff ----

int kb_export(const KbArgs& a) {
  kb::KnowledgeBase base(kb_path(a));
  const auto records = kb::export_records(base);
  if (a.out.empty() || a.out == "-") {
    kb::write_jsonl(records, std::cout);
    return 0;
  }
  // Written beside the target and renamed into place: a failed export leaves no half file.
  const fs::path out = a.out, tmp = a.out + ".partial";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw UserError(fmt::format("cannot write {}", tmp.string()));
    kb::write_jsonl(records, f);
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw UserError(fmt::format("writing {} failed (disk full?); nothing was exported", out.string()));
    }
  }
  fs::rename(tmp, out);
  std::map<std::string, int> per_kind;
  for (const auto& r : records) per_kind[r.value("kind", "")]++;
  per_kind.erase("header");
  if (a.json) {
    std::cout << json{{"kb", base.file().string()},
                      {"out", out.string()},
                      {"records", records.size() - 1},
                      {"per_kind", per_kind}}
                     .dump(2)
              << "\n";
  } else {
    std::string per;
    for (const auto& [k, n] : per_kind) per += fmt::format("{}{} {}", per.empty() ? "" : ", ", n, k);
    std::cout << fmt::format("exported {} records from {} to {} ({})\n", records.size() - 1, base.file().string(),
                             out.string(), per);
  }
  return 0;
}

int kb_import(const KbArgs& a) {
  std::ifstream in(a.file, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read {}", a.file));
  const auto records = kb::read_jsonl(in, a.file);
  kb::OpenOptions as_given;
  as_given.seed = false;  // a KB made by an import holds what the file holds, seed rows included
  kb::KnowledgeBase base(kb_path(a), as_given);
  print_report(kb::import_records(base, records), a.file, a);
  return 0;
}

int kb_merge(const KbArgs& a) {
  kb::OpenOptions as_given;
  as_given.seed = false;  // likewise for a KB made by a merge
  kb::KnowledgeBase base(kb_path(a), as_given);
  if (fs::exists(a.file) && fs::exists(base.file()) && fs::equivalent(a.file, base.file()))
    throw UserError("merging a knowledge base into itself does nothing; name the other team's KB file");
  print_report(kb::merge_from(base, a.file), kb::redact_kb_location(a.file), a);
  return 0;
}

int kb_diff(const KbArgs& a) {
  kb::KnowledgeBase base(kb_path(a));
  kb::KnowledgeBase other = kb::KnowledgeBase::snapshot_of(a.file);
  const kb::DiffReport d = kb::diff_records(kb::export_records(base), kb::export_records(other));
  if (a.json) {
    std::cout << json{{"here", base.file().string()}, {"there", kb::redact_kb_location(a.file)},
                      {"identical", d.empty()},       {"only_here", d.only_here},
                      {"only_there", d.only_there},   {"different", d.different}}
                     .dump(2)
              << "\n";
    return 0;
  }
  if (d.empty()) {
    std::cout << fmt::format("{} and {} hold the same knowledge\n", base.file().string(),
                             kb::redact_kb_location(a.file));
    return 0;
  }
  const auto section = [&](const char* title, const std::map<std::string, std::vector<std::string>>& m) {
    if (m.empty()) return;
    std::cout << title << "\n";
    for (const auto& [kind, keys] : m) {
      std::cout << fmt::format("  {} {}:", keys.size(), kind);
      for (size_t i = 0; i < keys.size() && i < static_cast<size_t>(a.limit); ++i) std::cout << " " << keys[i];
      if (keys.size() > static_cast<size_t>(a.limit)) std::cout << " …";
      std::cout << "\n";
    }
  };
  section(fmt::format("only in {} (here):", base.file().string()).c_str(), d.only_here);
  section(fmt::format("only in {} (there):", kb::redact_kb_location(a.file)).c_str(), d.only_there);
  section("in both, different:", d.different);
  return 0;
}

}  // namespace

void add_kb(CLI::App& app, KbArgs& a) {
  auto* kb = app.add_subcommand("kb", "The knowledge base: init, query, show, stats, export, import, merge, diff");
  kb->require_subcommand(1);
  kb->footer(
      "Example:\n  mblast kb init && mblast kb query --target h100 --op-class softmax --bottleneck memory\n"
      "See docs/knowledge-base.md for the schema, retrieval and export format.");

  auto* init = sub(*kb, a, "init", "Create or upgrade a KB and load the seed knowledge (idempotent)",
                   "mblast kb init --kb team.sqlite");
  init->add_flag("--no-seed", a.no_seed, "Create or migrate only; load no seed knowledge");
  init->add_option("--seed-dir", a.seed_dir, "Load the seed from this folder of *.jsonl instead of the built-in one");

  auto* query = sub(*kb, a, "query", "Rank the actions for a state: what worked where",
                    "mblast kb query --target sm_90 --op-class softmax --bottleneck memory");
  query->add_option("-t,--target", a.target, "Target name (h100) or arch (sm_90, adreno-a7xx, rv64gcv-vlen256)");
  query->add_option("-b,--backend", a.backend, "cuda, opencl or rvv")->check(CLI::IsMember({"cuda", "opencl", "rvv"}));
  query->add_option("--op-class", a.op_class,
                    "elementwise, reduction, softmax, norm, scan, matmul, conv, attention, ...");
  query->add_option("--bottleneck", a.bottleneck, "memory, compute, latency or balanced")
      ->check(CLI::IsMember({"memory", "compute", "latency", "balanced"}));
  query->add_option("--text", a.text, "Words that must all appear in the action's text or its evidence");
  query->add_option("--intensity", a.intensity, "Arithmetic intensity, FLOPs per byte");
  query->add_option("--bandwidth-fraction", a.bandwidth_fraction, "Achieved / peak bandwidth (0..1)");
  query->add_option("--compute-fraction", a.compute_fraction, "Achieved / peak FLOP rate (0..1)");
  query->add_option("--utilisation", a.utilisation, "Occupancy or vector utilisation (0..1)");
  query->add_option("-n,--limit", a.limit, "Actions shown (0: all)")->capture_default_str();
  query->add_option("-k,--neighbours", a.k, "Nearest states used as evidence")->capture_default_str();
  query->add_option("--transfer-discount", a.transfer_discount, "Weight of evidence from other targets (0..1)")
      ->capture_default_str();
  query->add_flag("--include-excluded", a.include_excluded, "Also list actions a constraint excludes here");
  query
      ->add_option("--level", a.level,
                   "kernel (rank actions for a state) or model (optimize-model's decisions and outcomes)")
      ->capture_default_str()
      ->check(CLI::IsMember({"kernel", "model"}));

  auto* show =
      sub(*kb, a, "show", "Show one row (action, state, experience, candidate, constraint, ...) by id or prefix",
          "mblast kb show cuda.wgmma-async-mma");
  show->add_option("id", a.id, "Id, name, or the first characters (4 or more) of one")->required();

  sub(*kb, a, "stats", "Counts per backend of actions, states, experiences, constraints (seed and learned apart)",
      "mblast kb stats --json");

  auto* exp = sub(*kb, a, "export", "Write the whole KB as JSON Lines (format in docs/knowledge-base.md)",
                  "mblast kb export --out kb.jsonl");
  exp->add_option("-o,--out", a.out, "Output file (default: standard output)");

  auto* imp = sub(*kb, a, "import", "Add the rows of a JSON Lines export that this KB lacks (all or nothing)",
                  "mblast kb import team-b.jsonl");
  imp->add_option("file", a.file, "JSON Lines file written by `mblast kb export`")->required();

  auto* merge = sub(*kb, a, "merge", "Join another KB file into this one: no duplicates, statistics counted once",
                    "mblast kb merge --kb ours.sqlite theirs.sqlite");
  merge->add_option("other", a.file, "The other KB: a file or a postgresql:// URL (only read)")->required();

  auto* diff = sub(*kb, a, "diff", "What this KB has that another has not, and the reverse",
                   "mblast kb diff --kb ours.sqlite theirs.sqlite");
  diff->add_option("other", a.file, "The other KB: a file or a postgresql:// URL (only read)")->required();
  diff->add_option("-n,--limit", a.limit, "Keys listed per kind")->capture_default_str();
}

int run_kb(const KbArgs& a) {
  if (a.command == "init") return kb_init(a);
  if (a.command == "query") return kb_query(a);
  if (a.command == "show") return kb_show(a);
  if (a.command == "stats") return kb_stats(a);
  if (a.command == "export") return kb_export(a);
  if (a.command == "import") return kb_import(a);
  if (a.command == "merge") return kb_merge(a);
  if (a.command == "diff") return kb_diff(a);
  throw UserError("mblast kb needs a subcommand: init, query, show, stats, export, import, merge or diff");
}

}  // namespace mblast
