// The files of one optimization run, so it can be shown, reported and resumed:
//   <runs root>/<id>/run.json         what was asked (problem, target, actor, options) and the status
//   <runs root>/<id>/events.jsonl     one line per evaluated candidate, step and stop, appended
//   <runs root>/<id>/candidates/      every candidate's source, named by its content hash
//   <runs root>/<id>/report.md|json   the report (rewritten at the end of the run)
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mblast::loop {

class RunStore {
 public:
  // A new run folder with a fresh id (UTC time + random suffix) and run.json.
  static RunStore create(const std::filesystem::path& root, const nlohmann::json& meta);
  // An existing run; UserError naming the id and the root when there is none.
  static RunStore open(const std::filesystem::path& root, const std::string& id);

  const std::string& id() const { return id_; }
  const std::filesystem::path& dir() const { return dir_; }
  nlohmann::json& meta() { return meta_; }
  void save_meta();                            // atomic: temp file + rename
  void append_event(const nlohmann::json& e);  // one line, flushed and fsynced
  // The events written so far; a torn last line (a kill mid-write) is ignored.
  std::vector<nlohmann::json> events() const;
  std::filesystem::path save_candidate(const std::string& id, const std::string& extension, const std::string& source);
  std::filesystem::path candidate_path(const std::string& id, const std::string& extension) const;

 private:
  RunStore(std::filesystem::path dir, std::string id, nlohmann::json meta);
  std::filesystem::path dir_;
  std::string id_;
  nlohmann::json meta_;
};

// This machine's host name (run.json records it with the pid of the run's process).
std::string this_host();
// A run marked running whose process, on this host, no longer exists.
bool run_process_gone(const nlohmann::json& meta);

// run.json of every run under root, newest first (unreadable folders are skipped). A run whose
// process is gone while it was running is marked failed (in the file too).
std::vector<nlohmann::json> list_runs(const std::filesystem::path& root);

}  // namespace mblast::loop
