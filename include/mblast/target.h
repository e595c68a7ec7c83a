// Targets: declarative descriptions (targets/*.json, and the user's ~/.config/mblast/targets/
// which add targets or override built-in ones by name).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mblast {

struct RunnerAddress {
  std::string transport = "local";            // local | ssh | adb
  std::string host;                           // ssh: [user@]host
  int port = 0;                               // ssh port (0: default)
  std::string runner_path = "mblast-runner";  // the runner on the remote side
  std::vector<std::string> ssh_options;       // extra ssh arguments (-i key, -o ...)
};

struct Target {
  std::string name, backend, description;
  nlohmann::json spec;  // the whole description, sent to the runner
  RunnerAddress runner;
  std::filesystem::path source;  // the file it came from

  bool remote() const { return runner.transport != "local"; }
  // Why this target cannot be reached from here without asking the runner, or "".
  std::string unreachable_reason() const;
};

// A target file that could not be used: it is skipped, and the target it names (its "name",
// else its file name) is not offered, rather than silently falling back to a built-in of that
// name without the user's changes.
struct SkippedTargetFile {
  std::filesystem::path file;
  std::string name;    // the target it was meant to describe
  std::string reason;  // one line: "FILE: FIELD: expected TYPE, got ..."
};

struct TargetCatalog {
  std::vector<Target> targets;  // sorted by name
  std::vector<SkippedTargetFile> skipped;
};

// Every target file, built-in then the user's: each is read and its fields' types checked here,
// at load, so a wrong-typed field never reaches the runner. A broken file is skipped with its
// reason; it does not stop the others.
TargetCatalog load_target_catalog();
// The usable targets of load_target_catalog(), sorted by name (broken files skipped).
std::vector<Target> load_targets();
// Throws UserError: the broken file's reason when the target's file is broken; listing the known
// names (and any skipped files) when there is no such target.
Target find_target(const std::string& name);

// find_target, with its runner replaced by RUNNER_URL when that is not empty (--runner on every
// command that measures: eval, optimize, bench).
Target find_target(const std::string& name, const std::string& runner_url);

// Parses "ssh://[user@]host[:port]/path/to/mblast-runner" (or "local") into an address.
RunnerAddress parse_runner_url(const std::string& url);

// What to add to "target T is unavailable: ..." when a local runner found no such device: how to
// reach a machine that has one. "" for a remote target (its own reason says where it looked).
std::string unavailable_hint(const Target& t);

// The help text of every --runner option.
inline constexpr const char* kRunnerOptionHelp =
    "Runner address overriding the target's: local or ssh://[user@]host[:port]/path/mblast-runner "
    "(extra ssh arguments from $MBLAST_SSH_OPTIONS)";

}  // namespace mblast
