#include "mblast/driver/plan_command.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "mblast/driver/import_command.h"
#include "mblast/driver/kernelbench_tool.h"
#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/lower/lower.h"
#include "mblast/policy/kernel_plan.h"
#include "mblast/policy/variants.h"
#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast {
namespace {

// Traces a KernelBench-format file into a problem under TMP at a size that fits MAX_BYTES, with one
// seed and one init (the plan needs the graph and the shapes, not the reference data of a bench).
// Returns the problem folder; throws UserError with the importer's one-line reason.
std::filesystem::path trace_python_file(const std::string& file, const PlanArgs& a, const std::filesystem::path& tmp) {
  std::vector<std::string> args = {"import",   std::filesystem::absolute(file).string(),
                                   "--out",    tmp.string(),
                                   "--seeds",  "1",
                                   "--inits",  "1",
                                   "--device", "cpu"};
  if (!a.max_bytes.empty() && a.max_bytes != "0")
    args.insert(args.end(), {"--max-bytes", std::to_string(parse_byte_size(a.max_bytes, "--max-bytes"))});
  const auto r = run_kernelbench_tool(kernelbench_python(a.python), args, a.timeout_s);
  if (!r.ok()) {
    // The helper names the file by its absolute path; the line names it as the user did.
    std::string why = kernelbench_tool_failure(r);
    const std::string abs = std::filesystem::absolute(file).string() + ": ";
    if (why.rfind(abs, 0) == 0) why = why.substr(abs.size());
    throw UserError(file + ": " + why);
  }
  const auto dir = tmp / std::filesystem::path(file).stem();
  if (!std::filesystem::exists(dir / "problem.json")) throw UserError(file + ": the importer wrote no problem");
  return dir;
}

}  // namespace

void add_plan(CLI::App& app, PlanArgs& a) {
  auto* c = app.add_subcommand(
      "plan", "Show what the builtin policy recognises in problems (and what it generates for a target)");
  c->footer(
      "Example:\n  mblast plan problems/softmax imported/level2/* --target h200\n"
      "  mblast plan my_module.py --target pocl-cpu   (a KernelBench-format file: will mblast handle it?)\n"
      "A problem the generators cannot handle shows the reason; nothing is built or run.");
  c->add_option("problems", a.problems, "Problem directories, or KernelBench-format .py files (Model, get_inputs)")
      ->required();
  c->add_option("--max-bytes", a.max_bytes,
                "A .py file is traced with its size constants scaled down to fit N bytes (one seed, one init), in a "
                "temporary folder; 0 keeps the file's sizes")
      ->capture_default_str();
  c->add_option("--python", a.python,
                "Python interpreter with torch, for .py files (default: $MBLAST_PYTHON, else mblast's .venv)");
  c->add_option("--timeout", a.timeout_s, "Seconds allowed to trace one .py file")->capture_default_str();
  c->add_option("-t,--target", a.target, "Also count the candidates the generators make for this target");
  c->add_flag("--json", a.json,
              "Print a JSON array: per problem its plan (kind, stages, summary) and, with --target, its variants");
  c->add_option("--write-variants", a.write_dir,
                "With --target: write each generated variant's source to DIR/<problem>/<n>_<family><ext>, to read or "
                "build by hand");
  c->add_flag("--pipeline", a.pipeline,
              "With --target: only the lowering pipeline's candidate (family lower.generic), whether or not a "
              "generator recognises the problem");
}

int run_plan(const PlanArgs& a) {
  std::optional<Target> target;
  if (!a.target.empty()) target = find_target(a.target);
  if (!a.write_dir.empty() && !target)
    throw UserError("--write-variants needs --target (the variants are per backend)");
  nlohmann::json all = nlohmann::json::array();
  for (const auto& dir : a.problems) {
    nlohmann::json e = {{"problem", dir}};
    try {
      std::optional<ScratchDir> traced;
      std::string problem_dir = dir;
      if (std::filesystem::path(dir).extension() == ".py") {
        if (!std::filesystem::is_regular_file(dir)) throw UserError(dir + ": no such file");
        traced.emplace("mblast-plan");
        problem_dir = trace_python_file(dir, a, traced->path()).string();
        e["traced"] = {{"max_bytes", a.max_bytes}, {"seeds", 1}, {"inits", 1}};
      }
      Problem p = load_problem(problem_dir);
      if (traced) {
        // The scale the file was traced at: the plan's shapes are those, not the file's.
        const auto pj =
            nlohmann::json::parse(read_file(std::filesystem::path(problem_dir) / "problem.json"), nullptr, false);
        if (pj.is_object() && pj.contains("scale")) e["traced"]["scale"] = pj["scale"];
      }
      policy::KernelPlan plan = policy::plan_kernel(p);
      e["name"] = p.name;
      e["kind"] = plan.kind;
      e["summary"] = plan.kind == "unsupported" ? plan.reason : plan.summary();
      if (plan.kind != "unsupported") e["plan"] = plan.to_json();
      // The lowering pipeline (src/lower): its kernels, or the op it cannot lower with its node.
      auto lowered = lower::lower_problem(p);
      std::string lower_text;
      std::optional<lower::Schedule> scheduled;
      if (lowered.program) {
        try {
          scheduled = lower::schedule(*lowered.program);
        } catch (const std::exception& ex) {  // refused by the scheduler (too many kernels)
          lowered.program.reset();
          lowered.error = ex.what();
        }
      }
      if (lowered.program && scheduled) {
        const auto& sched = *scheduled;
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
          if (auto v = policy::lowered_variant(p, *target, &why))
            variants.push_back(std::move(*v));
          else
            e["pipeline_reason"] = why;
        } else {
          variants = policy::generate_variants(plan, p, *target);
        }
        e["variants"] = variants.size();
        // What each variant applies, so that a script can pick one by action (the scripted
        // engineer of benchmarks/learning.py --llm asks for "the variant of action X").
        nlohmann::json list = nlohmann::json::array();
        for (const auto& v : variants)
          list.push_back(
              {{"family", v.family}, {"actions", v.actions}, {"params", v.params}, {"description", v.description}});
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
      std::string traced_text;
      if (e.contains("traced")) {
        std::string scaled;
        const nlohmann::json constants =
            e["traced"].value("scale", nlohmann::json::object()).value("constants", nlohmann::json::object());
        for (const auto& [k, v] : constants.items())
          if (v.is_array() && v.size() == 2)
            scaled += fmt::format("{}{} {} -> {}", scaled.empty() ? "" : ", ", k, v[0].dump(), v[1].dump());
        traced_text = fmt::format("\n  traced at --max-bytes {}{}", a.max_bytes,
                                  scaled.empty() ? " (the file's own sizes)" : ": " + scaled);
      }
      std::string count =
          e.contains("variants") ? fmt::format(" [{} variants for {}]", e["variants"].get<size_t>(), a.target) : "";
      std::cout << fmt::format("{}: {}: {}{}{}\n", e.value("name", dir), e["kind"].get<std::string>(),
                               e["summary"].get<std::string>(), count,
                               e.value("lowering_text", std::string()) + traced_text);
    }
    e.erase("lowering_text");
    all.push_back(std::move(e));
  }
  if (a.json) std::cout << all.dump(2) << "\n";
  return 0;
}

}  // namespace mblast
