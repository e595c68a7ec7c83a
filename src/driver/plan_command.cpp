#include "mblast/driver/plan_command.h"

#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/policy/kernel_plan.h"
#include "mblast/policy/variants.h"
#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast {

void add_plan(CLI::App& app, PlanArgs& a) {
  auto* c = app.add_subcommand("plan", "Show what the builtin policy recognises in problems (and what it generates for a target)");
  c->footer("Example:\n  mblast plan problems/softmax imported/level2/* --target h200\n"
            "A problem the generators cannot handle shows the reason; nothing is built or run.");
  c->add_option("problems", a.problems, "Problem directories")->required();
  c->add_option("-t,--target", a.target, "Also count the candidates the generators make for this target");
  c->add_flag("--json", a.json, "Print a JSON array: per problem its plan (kind, stages, summary) and variant count");
  c->add_option("--write-variants", a.write_dir,
                "With --target: write each generated variant's source to DIR/<problem>/<n>_<family><ext>, to read or build by hand");
}

int run_plan(const PlanArgs& a) {
  std::optional<Target> target;
  if (!a.target.empty()) target = find_target(a.target);
  if (!a.write_dir.empty() && !target) throw UserError("--write-variants needs --target (the variants are per backend)");
  nlohmann::json all = nlohmann::json::array();
  for (const auto& dir : a.problems) {
    nlohmann::json e = {{"problem", dir}};
    try {
      Problem p = load_problem(dir);
      policy::KernelPlan plan = policy::plan_kernel(p);
      e["name"] = p.name;
      e["kind"] = plan.kind;
      e["summary"] = plan.kind == "unsupported" ? plan.reason : plan.summary();
      if (plan.kind != "unsupported") e["plan"] = plan.to_json();
      if (target) {
        const auto variants = policy::generate_variants(plan, p, *target);
        e["variants"] = variants.size();
        if (!a.write_dir.empty()) {
          const std::filesystem::path d = std::filesystem::path(a.write_dir) / p.name;
          std::filesystem::create_directories(d);
          for (size_t i = 0; i < variants.size(); ++i)
            write_file_atomically(d / fmt::format("{}_{}{}", i, variants[i].family, variants[i].extension), variants[i].source);
          e["written_to"] = d.string();
        }
      }
    } catch (const UserError& err) {
      e["kind"] = "error";
      e["summary"] = err.what();
    }
    if (!a.json) {
      std::string count = e.contains("variants") ? fmt::format(" [{} variants for {}]", e["variants"].get<size_t>(), a.target) : "";
      std::cout << fmt::format("{}: {}: {}{}\n", e.value("name", dir), e["kind"].get<std::string>(), e["summary"].get<std::string>(), count);
    }
    all.push_back(std::move(e));
  }
  if (a.json) std::cout << all.dump(2) << "\n";
  return 0;
}

}  // namespace mblast
