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
  const nlohmann::json& request;  // the driver's "time" request (repeats, rotate, tolerances, ...)
  const nlohmann::json& eval;     // the eval request (seeds, outputs)
  const nlohmann::json& check_costs;  // the device's costs of the per-call work, or null (peaks "checks")
  double time_s = 300;            // the most one message of the worker may take
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
std::string audit_clock(const std::vector<CallRecord>& timed, const nlohmann::json& check_costs,
                        const CallBuffers& buffers);

}  // namespace mblast::runner
