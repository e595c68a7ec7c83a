// The timed stage of an eval, as the runner drives it (docs/measurement.md):
//   - each call gets fresh inputs (a key the runner draws, mixing two verified seeds' inputs),
//     poisoned outputs and cold caches, and is fingerprinted right after it returns;
//   - the runner holds every figure, sees each call's time on its own clock, and decides when
//     enough calls were timed and which of them are checked, only after they have run;
//   - the checked calls run again in a worker of their own that has seen none of them, and the
//     outputs must agree within the problem's tolerance.
#pragma once

#include <functional>
#include <span>

#include <nlohmann/json.hpp>

#include "worker_run.h"

namespace mblast::runner {

struct TimedStage {
  const nlohmann::json& request;       // the driver's "time" request (repeats, rotate, tolerances, ...)
  const nlohmann::json& eval;          // the eval request (seeds, outputs)
  const nlohmann::json& check_costs;   // the device's costs of the per-call work, or null (peaks "checks")
  double time_s = 300;                 // the most one message of the worker may take
  std::span<const std::byte> payload;  // the request's payload (its inputs, for the spot worker)
  // The per-call work's costs measured now, in a worker with no candidate loaded; asked for
  // only when the audit fails against CHECK_COSTS (cached when the machine was quiet, or none
  // yet), after the eval's workers have exited. Empty: no second measurement.
  std::function<nlohmann::json()> costs_now;
};

// Runs the stage with the verified worker W and the spot-check worker SPOT (started with the
// eval, waiting). Returns the stage's last message for the driver: {"stage": "timing", samples,
// ...} or a "failed" one (a timed call unwritten or wrong, figures inconsistent with the
// runner's clock, messages out of protocol order, or the worker's own failure).
nlohmann::json run_timed_stage(const TimedStage& stage, WorkerRun& w, WorkerRun* spot);

// The runner's-clock audit of one eval's timed calls (exposed for its unit test): "" when the
// worker's figures are consistent with what the runner saw, else why not.
struct CallRecord {
  double window_s = 0;  // the runner's clock: "call" sent to "call_done" received
  double sample = 0, wall_s = 0, mix_s = 0, flush_s = 0, check_s = 0;  // the worker's accounts
};
// What the work around each call handles: bytes, and buffers (each costs a fixed latency too).
struct CallBuffers {
  double input_bytes = 0, output_bytes = 0;
  int inputs = 0, outputs = 0;
};
// The slack of the bound on the work around each call (flush, input mixing, checks): what a
// quiet machine's wake-ups add to four times the device's measured costs, and what at most a
// machine whose CPUs others use in full adds to that (in proportion to their share).
inline constexpr double kQuietCostSlack = 2e-3, kLoadCostSlack = 12e-3;
// OTHER_LOAD: the share of the machine's CPUs that processes outside the eval used meanwhile
// (0 to 1, machine_load below): their wake-ups of the worker are honest time in its checks.
std::string audit_clock(const std::vector<CallRecord>& timed, const nlohmann::json& check_costs,
                        const CallBuffers& buffers, double other_load = 0);

// The machine's CPU time so far, split into this process with everything it started (the
// runner, its workers, whatever they started) and the rest (other sessions, builds). The
// candidate's processes are always in the first part: they cannot pass their own work off as
// the machine's load.
struct CpuTimes {
  double wall_s = 0;    // steady clock
  double others_s = 0;  // user processes not ours, reaped ones included, and the CPU time the hypervisor stole
  double ours_s = 0;    // this process and its descendants, reaped ones included
  int cpus = 1;
  bool ok = false;  // /proc was readable
};
CpuTimes cpu_times();
// The share of the machine's CPUs others used between A and B, 0 to 1 (0 when unknown).
double machine_load(const CpuTimes& a, const CpuTimes& b);

}  // namespace mblast::runner
