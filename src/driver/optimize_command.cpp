// `mblast optimize` and `mblast runs` (include/mblast/driver/optimize_command.h).
#include "mblast/driver/optimize_command.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <span>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "mblast/driver/import_command.h"
#include "mblast/driver/user_kernel.h"
#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/kb/database.h"
#include "mblast/kb/knowledge_base.h"
#include "mblast/llm/client.h"
#include "mblast/loop/builtin_actor.h"
#include "mblast/loop/llm_actor.h"
#include "mblast/loop/optimizer.h"
#include "mblast/loop/report.h"
#include "mblast/loop/run_store.h"
#include "mblast/paths.h"
#include "mblast/target.h"
#include "mblast/tensor.h"

namespace fs = std::filesystem;

namespace mblast {

namespace {

std::string extension_for(const std::string& backend) {
  if (backend == "cuda") return ".cuda.cu";
  if (backend == "rvv") return ".rvv.c";
  return ".opencl.cpp";
}

// A KernelBench file becomes a problem directory under the runs root, keyed by its content,
// so optimizing the same file twice imports it once.
fs::path import_on_the_fly(const fs::path& file, bool quiet) {
  std::string text = read_file(file);
  if (text.empty()) throw UserError(file.string() + " is empty");
  std::string key = content_hash_hex(std::string_view(text)).substr(0, 16);
  fs::path out = loop::runs_root() / "imports" / key;
  fs::path dir = out / file.stem();
  if (fs::exists(dir / "problem.json")) return dir;
  if (!quiet) std::fprintf(stderr, "mblast: importing %s (KernelBench format)\n", file.string().c_str());
  ImportArgs a;
  a.source = file.string();
  a.out = out.string();
  a.json = false;
  if (run_import(a) != 0 || !fs::exists(dir / "problem.json"))
    throw UserError(
        fmt::format("{} could not be imported as a KernelBench problem (see the line above)", file.string()));
  return dir;
}

// The starting candidate: --start, else the problem's naive candidate, else a suite candidate
// next to a KernelBench file (benchmarks/suite/candidates/<level>/<stem><ext>).
std::optional<fs::path> find_start(const OptimizeArgs& a, const Problem& p, const Target& t,
                                   const fs::path& kernelbench_file) {
  if (!a.start.empty()) {
    if (!fs::exists(a.start)) throw UserError("--start: no such file " + a.start);
    return fs::path(a.start);
  }
  std::string ext = extension_for(t.backend);
  if (fs::exists(p.dir / "candidates" / ("naive" + ext))) return p.dir / "candidates" / ("naive" + ext);
  if (!kernelbench_file.empty()) {
    fs::path level = kernelbench_file.parent_path();
    fs::path c = level.parent_path() / "candidates" / level.filename() / (kernelbench_file.stem().string() + ext);
    if (fs::exists(c)) return c;
  }
  return std::nullopt;
}

// With no start candidate, the builtin policy's first kernel is the start (speedups are counted
// from it): written under the runs root and taken out of the variants. The next few are written
// too, as fallback starts should the first not be correct on the target (they stay among the
// variants: one tried as a start is not proposed again).
fs::path take_first_variant_as_start(const Problem& problem, const std::string& ext,
                                     std::vector<policy::Variant>& variants, std::vector<fs::path>* fallbacks) {
  constexpr size_t kFallbacks = 3;
  auto file_of = [&](const policy::Variant& v, size_t i) {
    fs::path f =
        loop::runs_root() / "starts" / (problem.name + "." + v.family + (i ? "." + std::to_string(i) : "") + ext);
    write_file_atomically(f, v.source);
    return f;
  };
  fs::path f = file_of(variants.front(), 0);
  variants.erase(variants.begin());
  for (size_t i = 0; i < variants.size() && i < kFallbacks; ++i) fallbacks->push_back(file_of(variants[i], i + 1));
  return f;
}

int print_result(const nlohmann::json& r, bool json) {
  if (json) {
    std::cout << r.dump(2) << "\n";
  } else {
    if (r.value("failed", false)) std::cout << "FAILED: " << r.value("failure", "") << "\n";
    std::cout << fmt::format("{} on {}: {}\n", r.value("problem", ""), r.value("target", ""),
                             r.value("improved", false)
                                 ? fmt::format("{:.2f}x faster than the start", r.value("speedup", 1.0))
                                 : r.value("note", std::string("the start is kept")));
    std::cout << "candidate: " << r.value("candidate", "") << "\n";
    std::cout << "report:    " << r["report"].value("markdown", "") << "\n";
    std::cout << "run:       " << r.value("run", "") << " (" << r.value("evaluations", 0) << " evaluations, "
              << r.value("stop_reason", "") << ")\n";
  }
  // A failed run (its actor failed) is not a result CI may pass, whatever it kept.
  return r.value("correct", false) && !r.value("failed", false) ? 0 : 1;
}

// The spend of one run: its report's, else (a run that did not finish) its last step's.
nlohmann::json run_spend(const fs::path& root, const nlohmann::json& meta) {
  const fs::path dir = root / meta.value("id", "");
  auto report = nlohmann::json::parse(try_read_file(dir / "report.json").value_or(""), nullptr, false);
  if (report.is_object() && report.contains("result")) return report["result"].value("spend", nlohmann::json::object());
  nlohmann::json last = nlohmann::json::object();
  try {
    for (const auto& e : loop::RunStore::open(root, meta.value("id", "")).events())
      if (e.value("type", "") == "step" && e.contains("spend")) last = e["spend"];
  } catch (const UserError&) {
  }
  return last;
}

int runs_cost(const fs::path& root, bool as_json) {
  using nlohmann::json;
  const char* fields[] = {"calls", "cached", "input_tokens", "output_tokens", "usd"};
  auto add = [&](json& into, const json& from) {
    if (!into.is_object()) into = json::object();
    for (const char* f : fields) {
      if (std::string(f) == "usd")
        into[f] = into.value(f, 0.0) + from.value(f, 0.0);
      else
        into[f] = into.value(f, 0LL) + from.value(f, 0LL);
    }
  };
  json runs = json::array(), by_role = json::object(), by_model = json::object(), total = json::object();
  for (const auto& meta : loop::list_runs(root)) {
    const json spend = run_spend(root, meta);
    if (!spend.is_object() || spend.empty()) continue;  // the builtin policy spends nothing
    const std::string model = spend.value("model", meta.value("actor", std::string("?")));
    json row = {{"run", meta.value("id", "")},        {"problem", meta.value("problem", "")},
                {"target", meta.value("target", "")}, {"model", model},
                {"status", meta.value("status", "")}, {"by_role", spend.value("by_role", json::object())}};
    add(row, spend);
    add(total, spend);
    add(by_model[model], spend);
    for (const auto& [role, r] : row["by_role"].items()) add(by_role[role], r);
    runs.push_back(row);
  }
  if (as_json) {
    const json all = {{"runs", runs}, {"by_role", by_role}, {"by_model", by_model}, {"total", total}};
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  auto line = [](const std::string& what, const json& s) {
    return fmt::format("{:<44} {:>6} {:>7} {:>10} {:>10} {:>10.4f}\n", what, s.value("calls", 0LL),
                       s.value("cached", 0LL), s.value("input_tokens", 0LL), s.value("output_tokens", 0LL),
                       s.value("usd", 0.0));
  };
  std::cout << fmt::format("{:<44} {:>6} {:>7} {:>10} {:>10} {:>10}\n", "", "calls", "cached", "input", "output",
                           "USD");
  for (const auto& r : runs) {
    std::cout << line(fmt::format("{} {} on {}", r.value("run", ""), r.value("problem", ""), r.value("target", "")), r);
    for (const auto& [role, s] : r["by_role"].items()) std::cout << line("    " + role, s);
  }
  std::cout << "by role:\n";
  for (const auto& [role, s] : by_role.items()) std::cout << line("  " + role, s);
  std::cout << "by model:\n";
  for (const auto& [model, s] : by_model.items()) std::cout << line("  " + model, s);
  std::cout << line(fmt::format("total ({} runs with an LLM)", runs.size()), total);
  return 0;
}

}  // namespace

void add_optimize(CLI::App& app, OptimizeArgs& a) {
  auto* c = app.add_subcommand("optimize", "Make a kernel faster: propose, verify, time, learn (the AC-TGD loop)");
  c->footer(
      "Examples:\n"
      "  mblast optimize problems/softmax --target pocl-cpu\n"
      "  mblast optimize benchmarks/suite/level1/15_softmax.py --target h200 --llm anthropic:claude-sonnet-4-5\n"
      "  mblast optimize --resume 20261202-131500-3fa2c1\n"
      "  mblast optimize my_kernel.cu --target h200          (with my_kernel.spec.json beside it)\n"
      "INPUT is a problem directory, a KernelBench-format .py file (imported on the fly), or your\n"
      "own kernel in the candidate ABI with a small spec naming its tensors (docs/optimize.md).\n"
      "The start is --start, else the problem's candidates/naive.<backend> file, else the suite's\n"
      "candidate for a KernelBench file, else the builtin policy's first generated kernel.\n"
      "With no --llm and no LLM in $MBLAST_LLM or the config file, the builtin policy proposes.\n"
      "Every candidate is verified and timed by the runner; a wrong or slower one is never the\n"
      "result. Knowledge goes to the KB (--kb, else $MBLAST_KB, else ~/.local/share/mblast/kb.sqlite).");
  c->add_option("input", a.input,
                "Problem directory, KernelBench .py file, or your own kernel (.cu, .cpp, .c) with a spec");
  c->add_option("--spec", a.spec, "With your own kernel: its spec (default: <name>.spec.json beside it)");
  c->add_option("-t,--target", a.target, "Target name (see `mblast targets`)")->capture_default_str();
  c->add_option("--runner", a.runner, kRunnerOptionHelp);
  c->add_option("--start", a.start, "Starting candidate file (default: the problem's naive candidate)");
  c->add_option("--policy", a.policy, "auto (an LLM when one is configured, else builtin) | builtin | llm")
      ->check(CLI::IsMember({"auto", "builtin", "llm"}))
      ->capture_default_str();
  c->add_option("--llm", a.llm, "openai:MODEL | anthropic:MODEL | http://HOST:PORT/v1:MODEL (docs/llm.md)");
  c->add_option("--kb", a.kb, "Knowledge base file");
  c->add_option("--out", a.out, "Folder for the best candidate and the reports (default: the run's folder)");
  c->add_option("--max-evals", a.options.budget.max_evals, "Candidate evaluations at most")->capture_default_str();
  c->add_option("--max-steps", a.options.budget.max_steps, "Steps at most")->capture_default_str();
  c->add_option("--max-time", a.options.budget.max_wall_s, "Wall-time budget in seconds")->capture_default_str();
  c->add_option("--patience", a.options.budget.patience, "Stop after this many steps without a gain")
      ->capture_default_str();
  c->add_option("--sol", a.options.budget.sol_fraction, "Stop at this fraction of peak (timed targets)")
      ->capture_default_str();
  c->add_option("-k,--samples", a.options.samples, "Proposals per step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--beam", a.options.beam, "Best candidates kept to continue from")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--seed", a.options.seed, "Seed of the policy's tie-breaking and the LLM sampling")
      ->capture_default_str();
  c->add_option("--max-llm-calls", a.max_llm_calls, "LLM budget: calls (0: no limit)")->capture_default_str();
  c->add_option("--max-tokens", a.max_tokens, "LLM budget: input + output tokens (0: no limit)")->capture_default_str();
  c->add_option("--max-usd", a.max_usd, "LLM budget: US dollars (0: no limit)")->capture_default_str();
  c->add_flag("--replay", a.replay, "Answer every LLM request from the response cache; a miss is an error");
  c->add_flag("--no-cache", a.no_cache, "Neither read nor write the LLM response cache");
  c->add_option("--llm-timeout", a.llm_timeout, "Seconds per LLM request attempt (default: the config's, else 120)");
  c->add_flag("--show-prompt", a.show_prompt,
              "Measure the start and print the actor prompt the first step would send (no LLM is asked)");
  c->add_flag("--no-confirm", a.no_confirm, "Do not re-time the start and the best back to back at the end");
  c->add_option("--resume", a.resume, "Continue the run with this id (see `mblast runs list`)");
  c->add_flag("--json", a.json, "Print the final result as one JSON object");
  c->add_flag("-q,--quiet", a.quiet, "No progress on stderr: neither the live line nor the loop's notes");
  c->add_option("--repeats", a.options.eval.min_repeats, "Minimum timed runs per evaluation")->capture_default_str();
  c->add_option("--min-time", a.options.eval.min_seconds,
                "Seconds of timing loop per evaluation (timed runs and the cache flushes between them)")
      ->capture_default_str();
}

int run_optimize(const OptimizeArgs& args) {
  OptimizeArgs a = args;
  loop::OptimizeOptions o = a.options;
  o.kb_path = a.kb;
  o.out_dir = a.out;
  o.quiet = a.quiet;
  o.confirm = !a.no_confirm;
  o.resume = a.resume;
  fs::path kernelbench_file;
  std::string input = a.input, target_name = a.target, start = a.start;
  if (!a.resume.empty()) {
    loop::RunStore run = loop::RunStore::open(loop::runs_root(), a.resume);
    input = run.meta().value("problem_dir", "");
    target_name = run.meta().value("target", "");
    start = run.meta().value("start", "");
    if (a.policy == "auto" && run.meta().value("actor", "") == "builtin") a.policy = "builtin";
  }
  if (input.empty()) throw UserError("give a problem directory or KernelBench file (or --resume RUN)");
  fs::path in = input;
  if (!fs::exists(in)) throw UserError("no such problem directory or file: " + input);
  if (fs::is_regular_file(in) && in.extension() == ".py") {
    kernelbench_file = in;
    in = import_on_the_fly(in, a.json || a.quiet);
  } else if (fs::is_regular_file(in) && is_kernel_file(in)) {
    // A user's own kernel: its spec names the tensors, its outputs become the reference and it
    // is the start, so its time is the baseline every speedup is counted from.
    const fs::path spec = a.spec.empty() ? default_spec_for(in) : fs::path(a.spec);
    const Target t = find_target(target_name, a.runner);
    if (!a.json && !a.quiet)
      std::fprintf(stderr, "mblast: %s with %s: its outputs on %s become the reference\n", in.string().c_str(),
                   spec.string().c_str(), t.name.c_str());
    fs::path kernel = in;
    in = prepare_user_problem(kernel, spec, t, o.runs_dir.empty() ? loop::runs_root() : o.runs_dir, o.eval);
    if (start.empty()) start = kernel.string();
  } else if (fs::is_regular_file(in)) {
    throw UserError(input +
                    " is not a problem directory, a KernelBench .py file or a kernel (.cu, .cpp, .c) with a spec");
  } else if (!a.spec.empty()) {
    throw UserError("--spec goes with a kernel file, not a problem directory");
  }
  loop::OptimizeInput oi{load_problem(in), find_target(target_name, a.runner), {}, input, {}};
  a.start = start;

  // The actor: an LLM when one is configured (or asked for), else the builtin policy.
  std::unique_ptr<loop::Actor> actor;
  std::unique_ptr<loop::Critic> critic = std::make_unique<loop::RuleCritic>();
  policy::KernelPlan plan = policy::plan_kernel(oi.problem);
  auto start_file = find_start(a, oi.problem, oi.target, kernelbench_file);
  const std::string ext = extension_for(oi.target.backend);
  std::string start_source = start_file ? read_file(*start_file) : "";
  std::optional<llm::LlmConfig> llm_config;
  if (a.policy != "builtin" && !a.show_prompt) llm_config = llm::resolve_llm_config(a.llm, !a.replay);
  if (a.policy == "llm" && !llm_config)
    throw UserError(
        "--policy llm: no LLM is configured (give --llm SPEC, set MBLAST_LLM or the config file; docs/llm.md)");
  std::unique_ptr<llm::Client> client;
  std::string note;
  std::vector<policy::Variant> variants;
  if (llm_config) {
    llm::ClientOptions co;
    co.cache_mode = a.replay ? llm::CacheMode::replay : a.no_cache ? llm::CacheMode::off : llm::CacheMode::normal;
    if (a.max_llm_calls > 0) co.budget.max_calls = a.max_llm_calls;
    if (a.max_tokens > 0) co.budget.max_tokens = a.max_tokens;
    if (a.max_usd > 0) co.budget.max_usd = a.max_usd;
    if (a.llm_timeout > 0) co.timeout_s = a.llm_timeout;
    client = std::make_unique<llm::Client>(*llm_config, co);
    std::fprintf(stderr, "mblast: actor and critic: %s (from %s)\n", llm_config->spec.c_str(),
                 llm_config->source.c_str());
  } else if (!a.show_prompt) {
    std::fprintf(stderr,
                 "mblast: no LLM configured (--llm, $MBLAST_LLM or the config file): using the builtin policy\n");
  }
  // The builtin policy's variants: the proposals with no LLM, the start when there is none, and
  // an LLM's fallback when it only repeats itself.
  variants = loop::builtin_variants(oi.problem, oi.target, plan, start_source, ext, &note);
  if (!client || !start_file) std::fprintf(stderr, "mblast: %s\n", note.c_str());
  if (!start_file) {
    if (variants.empty())
      throw UserError(fmt::format("no starting candidate for {} on {}: give --start FILE (a correct {} candidate)",
                                  oi.problem.name, oi.target.name, oi.target.backend));
    std::fprintf(stderr, "mblast: no naive candidate: the start is the builtin policy's %s kernel\n",
                 variants.front().family.c_str());
    start_file = take_first_variant_as_start(oi.problem, ext, variants, &oi.fallback_starts);
  }
  oi.start = *start_file;
  if (a.show_prompt) {
    // The preview measures the start and retrieves from the KB like a run's first step, but what a
    // run writes (its run folder, the start's state and experience) goes to copies that are
    // removed: the user's KB and runs list stay as they were.
    ScratchDir scratch("mblast-show-prompt");
    const fs::path kb = o.kb_path.empty() ? kb::default_kb_path() : o.kb_path;
    const fs::path copy = scratch.path() / "kb.sqlite";
    if (kb::is_postgresql_url(kb.string()) || fs::exists(kb)) {
      kb::KnowledgeBase snap = kb::KnowledgeBase::snapshot_of(kb);
      snap.db().prepare("VACUUM INTO ?").bind(1, copy.string()).step();
    }
    o.kb_path = copy;  // a new one (with the seed) where the user has none yet
    o.runs_dir = scratch.path() / "runs";
    loop::PromptPreview preview;
    o.confirm = false;
    o.budget.sol_fraction = 1e9;  // the prompt is shown even for a start near the peak
    o.budget.max_evals = std::max(o.budget.max_evals, 1);
    loop::optimize(oi, preview, *critic, o);
    std::cout << preview.prompt();
    return preview.prompt().empty() ? 1 : 0;
  }
  if (client) {
    auto llm_actor = std::make_unique<loop::LlmActor>(*client);
    llm_actor->set_fallback(std::make_unique<loop::BuiltinActor>(std::move(variants), o.seed));
    actor = std::move(llm_actor);
    critic = std::make_unique<loop::LlmCritic>(*client);
  } else {
    actor = std::make_unique<loop::BuiltinActor>(std::move(variants), o.seed);
  }
  // The actor's knowledge update (an LLM's) runs inside the loop, before the reports are written.
  return print_result(loop::optimize(oi, *actor, *critic, o), a.json);
}

bool builtin_generates(const Problem& problem, const Target& target) {
  std::string note;
  return !loop::builtin_variants(problem, target, policy::plan_kernel(problem), "", extension_for(target.backend),
                                 &note)
              .empty();
}

std::string builtin_plan_note(const Problem& problem, const Target& target) {
  std::string note;
  const policy::KernelPlan plan = policy::plan_kernel(problem);
  loop::builtin_variants(problem, target, plan, "", extension_for(target.backend), &note);
  if (plan.kind == "unsupported") {
    // The lowering pipeline was tried last: its reason first, the generators' after it.
    std::string why;
    if (!policy::lowered_variant(problem, target, &why) && !why.empty())
      return "lowering pipeline: " + why + (plan.reason.empty() ? "" : "; generators: " + plan.reason);
    if (!plan.reason.empty()) return plan.reason;
  }
  return note.empty() ? "the builtin policy has no kernel for it" : note;
}

nlohmann::json optimize_with_builtin(const Problem& problem, const Target& target, const std::optional<fs::path>& start,
                                     const loop::OptimizeOptions& options) {
  const std::string ext = extension_for(target.backend);
  policy::KernelPlan plan = policy::plan_kernel(problem);
  std::string note;
  auto variants = loop::builtin_variants(problem, target, plan, start ? read_file(*start) : "", ext, &note);
  loop::OptimizeInput oi{problem, target, start.value_or(fs::path()), problem.dir.string(), {}};
  if (!start) {
    if (variants.empty())
      throw UserError(
          fmt::format("no starting candidate and no generator for {} on {} ({})", problem.name, target.name, note));
    oi.start = take_first_variant_as_start(problem, ext, variants, &oi.fallback_starts);
  }
  loop::BuiltinActor actor(std::move(variants), options.seed);
  loop::RuleCritic critic;
  return loop::optimize(oi, actor, critic, options);
}

nlohmann::json optimize_with_llm(const Problem& problem, const Target& target, const std::optional<fs::path>& start,
                                 const loop::OptimizeOptions& options, const std::string& llm_spec) {
  auto config = llm::resolve_llm_config(llm_spec, true);
  if (!config) throw UserError("--llm " + llm_spec + ": no LLM configured (docs/llm.md)");
  const std::string ext = extension_for(target.backend);
  std::string note;
  auto variants =
      loop::builtin_variants(problem, target, policy::plan_kernel(problem), start ? read_file(*start) : "", ext, &note);
  loop::OptimizeInput oi{problem, target, start.value_or(fs::path()), problem.dir.string(), {}};
  if (!start) {
    if (variants.empty())
      throw UserError(
          fmt::format("no starting candidate and no generator for {} on {} ({})", problem.name, target.name, note));
    oi.start = take_first_variant_as_start(problem, ext, variants, &oi.fallback_starts);
  }
  llm::Client client(*config, llm::ClientOptions{});
  loop::LlmActor actor(client, !options.quiet);
  actor.set_fallback(std::make_unique<loop::BuiltinActor>(std::move(variants), options.seed));
  loop::LlmCritic critic(client);
  return loop::optimize(oi, actor, critic, options);
}

void add_runs(CLI::App& app, RunsArgs& a) {
  auto* c = app.add_subcommand("runs", "List optimization runs, or show one's report");
  c->require_subcommand(1);
  auto* list = c->add_subcommand("list", "Every run, newest first");
  list->add_flag("--json", a.json, "As JSON");
  auto* show = c->add_subcommand("show", "A run's report (or its progress while it runs)");
  show->add_option("run", a.run, "Run id")->required();
  show->add_flag("--json", a.json, "As JSON (the report's JSON)");
  auto* cost = c->add_subcommand("cost",
                                 "LLM spend summed by run, role (actor, critic, analysis, repair, knowledge "
                                 "update) and model");
  cost->add_flag("--json", a.json, "As JSON");
  c->footer("Runs live in $MBLAST_RUNS_DIR, else $XDG_DATA_HOME/mblast/runs, else ~/.local/share/mblast/runs.");
}

int run_runs(CLI::App& app, const RunsArgs& a) {
  auto* runs = app.get_subcommand("runs");
  fs::path root = loop::runs_root();
  if (runs->got_subcommand("list")) {
    auto all = loop::list_runs(root);
    if (a.json) {
      std::cout << nlohmann::json(all).dump(2) << "\n";
      return 0;
    }
    if (all.empty()) std::cout << "no runs under " << root.string() << "\n";
    for (const auto& r : all) {
      const auto& res = r.value("result", nlohmann::json::object());
      std::string outcome =
          r.value("status", "") == "failed" ? "FAILED: " + r.value("failure", std::string("?"))
          : r.value("status", "") != "finished"
              ? r.value("status", "")
              : fmt::format("{:.2f}x, {} evals", res.value("speedup", 1.0), res.value("evaluations", 0));
      std::cout << fmt::format("{}  {:<24} {:<14} {:<10} {}\n", r.value("id", ""), r.value("problem", ""),
                               r.value("target", ""), r.value("actor", ""), outcome);
    }
    return 0;
  }
  if (runs->got_subcommand("cost")) return runs_cost(root, a.json);
  loop::RunStore run = loop::RunStore::open(root, a.run);
  if (loop::run_process_gone(run.meta())) loop::list_runs(root);  // marks it failed
  run = loop::RunStore::open(root, a.run);
  fs::path report = run.dir() / (a.json ? "report.json" : "report.md");
  if (fs::exists(report)) {
    std::cout << read_file(report);
    return 0;
  }
  // Not finished (running, or killed): the report so far, from its events.
  nlohmann::json partial = {{"run", run.id()},
                            {"problem", run.meta().value("problem", "")},
                            {"target", run.meta().value("target", "")},
                            {"policy", run.meta().value("actor", "")},
                            {"stop_reason", "not finished (" + run.meta().value("status", std::string("?")) + ")"}};
  if (run.meta().contains("failure")) partial["failure"] = run.meta()["failure"], partial["failed"] = true;
  auto events = run.events();
  if (a.json)
    std::cout << nlohmann::json({{"result", partial}, {"events", events}}).dump(2) << "\n";
  else
    std::cout << loop::report_markdown(partial, events);
  return 0;
}

}  // namespace mblast
