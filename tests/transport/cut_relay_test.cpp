// The driver's side of a verification run cut short: the runner relays each run's outputs as
// they arrive and ends them with {"stage":"verify_run_end","complete":...}; a worker that dies
// inside a run leaves zeros for the rest, which must not be judged. tests/transport/
// cutting_runner.cpp, placed between the driver and the real runner, plays that worker on a
// correct evaluation (tests/adversarial's dies_while_sending makes a real candidate do it).
#include <gtest/gtest.h>

#include <cstdlib>

#include "mblast/measure/evaluate.h"
#include "mblast/measure/runner_client.h"
#include "test_env.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;

// MBLAST_RUNNER names the cutting runner while it lives, and the real one again after, also
// when the evaluation throws.
struct CuttingRunnerEnv {
  std::string real = std::getenv("MBLAST_RUNNER");
  explicit CuttingRunnerEnv(const std::string& mode) {
    ::setenv("MBLAST_CUTTING_REAL_RUNNER", real.c_str(), 1);
    ::setenv("MBLAST_CUTTING_MODE", mode.c_str(), 1);
    ::setenv("MBLAST_RUNNER", MBLAST_CUTTING_RUNNER, 1);
  }
  ~CuttingRunnerEnv() { ::setenv("MBLAST_RUNNER", real.c_str(), 1); }
};

// The relu problem's naive OpenCL candidate evaluated on an OpenCL target through the cutting
// runner; skips where there is no OpenCL target.
class CutVerifyRun : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto targets = testing::available_targets("opencl", &why);
    if (targets.empty()) GTEST_SKIP() << "backend unavailable: " << why;
    target_ = targets.front();
  }
  nlohmann::json evaluate_through_cut(const std::string& mode) {
    CuttingRunnerEnv env(mode);
    RunnerAddress local;
    local.transport = "local";
    RunnerClient client(local);
    const fs::path relu = testing::source_dir() / "problems" / "relu";
    return evaluate(load_problem(relu), target_, relu / "candidates" / "naive.opencl.cpp", testing::quick_timing(),
                    &client);
  }
  Target target_;
};

TEST_F(CutVerifyRun, IsNotJudgedAndTheWorkersFailureIsReported) {
  auto r = evaluate_through_cut("cut");
  EXPECT_FALSE(r["correct"].get<bool>()) << r.dump(2);
  // Not an exception from parsing the zeros as safetensors, nor wrong_output: the cut run was
  // not read.
  EXPECT_EQ(r["failure_kind"], "crashed") << r.dump(2);
  EXPECT_NE(r["reason"].get<std::string>().find("while sending a verification run"), std::string::npos) << r.dump(2);
}

TEST_F(CutVerifyRun, AWholeRunIsJudged) {
  // The same zeros, said to be complete, are checked and fail: the test above would see
  // wrong_output if the driver judged a run cut short.
  auto r = evaluate_through_cut("lie");
  EXPECT_FALSE(r["correct"].get<bool>()) << r.dump(2);
  EXPECT_EQ(r["failure_kind"], "wrong_output") << r.dump(2);
  EXPECT_NE(r["reason"].get<std::string>().find("run 0"), std::string::npos) << r.dump(2);
}

}  // namespace
}  // namespace mblast
