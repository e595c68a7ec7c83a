#include "mblast/driver/targets_command.h"

#include <iostream>
#include <set>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "mblast/error.h"
#include "mblast/measure/runner_client.h"
#include "mblast/target.h"

namespace mblast {

using nlohmann::json;

void add_targets(CLI::App& app, TargetsArgs& a) {
  auto* c = app.add_subcommand("targets", "List targets and whether each is available here");
  c->footer(
      "Example:\n  mblast targets --json\nEach local target is probed through the runner (a device is opened); "
      "a remote one is available when its runner host is configured.");
  c->add_flag("--json", a.json, "Print a JSON array");
  c->add_flag("--no-probe", a.no_probe, "Do not open devices; list descriptions only");
  c->add_option("--measure-peaks", a.measure_peaks,
                "Measure TARGET's peak bandwidth and FP32 rate again and keep them (on a quiet machine: peaks are "
                "measured once and cached, and one measured while other work ran is too low)")
      ->option_text("TARGET");
}

json measure_target_peaks(const Target& t) {
  if (std::string why = t.unreachable_reason(); !why.empty()) throw UserError(t.name + ": " + why);
  RunnerClient client(t.runner);
  client.send({{"op", "peaks"}, {"target", t.spec}, {"refresh", true}});
  auto m = client.receive(330);
  if (m.header.value("stage", "") != "peaks")
    throw UserError(fmt::format("{}: peaks not measured: {}", t.name,
                                m.header.value("reason", std::string("the runner said nothing"))));
  return m.header;
}

namespace {

int print_peaks(const TargetsArgs& a) {
  const Target t = find_target(a.measure_peaks);
  json p = measure_target_peaks(t);
  if (a.json) {
    std::cout << p.dump(2) << "\n";
    return 0;
  }
  const double bw = p.value("bandwidth_bytes_per_s", 0.0), fl = p.value("fp32_flops_per_s", 0.0);
  if (bw > 0 || fl > 0)
    std::cout << fmt::format("{}: {:.1f} GB/s, {:.1f} GFLOP/s fp32, kept for later evaluations\n", t.name, bw * 1e-9,
                             fl * 1e-9);
  else
    std::cout << fmt::format("{}: no speed-of-light figures\n", t.name);
  std::cout << "method: " << p.value("method", std::string()) << "\n";
  return 0;
}

}  // namespace

int run_targets(const TargetsArgs& a) {
  if (!a.measure_peaks.empty()) return print_peaks(a);
  // A broken target file is a row of its own (its reason names the file and the field); the
  // other targets are listed and probed as usual.
  const TargetCatalog catalog = load_target_catalog();
  const auto& targets = catalog.targets;
  std::unique_ptr<RunnerClient> local;
  std::string local_error;
  std::set<std::string> local_backends;
  json out = json::array();
  for (const auto& t : targets) {
    json e = {
        {"name", t.name},     {"backend", t.backend}, {"description", t.description}, {"transport", t.runner.transport},
        {"available", false}, {"reason", nullptr}};
    if (t.spec.contains("arch")) e["arch"] = t.spec["arch"];
    std::string why = t.unreachable_reason();
    if (!why.empty()) {
      e["reason"] = why;
    } else if (a.no_probe) {
      e["available"] = nullptr;
      e["reason"] = "not probed (--no-probe)";
    } else if (t.remote()) {
      e["available"] = true;  // reachable on paper; `mblast eval` connects
      e["reason"] = nullptr;
    } else {
      if (!local && local_error.empty()) {
        try {
          local = std::make_unique<RunnerClient>(RunnerAddress{});
          for (const auto& b : local->hello().value("backends", json::array()))
            local_backends.insert(b.get<std::string>());
        } catch (const std::exception& ex) {
          local_error = ex.what();
        }
      }
      if (!local) {
        e["reason"] = local_error;
      } else if (!local_backends.count(t.backend)) {
        e["reason"] = "backend '" + t.backend + "' is not compiled into this mblast-runner";
      } else {
        local->send({{"op", "probe"}, {"target", t.spec}});
        auto m = local->receive(120);
        if (m.header.value("stage", "") == "probe") {
          e["available"] = true;
          e["device"] = m.header.value("device", json::object());
          if (auto w = m.header["device"].value("warning", ""); !w.empty()) e["warning"] = w;
        } else {
          e["reason"] = m.header.value("reason", "probe failed");
        }
      }
    }
    out.push_back(e);
  }
  for (const auto& s : catalog.skipped)
    out.push_back({{"name", s.name},
                   {"backend", nullptr},
                   {"description", nullptr},
                   {"transport", nullptr},
                   {"available", false},
                   {"reason", s.reason},
                   {"file", s.file.string()},
                   {"broken_file", true}});
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<16} {:<8} {:<10} {}\n", "TARGET", "BACKEND", "AVAILABLE", "DEVICE / REASON");
  for (const auto& e : out) {
    std::string avail = e["available"].is_null() ? "?" : e["available"].get<bool>() ? "yes" : "no";
    std::string detail =
        e["available"].is_boolean() && e["available"].get<bool>()
            ? (e.contains("device") ? e["device"].value("name", "") : std::string("remote runner configured"))
        : e["reason"].is_string() ? e["reason"].get<std::string>()
                                  : "";
    if (e.contains("warning")) detail += "  [warning: " + e["warning"].get<std::string>() + "]";
    std::cout << fmt::format("{:<16} {:<8} {:<10} {}\n", e["name"].get<std::string>(),
                             e["backend"].is_string() ? e["backend"].get<std::string>() : "?", avail, detail);
  }
  return 0;
}

}  // namespace mblast
