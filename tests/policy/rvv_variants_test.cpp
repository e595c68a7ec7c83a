// rvv_variants(): generated candidates (a covering subset of each problem's variants, all with
// MBLAST_TEST_EVERY_VARIANT=1: variant_subset.h) are built and verified through the real runner
// on the rvv-qemu targets (skipped with the reason when clang-19 / qemu are missing). Plans are made by
// hand here, so these tests do not depend on plan_kernel, except the chains, planned from a small
// graph (a chain's stages and temporaries are the planner's to lay out). Besides the hand-made problems,
// small synthetic problems (written to a temporary directory with a numpy reference) cover the
// paths those do not: every epilogue op, broadcast and gathered leaves, inner-axis reductions
// and softmax, log_softmax, transposed and batched matmul operands, row tails. The accuracy of
// the vector math is checked the same way, over wide input ranges at a few ulp.
//
// Set MBLAST_RVV_DUMP=<dir> to keep every generated source there, and MBLAST_RVV_REPORT=1 for the
// hand-made problems' instruction counts against their naive and autovec candidates (slow).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "conv_transpose_reference.h"
#include "mblast/measure/evaluate.h"
#include "mblast/measure/runner_client.h"
#include "mblast/policy/kernel_plan.h"
#include "mblast/policy/variants.h"
#include "test_env.h"
#include "variant_subset.h"

namespace mblast::policy {
namespace {

namespace fs = std::filesystem;
using K = ExprNode::Kind;

// ---- building plans by hand -------------------------------------------------------------

struct ExprBuilder {
  Expr e;
  int add(ExprNode n) {
    e.nodes.push_back(std::move(n));
    return static_cast<int>(e.nodes.size()) - 1;
  }
  int leaf(K kind, int tensor, int64_t div, int64_t mod) {
    ExprNode n;
    n.kind = kind;
    n.tensor = tensor;
    n.index = {div, mod};
    return add(n);
  }
  int in(int t, int64_t div, int64_t mod) { return leaf(K::Input, t, div, mod); }
  int pr(int t, int64_t div, int64_t mod) { return leaf(K::Param, t, div, mod); }
  int c(double v) {
    ExprNode n;
    n.kind = K::Const;
    n.value = v;
    return add(n);
  }
  int acc() {
    ExprNode n;
    n.kind = K::Acc;
    return add(n);
  }
  int u(const std::string& op, int a, double v = 0, double v2 = 0) {
    ExprNode n;
    n.kind = K::Unary;
    n.op = op;
    n.args = {a};
    n.value = v;
    n.value2 = v2;
    return add(n);
  }
  int b(const std::string& op, int a, int x) {
    ExprNode n;
    n.kind = K::Binary;
    n.op = op;
    n.args = {a, x};
    return add(n);
  }
  Expr done(int root) {
    e.root = root;
    return e;
  }
};

Expr identity() {
  ExprBuilder b;
  return b.done(b.acc());
}

KernelPlan elementwise(const Problem& p, Expr e) {
  KernelPlan k;
  k.kind = "elementwise";
  k.out_shape = p.outputs[0].shape;
  k.out_numel = static_cast<int64_t>(p.outputs[0].numel());
  k.expr = std::move(e);
  return k;
}

KernelPlan reduction(const Problem& p, const std::string& kind, const std::string& op, ReduceShape r,
                     Expr e = identity()) {
  KernelPlan k;
  k.kind = kind;
  k.reduce_op = op;
  k.source = 0;
  k.rshape = r;
  k.out_shape = p.outputs[0].shape;
  k.out_numel = static_cast<int64_t>(p.outputs[0].numel());
  k.expr = std::move(e);
  return k;
}

struct MatmulSpec {
  int a = 0, b = 0;
  bool a_param = false, b_param = false, a_t = false, b_t = false, a_batched = false, b_batched = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

KernelPlan matmul(const Problem& p, const MatmulSpec& s, Expr e = identity()) {
  KernelPlan k;
  k.kind = "matmul";
  k.a = s.a, k.b = s.b;
  k.a_is_param = s.a_param, k.b_is_param = s.b_param;
  k.a_transposed = s.a_t, k.b_transposed = s.b_t;
  k.a_batched = s.a_batched, k.b_batched = s.b_batched;
  k.batch = s.batch, k.m = s.m, k.n = s.n, k.k = s.k;
  k.out_shape = p.outputs[0].shape;
  k.out_numel = static_cast<int64_t>(p.outputs[0].numel());
  k.expr = std::move(e);
  return k;
}

Problem hand_made(const std::string& name) { return load_problem(testing::source_dir() / "problems" / name); }

// The plan plan_kernel is meant to find for each hand-made problem.
KernelPlan hand_made_plan(const Problem& p) {
  const int64_t n = static_cast<int64_t>(p.outputs[0].numel());
  if (p.name == "vec_add") {
    ExprBuilder b;
    return elementwise(p, b.done(b.b("add", b.in(0, 1, n), b.in(1, 1, n))));
  }
  if (p.name == "relu") {
    ExprBuilder b;
    return elementwise(p, b.done(b.u("relu", b.in(0, 1, n))));
  }
  if (p.name == "act_chain") {  // tanh(leaky_relu(x, 0.1) * scale[col]) + 0.5 * x
    ExprBuilder b;
    int x = b.in(0, 1, n);
    int t = b.u("tanh", b.b("mul", b.u("leaky_relu", x, 0.1), b.pr(0, 1, 1024)));
    return elementwise(p, b.done(b.b("add", t, b.b("mul", b.in(0, 1, n), b.c(0.5)))));
  }
  if (p.name == "row_sum") return reduction(p, "reduce", "sum", {2048, 1024, 1});
  if (p.name == "softmax") return reduction(p, "softmax", "", {1024, 1024, 1});
  if (p.name == "matmul") return matmul(p, {.a = 0, .b = 0, .b_param = true, .m = 256, .n = 384, .k = 512});
  return {};
}

Target target_named(const std::string& name) {
  Target t;
  t.name = name;
  t.backend = "rvv";
  return t;
}

// ---- evaluation ---------------------------------------------------------------------------

class Workdir {
 public:
  Workdir() : dir_(fs::temp_directory_path() / ("mblast-rvv-variants-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  ~Workdir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
};

Workdir& workdir() {
  static Workdir w;
  return w;
}

std::string file_stem(const Variant& v) {
  std::string s = v.family;
  for (auto it = v.params.begin(); it != v.params.end(); ++it)
    s += "-" + it.key() + (it->is_string() ? it->get<std::string>() : it->dump());
  // A chain's params (every stage's) make names past the file system's limit: a digest then.
  if (s.size() > 120) s = fmt::format("{}-{:016x}", v.family, std::hash<std::string>{}(v.params.dump()));
  return s;
}

fs::path write_variant(const Problem& p, const Variant& v) {
  const fs::path dir = workdir().path() / "candidates" / p.name;
  fs::create_directories(dir);
  const fs::path f = dir / (file_stem(v) + v.extension);
  std::ofstream(f) << v.source;
  if (const char* dump = std::getenv("MBLAST_RVV_DUMP"); dump && *dump) {
    fs::create_directories(fs::path(dump) / p.name);
    std::ofstream(fs::path(dump) / p.name / f.filename()) << v.source;
  }
  return f;
}

EvalOptions quick() {  // instruction counts: one call per rotating set is the whole measurement
  EvalOptions o = testing::quick_timing();
  o.min_repeats = 2;
  o.min_seconds = 0;
  return o;
}

struct Outcome {
  bool correct = false;
  double insns = 0;  // median instructions per call
  std::string why;
};

Outcome eval_file(const Problem& p, const Target& t, const fs::path& file, RunnerClient* client) {
  nlohmann::json r = evaluate(p, t, file, quick(), client);
  Outcome o;
  o.correct = r.value("correct", false);
  if (o.correct && r.contains("time")) o.insns = r["time"].value("median", 0.0);
  if (!o.correct)
    o.why = r.value("failure_kind", nlohmann::json()).dump() + ": " + r.value("reason", nlohmann::json()).dump() +
            "\n" + r.value("log", "");
  return o;
}

// The rvv-qemu target of this VLEN when the runner can open it here.
std::optional<Target> rvv_target(int vlen, std::string* why) {
  for (const auto& t : testing::available_targets("rvv", why))
    if (t.name == "rvv-qemu-" + std::to_string(vlen)) return t;
  if (why && why->empty()) *why = "rvv-qemu-" + std::to_string(vlen) + " is not available";
  return std::nullopt;
}

#define REQUIRE_RVV(target, vlen)              \
  std::string why_##vlen;                      \
  auto target = rvv_target(vlen, &why_##vlen); \
  if (!target) GTEST_SKIP() << "backend unavailable: " << why_##vlen;

// ---- what every variant list must satisfy ---------------------------------------------------

std::set<std::string> seed_action_ids() {
  std::set<std::string> ids;
  std::ifstream in(testing::source_dir() / "kb_schema" / "seed" / "rvv.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ids.insert(nlohmann::json::parse(line).at("id").get<std::string>());
  }
  return ids;
}

void check_variant_list(const std::vector<Variant>& vs, const KernelPlan& plan) {
  const auto fused = fuse_row_map(plan);
  static const std::set<std::string> ids = seed_action_ids();
  ASSERT_FALSE(ids.empty());
  ASSERT_FALSE(vs.empty()) << plan.summary();
  EXPECT_LE(vs.size(), 36u) << "a few dozen variants at most";
  std::set<std::string> keys;
  for (const auto& v : vs) {
    SCOPED_TRACE(v.family + " " + v.params.dump());
    EXPECT_EQ(v.extension, ".rvv.c");
    EXPECT_TRUE(v.family.starts_with("rvv."));
    EXPECT_FALSE(v.description.empty());
    ASSERT_FALSE(v.actions.empty());
    for (const auto& a : v.actions)
      EXPECT_TRUE(ids.count(a)) << "action " << a << " is not in kb_schema/seed/rvv.jsonl";
    EXPECT_TRUE(keys.insert(v.family + v.params.dump()).second) << "family + params identify a variant";
    // The source names its family, params and plan up front.
    const std::string head = v.source.substr(0, v.source.find("#include"));
    EXPECT_NE(head.find(v.family), std::string::npos);
    EXPECT_NE(head.find(v.params.dump()), std::string::npos);
    // A row map names the one-kernel plan it makes of the chain.
    EXPECT_NE(head.find(fused && v.family.starts_with("rvv.row-map.") ? fused->summary() : plan.summary()),
              std::string::npos);
    EXPECT_NE(v.source.find("int mblast_run("), std::string::npos);
  }
}

// ---- hand-made problems: every variant on rvv-qemu-256 ------------------------------------

class HandMade : public ::testing::TestWithParam<std::string> {};

TEST_P(HandMade, VariantsAreCorrect) {
  REQUIRE_RVV(t256, 256);
  const Problem p = hand_made(GetParam());
  const KernelPlan plan = hand_made_plan(p);
  const auto variants = rvv_variants(plan, p, *t256);
  check_variant_list(variants, plan);
  RunnerClient client(RunnerAddress{});
  // The report below needs the best of all; correctness alone, a covering subset (variant_subset.h).
  const char* report = std::getenv("MBLAST_RVV_REPORT");
  const bool reporting = report && std::string(report) == "1";
  const std::vector<size_t> chosen = variants_to_evaluate(variants, reporting || every_variant_requested());
  std::printf("[ policy ] rvv/%s: %zu of %zu variants evaluated at VLEN 256\n", p.name.c_str(), chosen.size(),
              variants.size());
  double best = 0;
  const Variant* best_v = nullptr;
  std::map<std::string, const Variant*> first_of_family;
  for (size_t i : chosen) {
    const Variant& v = variants[i];
    SCOPED_TRACE(v.family + " " + v.params.dump() + ": " + v.description);
    Outcome o = eval_file(p, *t256, write_variant(p, v), &client);
    ASSERT_TRUE(o.correct) << o.why;
    ASSERT_GT(o.insns, 0);
    if (!best_v || o.insns < best) best = o.insns, best_v = &v;
    first_of_family.emplace(v.family, &v);
  }
  // A subset at the other VLENs: the best of those evaluated at 256 and the first of every family.
  std::set<const Variant*> subset = {best_v};
  for (const auto& [f, v] : first_of_family) subset.insert(v);
  std::map<int, double> best_at = {{256, best}};
  for (int vlen : {128, 512}) {
    std::string why;
    auto t = rvv_target(vlen, &why);
    if (!t) continue;
    for (const Variant* v : subset) {
      SCOPED_TRACE(t->name + " " + v->family + " " + v->params.dump());
      Outcome o = eval_file(p, *t, write_variant(p, *v), &client);
      ASSERT_TRUE(o.correct) << o.why;
      if (v == best_v) best_at[vlen] = o.insns;
    }
  }
  // Report (not asserted, opt-in: MBLAST_RVV_REPORT=1): the best variant against the problem's
  // naive and autovec candidates. The scalar naive matmul alone takes minutes under QEMU, so CI
  // checks correctness and leaves the figures to whoever asks for them.
  if (!reporting) return;
  for (int vlen : {128, 256}) {
    std::string why;
    auto t = rvv_target(vlen, &why);
    if (!t) continue;
    const fs::path cands = p.dir / "candidates";
    Outcome naive = eval_file(p, *t, cands / "naive.rvv.c", &client);
    Outcome autovec = eval_file(p, *t, cands / "autovec.rvv.c", &client);
    const std::string line =
        fmt::format("{:<10} VLEN {:>3}: best {} {} = {:.0f} insns; naive {:.0f} ({:.2f}x); autovec {:.0f} ({:.2f}x)",
                    p.name, vlen, best_v->family, best_v->params.dump(), best_at[vlen], naive.insns,
                    naive.insns / best_at[vlen], autovec.insns, autovec.insns / best_at[vlen]);
    std::cout << "[rvv report] " << line << std::endl;
    RecordProperty("vlen" + std::to_string(vlen), line);
  }
}

INSTANTIATE_TEST_SUITE_P(Problems, HandMade,
                         ::testing::Values("vec_add", "relu", "act_chain", "row_sum", "softmax", "matmul"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---- synthetic problems ---------------------------------------------------------------------

struct Synthetic {
  std::string name;
  nlohmann::json inputs, params, output;            // [{"name", "dtype", "shape"}]
  std::string make_inputs, make_params, reference;  // bodies of the python functions
  double atol = 1e-5, rtol = 1e-5;
};

Problem write_problem(const Synthetic& s) {
  const fs::path dir = workdir().path() / "problems" / s.name;
  fs::create_directories(dir);
  auto numel = [](const nlohmann::json& t) {
    int64_t n = 1;
    for (auto d : t["shape"]) n *= d.get<int64_t>();
    return n;
  };
  int64_t bytes = 4 * numel(s.output);
  for (const auto* list : {&s.inputs, &s.params})
    for (const auto& t : *list) bytes += 4 * numel(t);
  nlohmann::json j = {
      {"format", 1},
      {"flops", numel(s.output)},
      {"bytes", bytes},
      {"name", s.name},
      {"description", "synthetic problem of the rvv generator tests"},
      {"op_class", "elementwise"},
      {"inputs", s.inputs},
      {"parameters", s.params},
      {"outputs", nlohmann::json::array({s.output})},
      {"tolerance", {{"f32", {{"atol", s.atol}, {"rtol", s.rtol}, {"min_match", 1.0}}}}},
      {"seeds", {{{"seed", 0}, {"distribution", "normal"}}, {{"seed", 1}, {"distribution", "signed_uniform"}}}},
      {"inits", {0}},
      {"provenance", {{"kind", "hand-made"}, {"source", "tests/policy/rvv_variants_test.cpp"}}}};
  std::ofstream(dir / "problem.json") << j.dump(2);
  std::ofstream(dir / "reference.py") << "import math\nimport numpy as np\nfrom mblast_data import sample\n\n"
                                      << "def make_inputs(rng, distribution):\n"
                                      << s.make_inputs << "\n\n"
                                      << "def make_params(rng):\n"
                                      << s.make_params << "\n\n"
                                      << "def reference(inputs, params):\n"
                                      << s.reference << "\n";
  return load_problem(dir);
}

nlohmann::json spec(const std::string& name, std::vector<int64_t> shape) {
  return {{"name", name}, {"dtype", "f32"}, {"shape", shape}};
}

// Evaluates the first and last variant of every family (the LMUL extremes; the code paths
// between them are the same) on rvv-qemu-256, and everything when `all`; the same first and
// last at VLEN 128 and 512 too, where the strip, panel and tail lengths all differ.
void expect_variants_correct(const Problem& p, const KernelPlan& plan, bool all = false) {
  std::string why;
  auto t = rvv_target(256, &why);
  ASSERT_TRUE(t.has_value()) << why;
  const auto variants = generate_variants(plan, p, *t);
  check_variant_list(variants, plan);
  std::map<std::string, std::vector<const Variant*>> by_family;
  for (const auto& v : variants) by_family[v.family].push_back(&v);
  RunnerClient client(RunnerAddress{});
  for (int vlen : {256, 128, 512}) {
    auto target = rvv_target(vlen, &why);
    if (!target) continue;
    for (const auto& [family, list] : by_family) {
      std::set<const Variant*> pick = {list.front(), list.back()};
      if (all && vlen == 256) pick.insert(list.begin(), list.end());
      for (const Variant* v : pick) {
        SCOPED_TRACE(target->name + " " + v->family + " " + v->params.dump() + ": " + v->description);
        Outcome o = eval_file(p, *target, write_variant(p, *v), &client);
        EXPECT_TRUE(o.correct) << o.why;
      }
    }
  }
}

class SyntheticProblems : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!rvv_target(256, &why)) GTEST_SKIP() << "backend unavailable: " << why;
  }
};

// Every epilogue op, per-column (contiguous), per-row (one value per row) and scalar parameters,
// a uniform sub-expression (c * c + 1) computed in scalar C, fused multiply-adds.
TEST_F(SyntheticProblems, ElementwiseEveryOp) {
  Synthetic s{
      "ew_ops", nlohmann::json::array({spec("x", {48, 80})}),
      nlohmann::json::array({spec("s", {80}), spec("r", {48, 1}), spec("c", {1})}), spec("y", {48, 80}),
      "    return {'x': sample(rng, (48, 80), distribution, 'f32')}",
      "    return {'s': sample(rng, (80,), 'normal', 'f32'), 'r': sample(rng, (48, 1), 'normal', 'f32'),\n"
      "            'c': sample(rng, (1,), 'normal', 'f32')}",
      "    x = inputs['x'].astype(np.float64); s = params['s'].astype(np.float64)[None, :]\n"
      "    r = params['r'].astype(np.float64); c = float(params['c'][0])\n"
      "    erf = np.vectorize(math.erf)\n"
      "    xs = x * s\n"
      "    gelu = 0.5 * xs * (1 + erf(xs / math.sqrt(2)))\n"
      "    gelu_tanh = x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))\n"
      "    silu = x / (1 + np.exp(-x))\n"
      "    softplus = np.where(3 * x > 20, 3 * x, np.log1p(np.exp(3 * x)))\n"
      "    y = (gelu + gelu_tanh - silu * c + softplus + np.log(np.abs(x) + 0.1) + np.sqrt(np.abs(x))\n"
      "         + 1 / np.sqrt(x * x + 1) + 1 / (1 + np.exp(-2 * x)) + 0.25 * np.exp(x) + np.tanh(x * r)\n"
      "         + np.where(x > 0, x, -0.2 * x) + np.clip(x, -0.5, 0.5) + np.clip(8 * x, 0, 6) + (-x) / 2.5\n"
      "         + np.maximum(x, r) + np.minimum(x, c) + np.abs(x) - x / (c * c + 1) + np.where(x > 0, x, 3 * x)\n"
      "         + np.where(x > 0, x, 0.3 * x) + np.maximum(x, 0) + np.clip(x, -1, 1) - 2 * x * s + x * s * x - 0.5 - "
      "x)\n"
      "    return {'y': y}",
      // Two dozen terms of up to ~60 summed in float32: this checks the plumbing (a wrong op is off by
      // O(1)); VectorMathIsAccurate checks the accuracy of each function.
      2e-4, 1e-4};
  const Problem p = write_problem(s);
  const int64_t n = 48 * 80;
  ExprBuilder b;
  auto X = [&] { return b.in(0, 1, n); };
  auto S = [&] { return b.pr(0, 1, 80); };
  auto R = [&] { return b.pr(1, 80, 48); };
  auto C = [&] { return b.pr(2, 1, 1); };
  std::vector<int> terms = {
      b.u("gelu", b.b("mul", X(), S())),
      b.u("gelu_tanh", X()),
      b.b("mul", b.c(-1), b.b("mul", b.u("silu", X()), C())),
      b.u("softplus", b.b("mul", X(), b.c(3))),
      b.u("log", b.b("add", b.u("abs", X()), b.c(0.1))),
      b.u("sqrt", b.u("abs", X())),
      b.u("rsqrt", b.b("add", b.b("mul", X(), X()), b.c(1))),
      b.u("sigmoid", b.b("mul", b.c(2), X())),
      b.b("mul", b.c(0.25), b.u("exp", X())),
      b.u("tanh", b.b("mul", X(), R())),
      b.u("leaky_relu", X(), -0.2),
      b.u("clamp", X(), -0.5, 0.5),
      b.u("relu6", b.b("mul", X(), b.c(8))),
      b.b("div", b.u("neg", X()), b.c(2.5)),
      b.b("max", X(), R()),
      b.b("min", C(), X()),
      b.u("abs", X()),
      b.b("sub", b.c(0), b.b("div", X(), b.b("add", b.b("mul", C(), C()), b.c(1)))),
      b.u("leaky_relu", X(), 3.0),
      b.u("leaky_relu", X(), 0.3),
      b.u("relu", X()),
      b.u("hardtanh", X(), -1, 1),
      b.b("sub", b.b("mul", X(), b.b("mul", S(), X())), b.b("mul", b.b("mul", X(), S()), b.c(2))),
      b.b("sub", b.c(-0.5), X()),
  };
  int sum = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) sum = b.b("add", sum, terms[i]);
  const KernelPlan plan = elementwise(p, b.done(sum));
  expect_variants_correct(p, plan, /*all=*/true);
}

// A per-channel parameter of an [N, C, W] output with W too short for a block: gathered.
TEST_F(SyntheticProblems, ElementwiseGatheredLeaf) {
  Synthetic s{"ew_gather",
              nlohmann::json::array({spec("x", {4, 12, 10})}),
              nlohmann::json::array({spec("w", {12, 1})}),
              spec("y", {4, 12, 10}),
              "    return {'x': sample(rng, (4, 12, 10), distribution, 'f32')}",
              "    return {'w': sample(rng, (12, 1), 'normal', 'f32')}",
              "    x = inputs['x'].astype(np.float64); w = params['w'].astype(np.float64)[None]\n"
              "    return {'y': np.maximum(x * w, 0) + 0.25 * x}"};
  const Problem p = write_problem(s);
  ExprBuilder b;
  int x = b.in(0, 1, 480);
  const KernelPlan plan = elementwise(
      p, b.done(b.b("add", b.u("relu", b.b("mul", x, b.pr(0, 10, 12))), b.b("mul", b.in(0, 1, 480), b.c(0.25)))));
  const auto vs = rvv_variants(plan, p, target_named("rvv-qemu-256"));
  ASSERT_FALSE(vs.empty());
  EXPECT_NE(vs[0].source.find("vluxei32"), std::string::npos) << "the per-channel leaf is read with an indexed load";
  expect_variants_correct(p, plan);
}

TEST_F(SyntheticProblems, ReduceInnerAxisMeanWithEpilogue) {
  Synthetic s{"reduce_inner",
              nlohmann::json::array({spec("x", {6, 50, 40})}),
              nlohmann::json::array({spec("bias", {40})}),
              spec("y", {6, 40}),
              "    return {'x': sample(rng, (6, 50, 40), distribution, 'f32')}",
              "    return {'bias': sample(rng, (40,), 'normal', 'f32', scale=0.1)}",
              "    x = inputs['x'].astype(np.float64); b = params['bias'].astype(np.float64)\n"
              "    return {'y': np.maximum(x.mean(axis=1) + b[None, :], 0)}"};
  const Problem p = write_problem(s);
  ExprBuilder b;
  const KernelPlan plan =
      reduction(p, "reduce", "mean", {6, 50, 40}, b.done(b.u("relu", b.b("add", b.acc(), b.pr(0, 1, 40)))));
  expect_variants_correct(p, plan);
}

// A sum over a long axis (16384, inner 40) whose exact value is 0: the second half is the first
// negated and reversed, so running sums grow to ~300 and cancel. A plain running sum per lane
// misses by 4-6e-4; the tolerance is what a pairwise (PyTorch-like) sum meets. Every variant.
TEST_F(SyntheticProblems, ReduceLongCancellingColumnSum) {
  Synthetic s{"reduce_long_sum",
              nlohmann::json::array({spec("x", {2, 16384, 40})}),
              nlohmann::json::array(),
              spec("y", {2, 40}),
              "    a = sample(rng, (2, 8192, 40), 'normal', 'f32', scale=3.0)\n"
              "    return {'x': np.concatenate([a, -a[:, ::-1, :]], axis=1)}",
              "    return {}",
              "    return {'y': inputs['x'].astype(np.float64).sum(axis=1)}",
              2e-4,
              1e-4};
  const Problem p = write_problem(s);
  ExprBuilder b;
  const KernelPlan plan = reduction(p, "reduce", "sum", {2, 16384, 40}, b.done(b.acc()));
  expect_variants_correct(p, plan, true);
}

// LayerNorm over rows of 130 (tails at every VLEN), the affine and a relu in the epilogue;
// inputs scaled by 3; the one-pass variance is offered because the tolerance allows it.
TEST_F(SyntheticProblems, LayerNormAffineRelu) {
  Synthetic s{"layernorm",
              nlohmann::json::array({spec("x", {19, 130})}),
              nlohmann::json::array({spec("w", {130}), spec("b", {130})}),
              spec("y", {19, 130}),
              "    return {'x': sample(rng, (19, 130), distribution, 'f32', scale=3.0)}",
              "    return {'w': sample(rng, (130,), 'normal', 'f32'), 'b': sample(rng, (130,), 'normal', 'f32')}",
              "    x = inputs['x'].astype(np.float64)\n    m = x.mean(axis=1, keepdims=True)\n"
              "    v = ((x - m) ** 2).mean(axis=1, keepdims=True)\n"
              "    y = (x - m) / np.sqrt(v + 1e-5) * params['w'].astype(np.float64) + params['b'].astype(np.float64)\n"
              "    return {'y': np.maximum(y, 0.0)}",
              1e-5,
              1e-4};
  const Problem p = write_problem(s);
  ExprBuilder b;
  KernelPlan plan = reduction(p, "layernorm", "", {19, 130, 1},
                              b.done(b.u("relu", b.b("add", b.b("mul", b.acc(), b.pr(0, 1, 130)), b.pr(1, 1, 130)))));
  plan.eps = 1e-5;
  const auto vs = rvv_variants(plan, p, target_named("rvv-qemu-256"));
  std::set<std::string> families;
  for (const auto& v : vs) families.insert(v.family);
  EXPECT_TRUE(families.count("rvv.layernorm.two-pass"));
  EXPECT_TRUE(families.count("rvv.layernorm.one-pass"));
  expect_variants_correct(p, plan);
}

// RMSNorm (a layernorm without the mean, as the planner makes of x * rsqrt(mean(x^2) + eps) * w):
// the two-pass form only, the mean 0.
TEST_F(SyntheticProblems, RmsNormWeight) {
  Synthetic s{
      "rmsnorm",
      nlohmann::json::array({spec("x", {19, 130})}),
      nlohmann::json::array({spec("w", {130})}),
      spec("y", {19, 130}),
      "    return {'x': sample(rng, (19, 130), distribution, 'f32', scale=3.0)}",
      "    return {'w': sample(rng, (130,), 'normal', 'f32')}",
      "    x = inputs['x'].astype(np.float64)\n"
      "    return {'y': x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + 1e-6) * params['w'].astype(np.float64)}",
      1e-5,
      1e-4};
  const Problem p = write_problem(s);
  ExprBuilder b;
  KernelPlan plan = reduction(p, "layernorm", "", {19, 130, 1}, b.done(b.b("mul", b.acc(), b.pr(0, 1, 130))));
  plan.eps = 1e-6;
  plan.rms = true;
  const auto vs = rvv_variants(plan, p, target_named("rvv-qemu-256"));
  ASSERT_FALSE(vs.empty());
  for (const auto& v : vs) {
    EXPECT_EQ(v.family, "rvv.layernorm.two-pass");
    EXPECT_NE(v.source.find("mean = 0.0f"), std::string::npos);
  }
  expect_variants_correct(p, plan);
}

TEST_F(SyntheticProblems, ReduceShortRowsMax) {
  Synthetic s{"reduce_short",
              nlohmann::json::array({spec("x", {300, 12})}),
              nlohmann::json::array(),
              spec("y", {300}),
              "    return {'x': sample(rng, (300, 12), distribution, 'f32')}",
              "    return {}",
              "    x = inputs['x'].astype(np.float64)\n    return {'y': x.max(axis=1) * 2 - 1}"};
  const Problem p = write_problem(s);
  ExprBuilder b;
  const KernelPlan plan =
      reduction(p, "reduce", "max", {300, 12, 1}, b.done(b.b("sub", b.b("mul", b.acc(), b.c(2)), b.c(1))));
  const auto vs = rvv_variants(plan, p, target_named("rvv-qemu-256"));
  std::set<std::string> families;
  for (const auto& v : vs) families.insert(v.family);
  EXPECT_TRUE(families.count("rvv.reduce.rows-in-lanes"));
  EXPECT_TRUE(families.count("rvv.reduce.row-accumulators"));
  expect_variants_correct(p, plan);
}

TEST_F(SyntheticProblems, ReduceRowsMinAndSumWithTranscendentalEpilogue) {
  Synthetic s{"reduce_rows_min",
              nlohmann::json::array({spec("x", {20, 300})}),
              nlohmann::json::array(),
              spec("y", {20}),
              "    return {'x': sample(rng, (20, 300), distribution, 'f32')}",
              "    return {}",
              "    x = inputs['x'].astype(np.float64)\n    return {'y': 1 / (1 + np.exp(-x.min(axis=1)))}"};
  const Problem p = write_problem(s);
  ExprBuilder b;
  expect_variants_correct(p, reduction(p, "reduce", "min", {20, 300, 1}, b.done(b.u("sigmoid", b.acc()))));

  Synthetic t = s;
  t.name = "reduce_rows_sum";
  t.reference = "    x = inputs['x'].astype(np.float64)\n    return {'y': np.tanh(x.sum(axis=1) * 0.1)}";
  const Problem q = write_problem(t);
  ExprBuilder c;
  expect_variants_correct(
      q, reduction(q, "reduce", "sum", {20, 300, 1}, c.done(c.u("tanh", c.b("mul", c.acc(), c.c(0.1))))));
}

TEST_F(SyntheticProblems, SoftmaxInnerAxis) {
  Synthetic s{"softmax_inner",
              nlohmann::json::array({spec("x", {4, 30, 20})}),
              nlohmann::json::array({spec("b", {20})}),
              spec("y", {4, 30, 20}),
              "    return {'x': sample(rng, (4, 30, 20), distribution, 'f32', scale=4.0)}",
              "    return {'b': sample(rng, (20,), 'normal', 'f32')}",
              "    x = inputs['x'].astype(np.float64)\n    e = np.exp(x - x.max(axis=1, keepdims=True))\n"
              "    return {'y': 2 * e / e.sum(axis=1, keepdims=True) + params['b'].astype(np.float64)}",
              1e-6,
              1e-4};
  const Problem p = write_problem(s);
  ExprBuilder b;
  expect_variants_correct(
      p, reduction(p, "softmax", "", {4, 30, 20}, b.done(b.b("add", b.b("mul", b.acc(), b.c(2)), b.pr(0, 1, 20)))),
      /*all=*/true);
}

TEST_F(SyntheticProblems, LogSoftmaxRowsAndInnerAxis) {
  Synthetic s{"log_softmax_rows",
              nlohmann::json::array({spec("x", {16, 100})}),
              nlohmann::json::array({spec("g", {100})}),
              spec("y", {16, 100}),
              "    return {'x': sample(rng, (16, 100), distribution, 'f32', scale=4.0)}",
              "    return {'g': sample(rng, (100,), 'normal', 'f32')}",
              "    x = inputs['x'].astype(np.float64); g = params['g'].astype(np.float64)\n"
              "    m = x.max(axis=1, keepdims=True)\n"
              "    return {'y': (x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))) * g[None, :]}",
              1e-5,
              1e-5};
  const Problem p = write_problem(s);
  ExprBuilder b;
  expect_variants_correct(p,
                          reduction(p, "log_softmax", "", {16, 100, 1}, b.done(b.b("mul", b.acc(), b.pr(0, 1, 100)))),
                          /*all=*/true);

  Synthetic t{"log_softmax_inner",
              nlohmann::json::array({spec("x", {3, 25, 16})}),
              nlohmann::json::array(),
              spec("y", {3, 25, 16}),
              "    return {'x': sample(rng, (3, 25, 16), distribution, 'f32', scale=4.0)}",
              "    return {}",
              "    x = inputs['x'].astype(np.float64)\n    m = x.max(axis=1, keepdims=True)\n"
              "    return {'y': np.exp(x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True)))}",
              1e-6,
              1e-4};
  const Problem q = write_problem(t);
  ExprBuilder c;
  expect_variants_correct(q, reduction(q, "log_softmax", "", {3, 25, 16}, c.done(c.u("exp", c.acc()))));
}

// nn.Linear: B^T as a parameter (packed in mblast_prepare), bias and GELU in registers, 33 rows
// (a row tail for every mr).
TEST_F(SyntheticProblems, LinearWithBiasAndGelu) {
  Synthetic s{"linear_gelu",
              nlohmann::json::array({spec("a", {33, 40})}),
              nlohmann::json::array({spec("weight", {24, 40}), spec("bias", {24})}),
              spec("y", {33, 24}),
              "    return {'a': sample(rng, (33, 40), distribution, 'f32')}",
              "    return {'weight': sample(rng, (24, 40), 'normal', 'f32', scale=0.15), 'bias': sample(rng, (24,), "
              "'normal', 'f32')}",
              "    a = inputs['a'].astype(np.float64); w = params['weight'].astype(np.float64)\n"
              "    z = a @ w.T + params['bias'].astype(np.float64)[None, :]\n"
              "    erf = np.vectorize(math.erf)\n"
              "    return {'y': 0.5 * z * (1 + erf(z / math.sqrt(2)))}",
              1e-5,
              1e-5};
  const Problem p = write_problem(s);
  ExprBuilder b;
  const KernelPlan plan = matmul(p, {.a = 0, .b = 0, .b_param = true, .b_t = true, .m = 33, .n = 24, .k = 40},
                                 b.done(b.u("gelu", b.b("add", b.acc(), b.pr(1, 1, 24)))));
  const auto vs = rvv_variants(plan, p, target_named("rvv-qemu-256"));
  ASSERT_FALSE(vs.empty());
  EXPECT_NE(vs[0].source.find("mblast_prepare"), std::string::npos);
  EXPECT_NE(std::find(vs[0].actions.begin(), vs[0].actions.end(), "rvv.prepack-weights"), vs[0].actions.end());
  expect_variants_correct(p, plan, /*all=*/true);
}

// Batched A^T @ B^T, both inputs (B^T packed per call).
TEST_F(SyntheticProblems, BatchedTransposedOperands) {
  Synthetic s{"bmm_tt",
              nlohmann::json::array({spec("at", {2, 20, 17}), spec("bt", {2, 30, 20})}),
              nlohmann::json::array(),
              spec("y", {2, 17, 30}),
              "    return {'at': sample(rng, (2, 20, 17), distribution, 'f32'), 'bt': sample(rng, (2, 30, 20), "
              "distribution, 'f32')}",
              "    return {}",
              "    a = inputs['at'].astype(np.float64).transpose(0, 2, 1); b = "
              "inputs['bt'].astype(np.float64).transpose(0, 2, 1)\n"
              "    return {'y': a @ b}",
              1e-5,
              1e-5};
  const Problem p = write_problem(s);
  expect_variants_correct(p, matmul(p, {.a = 0,
                                        .b = 1,
                                        .a_t = true,
                                        .b_t = true,
                                        .a_batched = true,
                                        .b_batched = true,
                                        .batch = 2,
                                        .m = 17,
                                        .n = 30,
                                        .k = 20}));
}

// Batched A with one B shared by every batch, ReLU epilogue.
TEST_F(SyntheticProblems, BatchedAWithSharedB) {
  Synthetic s{"mm_shared_b",
              nlohmann::json::array({spec("a", {3, 10, 16})}),
              nlohmann::json::array({spec("w", {16, 21})}),
              spec("y", {3, 10, 21}),
              "    return {'a': sample(rng, (3, 10, 16), distribution, 'f32')}",
              "    return {'w': sample(rng, (16, 21), 'normal', 'f32')}",
              "    a = inputs['a'].astype(np.float64); w = params['w'].astype(np.float64)\n"
              "    return {'y': np.maximum(a @ w, 0)}",
              1e-5,
              1e-5};
  const Problem p = write_problem(s);
  ExprBuilder b;
  expect_variants_correct(p, matmul(p,
                                    {.a = 0,
                                     .b = 0,
                                     .b_param = true,
                                     .a_batched = true,
                                     .b_batched = false,
                                     .batch = 3,
                                     .m = 10,
                                     .n = 21,
                                     .k = 16},
                                    b.done(b.u("relu", b.acc()))));
}

// ---- pooling --------------------------------------------------------------------------------

KernelPlan pool(const std::string& op, std::vector<int64_t> out, PoolShape shape, Expr epilogue = {}) {
  KernelPlan p;
  p.kind = "pool";
  p.pool_op = op;
  p.source = 0;
  p.pool = shape;
  p.out_numel = 1;
  for (int64_t d : out) p.out_numel *= d;
  p.out_shape = std::move(out);
  p.expr = std::move(epilogue);
  return p;
}

// The reference's window loop, for output [n, c, oh, ow] (float64, padding skipped).
std::string pool_reference(const std::string& geometry, const std::string& reduce_taps) {
  return "    x = inputs['x'].astype(np.float64)\n"
         "    n, c, h, w = x.shape\n"
         "    " +
         geometry +
         "\n"
         "    out = np.empty((n, c, oh, ow))\n"
         "    for i in range(oh):\n"
         "        for j in range(ow):\n"
         "            taps = [x[:, :, i * sh - ph + r * dh, j * sw - pw + q * dw] for r in range(kh) for q in "
         "range(kw)\n"
         "                    if 0 <= i * sh - ph + r * dh < h and 0 <= j * sw - pw + q * dw < w]\n"
         "            t = np.stack(taps, axis=-1)\n"
         "            out[:, :, i, j] = " +
         reduce_taps + "\n";
}

// Max pooling with padding (as -inf), stride 2 and dilation 2, odd sizes, a ReLU epilogue: the
// strided strips, the border columns in scalar C, and the scalar variant.
TEST_F(SyntheticProblems, MaxPoolPaddedDilatedWithRelu) {
  Synthetic s{
      "pool_max",
      nlohmann::json::array({spec("x", {2, 3, 11, 9})}),
      nlohmann::json::array(),
      spec("y", {2, 3, 5, 4}),
      "    return {'x': sample(rng, (2, 3, 11, 9), distribution, 'f32')}",
      "    return {}",
      pool_reference("oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = 5, 4, 3, 3, 2, 2, 1, 1, 2, 2", "t.max(axis=-1)") +
          "    return {'y': np.maximum(out, 0.0)}",
      1e-6,
      1e-6};
  const Problem p = write_problem(s);
  ExprBuilder b;
  expect_variants_correct(
      p,
      pool("max", {2, 3, 5, 4}, PoolShape{6, 11, 9, 5, 4, 3, 3, 2, 2, 1, 1, 2, 2, true}, b.done(b.u("relu", b.acc()))),
      true);
}

// Average pooling of a 2x3 window, stride (1, 2), padding 1, count_include_pad=False: the divisor
// counts the taps inside (rows cut by the padding change it within a vector strip too).
TEST_F(SyntheticProblems, AvgPoolExcludingPadding) {
  Synthetic s{"pool_avg",
              nlohmann::json::array({spec("x", {1, 4, 7, 10})}),
              nlohmann::json::array(),
              spec("y", {1, 4, 8, 5}),
              "    return {'x': sample(rng, (1, 4, 7, 10), distribution, 'f32')}",
              "    return {}",
              pool_reference("oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = 8, 5, 2, 3, 1, 2, 1, 1, 1, 1",
                             "t.sum(axis=-1) / len(taps)") +
                  "    return {'y': out}",
              1e-6,
              1e-5};
  const Problem p = write_problem(s);
  expect_variants_correct(p, pool("avg", {1, 4, 8, 5}, PoolShape{4, 7, 10, 8, 5, 2, 3, 1, 2, 1, 1, 1, 1, false}), true);
}

// A grouped convolution with stride (2, 1), padding 1, dilation (1, 2), the bias and a SiLU as
// the epilogue (a vector math helper the epilogue pass needs): vector strips (unit-stride loads
// at stride 1 along the row), border columns and the scalar variant.
TEST_F(SyntheticProblems, ConvGroupedStridedDilatedWithBiasSilu) {
  Synthetic s{"conv_grouped",
              nlohmann::json::array({spec("x", {2, 4, 9, 8})}),
              nlohmann::json::array({spec("w", {6, 2, 3, 3}), spec("b", {6})}),
              spec("y", {2, 6, 5, 6}),
              "    return {'x': sample(rng, (2, 4, 9, 8), distribution, 'f32')}",
              "    return {'w': sample(rng, (6, 2, 3, 3), 'normal', 'f32'), 'b': sample(rng, (6,), 'normal', 'f32')}",
              "    x = inputs['x'].astype(np.float64); wt = params['w'].astype(np.float64)\n"
              "    xp = np.zeros((2, 4, 11, 10)); xp[:, :, 1:10, 1:9] = x\n"
              "    y = np.zeros((2, 6, 5, 6))\n"
              "    for co in range(6):\n"
              "        g = co // 3\n"
              "        for r in range(3):\n"
              "            for q in range(3):\n"
              "                patch = xp[:, 2 * g:2 * g + 2, r:r + 9:2, 2 * q:2 * q + 6]\n"
              "                y[:, co] += np.einsum('nchw,c->nhw', patch, wt[co, :, r, q])\n"
              "    z = y + params['b'].astype(np.float64)[None, :, None, None]\n"
              "    return {'y': z / (1.0 + np.exp(-z))}",
              1e-5,
              1e-4};
  const Problem p = write_problem(s);
  KernelPlan plan;
  plan.kind = "conv";
  plan.source = 0;
  plan.conv = ConvShape{2, 4, 6, 2, 9, 8, 5, 6, 3, 3, 2, 1, 1, 1, 1, 2};
  plan.conv_weight = 0;
  plan.out_shape = {2, 6, 5, 6};
  plan.out_numel = 360;
  ExprBuilder b;
  plan.expr = b.done(b.u("silu", b.b("add", b.acc(), b.pr(1, 30, 6))));
  expect_variants_correct(p, plan, true);
}

// The reference's scatter, nested in reference() (the synthetic file has no other top level).
std::string conv_transpose_reference(const std::string& call) {
  std::string nested;
  std::istringstream lines(kConvTransposeReference);
  for (std::string line; std::getline(lines, line);) nested += line.empty() ? "\n" : "    " + line + "\n";
  return nested + "    y = " + call;
}

KernelPlan conv_transpose_plan(std::vector<int64_t> out, ConvShape shape, Expr epilogue) {
  KernelPlan plan;
  plan.kind = "conv_transpose";
  plan.source = 0;
  plan.conv = shape;
  plan.conv_weight = 0;
  plan.conv_weight_is_param = true;
  plan.out_numel = 1;
  for (auto d : out) plan.out_numel *= d;
  plan.out_shape = std::move(out);
  plan.expr = std::move(epilogue);
  return plan;
}

// relu(conv_transpose2d(x, w, b, stride (2, 3), padding (1, 2), output_padding (1, 2), dilation
// (1, 2), groups 2)): strided scatters (vlse/vsse), taps landing before the row's start and past its
// end, output rows no input row reaches through some taps.
TEST_F(SyntheticProblems, ConvTransposeStridedGroupedWithBiasRelu) {
  Synthetic s{"conv_transpose",
              nlohmann::json::array({spec("x", {2, 4, 5, 4})}),
              nlohmann::json::array({spec("w", {4, 3, 3, 4}), spec("b", {6})}),
              spec("y", {2, 6, 10, 14}),
              "    return {'x': sample(rng, (2, 4, 5, 4), distribution, 'f32')}",
              "    return {'w': sample(rng, (4, 3, 3, 4), 'normal', 'f32'), 'b': sample(rng, (6,), 'normal', 'f32')}",
              conv_transpose_reference("conv_transpose(inputs['x'].astype(np.float64), params['w'].astype(np.float64), "
                                       "2, 3, 1, 2, 1, 2, 1, 2, 2)\n") +
                  "    return {'y': np.maximum(y + params['b'].astype(np.float64)[None, :, None, None], 0.0)}",
              1e-5,
              1e-4};
  const Problem p = write_problem(s);
  ExprBuilder b;
  const KernelPlan plan =
      conv_transpose_plan({2, 6, 10, 14}, ConvShape{2, 4, 6, 2, 5, 4, 10, 14, 3, 4, 2, 3, 1, 2, 1, 2},
                          b.done(b.u("relu", b.b("add", b.acc(), b.pr(1, 140, 6)))));
  expect_variants_correct(p, plan, true);
}

// conv_transpose1d(x, w, stride 1, padding 1, dilation 2) over rows of 9: the unit-stride
// scatter, a row longer than VLMAX at LMUL 1 on VLEN 128.
TEST_F(SyntheticProblems, ConvTranspose1dUnitStride) {
  Synthetic s{"conv_transpose_1d",
              nlohmann::json::array({spec("x", {1, 3, 1, 9})}),
              nlohmann::json::array({spec("w", {3, 2, 1, 3})}),
              spec("y", {1, 2, 1, 11}),
              "    return {'x': sample(rng, (1, 3, 1, 9), distribution, 'f32')}",
              "    return {'w': sample(rng, (3, 2, 1, 3), 'normal', 'f32')}",
              conv_transpose_reference("conv_transpose(inputs['x'].astype(np.float64), params['w'].astype(np.float64), "
                                       "1, 1, 0, 1, 0, 0, 1, 2, 1)\n") +
                  "    return {'y': y}",
              1e-5,
              1e-4};
  const Problem p = write_problem(s);
  const KernelPlan plan =
      conv_transpose_plan({1, 2, 1, 11}, ConvShape{1, 3, 2, 1, 1, 9, 1, 11, 1, 3, 1, 1, 0, 1, 1, 2}, identity());
  expect_variants_correct(p, plan, true);
}

TEST_F(SyntheticProblems, ConvDepthwiseCausalPaddedUnevenly) {
  // F.pad(x, (3, 1)) then a depthwise Conv1d, kernel 3, dilation 2, stride 2: the padding is
  // uneven (3 left, 1 right), so the interior columns and the output length differ from any
  // symmetric conv's.
  Synthetic s{"conv_causal",
              nlohmann::json::array({spec("x", {2, 3, 1, 20})}),
              nlohmann::json::array({spec("w", {3, 1, 1, 3})}),
              spec("y", {2, 3, 1, 10}),
              "    return {'x': sample(rng, (2, 3, 1, 20), distribution, 'f32')}",
              "    return {'w': sample(rng, (3, 1, 1, 3), 'normal', 'f32')}",
              "    x = inputs['x'].astype(np.float64); wt = params['w'].astype(np.float64)\n"
              "    xp = np.zeros((2, 3, 1, 24)); xp[..., 3:23] = x\n"
              "    y = np.zeros((2, 3, 1, 10))\n"
              "    for q in range(3):\n"
              "        y += xp[..., 2 * q:2 * q + 19:2] * wt[:, 0, 0, q][None, :, None, None]\n"
              "    return {'y': np.maximum(y, 0.0)}",
              1e-5,
              1e-4};
  const Problem p = write_problem(s);
  KernelPlan plan;
  plan.kind = "conv";
  plan.source = 0;
  plan.conv = ConvShape{2, 3, 3, 3, 1, 20, 1, 10, 1, 3, 1, 2, 0, 3, 1, 2};
  plan.conv.pw_right = 1;
  plan.conv_weight = 0;
  plan.out_shape = {2, 3, 1, 10};
  plan.out_numel = 60;
  ExprBuilder b;
  plan.expr = b.done(b.u("relu", b.acc()));
  expect_variants_correct(p, plan, true);
}

// ---- chains: several kernels joined by temporaries (planned from a graph) --------------------

nlohmann::json graph_node(const std::string& name, const std::string& op, const std::string& target,
                          nlohmann::json args, nlohmann::json kwargs = nlohmann::json::object()) {
  return {{"name", name}, {"op", op}, {"target", target}, {"args", std::move(args)}, {"kwargs", std::move(kwargs)}};
}

nlohmann::json graph_ref(const std::string& n) { return {{"node", n}}; }

nlohmann::json graph_tensor(const std::string& name, const std::string& op, const std::string& tensor) {
  nlohmann::json n = graph_node(name, op, name, nlohmann::json::array());
  n["tensor"] = tensor;
  return n;
}

// softmax(x @ W * 0.5): a matrix product with an epilogue, then a softmax of the temporary.
TEST_F(SyntheticProblems, ChainMatmulThenSoftmax) {
  Synthetic s{"chain_mm_softmax",
              nlohmann::json::array({spec("x", {20, 40})}),
              nlohmann::json::array({spec("w", {40, 70})}),
              spec("y", {20, 70}),
              "    return {'x': sample(rng, (20, 40), distribution, 'f32')}",
              "    return {'w': sample(rng, (40, 70), 'normal', 'f32')}",
              "    z = inputs['x'].astype(np.float64) @ params['w'].astype(np.float64) * 0.5\n"
              "    e = np.exp(z - z.max(axis=1, keepdims=True))\n"
              "    return {'y': e / e.sum(axis=1, keepdims=True)}",
              1e-5,
              1e-5};
  const Problem p = write_problem(s);
  const nlohmann::json g = {{"nodes",
                             {graph_tensor("x", "placeholder", "x"), graph_tensor("w", "get_attr", "w"),
                              graph_node("mm", "call_function", "torch.matmul", {graph_ref("x"), graph_ref("w")}),
                              graph_node("z", "call_function", "operator.mul", {graph_ref("mm"), 0.5}),
                              graph_node("sm", "call_function", "torch.softmax", {graph_ref("z")}, {{"dim", -1}}),
                              graph_node("output", "output", "output", {graph_ref("sm")})}}};
  const KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "chain") << plan.reason;
  expect_variants_correct(p, plan);
}

// logsumexp over rows: max -> exp(x - max) -> sum with log(acc) + max, the last stage reading
// the first stage's temporary as well as its own.
TEST_F(SyntheticProblems, ChainLogSumExp) {
  Synthetic s{"chain_logsumexp",
              nlohmann::json::array({spec("x", {24, 50})}),
              nlohmann::json::array(),
              spec("y", {24}),
              "    return {'x': sample(rng, (24, 50), distribution, 'f32') * 4}",
              "    return {}",
              "    x = inputs['x'].astype(np.float64); m = x.max(axis=1)\n"
              "    return {'y': np.log(np.exp(x - m[:, None]).sum(axis=1)) + m}",
              1e-5,
              1e-5};
  const Problem p = write_problem(s);
  const nlohmann::json g = {{"nodes",
                             {graph_tensor("x", "placeholder", "x"),
                              graph_node("l", "call_function", "torch.logsumexp", {graph_ref("x")}, {{"dim", 1}}),
                              graph_node("output", "output", "output", {graph_ref("l")})}}};
  const KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "chain") << plan.reason;
  ASSERT_EQ(plan.stages.size(), 3u) << plan.summary();
  expect_variants_correct(p, plan);
}

// x / (x.sum(1, keepdim) + 1) (level2/15's shape) over rows of 100 (strip tails at every VLEN):
// one row-map kernel first, then the chain's two; every family's first and last correct.
TEST_F(SyntheticProblems, ChainRowSumThenDivideIsOneRowMapFirst) {
  Synthetic s{"chain_row_normalize",
              nlohmann::json::array({spec("x", {12, 100})}),
              nlohmann::json::array(),
              spec("y", {12, 100}),
              "    return {'x': (sample(rng, (12, 100), distribution, 'f32') + 2.0).astype(np.float32)}",
              "    return {}",
              "    x = inputs['x'].astype(np.float64)\n"
              "    return {'y': x / (x.sum(axis=1, keepdims=True) + 1.0)}",
              1e-6,
              1e-5};
  const Problem p = write_problem(s);
  const nlohmann::json g = {{"nodes",
                             {graph_tensor("x", "placeholder", "x"),
                              graph_node("s", "call_method", "sum", {graph_ref("x")}, {{"dim", -1}, {"keepdim", true}}),
                              graph_node("e", "call_function", "operator.add", {graph_ref("s"), 1.0}),
                              graph_node("y", "call_function", "operator.truediv", {graph_ref("x"), graph_ref("e")}),
                              graph_node("output", "output", "output", {graph_ref("y")})}}};
  const KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "chain") << plan.reason;
  std::string why;
  const auto t = rvv_target(256, &why);
  ASSERT_TRUE(t.has_value()) << why;
  const auto variants = generate_variants(plan, p, *t);
  ASSERT_FALSE(variants.empty());
  EXPECT_EQ(variants.front().family, "rvv.row-map.row-accumulators");
  EXPECT_TRUE(std::any_of(variants.begin(), variants.end(), [](const Variant& v) { return v.family == "rvv.chain"; }));
  expect_variants_correct(p, plan);
}

// Attention over a fused QKV tensor [B, S, 3 * D], written as a transformer block writes it:
// reshape by sizes read from x, permute to (3, B, H, S, Dh), q/k/v by index, softmax(q k^T / 2)
// v, the heads merged back by transpose and reshape: four gathers (q, k, v, the context) around
// two batched products and a softmax, every stage's variants correct.
TEST_F(SyntheticProblems, ChainAttentionHeadsThroughViews) {
  Synthetic s{"chain_attention_views",
              nlohmann::json::array({spec("x", {2, 5, 72})}),
              nlohmann::json::array(),
              spec("y", {2, 5, 24}),
              "    return {'x': sample(rng, (2, 5, 72), distribution, 'f32')}",
              "    return {}",
              "    t = inputs['x'].astype(np.float64).reshape(2, 5, 3, 4, 6).transpose(2, 0, 3, 1, 4)\n"
              "    z = t[0] @ t[1].transpose(0, 1, 3, 2) * 0.5\n"
              "    e = np.exp(z - z.max(axis=-1, keepdims=True))\n"
              "    ctx = (e / e.sum(axis=-1, keepdims=True)) @ t[2]\n"
              "    return {'y': ctx.transpose(0, 2, 1, 3).reshape(2, 5, 24)}",
              1e-5,
              1e-5};
  const Problem p = write_problem(s);
  auto method = [](const std::string& name, const std::string& fn, nlohmann::json args) {
    return graph_node(name, "call_method", fn, std::move(args));
  };
  auto item = [](const std::string& name, int i) {
    return graph_node(name, "call_function", "_operator.getitem", {graph_ref("pm"), i});
  };
  const nlohmann::json g = {{"nodes",
                             {graph_tensor("x", "placeholder", "x"), method("b", "size", {graph_ref("x"), 0}),
                              method("s", "size", {graph_ref("x"), 1}),
                              method("r", "reshape", {graph_ref("x"), graph_ref("b"), graph_ref("s"), 3, 4, 6}),
                              method("pm", "permute", {graph_ref("r"), 2, 0, 3, 1, 4}), item("q", 0), item("k", 1),
                              item("v", 2), method("kt", "transpose", {graph_ref("k"), -2, -1}),
                              graph_node("mm", "call_function", "torch.matmul", {graph_ref("q"), graph_ref("kt")}),
                              graph_node("z", "call_function", "operator.mul", {graph_ref("mm"), 0.5}),
                              graph_node("sm", "call_function", "torch.softmax", {graph_ref("z")}, {{"dim", -1}}),
                              graph_node("ctx", "call_function", "torch.matmul", {graph_ref("sm"), graph_ref("v")}),
                              method("ct", "transpose", {graph_ref("ctx"), 1, 2}),
                              method("y", "reshape", {graph_ref("ct"), graph_ref("b"), graph_ref("s"), 24}),
                              graph_node("output", "output", "output", {graph_ref("y")})}}};
  const KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "chain") << plan.reason;
  ASSERT_EQ(plan.stages.size(), 7u) << plan.summary();
  expect_variants_correct(p, plan);
}

// A strided copy on its own: x.transpose(1, 2) * 0.5 (the innermost stride 9: strided loads)
// and the scalar variant.
TEST_F(SyntheticProblems, GatherTransposedWithEpilogue) {
  Synthetic s{"gather_transpose",
              nlohmann::json::array({spec("x", {3, 7, 9})}),
              nlohmann::json::array(),
              spec("y", {3, 9, 7}),
              "    return {'x': sample(rng, (3, 7, 9), distribution, 'f32')}",
              "    return {}",
              "    return {'y': inputs['x'].astype(np.float64).transpose(0, 2, 1) * 0.5}",
              0.0,
              0.0};
  const Problem p = write_problem(s);
  KernelPlan plan;
  plan.kind = "gather";
  plan.source = 0;
  plan.gather_shape = {3, 9, 7};
  plan.gather_strides = {63, 1, 9};
  plan.out_shape = {3, 9, 7};
  plan.out_numel = 189;
  ExprBuilder b;
  plan.expr = b.done(b.b("mul", b.acc(), b.c(0.5)));
  expect_variants_correct(p, plan, true);
}

// cumsum(x, -1) * 0.5 of rows of 4096 at an imported problem's tolerance (many strips: the carry,
// compensated, must not drift) and cumsum(x, 1)
// of [2, 50, 7] (VLMAX columns at a time), planned from their graphs.
TEST_F(SyntheticProblems, CumsumRowsAndColumns) {
  Synthetic rows{"cumsum_rows",
                 nlohmann::json::array({spec("x", {2, 4096})}),
                 nlohmann::json::array(),
                 spec("y", {2, 4096}),
                 "    return {'x': sample(rng, (2, 4096), distribution, 'f32')}",
                 "    return {}",
                 "    return {'y': np.cumsum(inputs['x'].astype(np.float64), axis=1) * 0.5}",
                 1e-5,
                 1e-4};
  const Problem p = write_problem(rows);
  const nlohmann::json g = {{"nodes",
                             {graph_tensor("x", "placeholder", "x"),
                              graph_node("c", "call_function", "torch.cumsum", {graph_ref("x")}, {{"dim", -1}}),
                              graph_node("y", "call_function", "operator.mul", {graph_ref("c"), 0.5}),
                              graph_node("output", "output", "output", {graph_ref("y")})}}};
  const KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "cumsum") << plan.reason;
  EXPECT_EQ(plan.rshape.inner, 1);
  expect_variants_correct(p, plan, true);

  Synthetic cols{"cumsum_columns",
                 nlohmann::json::array({spec("x", {2, 50, 7})}),
                 nlohmann::json::array(),
                 spec("y", {2, 50, 7}),
                 "    return {'x': sample(rng, (2, 50, 7), distribution, 'f32')}",
                 "    return {}",
                 "    return {'y': np.cumsum(inputs['x'].astype(np.float64), axis=1)}",
                 1e-5,
                 1e-5};
  const Problem q = write_problem(cols);
  const nlohmann::json h = {
      {"nodes",
       {graph_tensor("x", "placeholder", "x"), graph_node("c", "call_method", "cumsum", {graph_ref("x"), 1}),
        graph_node("output", "output", "output", {graph_ref("c")})}}};
  const KernelPlan cp = plan_kernel(q, h);
  ASSERT_EQ(cp.kind, "cumsum") << cp.reason;
  EXPECT_EQ(cp.rshape.inner, 7);
  expect_variants_correct(q, cp, true);
}

// argmax(x, -1) over rows of 700 (lanes and a scalar tail at any VLEN) with ties and NaNs
// (PyTorch's rule: the first maximum, a NaN above all, the first NaN), int64 indices; and along
// a middle axis (the scalar variant), both planned from their graphs.
TEST_F(SyntheticProblems, ArgmaxRowsWithTiesAndNaNAndColumns) {
  Synthetic rows{
      "argmax_rows",
      nlohmann::json::array({spec("x", {4, 700})}),
      nlohmann::json::array(),
      {{"name", "y"}, {"dtype", "i64"}, {"shape", {4}}},
      "    x = sample(rng, (4, 700), distribution, 'f32')\n"
      "    x[1, 3] = x[1, 650] = 50.0\n    x[2, 100] = np.nan\n    x[2, 300] = np.nan\n    x[3, 699] = np.inf\n"
      "    return {'x': x}",
      "    return {}",
      "    return {'y': np.argmax(inputs['x'], axis=1).astype(np.int64)}",
      0.0,
      0.0};
  const Problem p = write_problem(rows);
  const nlohmann::json g = {{"nodes",
                             {graph_tensor("x", "placeholder", "x"),
                              graph_node("a", "call_function", "torch.argmax", {graph_ref("x")}, {{"dim", -1}}),
                              graph_node("output", "output", "output", {graph_ref("a")})}}};
  const KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "argmax") << plan.reason;
  expect_variants_correct(p, plan, true);

  Synthetic cols{"argmax_columns",
                 nlohmann::json::array({spec("x", {4, 50, 6})}),
                 nlohmann::json::array(),
                 {{"name", "y"}, {"dtype", "i64"}, {"shape", {4, 6}}},
                 "    return {'x': sample(rng, (4, 50, 6), distribution, 'f32')}",
                 "    return {}",
                 "    return {'y': np.argmax(inputs['x'], axis=1).astype(np.int64)}",
                 0.0,
                 0.0};
  const Problem q = write_problem(cols);
  const nlohmann::json h = {
      {"nodes",
       {graph_tensor("x", "placeholder", "x"), graph_node("a", "call_method", "argmax", {graph_ref("x")}, {{"dim", 1}}),
        graph_node("output", "output", "output", {graph_ref("a")})}}};
  const KernelPlan cp = plan_kernel(q, h);
  ASSERT_EQ(cp.kind, "argmax") << cp.reason;
  expect_variants_correct(q, cp, true);
}

// ---- accuracy of the vector math ------------------------------------------------------------

struct MathCase {
  std::string op, grid, reference;
  double rtol = 5e-7;
};

// y = op(x) over a fixed grid of 65536 points, to 5e-7 relative (about 4 ulp) + 1e-10 absolute.
// gelu_tanh gets 2e-6: its float32 argument -2u carries a rounding error that e^(-2u) amplifies
// by |2u| (PyTorch's float32 kernel has the same), which is what the reference, in float64, lacks.
// log reads -x (the data generator wants a negative input somewhere).
TEST_F(SyntheticProblems, VectorMathIsAccurate) {
  const std::vector<MathCase> cases = {
      {"exp", "np.linspace(-87, 88, N)", "np.exp(x)"},
      {"log", "-np.concatenate([np.geomspace(1e-44, 1e38, N // 2), np.linspace(0.25, 4, N // 2)])", "np.log(-x)"},
      {"tanh", "np.concatenate([np.linspace(-20, 20, N // 2), np.linspace(-0.01, 0.01, N // 2)])", "np.tanh(x)"},
      {"sigmoid", "np.linspace(-100, 100, N)", "1 / (1 + np.exp(-x))"},
      {"silu", "np.linspace(-100, 100, N)", "x / (1 + np.exp(-x))"},
      {"gelu", "np.concatenate([np.linspace(-15, 15, N // 2), np.linspace(-0.01, 0.01, N // 2)])",
       "0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2))"},
      {"gelu_tanh", "np.linspace(-10, 10, N)", "x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))",
       2e-6},
      {"softplus", "np.linspace(-100, 100, N)", "np.where(x > 20, x, np.log1p(np.exp(x)))"},
  };
  std::string why;
  auto t = rvv_target(256, &why);
  RunnerClient client(RunnerAddress{});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.op);
    Synthetic s{"math_" + c.op,
                nlohmann::json::array({spec("x", {65536})}),
                nlohmann::json::array(),
                spec("y", {65536}),
                "    N = 65536\n    return {'x': (" + c.grid + ").astype(np.float32)}",
                "    return {}",
                "    x = inputs['x'].astype(np.float64)\n    return {'y': " + c.reference + "}",
                1e-10,
                c.rtol};
    const Problem p = write_problem(s);
    ExprBuilder b;
    int x = b.in(0, 1, 65536);
    const KernelPlan plan = elementwise(p, b.done(b.u(c.op, c.op == "log" ? b.u("neg", x) : x)));
    const auto vs = rvv_variants(plan, p, *t);
    ASSERT_FALSE(vs.empty());
    for (const auto& v : vs) {
      if (v.params.value("unroll", 1) != 1 ||
          (v.params.value("lmul", "") != "m1" && v.params.value("lmul", "") != "m8"))
        continue;
      SCOPED_TRACE(v.params.dump());
      Outcome o = eval_file(p, *t, write_variant(p, v), &client);
      EXPECT_TRUE(o.correct) << o.why;
    }
  }
}

// ---- what rvv_variants refuses ---------------------------------------------------------------

TEST(RvvVariants, NothingForPlansItCannotServe) {
  const Problem p = hand_made("relu");
  const Target t = target_named("rvv-qemu-256");
  KernelPlan plan = hand_made_plan(p);
  ASSERT_FALSE(rvv_variants(plan, p, t).empty());

  KernelPlan unsupported = plan;
  unsupported.kind = "unsupported";
  EXPECT_TRUE(rvv_variants(unsupported, p, t).empty());

  Problem f16 = p;
  f16.inputs[0].dtype = DType::f16;
  EXPECT_TRUE(rvv_variants(plan, f16, t).empty()) << "f32 only";

  KernelPlan bad_leaf = plan;
  bad_leaf.expr.nodes[0].tensor = 3;
  EXPECT_TRUE(rvv_variants(bad_leaf, p, t).empty()) << "a leaf naming a tensor the problem lacks";

  KernelPlan unknown_op = plan;
  unknown_op.expr.nodes[1].op = "frobnicate";
  EXPECT_TRUE(rvv_variants(unknown_op, p, t).empty()) << "an op with neither a vector nor a scalar rendering";

  KernelPlan wrong_numel = plan;
  wrong_numel.out_numel = 7;
  EXPECT_TRUE(rvv_variants(wrong_numel, p, t).empty());
}

TEST(RvvVariants, SameFamilyAndParamsGiveTheSameSource) {
  for (const std::string name : {"act_chain", "matmul", "softmax"}) {
    const Problem p = hand_made(name);
    const KernelPlan plan = hand_made_plan(p);
    const auto a = rvv_variants(plan, p, target_named("rvv-qemu-128"));
    const auto b = rvv_variants(plan, p, target_named("rvv-qemu-512"));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i].source, b[i].source) << "VLEN-agnostic: one source for every rvv target";
  }
}

}  // namespace
}  // namespace mblast::policy
