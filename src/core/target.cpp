#include "mblast/target.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/json_fields.h"
#include "mblast/paths.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// Every field a backend or the driver reads from a target, with its type (targets/*.json and
// the backends' READMEs). Null passes: in a user's file it deletes the built-in field (JSON
// merge patch). Fields not named here are passed to the runner unchecked.
void check_target_types(const json& j) {
  check_field_types(j,
                    {
                        {"name", kString},
                        {"backend", kString, "opencl, cuda or rvv"},
                        {"description", kString},
                        {"arch", kObject},
                        {"arch.vlen", kInteger},
                        {"arch.march", kString},
                        {"arch.zvfh", kBoolean},
                        {"arch.sm", kString | kInteger},
                        {"arch.gencode", kString},
                        {"arch.family", kString},
                        {"arch.generation", kString},
                        {"arch.subgroup_size", kInteger},
                        {"device", kObject},
                        {"device.platform_contains", kString},
                        {"device.device_contains", kString},
                        {"device.type", kString},
                        {"device.name_contains", kString},
                        {"device.compute_capability", kString},
                        {"device.cache_flush", kString},
                        {"build", kObject},
                        {"build.cxx", kString},
                        {"build.cc", kString},
                        {"build.nvcc", kString},
                        {"build.cxxflags", kArray, "of strings"},
                        {"build.cflags", kArray, "of strings"},
                        {"build.nvcc_flags", kArray, "of strings"},
                        {"build.cxxflags[]", kString},
                        {"build.cflags[]", kString},
                        {"build.nvcc_flags[]", kString},
                        {"execution", kObject},
                        {"execution.kind", kString, "qemu or native"},
                        {"execution.qemu", kString},
                        {"runner", kObject},
                        {"runner.transport", kString, "local, ssh or adb"},
                        {"runner.host", kString},
                        {"runner.port", kInteger},
                        {"runner.runner_path", kString},
                        {"runner.ssh_options", kArray, "of strings"},
                        {"runner.ssh_options[]", kString},
                        {"vendor_peaks", kObject},
                        {"vendor_peaks.bandwidth_bytes_per_s", kNumber},
                        {"vendor_peaks.fp32_flops_per_s", kNumber},
                        {"vendor_peaks.tf32_flops_per_s", kNumber},
                        {"vendor_peaks.bf16_flops_per_s", kNumber},
                        {"vendor_peaks.fp16_flops_per_s", kNumber},
                        {"vendor_peaks.source", kString},
                    },
                    /*null_is_absent=*/true);
}

// The types are checked already (check_target_types); what is left are the values.
RunnerAddress address_from(const json& j) {
  RunnerAddress a;
  if (!j.is_object()) return a;
  a.transport = string_field(j, "transport", "local", "runner");
  a.host = string_field(j, "host", "", "runner");
  a.port = static_cast<int>(integer_field(j, "port", 0, "runner", 0, 65535));
  a.runner_path = string_field(j, "runner_path", "mblast-runner", "runner");
  if (j.contains("ssh_options"))
    for (const auto& o : j["ssh_options"]) a.ssh_options.push_back(o.get<std::string>());
  if (a.transport != "local" && a.transport != "ssh" && a.transport != "adb")
    throw UserError("runner.transport: '" + a.transport + "' is not one of local, ssh, adb");
  return a;
}

// Reads one target file into `out` (a user's file extends the built-in of the same name).
void load_file(const fs::path& f, std::map<std::string, Target>& out, std::string& name) {
  const std::optional<std::string> text = try_read_file(f);
  if (!text) throw UserError("cannot read the file");
  json j = parse_json_text(*text);
  if (!j.is_object()) throw UserError("expected an object at the top level, got " + describe_json_value(j));
  if (j.contains("name") && j["name"].is_string()) name = j["name"].get<std::string>();
  check_target_types(j);
  if (name.empty()) throw UserError("name: expected a target name, got an empty string");
  if (auto it = out.find(name); it != out.end()) {
    json merged = it->second.spec;
    merged.merge_patch(j);
    j = std::move(merged);
  }
  Target t;
  t.name = name;
  t.backend = string_field(j, "backend", "");
  if (t.backend.empty()) throw UserError("backend: missing (expected a string: opencl, cuda or rvv)");
  t.description = string_field(j, "description", "");
  t.runner = address_from(j.value("runner", json::object()));
  if (j.contains("execution") && j["execution"].contains("kind")) {
    const std::string kind = j["execution"]["kind"].get<std::string>();
    if (kind != "qemu" && kind != "native")
      throw UserError("execution.kind: '" + kind + "' is not one of qemu, native");
  }
  j["name"] = name;
  t.spec = std::move(j);
  t.source = f;
  out[name] = std::move(t);
}

void load_dir(const fs::path& dir, std::map<std::string, Target>& out, std::vector<SkippedTargetFile>& skipped) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string name = f.stem().string();
    try {
      load_file(f, out, name);
    } catch (const UserError& e) {
      skipped.push_back({f, name, f.string() + ": " + e.what()});
    } catch (const json::exception& e) {
      // A check above missed a case: still one line naming the file, and a bug to fix here.
      skipped.push_back({f, name, f.string() + ": unexpected content (" + e.what() + ")"});
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

TargetCatalog load_target_catalog() {
  std::map<std::string, Target> m;
  TargetCatalog c;
  load_dir(data_dir() / "targets", m, c.skipped);
  load_dir(config_dir() / "targets", m, c.skipped);
  // The target a broken file names is not offered: a built-in of that name without the user's
  // changes (another host, other flags) would be measured as if it were theirs.
  for (const auto& s : c.skipped) m.erase(s.name);
  for (auto& [_, t] : m) c.targets.push_back(std::move(t));
  return c;
}

std::vector<Target> load_targets() { return load_target_catalog().targets; }

Target find_target(const std::string& name) {
  auto all = load_target_catalog();
  for (auto& t : all.targets)
    if (t.name == name) return t;
  for (const auto& s : all.skipped)
    if (s.name == name) throw UserError("target '" + name + "' is unusable: " + s.reason);
  std::string names;
  for (const auto& t : all.targets) names += (names.empty() ? "" : ", ") + t.name;
  std::string skipped;
  for (const auto& s : all.skipped) skipped += (skipped.empty() ? "" : ", ") + s.file.string();
  throw UserError("unknown target '" + name + "' (known: " + names + ")" +
                  (skipped.empty() ? "" : "; skipped broken target files (see `mblast targets`): " + skipped));
}

Target find_target(const std::string& name, const std::string& runner_url) {
  Target t = find_target(name);
  if (!runner_url.empty()) t.runner = parse_runner_url(runner_url);
  return t;
}

std::string unavailable_hint(const Target& t) {
  if (t.remote()) return "";
  return " (measured by the local runner here; to reach a machine that has it, give --runner "
         "ssh://[user@]host/path/mblast-runner or a \"runner\" in the target's file, " +
         (config_dir() / "targets" / (t.name + ".json")).string() + ")";
}

RunnerAddress parse_runner_url(const std::string& url) {
  RunnerAddress a;
  if (url.empty() || url == "local") return a;
  const std::string prefix = "ssh://";
  if (url.rfind(prefix, 0) != 0)
    throw UserError("runner '" + url + "': expected local or ssh://[user@]host[:port]/path");
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
