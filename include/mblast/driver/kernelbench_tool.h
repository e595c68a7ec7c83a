// Running tools/mblast_kernelbench.py (the PyTorch side of mblast, "the Python helper") from
// the driver commands `import kernelbench`, `baseline` and `export`.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mblast/process.h"
#include "mblast/protocol.h"
#include "mblast/target.h"

namespace mblast {

// <data dir>/tools/mblast_kernelbench.py. Throws UserError when it is not there.
std::filesystem::path kernelbench_tool_path();

// The interpreter: `python` when not empty, else python_for_tools().
std::string kernelbench_python(const std::string& python);

// Runs `python helper args...` with a time limit. Throws UserError with a one-line reason when
// the interpreter cannot be started or the helper times out; a non-zero exit is left to the
// caller (see kernelbench_tool_failure). ON_LINE, when given, sees each line of the helper's
// output as it comes (the live progress of `mblast import`); the result holds all of it as well.
CommandResult run_kernelbench_tool(const std::string& python, const std::vector<std::string>& args, double timeout_s,
                                   const std::function<void(const std::string&)>& on_line = nullptr);

// One `mblast_kernelbench.py serve` process that runs the `baseline` commands of a whole bench
// (requests and answers are protocol messages, mblast/protocol.h, without payloads),
// so that Python, torch (and on a GPU its CUDA context) start once rather than per problem. It
// is started on first use and again after it failed; its output goes to a log file removed with
// it. MBLAST_BASELINE_SERVER=0 turns it off (every baseline in a process of its own).
class KernelbenchServer {
 public:
  explicit KernelbenchServer(std::string python);
  ~KernelbenchServer();
  KernelbenchServer(const KernelbenchServer&) = delete;
  KernelbenchServer& operator=(const KernelbenchServer&) = delete;

  // Whether MBLAST_BASELINE_SERVER allows it.
  static bool enabled();
  // Runs one command (`args` as for run_kernelbench_tool; "baseline" first) in the server: its
  // exit status, or nullopt when the server could not be started or died during it (it is then
  // stopped; the caller can run the command on its own to learn why). Throws UserError when no
  // answer came within timeout_s (the server is killed).
  std::optional<int> run(const std::vector<std::string>& args, double timeout_s);

 private:
  void stop();
  std::string python_;
  std::filesystem::path log_;
  std::optional<Child> child_;
  std::unique_ptr<protocol::MessageReader> reader_;  // its answers: one protocol message each
};

// The baseline's arguments for cold caches on a CPU, made the way the target's runner makes them:
// --cache-flush (the target's device.cache_flush: auto, evict or sweep) and, where it was built,
// --evict-library <bin>/../lib/mblast/libmblast_evict.so (mblast/cache_evict.h).
std::vector<std::string> baseline_cache_args(const Target& t);

// A fresh path in the temporary folder for the helper's --json-out (not created).
std::filesystem::path kernelbench_json_path(const std::string& what);

// The one line that says why the helper failed: its last "mblast_kernelbench: ..." line
// (without the prefix), else the last line of its output, else the exit status.
std::string kernelbench_tool_failure(const CommandResult& r);

}  // namespace mblast
