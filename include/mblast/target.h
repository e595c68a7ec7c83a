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
  std::string transport = "local";  // local | ssh | adb
  std::string host;                 // ssh: [user@]host
  int port = 0;                     // ssh port (0: default)
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

// All targets, built-in first, sorted by name. Throws UserError for a malformed file.
std::vector<Target> load_targets();
// Throws UserError listing the known names when there is no such target.
Target find_target(const std::string& name);

// Parses "ssh://[user@]host[:port]/path/to/mblast-runner" (or "local") into an address.
RunnerAddress parse_runner_url(const std::string& url);

}  // namespace mblast
