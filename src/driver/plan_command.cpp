#include "mblast/driver/plan_command.h"

#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/lower/lower.h"
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
  c->add_flag("--json", a.json,
              "Print a JSON array: per problem its plan (kind, stages, summary) and, with --target, its variants");
  c->add_option("--write-variants", a.write_dir,
                "With --target: write each generated variant's source to DIR/<problem>/<n>_<family><ext>, to read or build by hand");
  c->add_flag("--pipeline", a.pipeline,
              "With --target: only the lowering pipeline's candidate (family lower.generic), whether or not a generator recognises the problem");
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
      // The lowering pipeline (src/lower): its kernels, or the op it cannot lower with its node.
      const auto lowered = lower::lower_problem(p);
      std::string lower_text;
      if (lowered.program) {
        const auto sched = lower::schedule(*lowered.program);
        nlohmann::json ks = nlohmann::json::array();
        for (const auto& k : sched.kernels) ks.push_back(k.name);
        e["lowering"] = {{"ok", true}, {"kernels", ks}, {"summary", sched.summary()}};
        lower_text = fmt::format("\n  lowering pipeline: {} kernel(s)\n{}", sched.kernels.size(), sched.summary());
        if (lower_text.ends_with('\n')) lower_text.pop_back();
      } else {
        e["lowering"] = {{"ok", false}, {"reason", lowered.error}};
        lower_text = "\n  lowering pipeline: " + lowered.error;
      }
      if (plan.kind == "unsupported" || a.pipeline) e["lowering_text"] = lower_text;
      if (target) {
        std::vector<policy::Variant> variants;
        if (a.pipeline) {
          std::string why;
          if (auto v = policy::lowered_variant(p, *target, &why)) variants.push_back(std::move(*v));
          else e["pipeline_reason"] = why;
        } else {
          variants = policy::generate_variants(plan, p, *target);
        }
        e["variants"] = variants.size();
        // What each variant applies, so that a script can pick one by action (the scripted
        // engineer of benchmarks/learning.py --llm asks for "the variant of action X").
        nlohmann::json list = nlohmann::json::array();
        for (const auto& v : variants)
          list.push_back({{"family", v.family}, {"actions", v.actions}, {"params", v.params},
                          {"description", v.description}});
        if (!a.write_dir.empty()) {
          const std::filesystem::path d = std::filesystem::path(a.write_dir) / p.name;
          std::filesystem::create_directories(d);
          for (size_t i = 0; i < variants.size(); ++i) {
            const auto file = d / fmt::format("{}_{}{}", i, variants[i].family, variants[i].extension);
            write_file_atomically(file, variants[i].source);
            list[i]["file"] = file.string();
          }
          e["written_to"] = d.string();
        }
        if (a.json) e["variant_list"] = std::move(list);
      }
    } catch (const UserError& err) {
      e["kind"] = "error";
      e["summary"] = err.what();
    }
    if (!a.json) {
      std::string count = e.contains("variants") ? fmt::format(" [{} variants for {}]", e["variants"].get<size_t>(), a.target) : "";
      std::cout << fmt::format("{}: {}: {}{}{}\n", e.value("name", dir), e["kind"].get<std::string>(), e["summary"].get<std::string>(), count,
                               e.value("lowering_text", std::string()));
    }
    e.erase("lowering_text");
    all.push_back(std::move(e));
  }
  if (a.json) std::cout << all.dump(2) << "\n";
  return 0;
}

}  // namespace mblast
