// The mblast command line. main() only calls cli_main(), so tests link the whole program.
#include "mblast/driver/cli.h"

#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "mblast/driver/baseline_command.h"
#include "mblast/driver/bench_command.h"
#include "mblast/driver/doctor_command.h"
#include "mblast/driver/export_command.h"
#include "mblast/driver/import_command.h"
#include "mblast/driver/kb_command.h"
#include "mblast/driver/model_command.h"
#include "mblast/driver/optimize_command.h"
#include "mblast/driver/plan_command.h"
#include "mblast/driver/progress_log.h"
#include "mblast/driver/report_command.h"
#include "mblast/driver/targets_command.h"
#include "mblast/error.h"
#include "mblast/measure/evaluate.h"
#include "mblast/paths.h"
#include "mblast/target.h"
#include "mblast/version.h"

namespace mblast {

namespace {

struct EvalArgs {
  std::string problem, candidate, target = "pocl-cpu", runner;
  bool json = false, no_timing = false;
  EvalOptions opt;
};

void add_eval(CLI::App& app, EvalArgs& a) {
  auto* c = app.add_subcommand("eval", "Verify a candidate on a target, then time it");
  c->footer(
      "Example:\n"
      "  mblast eval problems/softmax problems/softmax/candidates/naive.opencl.cpp --target pocl-cpu\n"
      "The candidate is checked on every seed and parameter init, twice, with poisoned outputs;\n"
      "only a correct candidate is timed. Exit status: 0 correct, 1 rejected or infrastructure\n"
      "error, 2 bad input.");
  c->add_option("problem", a.problem, "Problem directory (holds problem.json)")->required();
  c->add_option("candidate", a.candidate, "Candidate source file implementing include/mblast/abi.h")->required();
  c->add_option("-t,--target", a.target, "Target name (see `mblast targets`)")->capture_default_str();
  c->add_option("--runner", a.runner, kRunnerOptionHelp);
  c->add_flag("--json", a.json, "Print the result as one JSON object");
  c->add_flag("--no-timing", a.no_timing, "Verify only");
  c->add_option("--repeats", a.opt.min_repeats, "Minimum timed runs")->capture_default_str();
  c->add_option("--warmup", a.opt.warmup, "Warm-up runs")->capture_default_str();
  c->add_option(
       "--min-time", a.opt.min_seconds,
       "Keep timing until the timing loop (timed runs and the cache flushes between them) has run this many seconds")
      ->capture_default_str();
  c->add_option("--rotate", a.opt.rotate,
                "Rotating input/output buffer sets (default: as the PyTorch baselines, one per seed and up to 4 within "
                "4 GiB of inputs on CUDA, 1 GiB elsewhere)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--run-timeout", a.opt.run_s,
                "Seconds allowed for each verification run (plus a second per 64 MiB the run moves)")
      ->capture_default_str();
  c->add_option("--build-timeout", a.opt.build_s, "Seconds allowed for building the candidate")->capture_default_str();
  c->add_option(
      "--memory-mb", a.opt.memory_mb,
      "Memory limit of the process running the candidate (default: 4096 MiB plus four times the problem's data)");
}

int run_eval(const EvalArgs& a) {
  EvalOptions o = a.opt;
  o.timing = !a.no_timing;
  o.quiet = a.json;
  Problem p = load_problem(a.problem);
  Target t = find_target(a.target, a.runner);
  nlohmann::json r = evaluate(p, t, a.candidate, o);
  if (a.json)
    std::cout << r.dump(2) << "\n";
  else
    std::cout << format_eval_result(r);
  return r.value("correct", false) ? 0 : 1;
}

}  // namespace

int cli_main(int argc, char** argv) {
  // Log lines go to stderr: stdout carries results (--json).
  // Once per process: tests call cli_main many times.
  if (!spdlog::get("mblast")) spdlog::set_default_logger(spdlog::stderr_color_mt("mblast"));
  route_logs_around_progress();  // a log line clears the live progress line first
  CLI::App app{"mblast — a learning-augmented optimizer for accelerator kernels (CUDA, OpenCL, RVV)"};
  app.set_version_flag("--version", std::string("mblast ") + kMblastVersion);
  app.require_subcommand(1);
  app.footer("Run `mblast COMMAND --help` for a command's options and an example.");
  EvalArgs eval_args;
  add_eval(app, eval_args);
  TargetsArgs targets_args;
  add_targets(app, targets_args);
  DoctorArgs doctor_args;
  add_doctor(app, doctor_args);
  PlanArgs plan_args;
  add_plan(app, plan_args);
  KbArgs kb_args;
  add_kb(app, kb_args);
  ImportArgs import_args;
  add_import(app, import_args);
  BaselineArgs baseline_args;
  add_baseline(app, baseline_args);
  ExportArgs export_args;
  add_export(app, export_args);
  OptimizeArgs optimize_args;
  add_optimize(app, optimize_args);
  RunsArgs runs_args;
  add_runs(app, runs_args);
  BenchArgs bench_args;
  add_bench(app, bench_args);
  OptimizeModelArgs optimize_model_args;
  add_optimize_model(app, optimize_model_args);
  RunModelArgs run_model_args;
  add_run_model(app, run_model_args);
  ReportArgs report_args;
  add_report(app, report_args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (app.got_subcommand("eval")) return run_eval(eval_args);
    if (app.got_subcommand("targets")) return run_targets(targets_args);
    if (app.got_subcommand("doctor")) return run_doctor(doctor_args);
    if (app.got_subcommand("plan")) return run_plan(plan_args);
    if (app.got_subcommand("kb")) return run_kb(kb_args);
    if (app.got_subcommand("import")) return run_import(import_args);
    if (app.got_subcommand("baseline")) return run_baseline(baseline_args);
    if (app.got_subcommand("export")) return run_export(export_args);
    if (app.got_subcommand("optimize")) return run_optimize(optimize_args);
    if (app.got_subcommand("runs")) return run_runs(app, runs_args);
    if (app.got_subcommand("bench")) return run_bench(bench_args);
    if (app.got_subcommand("optimize-model")) return run_optimize_model(optimize_model_args);
    if (app.got_subcommand("run-model")) return run_run_model(run_model_args);
    if (app.got_subcommand("report")) return run_report(report_args);
  } catch (const UserError& e) {
    std::fprintf(stderr, "mblast: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mblast: %s\n", e.what());
    return 1;
  }
  return 2;
}

}  // namespace mblast
