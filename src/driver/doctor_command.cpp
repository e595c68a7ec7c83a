#include "mblast/driver/doctor_command.h"

#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "mblast/measure/runner_client.h"
#include "mblast/paths.h"
#include "mblast/problem.h"
#include "mblast/version.h"

namespace mblast {

using nlohmann::json;

void add_doctor(CLI::App& app, DoctorArgs& a) {
  auto* c = app.add_subcommand("doctor", "Show the drivers, toolchains and libraries mblast found");
  c->footer("Example:\n  mblast doctor\n  mblast doctor --runner ssh://me@gpu-box/opt/mblast/bin/mblast-runner --json");
  c->add_flag("--json", a.json, "Print one JSON object");
  c->add_option("--runner", a.runner, "Ask this runner instead of the local one");
}

namespace {
void print_value(const std::string& indent, const std::string& key, const json& v) {
  if (v.is_object()) {
    std::cout << indent << key << ":\n";
    for (auto it = v.begin(); it != v.end(); ++it) print_value(indent + "  ", it.key(), *it);
  } else if (v.is_array()) {
    std::cout << indent << key << ":" << (v.empty() ? " (none)" : "") << "\n";
    for (const auto& e : v)
      std::cout << indent << "  - "
                << (e.is_object() ? e.value("name", e.dump()) + "  " + e.value("version", "") : e.dump()) << "\n";
  } else {
    std::cout << indent << key << ": " << (v.is_string() ? v.get<std::string>() : v.dump()) << "\n";
  }
}
}  // namespace

int run_doctor(const DoctorArgs& a) {
  json out = {{"mblast", kMblastVersion},
              {"data_dir", data_dir().string()},
              {"config_dir", config_dir().string()},
              {"python_for_tools", python_for_tools()}};
  RunnerAddress addr = a.runner.empty() ? RunnerAddress{} : parse_runner_url(a.runner);
  try {
    RunnerClient client(addr);
    client.send({{"op", "doctor"}});
    auto m = client.receive(120);
    m.header.erase("payload_bytes");
    m.header.erase("stage");
    out["runner"] = m.header;
    out["runner"]["address"] = client.describe();
  } catch (const Error& e) {
    out["runner"] = {{"error", e.what()}};
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    for (auto it = out.begin(); it != out.end(); ++it) print_value("", it.key(), *it);
  }
  return out["runner"].contains("error") ? 1 : 0;
}

}  // namespace mblast
