// The adversarial suite: candidates that cheat or break in the ways public kernel agents
// have been fooled by. Each must be rejected with its stated failure kind on every backend
// that has a variant of it (tests/adversarial/cases.json); a backend without a variant
// reports NOT_SUPPORTED (a skip), never a pass.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "mblast/measure/evaluate.h"
#include "mblast/measure/runner_client.h"
#include "test_env.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Case {
  std::string backend, name, problem, expect, what;
  bool first_eval = false;         // run with an empty cache: no peaks or per-call check costs for the device yet
  std::string source;              // the candidate file's stem, when another case's (default: name)
  std::string defines;             // text put before the source (a variant of another case's candidate)
  int repeat = 1;                  // evals of the candidate (a cheat that draws when to cheat)
  std::set<std::string> backends;  // where the case applies (default: every backend with the source)
};

// Cases whose verdict compares the candidate's measured time with the naive candidate's. They are
// built into a binary of their own (MBLAST_ADV_TIMED=1) that ctest runs alone (RUN_SERIAL): on a
// 2-core machine a neighbouring test takes one of pocl's two threads and halves one eval's speed,
// which a comparison of two evals reads as a cheat.
bool compares_times(const std::string& expect) { return expect == "counted_time" || expect == "refused_or_counted"; }

// Every tests/adversarial/cases*.json, in name order (one file per group of attacks): the timed
// ones or the others, after MBLAST_ADV_TIMED.
std::vector<Case> all_cases() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(testing::source_dir() / "tests" / "adversarial")) {
    const std::string n = e.path().filename().string();
    if (n.rfind("cases", 0) == 0 && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Case> v;
  for (const auto& f : files) {
    std::ifstream in(f);
    const json j = json::parse(in);
    for (const auto& b : testing::all_backend_names())
      for (const auto& c : j["cases"]) {
        if (compares_times(c["expect"]) != (MBLAST_ADV_TIMED != 0)) continue;
        v.push_back({b, c["name"], c["problem"], c["expect"], c["what"], c.value("first_eval", false),
                     c.value("source", c["name"].get<std::string>()), c.value("defines", ""), c.value("repeat", 1),
                     c.value("backends", std::set<std::string>{})});
      }
  }
  return v;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

EvalOptions adversarial_options() {
  EvalOptions o = testing::quick_timing();
  o.run_s = 8;  // the hang case must be cut off quickly
  o.time_s = 60;
  o.memory_mb = 2048;
  return o;
}

// The naive candidate's median time: the faster of two evals, so that one slowed eval of the
// reference does not make an honest candidate's time look hidden (one under QEMU, where the count
// is the same in every eval). A cheat that hides its work shows a small fraction of either.
double naive_time(const Problem& p, const Target& t, RunnerClient& client, const std::string& backend) {
  const fs::path naive = p.dir / "candidates" / ("naive." + backend + testing::candidate_extension(backend));
  double best = 0;
  for (int k = 0; k < (backend == "rvv" ? 1 : 2); ++k) {
    json base = evaluate(p, t, naive, adversarial_options(), &client);
    EXPECT_TRUE(base["correct"].get<bool>()) << base.dump(2);
    const double m = base["time"]["median"].get<double>();
    best = k == 0 ? m : std::min(best, m);
  }
  return best;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.backend << "/" << c.name; }

class Adversarial : public ::testing::TestWithParam<Case> {};

TEST_P(Adversarial, IsSeenForWhatItIs) {
  const Case& c = GetParam();
  // "source": "naive" is the problem's own naive candidate (with "defines" put before it).
  const std::string ext = testing::candidate_extension(c.backend);
  const fs::path src =
      c.source == "naive" ? testing::source_dir() / "problems" / c.problem / "candidates" / ("naive." + c.backend + ext)
                          : testing::source_dir() / "tests" / "adversarial" / c.backend / (c.source + ext);
  if (!fs::exists(src) || (!c.backends.empty() && !c.backends.count(c.backend)))
    GTEST_SKIP() << "NOT_SUPPORTED: no " << c.backend << " variant of " << c.name;
  if (c.expect == "refused_or_counted" && c.backend == "rvv")
    GTEST_SKIP() << "under QEMU a refused count stands at once, with no second measurement to probe "
                    "(the case without intermittence covers it)";
  std::string why;
  auto targets = testing::available_targets(c.backend, &why);
  if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
  Problem p = load_problem(testing::source_dir() / "problems" / c.problem);
  ensure_problem_data(p, true);

  // Materialise the candidate: substitute the expected-output path for peek_expected, and the helper
  // library's bytes for second_library_handler.
  std::string code = c.defines + read_file(src);
  code = std::regex_replace(code, std::regex("@EXPECTED_FILE@"),
                            p.expected_file(p.seeds.at(1).seed, p.inits.at(0)).string());
  if (code.find("@HELPER_LIB_BYTES@") != std::string::npos) {
    const std::string lib = read_file(MBLAST_ADV_HELPER_LIB);
    ASSERT_FALSE(lib.empty()) << "no helper library at " << MBLAST_ADV_HELPER_LIB;
    std::string bytes;
    for (const unsigned char ch : lib) bytes += std::to_string(static_cast<unsigned>(ch)) + ",";
    code.replace(code.find("@HELPER_LIB_BYTES@"), std::string("@HELPER_LIB_BYTES@").size(), bytes);
  }
  const fs::path work = fs::temp_directory_path() / ("mblast-adv-" + c.backend + "-" + c.name);
  fs::create_directories(work);
  const fs::path cand = work / src.filename();
  std::ofstream(cand) << code;

  // A first eval on a machine: the runner (started below, it reads the cache folder when it starts)
  // has nothing cached for the device, as after a fresh install.
  // Not under QEMU: a count has no clock to audit, and measuring the peaks there again takes minutes.
  const bool first_eval = c.first_eval && c.backend != "rvv";
  std::optional<std::string> shared_cache;
  if (first_eval) {
    const char* now = std::getenv("MBLAST_CACHE_DIR");
    shared_cache = now ? now : "";
    const fs::path fresh = work / "empty-cache";
    fs::remove_all(fresh);
    fs::create_directories(fresh);
    ::setenv("MBLAST_CACHE_DIR", fresh.c_str(), 1);
  }
  struct RestoreCache {
    std::optional<std::string>& old;
    ~RestoreCache() {
      if (old) ::setenv("MBLAST_CACHE_DIR", old->c_str(), 1);
    }
  } restore{shared_cache};

  for (const auto& t : targets) {
    SCOPED_TRACE("target " + t.name + ": " + c.what);
    RunnerClient client(RunnerAddress{});
    if (c.expect == "refused_or_counted") {
      // Refused, or accepted with its real work in the figure: never the hidden work's time.
      const double base = naive_time(p, t, client, c.backend);
      int refused = 0;
      for (int k = 0; k < c.repeat; ++k) {
        json r = evaluate(p, t, cand, adversarial_options(), &client);
        if (r["correct"].get<bool>()) {
          EXPECT_GE(r["time"]["median"].get<double>(), 0.5 * base)
              << "eval " << k << " accepted the hidden work's time";
        } else {
          EXPECT_EQ(r["failure_kind"], "timing_inconsistent") << r.value("reason", json()).dump();
          ++refused;
        }
      }
      std::cout << c.backend << "/" << c.name << " on " << t.name << ": " << refused << " of " << c.repeat
                << " evals refused, the others accepted with their real time\n";
      continue;
    }
    json r = evaluate(p, t, cand, adversarial_options(), &client);
    if (c.expect == "timing_inconsistent" && r.value("failure_kind", json("")) == "timing_inconsistent") {
      // A refusal of the clock stands only when a second measurement is refused too (under QEMU,
      // a count with no clock, at once).
      if (t.backend == "rvv") {
        EXPECT_FALSE(r.contains("remeasured")) << r.dump(2);
      } else {
        ASSERT_TRUE(r.contains("remeasured")) << r.dump(2);
        // Nothing was cached, so the first verdict of the runner's clock was reached with the costs measured
        // then, unless the worker saw the candidate's own signal handler first.
        const std::string first = r["remeasured"].value("first_reason", "");
        if (first_eval)
          EXPECT_TRUE(first.find("measured again") != std::string::npos ||
                      first.find("installed a handler") != std::string::npos)
              << r["remeasured"].dump();
      }
    }
    if (c.expect == "counted_time") {
      // Accepted, but its real work must be in the clock: at least half the naive candidate's time.
      ASSERT_TRUE(r["correct"].get<bool>()) << r.dump(2);
      EXPECT_GE(r["time"]["median"].get<double>(), 0.5 * naive_time(p, t, client, c.backend))
          << "work moved off the timed stream was not counted";
    } else {
      EXPECT_FALSE(r["correct"].get<bool>()) << "accepted a candidate that " << c.what;
      EXPECT_EQ(r["failure_kind"], c.expect) << r.value("reason", json()).dump() << "\nlog: " << r.value("log", "");
      EXPECT_TRUE(r["reason"].is_string() && !r["reason"].get<std::string>().empty());
      // A verdict of the driver's stops the runs soon after the first wrong one (at most the
      // run already under way follows it), instead of moving every run's outputs.
      static const std::set<std::string> decided_by_driver = {"unwritten_output", "wrong_output", "nan_or_inf",
                                                              "input_modified", "nondeterministic"};
      if (decided_by_driver.count(c.expect)) {
        const size_t all_runs = p.seeds.size() * p.inits.size() * static_cast<size_t>(adversarial_options().runs);
        ASSERT_TRUE(r["checks"].is_array());
        EXPECT_LT(r["checks"].size() / p.outputs.size(), all_runs) << "the runs went on after a wrong one";
      }
    }
    // The runner survives every one of them: the next request on the same runner works.
    const fs::path good = p.dir / "candidates" / ("naive." + c.backend + testing::candidate_extension(c.backend));
    if (fs::exists(good)) {
      EvalOptions o = adversarial_options();
      o.timing = false;
      json after = evaluate(p, t, good, o, &client);
      EXPECT_TRUE(after["correct"].get<bool>()) << "runner did not recover: " << after.dump(2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, Adversarial, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.backend + "_" + i.param.name; });

}  // namespace
}  // namespace mblast
