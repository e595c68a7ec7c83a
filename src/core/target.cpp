#include "mblast/target.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "mblast/error.h"
#include "mblast/paths.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
RunnerAddress address_from(const json& j) {
  RunnerAddress a;
  if (!j.is_object()) return a;
  a.transport = j.value("transport", "local");
  a.host = j.value("host", "");
  a.port = j.value("port", 0);
  a.runner_path = j.value("runner_path", "mblast-runner");
  if (j.contains("ssh_options"))
    for (const auto& o : j["ssh_options"]) a.ssh_options.push_back(o.get<std::string>());
  if (a.transport != "local" && a.transport != "ssh" && a.transport != "adb")
    throw UserError("runner transport '" + a.transport + "' is not one of local, ssh, adb");
  return a;
}

void load_dir(const fs::path& dir, std::map<std::string, Target>& out) {
  if (!fs::is_directory(dir)) return;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw UserError(f.string() + ": not a JSON object");
    try {
      const std::string name = j.value("name", f.stem().string());
      auto it = out.find(name);
      if (it != out.end()) {
        // A user file extends the built-in description of the same name.
        json merged = it->second.spec;
        merged.merge_patch(j);
        j = merged;
      }
      Target t;
      t.name = name;
      t.backend = j.value("backend", "");
      if (t.backend.empty()) throw UserError("no 'backend'");
      t.description = j.value("description", "");
      t.runner = address_from(j.value("runner", json::object()));
      j["name"] = name;
      t.spec = j;
      t.source = f;
      out[name] = std::move(t);
    } catch (const UserError& e) {
      throw UserError(f.string() + ": " + e.what());
    } catch (const json::exception& e) {
      throw UserError(f.string() + ": " + e.what());
    }
  }
}
}  // namespace

std::string Target::unreachable_reason() const {
  if (runner.transport == "local") return "";
  if (runner.host.empty())
    return "remote target: no runner host configured (add \"runner\": {\"transport\": \"" + runner.transport +
           "\", \"host\": ...} to " + (config_dir() / "targets" / (name + ".json")).string() + ")";
  if (runner.transport == "adb") return "the adb transport is not implemented yet; use ssh to a runner on the device";
  return "";
}

std::vector<Target> load_targets() {
  std::map<std::string, Target> m;
  load_dir(data_dir() / "targets", m);
  load_dir(config_dir() / "targets", m);
  std::vector<Target> v;
  for (auto& [_, t] : m) v.push_back(std::move(t));
  return v;
}

Target find_target(const std::string& name) {
  auto all = load_targets();
  for (auto& t : all)
    if (t.name == name) return t;
  std::string names;
  for (const auto& t : all) names += (names.empty() ? "" : ", ") + t.name;
  throw UserError("unknown target '" + name + "' (known: " + names + ")");
}

RunnerAddress parse_runner_url(const std::string& url) {
  RunnerAddress a;
  if (url.empty() || url == "local") return a;
  const std::string prefix = "ssh://";
  if (url.rfind(prefix, 0) != 0) throw UserError("runner '" + url + "': expected local or ssh://[user@]host[:port]/path");
  std::string rest = url.substr(prefix.size());
  auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  a.runner_path = slash == std::string::npos ? "mblast-runner" : rest.substr(slash);
  auto colon = hostport.rfind(':');
  if (colon != std::string::npos) {
    try {
      a.port = std::stoi(hostport.substr(colon + 1));
    } catch (...) {
      throw UserError("runner '" + url + "': bad port");
    }
    hostport = hostport.substr(0, colon);
  }
  if (hostport.empty()) throw UserError("runner '" + url + "': no host");
  a.transport = "ssh";
  a.host = hostport;
  return a;
}

}  // namespace mblast
