#include "mblast/driver/kernelbench_tool.h"

#include <random>
#include <sstream>

#include <unistd.h>

#include "mblast/error.h"
#include "mblast/paths.h"
#include "mblast/problem.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path kernelbench_tool_path() {
  const fs::path tool = data_dir() / "tools" / "mblast_kernelbench.py";
  if (!fs::exists(tool)) throw UserError(tool.string() + " not found (set MBLAST_HOME to mblast's source or share folder)");
  return tool;
}

std::string kernelbench_python(const std::string& python) { return python.empty() ? python_for_tools() : python; }

CommandResult run_kernelbench_tool(const std::string& python, const std::vector<std::string>& args, double timeout_s) {
  std::vector<std::string> argv = {python, kernelbench_tool_path().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r;
  try {
    r = run_command(argv, timeout_s, std::nullopt, 1 << 20);
  } catch (const Error& e) {
    throw UserError("cannot run the Python helper with " + python + ": " + e.what() + " (use --python or MBLAST_PYTHON)");
  }
  if (r.timed_out)
    throw UserError("the Python helper did not finish within " + std::to_string(static_cast<int>(timeout_s)) +
                    " s: " + shell_quote(argv));
  if (r.exit.exited && r.exit.code == 127 && r.output.find("mblast_kernelbench") == std::string::npos)
    throw UserError("cannot run the Python helper: " + python + " not found (use --python or MBLAST_PYTHON)");
  return r;
}

std::vector<std::string> baseline_cache_args(const Target& t) {
  std::vector<std::string> args = {"--cache-flush", t.spec.value("device", json::object()).value("cache_flush", "auto")};
  const fs::path lib = self_executable().parent_path().parent_path() / "lib" / "mblast" / "libmblast_evict.so";
  if (fs::exists(lib)) {
    args.push_back("--evict-library");
    args.push_back(lib.string());
  }
  return args;
}

fs::path kernelbench_json_path(const std::string& what) {
  static std::mt19937_64 rng{std::random_device{}()};
  return fs::temp_directory_path() / ("mblast-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(rng()) + ".json");
}

std::string kernelbench_tool_failure(const CommandResult& r) {
  static const std::string prefix = "mblast_kernelbench: ";
  std::istringstream in(r.output);
  std::string line, last, tagged;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    last = line;
    if (line.rfind(prefix, 0) == 0) tagged = line.substr(prefix.size());
  }
  if (!tagged.empty()) return tagged;
  if (!last.empty()) return last;
  if (!r.exit.exited) return "the Python helper was killed by signal " + std::to_string(r.exit.signal);
  return "the Python helper failed with exit status " + std::to_string(r.exit.code);
}

}  // namespace mblast
