#include "test_env.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "mblast/measure/runner_client.h"

namespace mblast::testing {

namespace fs = std::filesystem;

namespace {
// The suites need to find the source tree, this build's runner and a private cache, however
// they are started (ctest, by hand, during test discovery). Values set by the caller win.
const bool kEnvironmentReady = [] {
  ::setenv("MBLAST_HOME", MBLAST_TEST_SOURCE_DIR, 0);
  ::setenv("MBLAST_RUNNER", MBLAST_TEST_BINARY_DIR "/bin/mblast-runner", 0);
  ::setenv("MBLAST_CACHE_DIR", MBLAST_TEST_BINARY_DIR "/test-cache", 0);
  return true;
}();
}  // namespace

fs::path source_dir() {
  const char* h = std::getenv("MBLAST_HOME");
  return h && *h ? fs::path(h) : fs::path(MBLAST_TEST_SOURCE_DIR);  // discovery runs without the test environment
}

std::vector<std::string> problem_names() {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(source_dir() / "problems"))
    if (fs::exists(e.path() / "problem.json")) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

const std::vector<std::string>& all_backend_names() {
  static const std::vector<std::string> names = {"opencl", "cuda", "rvv"};
  return names;
}

std::string candidate_extension(const std::string& backend) {
  if (backend == "opencl") return ".cpp";
  if (backend == "cuda") return ".cu";
  return ".c";
}

std::vector<Target> available_targets(const std::string& backend, std::string* why) {
  static std::mutex mu;
  static std::map<std::string, std::pair<std::vector<Target>, std::string>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(backend);
  if (it == cache.end()) {
    std::vector<Target> ok;
    std::string reasons;
    try {
      RunnerClient client(RunnerAddress{});
      for (const auto& t : load_targets()) {
        if (t.backend != backend || t.remote()) continue;
        client.send({{"op", "probe"}, {"target", t.spec}});
        auto m = client.receive(120);
        if (m.header.value("stage", "") == "probe")
          ok.push_back(t);
        else
          reasons += (reasons.empty() ? "" : "; ") + t.name + ": " + m.header.value("reason", "?");
      }
    } catch (const std::exception& e) {
      reasons = e.what();
    }
    if (reasons.empty() && ok.empty()) reasons = "no local target of backend " + backend;
    it = cache.emplace(backend, std::make_pair(ok, reasons)).first;
  }
  if (why) *why = it->second.second;
  return it->second.first;
}

EvalOptions quick_timing() {
  EvalOptions o;
  o.quiet = true;
  o.min_repeats = 5;
  o.min_seconds = 0.02;
  o.max_wall_seconds = 1;
  o.warmup = 1;
  o.rotate = 2;
  return o;
}

}  // namespace mblast::testing
