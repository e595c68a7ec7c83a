#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <tuple>

#include "mblast/driver/targets_command.h"
#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/measure/evaluate.h"
#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ =
        fs::temp_directory_path() / ("mblast-unit-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
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
  "inputs": [{"name": "x", "dtype": "f32", "shape": [4]}], "parameters": )" +
         params + R"(,
  "outputs": [{"name": "y", "dtype": "f32", "shape": [4]}],
  "flops": 4, "bytes": 32, "seeds": [{"seed": 0}, {"seed": 1}], "inits": [0, 1]})";
}

// A manifest whose expected files hash as given, in the order s0i0, s0i1, s1i0, s1i1.
std::string manifest(const std::string& h00, const std::string& h01, const std::string& h10, const std::string& h11) {
  return R"({"files": {"expected.seed0.init0.safetensors": ")" + h00 + R"(", "expected.seed0.init1.safetensors": ")" +
         h01 + R"(", "expected.seed1.init0.safetensors": ")" + h10 + R"(", "expected.seed1.init1.safetensors": ")" +
         h11 + R"("}})";
}

TEST(Problem, InitsThatAreOneComputationRunOnce) {
  TempDir d;
  d.write("problem.json", two_inits("[]"));
  EXPECT_EQ(load_problem(d.path()).inits_to_run(), (std::vector<int>{0, 1})) << "no manifest: every init";
  d.write("data/MANIFEST.json", manifest("a", "a", "b", "b"));
  EXPECT_EQ(load_problem(d.path()).inits_to_run(), (std::vector<int>{0}))
      << "no parameters, identical expected outputs";
  d.write("data/MANIFEST.json", manifest("a", "a", "b", "c"));
  EXPECT_EQ(load_problem(d.path()).inits_to_run(), (std::vector<int>{0, 1})) << "one seed's outputs differ by init";
  d.write("data/MANIFEST.json",
          R"({"files": {"expected.seed0.init0.safetensors": "a", "expected.seed0.init1.safetensors": "a"}})");
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
  expect_one_line_error(
      R"({"format": 1, "name": "t", "inputs": [], "outputs": [], "seeds": [{"seed":0}], "inits": [0]})",
      "at least one output");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [{"name":"x","dtype":"f33","shape":[1]}],
    "outputs": [{"name":"y","dtype":"f32","shape":[1]}], "seeds": [{"seed":0}], "inits": [0]})",
                        "unknown dtype");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [{"name":"x","dtype":"f32","shape":[1]}],
    "outputs": [{"name":"x","dtype":"f32","shape":[1]}], "seeds": [{"seed":0}], "inits": [0]})",
                        "used twice");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [{"name":"x","dtype":"f32","shape":[-1]}],
    "outputs": [{"name":"y","dtype":"f32","shape":[1]}], "seeds": [{"seed":0}], "inits": [0]})",
                        "non-negative");
  expect_one_line_error(R"({"format": 1, "name": "t", "inputs": [], "outputs": [{"name":"y","dtype":"f32","shape":[1]}],
    "tolerance": {"f32": {"min_match": 0}}, "seeds": [{"seed":0}], "inits": [0]})",
                        "out of range");
}

// The message load_problem gives for kGood changed by `edit`, or "" when it loads.
std::string problem_error(const std::function<void(nlohmann::json&)>& edit) {
  TempDir d;
  nlohmann::json j = nlohmann::json::parse(kGood);
  edit(j);
  d.write("problem.json", j.dump());
  try {
    load_problem(d.path());
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// A wrong-typed field is named by its path with the type it must have: one line naming the file,
// never the JSON library's exception text.
TEST(Problem, WrongTypedFieldsNameTheFieldAndTheType) {
  using nlohmann::json;
  const std::vector<std::tuple<std::string, std::function<void(json&)>, std::string>> cases = {
      {"shape as a string", [](json& j) { j["inputs"][0]["shape"] = "512"; },
       "inputs[0].shape: expected an array (of integers, such as [512, 1024]), got the string \"512\""},
      {"dtype as a number", [](json& j) { j["inputs"][0]["dtype"] = 3; },
       "inputs[0].dtype: expected a string (a dtype name such as f32), got the number 3"},
      {"tolerance as an array", [](json& j) { j["tolerance"] = json::array(); }, "tolerance: expected an object"},
      {"atol as a string", [](json& j) { j["tolerance"]["f32"]["atol"] = "x"; },
       "tolerance.f32.atol: expected a number, got the string \"x\""},
      {"a seed as a string", [](json& j) { j["seeds"][0]["seed"] = "1"; },
       "seeds[0].seed: expected an integer, got the string \"1\""},
      {"a seed out of int range", [](json& j) { j["seeds"][0]["seed"] = 1000000000000LL; },
       "seeds[0].seed: expected an integer from"},
      {"an init as a string",
       [](json& j) {
         j["inits"] = json::array({0, "a"});
       },
       "inits[1]: expected an integer"},
      {"flops as a string", [](json& j) { j["flops"] = "big"; }, "flops: expected a number, got the string \"big\""},
      {"name as a number", [](json& j) { j["name"] = 3; }, "name: expected a string, got the number 3"},
      {"description as a number", [](json& j) { j["description"] = 3; }, "description: expected a string"},
      {"format as a string", [](json& j) { j["format"] = "1"; }, "format: expected an integer, got the string \"1\""},
      {"a dimension as a real",
       [](json& j) {
         j["outputs"][0]["shape"] = json::array({4, 2.5});
       },
       "outputs[0].shape[1]: expected an integer, got the number 2.5"},
      {"a tensor as a string", [](json& j) { j["outputs"][0] = "y"; }, "outputs[0]: expected an object"},
      {"inputs as an object", [](json& j) { j["inputs"] = json::object(); }, "inputs: expected an array"},
      {"provenance as a string", [](json& j) { j["provenance"] = "x"; }, "provenance: expected an object"},
      {"a seed's distribution as null", [](json& j) { j["seeds"][0]["distribution"] = nullptr; },
       "seeds[0].distribution: expected a string, got null"},
      {"an unknown dtype, placed", [](json& j) { j["inputs"][0]["dtype"] = "f33"; },
       "inputs[0]: tensor 'x' has unknown dtype"},
  };
  for (const auto& [what, edit, needle] : cases) {
    const std::string msg = problem_error(edit);
    EXPECT_NE(msg.find(needle), std::string::npos) << what << ": " << msg;
    EXPECT_NE(msg.find("problem.json: "), std::string::npos) << what << ": names the file: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << what << ": one line: " << msg;
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << what << ": no library text: " << msg;
  }
  EXPECT_EQ(problem_error([](json&) {}), "") << "the unedited problem loads";
}

TEST(Problem, InvalidJsonSaysWhereNotWhatTheLibraryRead) {
  TempDir d;
  d.write("problem.json", "{\n  \"format\": 1,\n  \"name\": \"t\",\n}");  // a trailing comma
  try {
    load_problem(d.path());
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("problem.json: not valid JSON (line 4, column 1)"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  }
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
  EXPECT_NO_THROW(load_targets()) << "a broken file is skipped, not fatal";
  ::unsetenv("MBLAST_CONFIG_DIR");
  EXPECT_THROW(find_target("no-such-target"), UserError);
}

// The user's config folder for one test: MBLAST_CONFIG_DIR set while it lives.
struct UserConfig : TempDir {
  UserConfig() { ::setenv("MBLAST_CONFIG_DIR", path().c_str(), 1); }
  ~UserConfig() { ::unsetenv("MBLAST_CONFIG_DIR"); }
};

const SkippedTargetFile* skipped_file(const TargetCatalog& c, const std::string& stem) {
  for (const auto& s : c.skipped)
    if (s.file.stem() == stem) return &s;
  return nullptr;
}

bool has_target(const TargetCatalog& c, const std::string& name) {
  return std::any_of(c.targets.begin(), c.targets.end(), [&](const Target& t) { return t.name == name; });
}

// Broken user files are each skipped with one line naming the file, the field and its type; the
// built-in targets and the user's good file are all still there.
TEST(Target, ABrokenUserFileIsSkippedAndNamedTheOthersStay) {
  UserConfig cfg;
  cfg.write("targets/notjson.json", "hello {");
  cfg.write("targets/arch.json", R"({"backend": "opencl", "arch": 5})");
  cfg.write("targets/transport.json", R"({"name": "pocl-cpu", "runner": {"transport": 7}})");
  cfg.write("targets/mine.json", R"({"backend": "opencl", "description": "my own", "device": {"type": "cpu"}})");
  const TargetCatalog c = load_target_catalog();
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"notjson", "notjson.json: not valid JSON (line 1, column 1)"},
      {"arch", "arch.json: arch: expected an object, got the number 5"},
      {"transport", "transport.json: runner.transport: expected a string (local, ssh or adb), got the number 7"}};
  for (const auto& [stem, needle] : expected) {
    const SkippedTargetFile* s = skipped_file(c, stem);
    ASSERT_NE(s, nullptr) << stem << " is reported";
    EXPECT_NE(s->reason.find((cfg.path() / "targets").string()), std::string::npos) << s->reason;
    EXPECT_NE(s->reason.find(needle), std::string::npos) << s->reason;
    EXPECT_EQ(s->reason.find('\n'), std::string::npos) << s->reason;
    EXPECT_EQ(s->reason.find("json.exception"), std::string::npos) << s->reason;
  }
  EXPECT_EQ(c.skipped.size(), 3u);
  for (const char* name : {"mine", "rvv-qemu-256", "h200", "adreno-740", "nvidia-opencl"})
    EXPECT_TRUE(has_target(c, name)) << name << " is still offered";
  EXPECT_EQ(find_target("mine").description, "my own");
  // The broken override of pocl-cpu is not silently replaced by the built-in: its reason is the
  // answer for that name.
  EXPECT_FALSE(has_target(c, "pocl-cpu"));
  try {
    find_target("pocl-cpu");
    ADD_FAILURE() << "a broken override was ignored";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("transport.json: runner.transport: expected a string"), std::string::npos)
        << e.what();
  }
  // The user's files are left as they were.
  EXPECT_EQ(read_file(cfg.path() / "targets" / "notjson.json"), "hello {");
}

// A wrong-typed field fails when the file is loaded, not later in the runner (where, for
// example, an "arch" of 5 made the RVV device's arch.value("vlen") throw a library exception).
TEST(Target, WrongTypedFieldsFailAtLoad) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"name": "rvv-qemu-256", "arch": {"vlen": "256"}})",
       "arch.vlen: expected an integer, got the string \"256\""},
      {R"({"name": "rvv-qemu-256", "execution": {"kind": 3}})",
       "execution.kind: expected a string (qemu or native), got the number 3"},
      {R"({"name": "rvv-qemu-256", "execution": {"kind": "emulated"}})",
       "execution.kind: 'emulated' is not one of qemu, native"},
      {R"({"name": "rvv-qemu-256", "build": {"cflags": "-O3"}})",
       "build.cflags: expected an array (of strings), got the string \"-O3\""},
      {R"({"name": "pocl-cpu", "build": {"cxxflags": ["-O3", 1]}})",
       "build.cxxflags[1]: expected a string, got the number 1"},
      {R"({"name": "pocl-cpu", "device": "cpu"})", "device: expected an object, got the string \"cpu\""},
      {R"({"name": "pocl-cpu", "runner": {"port": "22"}})", "runner.port: expected an integer, got the string \"22\""},
      {R"({"name": "pocl-cpu", "runner": {"port": 70000}})", "runner.port: expected an integer from 0 to 65535"},
      {R"({"name": "pocl-cpu", "runner": {"ssh_options": "-i key"}})",
       "runner.ssh_options: expected an array (of strings)"},
      {R"({"name": "pocl-cpu", "runner": {"transport": "carrier-pigeon"}})",
       "runner.transport: 'carrier-pigeon' is not one of"},
      {R"({"name": 7, "backend": "opencl"})", "name: expected a string, got the number 7"},
      {R"({"backend": 3})", "backend: expected a string (opencl, cuda or rvv), got the number 3"},
      {R"({"description": "no backend"})", "backend: missing"},
      {R"([1, 2])", "expected an object at the top level, got an array"},
  };
  for (const auto& [text, needle] : cases) {
    UserConfig cfg;
    cfg.write("targets/user.json", text);
    const TargetCatalog c = load_target_catalog();
    ASSERT_EQ(c.skipped.size(), 1u) << text;
    const std::string& why = c.skipped[0].reason;
    EXPECT_NE(why.find("user.json: " + needle), std::string::npos) << text << " -> " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
    EXPECT_EQ(why.find("json.exception"), std::string::npos) << why;
    EXPECT_GE(c.targets.size(), 12u) << "the built-in targets stay";
  }
}

// A null deletes a built-in field (JSON merge patch): it is not a wrong type.
TEST(Target, NullInAUserFileDeletesTheBuiltInField) {
  UserConfig cfg;
  cfg.write("targets/pocl.json", R"({"name": "pocl-cpu", "description": null, "build": {"cxxflags": ["-O3"]}})");
  const Target t = find_target("pocl-cpu");
  EXPECT_EQ(t.description, "");
  EXPECT_EQ(t.spec["build"]["cxxflags"][0], "-O3");
  EXPECT_EQ(t.backend, "opencl");
}

// `mblast targets` with broken user files lists every other target and names each broken file
// on a row of its own (text and --json).
TEST(Target, TargetsCommandListsTheOthersAndNamesTheBrokenFile) {
  UserConfig cfg;
  cfg.write("targets/broken.json", R"({"backend": "rvv", "arch": {"vlen": "wide"}})");
  cfg.write("targets/garbage.json", std::string("\x89PNG\r\n\x1a\n\0\0", 10));
  cfg.write("targets/mine.json", R"({"backend": "opencl"})");
  auto run = [](bool as_json) {
    std::ostringstream captured;
    auto* old = std::cout.rdbuf(captured.rdbuf());
    int rc = -1;
    try {
      rc = run_targets(TargetsArgs{as_json, /*no_probe=*/true, ""});
    } catch (...) {
      std::cout.rdbuf(old);
      throw;
    }
    std::cout.rdbuf(old);
    EXPECT_EQ(rc, 0);
    return captured.str();
  };
  const std::string text = run(false);
  for (const char* name : {"mine", "pocl-cpu", "rvv-qemu-256", "h200", "spacemit-k1"})
    EXPECT_NE(text.find(std::string("\n") + name + " "), std::string::npos) << name << " listed:\n" << text;
  EXPECT_NE(text.find((cfg.path() / "targets" / "broken.json").string() +
                      ": arch.vlen: expected an integer, got the string \"wide\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("garbage.json: not valid JSON (line 1, column 1)"), std::string::npos) << text;
  const auto rows = nlohmann::json::parse(run(true));
  int broken = 0, listed = 0;
  for (const auto& r : rows) {
    if (r.value("broken_file", false)) {
      ++broken;
      EXPECT_FALSE(r["available"].get<bool>());
      EXPECT_NE(r["reason"].get<std::string>().find(r["file"].get<std::string>()), std::string::npos) << r.dump();
    } else {
      ++listed;
    }
  }
  EXPECT_EQ(broken, 2);
  EXPECT_GE(listed, 14) << "13 built-in targets and mine";
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
  EXPECT_EQ(rotating_sets(with_input_mib(512), cpu, 0), 3);  // 2 fit; every seed is timed still
  EXPECT_EQ(rotating_sets(with_input_mib(512), cuda, 0), 4);
  EXPECT_EQ(rotating_sets(with_input_mib(2048), cuda, 0), 3);
  EXPECT_EQ(rotating_sets(with_input_mib(512), cpu, 2), 2);  // asked for
  p.seeds.clear();
  EXPECT_EQ(rotating_sets(with_input_mib(4096), cpu, 0), 1);
}

}  // namespace
}  // namespace mblast
