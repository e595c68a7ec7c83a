#include "mblast/driver/kernelbench_tool.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <random>
#include <sstream>

#include "mblast/error.h"
#include "mblast/paths.h"
#include "mblast/problem.h"
#include "mblast/protocol.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path kernelbench_tool_path() {
  const fs::path tool = data_dir() / "tools" / "mblast_kernelbench.py";
  if (!fs::exists(tool))
    throw UserError(tool.string() + " not found (set MBLAST_HOME to mblast's source or share folder)");
  return tool;
}

std::string kernelbench_python(const std::string& python) { return python.empty() ? python_for_tools() : python; }

namespace {
UserError helper_timed_out(double timeout_s, const std::vector<std::string>& argv) {
  return UserError("the Python helper did not finish within " + std::to_string(static_cast<int>(timeout_s)) +
                   " s: " + shell_quote(argv));
}
}  // namespace

namespace {

// run_command() with each line of the output given to ON_LINE as it arrives.
CommandResult run_with_lines(const std::vector<std::string>& argv, double timeout_s, size_t max_output,
                             const std::function<void(const std::string&)>& on_line) {
  const auto t0 = std::chrono::steady_clock::now();
  SpawnOptions o;
  o.argv = argv;
  o.pipe_stdout = true;
  o.before_exec = [] {
    ::dup2(1, 2);
    return std::string();
  };
  Child c = spawn(o);
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  CommandResult r;
  std::string partial;
  char buf[8192];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd p{c.stdout_fd(), POLLIN, 0};
    const int pr = ::poll(&p, 1, static_cast<int>(left));
    if (pr <= 0) continue;  // EINTR, or the deadline (checked above)
    const ssize_t n = ::read(c.stdout_fd(), buf, sizeof buf);
    if (n <= 0) break;
    if (r.output.size() < max_output)
      r.output.append(buf, std::min<size_t>(static_cast<size_t>(n), max_output - r.output.size()));
    partial.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1))
      on_line(partial.substr(0, nl));
  }
  if (!partial.empty()) on_line(partial);
  r.exit = r.timed_out ? c.kill() : c.wait().value_or(Child::Exit{});
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

CommandResult run_kernelbench_tool(const std::string& python, const std::vector<std::string>& args, double timeout_s,
                                   const std::function<void(const std::string&)>& on_line) {
  std::vector<std::string> argv = {python, kernelbench_tool_path().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r;
  try {
    r = on_line ? run_with_lines(argv, timeout_s, 1 << 20, on_line)
                : run_command(argv, timeout_s, std::nullopt, 1 << 20);
  } catch (const Error& e) {
    throw UserError("cannot run the Python helper with " + python + ": " + e.what() +
                    " (use --python or MBLAST_PYTHON)");
  }
  if (r.timed_out) throw helper_timed_out(timeout_s, argv);
  if (r.exit.exited && r.exit.code == 127 && r.output.find("mblast_kernelbench") == std::string::npos)
    throw UserError("cannot run the Python helper: " + python + " not found (use --python or MBLAST_PYTHON)");
  return r;
}

KernelbenchServer::KernelbenchServer(std::string python) : python_(std::move(python)) {}

KernelbenchServer::~KernelbenchServer() { stop(); }

bool KernelbenchServer::enabled() {
  const char* v = std::getenv("MBLAST_BASELINE_SERVER");
  return !v || std::string(v) != "0";
}

void KernelbenchServer::stop() {
  reader_.reset();
  child_.reset();  // kills and reaps it
  std::error_code ec;
  if (!log_.empty()) fs::remove(log_, ec);
  log_.clear();
}

std::optional<int> KernelbenchServer::run(const std::vector<std::string>& args, double timeout_s) {
  if (!child_) {
    SpawnOptions o;
    o.argv = {python_, kernelbench_tool_path().string(), "serve"};
    o.protocol_pipes = true;
    log_ = kernelbench_json_path("baseline-server").replace_extension(".log");
    o.output_file = log_;
    try {
      child_ = spawn(o);
    } catch (const Error&) {
      stop();
      return std::nullopt;
    }
    reader_ = std::make_unique<protocol::MessageReader>(child_->from_child_fd());
  }
  ::signal(SIGPIPE, SIG_IGN);  // a server that died is seen as a failed write, not the end of mblast
  try {
    protocol::write_message(child_->to_child_fd(), {{"argv", args}});
    const auto m =
        reader_->read(protocol::Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000)));
    if (m && m->header.contains("exit") && m->header["exit"].is_number_integer()) return m->header["exit"].get<int>();
  } catch (const protocol::Timeout&) {
    stop();
    throw helper_timed_out(timeout_s, args);
  } catch (const Error&) {  // the server is gone, or wrote something else
  }
  stop();
  return std::nullopt;
}

std::vector<std::string> baseline_cache_args(const Target& t) {
  std::vector<std::string> args = {"--cache-flush",
                                   t.spec.value("device", json::object()).value("cache_flush", "auto")};
  const fs::path lib = self_executable().parent_path().parent_path() / "lib" / "mblast" / "libmblast_evict.so";
  if (fs::exists(lib)) {
    args.push_back("--evict-library");
    args.push_back(lib.string());
  }
  return args;
}

fs::path kernelbench_json_path(const std::string& what) {
  static std::mt19937_64 rng{std::random_device{}()};
  return fs::temp_directory_path() /
         ("mblast-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(rng()) + ".json");
}

std::string kernelbench_tool_failure(const CommandResult& r) {
  static const std::string prefix = "mblast_kernelbench: ";
  std::istringstream in(r.output);
  std::string line, last, tagged, summary;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    last = line;
    if (line.rfind(prefix, 0) != 0 || line.rfind(prefix + "progress: ", 0) == 0)
      continue;  // not the live line's events
    // An import's closing count ("imported 0, failed 1") says less than the file's own line.
    if (line.rfind(prefix + "imported ", 0) == 0)
      summary = line.substr(prefix.size());
    else
      tagged = line.substr(prefix.size());
  }
  if (!tagged.empty()) return tagged;
  if (!summary.empty()) return summary;
  if (!last.empty()) return last;
  if (!r.exit.exited) return "the Python helper was killed by signal " + std::to_string(r.exit.signal);
  return "the Python helper failed with exit status " + std::to_string(r.exit.code);
}

}  // namespace mblast
