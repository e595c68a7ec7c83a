#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "mblast/measure/evaluate.h"
#include "mblast/error.h"
#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("mblast-unit-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path_ / rel).parent_path());
    std::ofstream(path_ / rel) << text;
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

const char* kGood = R"({"format": 1, "name": "t", "op_class": "elementwise",
  "inputs": [{"name": "x", "dtype": "f32", "shape": [4]}],
  "outputs": [{"name": "y", "dtype": "f32", "shape": [4]}],
  "tolerance": {"f32": {"atol": 1e-3, "rtol": 0, "min_match": 1.0}},
  "flops": 4, "bytes": 32, "seeds": [{"seed": 0, "distribution": "normal"}], "inits": [0]})";

TEST(Problem, LoadsAWellFormedProblem) {
  TempDir d;
  d.write("problem.json", kGood);
  Problem p = load_problem(d.path());
  EXPECT_EQ(p.name, "t");
  EXPECT_EQ(p.inputs.at(0).shape, std::vector<int64_t>{4});
  EXPECT_DOUBLE_EQ(p.tolerance_for(DType::f32).atol, 1e-3);
  EXPECT_DOUBLE_EQ(p.tolerance_for(DType::f16).atol, default_tolerance(DType::f16).atol);
  EXPECT_EQ(p.expected_file(0, 0).filename(), "expected.seed0.init0.safetensors");
  EXPECT_FALSE(p.data_present());
}

// Two seeds, two inits; `params` is the parameter list's JSON.
std::string two_inits(const std::string& params) {
  return R"({"format": 1, "name": "t", "op_class": "elementwise",
  "inputs": [{"name": "x", "dtype": "f32", "shape": [4]}], "parameters": )" + params + R"(,
  "outputs": [{"name": "y", "dtype": "f32", "shape": [4]}],
  "flops": 4, "bytes": 32, "seeds": [{"seed": 0}, {"seed": 1}], "inits": [0, 1]})";
}

// A manifest whose expected files hash as given, in the order s0i0, s0i1, s1i0, s1i1.
std::string manifest(const std::string& h00, const std::string& h01, const std::string& h10, const std::string& h11) {
  return R"({"files": {"expected.seed0.init0.safetensors": ")" + h00 + R"(", "expected.seed0.init1.safetensors": ")" + h01 +
         R"(", "expected.seed1.init0.safetensors": ")" + h10 + R"(", "expected.seed1.init1.safetensors": ")" + h11 + R"("}})";
}

TEST(Problem, InitsThatAreOneComputationRunOnce) {
  TempDir d;
  d.write("problem.json", two_inits("[]"));
  EXPECT_EQ(load_problem(d.path()).inits_to_run(), (std::vector<int>{0, 1})) << "no manifest: every init";
  d.write("data/MANIFEST.json", manifest("a", "a", "b", "b"));
  EXPECT_EQ(load_problem(d.path()).inits_to_run(), (std::vector<int>{0})) << "no parameters, identical expected outputs";
  d.write("data/MANIFEST.json", manifest("a", "a", "b", "c"));
  EXPECT_EQ(load_problem(d.path()).inits_to_run(), (std::vector<int>{0, 1})) << "one seed's outputs differ by init";
  d.write("data/MANIFEST.json", R"({"files": {"expected.seed0.init0.safetensors": "a", "expected.seed0.init1.safetensors": "a"}})");
  EXPECT_EQ(load_problem(d.path()).inits_to_run(), (std::vector<int>{0, 1})) << "a seed the manifest does not name";
  d.write("data/MANIFEST.json", "{not json");
  EXPECT_EQ(load_problem(d.path()).inits_to_run(), (std::vector<int>{0, 1})) << "a damaged manifest";
  TempDir withp;
  withp.write("problem.json", two_inits(R"([{"name": "w", "dtype": "f32", "shape": [4]}])"));
  withp.write("data/MANIFEST.json", manifest("a", "a", "b", "b"));
  EXPECT_EQ(load_problem(withp.path()).inits_to_run(), (std::vector<int>{0, 1})) << "parameters: every init";
}

void expect_one_line_error(const std::string& json, const std::string& needle) {
  TempDir d;
  d.write("problem.json", json);
  try {
    load_problem(d.path());
    ADD_FAILURE() << "accepted: " << json;
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_NE(msg.find("problem.json"), std::string::npos) << "the message names the file: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(Problem, MalformedProblemsGetOneLineReasons) {
  expect_one_line_error("{not json", "not valid JSON");
  expect_one_line_error(R"({"format": 2})", "unsupported format");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [], "outputs": [], "seeds": [{"seed":0}], "inits": [0]})",
                        "at least one output");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [{"name":"x","dtype":"f33","shape":[1]}],
    "outputs": [{"name":"y","dtype":"f32","shape":[1]}], "seeds": [{"seed":0}], "inits": [0]})", "unknown dtype");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [{"name":"x","dtype":"f32","shape":[1]}],
    "outputs": [{"name":"x","dtype":"f32","shape":[1]}], "seeds": [{"seed":0}], "inits": [0]})", "used twice");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [{"name":"x","dtype":"f32","shape":[-1]}],
    "outputs": [{"name":"y","dtype":"f32","shape":[1]}], "seeds": [{"seed":0}], "inits": [0]})", "non-negative");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [], "outputs": [{"name":"y","dtype":"f32","shape":[1]}],
    "tolerance": {"f32": {"min_match": 0}}, "seeds": [{"seed":0}], "inits": [0]})", "out of range");
}

TEST(Problem, MissingDataWithoutReferenceIsAUserError) {
  TempDir d;
  d.write("problem.json", kGood);
  EXPECT_THROW(ensure_problem_data(load_problem(d.path()), true), UserError);
}

TEST(Target, RunnerUrls) {
  auto a = parse_runner_url("ssh://root@127.0.0.1:2222/opt/mblast/bin/mblast-runner");
  EXPECT_EQ(a.transport, "ssh");
  EXPECT_EQ(a.host, "root@127.0.0.1");
  EXPECT_EQ(a.port, 2222);
  EXPECT_EQ(a.runner_path, "/opt/mblast/bin/mblast-runner");
  EXPECT_EQ(parse_runner_url("local").transport, "local");
  EXPECT_THROW(parse_runner_url("http://x"), UserError);
  EXPECT_THROW(parse_runner_url("ssh://:22/x"), UserError);
}

TEST(Target, BuiltinsAndUserOverrides) {
  TempDir cfg;
  ::setenv("MBLAST_CONFIG_DIR", cfg.path().c_str(), 1);
  auto names = [] {
    std::vector<std::string> v;
    for (const auto& t : load_targets()) v.push_back(t.name);
    return v;
  };
  for (const char* required : {"pocl-cpu", "nvidia-opencl", "adreno-740", "h200", "h100", "b200", "a100", "l40s",
                               "rvv-qemu-128", "rvv-qemu-256", "rvv-qemu-512", "spacemit-k1", "sifive-x280"})
    EXPECT_NE(std::find(names().begin(), names().end(), required), names().end()) << required;
  EXPECT_FALSE(find_target("adreno-740").unreachable_reason().empty());
  // A user file gives the phone a host: it becomes reachable, other fields kept.
  cfg.write("targets/adreno-740.json", R"({"runner": {"transport": "ssh", "host": "u@phone"}})");
  Target t = find_target("adreno-740");
  EXPECT_EQ(t.runner.host, "u@phone");
  EXPECT_EQ(t.backend, "opencl");
  EXPECT_TRUE(t.unreachable_reason().empty());
  cfg.write("targets/broken.json", "{");
  EXPECT_THROW(load_targets(), UserError);
  ::unsetenv("MBLAST_CONFIG_DIR");
  EXPECT_THROW(find_target("no-such-target"), UserError);
}

TEST(Target, RotatingSetsFollowTheBaselinesRule) {
  // One set per seed at least, up to 4 while all sets' inputs fit 4 GiB (CUDA) or 1 GiB.
  Problem p;
  p.seeds = {{0, "uniform01"}, {1, "normal"}, {2, "signed_uniform"}};
  auto with_input_mib = [&](int64_t mib) {
    p.inputs = {TensorSpec{"x", DType::f32, {mib, 1024 * 256}}};
    return p;
  };
  Target cuda, cpu;
  cuda.backend = "cuda";
  cpu.backend = "opencl";
  EXPECT_EQ(rotating_sets(with_input_mib(8), cpu, 0), 4);
  EXPECT_EQ(rotating_sets(with_input_mib(512), cpu, 0), 3);   // 2 fit; every seed is timed still
  EXPECT_EQ(rotating_sets(with_input_mib(512), cuda, 0), 4);
  EXPECT_EQ(rotating_sets(with_input_mib(2048), cuda, 0), 3);
  EXPECT_EQ(rotating_sets(with_input_mib(512), cpu, 2), 2);   // asked for
  p.seeds.clear();
  EXPECT_EQ(rotating_sets(with_input_mib(4096), cpu, 0), 1);
}

}  // namespace
}  // namespace mblast
