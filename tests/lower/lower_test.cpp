// The lowering pipeline (src/lower) on small hand-written ATen graphs: what it lowers to, how
// the scheduler fuses it, the one-line reason for an op it does not know, and the numbers: the
// C dialect (the RVV backend's) is plain C, so it is compiled for this host with cc, loaded,
// and run on hand-made inputs against values computed here.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "mblast/abi.h"
#include "mblast/lower/dialects.h"
#include "mblast/lower/lower.h"

namespace mblast::lower {
namespace {

using nlohmann::json;

TensorSpec spec(const std::string& name, std::vector<int64_t> shape, mblast::DType t = mblast::DType::f32) {
  TensorSpec s;
  s.name = name;
  s.shape = std::move(shape);
  s.dtype = t;
  return s;
}

json ph(const std::string& name, const std::string& tensor, std::vector<int64_t> shape, const std::string& dt = "f32") {
  return {{"name", name},          {"op", "placeholder"}, {"target", name}, {"tensor", tensor},
          {"args", json::array()}, {"shape", shape},      {"dtype", dt}};
}

json call(const std::string& name, const std::string& target, json args, std::vector<int64_t> shape,
          const std::string& dt = "f32", json kwargs = json::object()) {
  return {{"name", name},
          {"op", "call_function"},
          {"target", target},
          {"args", std::move(args)},
          {"kwargs", std::move(kwargs)},
          {"shape", shape},
          {"dtype", dt}};
}

json nref(const std::string& n) {
  json r = json::object();
  r["node"] = n;
  return r;
}

// An argument list built element by element (a braced list of one json object is taken for that object).
template <class... A>
json args(A&&... a) {
  json v = json::array();
  (v.push_back(json(std::forward<A>(a))), ...);
  return v;
}

json output(json args) {
  return {{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", json::array({std::move(args)})}};
}

// Compiles the C dialect's candidate for this host and runs it once.
struct Host {
  void* handle = nullptr;
  std::filesystem::path dir;
  explicit Host(const std::string& source) {
    dir = std::filesystem::temp_directory_path() /
          ("mblast_lower_test_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "c.c") << source;
    const std::string cmd = "cc -std=c11 -O1 -shared -fPIC -I" + std::string(MBLAST_SOURCE_DIR) + "/include -o " +
                            (dir / "c.so").string() + " " + (dir / "c.c").string() + " -lm 2>" + (dir / "log").string();
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(dir / "log");
      ADD_FAILURE() << "cc failed: " << std::string(std::istreambuf_iterator<char>(log), {}) << "\n" << source;
      return;
    }
    handle = dlopen((dir / "c.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) ADD_FAILURE() << dlerror();
  }
  ~Host() {
    if (handle) dlclose(handle);
    std::filesystem::remove_all(dir);
  }
  // Returns mblast_run's result; outputs written into `outs`.
  int run(const Problem& p, std::vector<std::vector<float>>& ins, std::vector<std::vector<float>>& pars,
          std::vector<std::vector<float>>& outs) {
    if (!handle) return -99;
    auto make = [](const std::vector<TensorSpec>& specs, std::vector<std::vector<float>>& data) {
      std::vector<mblast_tensor> ts(specs.size());
      for (size_t i = 0; i < specs.size(); ++i) {
        ts[i].name = specs[i].name.c_str();
        ts[i].dtype = static_cast<mblast_dtype>(specs[i].dtype);
        ts[i].ndim = static_cast<int32_t>(specs[i].shape.size());
        for (size_t d = 0; d < specs[i].shape.size(); ++d) ts[i].shape[d] = specs[i].shape[d];
        data[i].resize(specs[i].numel());
        ts[i].data = data[i].data();
        ts[i].nbytes = specs[i].nbytes();
      }
      return ts;
    };
    auto in = make(p.inputs, ins);
    auto par = make(p.parameters, pars);
    outs.resize(p.outputs.size());
    auto out = make(p.outputs, outs);
    using Prep = int (*)(const mblast_context*, const mblast_tensor*, int32_t, void**);
    using Run = int (*)(const mblast_context*, void*, const mblast_tensor*, int32_t, const mblast_tensor*, int32_t,
                        mblast_tensor*, int32_t);
    using Rel = void (*)(const mblast_context*, void*);
    auto prep = reinterpret_cast<Prep>(dlsym(handle, "mblast_prepare"));
    auto run = reinterpret_cast<Run>(dlsym(handle, "mblast_run"));
    auto rel = reinterpret_cast<Rel>(dlsym(handle, "mblast_release"));
    mblast_context ctx{};
    ctx.abi_version = MBLAST_ABI_VERSION;
    ctx.backend = MBLAST_BACKEND_RVV;
    void* state = nullptr;
    if (prep(&ctx, par.data(), static_cast<int32_t>(par.size()), &state) != 0) return -98;
    const int rc = run(&ctx, state, in.data(), static_cast<int32_t>(in.size()), par.data(),
                       static_cast<int32_t>(par.size()), out.data(), static_cast<int32_t>(out.size()));
    rel(&ctx, state);
    return rc;
  }
};

Schedule lowered(const json& g, const Problem& p) {
  const auto l = lower_graph(g, p);
  if (!l.program) {
    ADD_FAILURE() << l.error;
    return {};
  }
  return schedule(*l.program);
}

std::vector<float> random(size_t n, unsigned seed) {
  std::mt19937 r(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(r);
  return v;
}

TEST(Lower, MatmulWithTransposedBIsOneReductionKernel) {
  // torch.matmul(A, B.T): permute is an index map, inlined into the product's loads.
  Problem p;
  p.name = "mm_bt";
  p.inputs = {spec("in0", {3, 5}), spec("in1", {4, 5})};
  p.outputs = {spec("out", {3, 4})};
  json g = {
      {"nodes",
       {ph("a", "in0", {3, 5}), ph("b", "in1", {4, 5}), call("t", "aten.permute.default", {nref("b"), {1, 0}}, {5, 4}),
        call("mm", "aten.mm.default", {nref("a"), nref("t")}, {3, 4}), output(nref("mm"))}}};
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].reduce, ReduceOp::Sum);
  EXPECT_EQ(s.buffer[static_cast<size_t>(s.kernels[0].tensor)], "out0");
  EXPECT_TRUE(s.temps.empty());
  Host h(emit_rvv(s, p));
  const auto a = random(15, 1), b = random(20, 2);
  std::vector<std::vector<float>> ins = {a, b}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double want = 0;
      for (int k = 0; k < 5; ++k) want += static_cast<double>(a[i * 5 + k]) * b[j * 5 + k];
      EXPECT_NEAR(outs[0][static_cast<size_t>(i * 4 + j)], want, 1e-5) << i << "," << j;
    }
}

TEST(Lower, SoftmaxIsTwoRowStatisticsAndOneFusedOutput) {
  Problem p;
  p.name = "softmax";
  p.inputs = {spec("in0", {4, 7})};
  p.outputs = {spec("out", {4, 7})};
  json g = {{"nodes",
             {ph("x", "in0", {4, 7}), call("h", "aten.mul.Tensor", args(nref("x"), 0.5), {4, 7}),
              call("sm", "aten._softmax.default", args(nref("h"), -1, false), {4, 7}), output(nref("sm"))}}};
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 3u);  // row max, row sum of exp, the output (the cheap scaling inlined everywhere)
  EXPECT_EQ(s.kernels[0].reduce, ReduceOp::Max);
  EXPECT_EQ(s.kernels[1].reduce, ReduceOp::Sum);
  EXPECT_EQ(s.kernels[2].reduce, ReduceOp::None);
  EXPECT_EQ(s.temps.size(), 2u);
  Host h(emit_rvv(s, p));
  const auto x = random(28, 3);
  std::vector<std::vector<float>> ins = {x}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int r = 0; r < 4; ++r) {
    double m[7], z = 0;
    for (int j = 0; j < 7; ++j) {
      const double v = x[static_cast<size_t>(r * 7 + j)];
      m[j] = v * 0.5;
      z += std::exp(m[j]);
    }
    for (int j = 0; j < 7; ++j) EXPECT_NEAR(outs[0][static_cast<size_t>(r * 7 + j)], std::exp(m[j]) / z, 1e-5);
  }
}

TEST(Lower, ConvolutionWithPaddingStrideAndGroups) {
  // conv2d(x [1, 4, 5, 5], w [6, 2, 3, 3], bias, stride 2, padding 1, groups 2) -> [1, 6, 3, 3]
  Problem p;
  p.name = "conv";
  p.inputs = {spec("in0", {1, 4, 5, 5})};
  p.parameters = {spec("w", {6, 2, 3, 3}), spec("b", {6})};
  p.outputs = {spec("out", {1, 6, 3, 3})};
  json g = {{"nodes",
             {ph("x", "in0", {1, 4, 5, 5}), ph("w", "w", {6, 2, 3, 3}), ph("b", "b", {6}),
              call("c", "aten.convolution.default",
                   {nref("x"), nref("w"), nref("b"), {2, 2}, {1, 1}, {1, 1}, false, {0, 0}, 2}, {1, 6, 3, 3}),
              call("r", "aten.relu.default", {nref("c")}, {1, 6, 3, 3}), output(nref("r"))}}};
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 2u);  // the convolution, then bias + relu (its epilogue) into the output
  Host h(emit_rvv(s, p));
  const auto x = random(100, 4), w = random(108, 5), b = random(6, 6);
  std::vector<std::vector<float>> ins = {x}, pars = {w, b}, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int oc = 0; oc < 6; ++oc)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        double acc = b[static_cast<size_t>(oc)];
        const int g0 = oc / 3;
        for (int ic = 0; ic < 2; ++ic)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) {
              const int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
              if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5) continue;
              acc += static_cast<double>(x[static_cast<size_t>(((g0 * 2 + ic) * 5 + ih) * 5 + iw)]) *
                     w[static_cast<size_t>(((oc * 2 + ic) * 3 + kh) * 3 + kw)];
            }
        EXPECT_NEAR(outs[0][static_cast<size_t>((oc * 3 + oh) * 3 + ow)], std::max(acc, 0.0), 1e-4);
      }
}

TEST(Lower, CatSliceFlipAndArgmaxAsIndexMaps) {
  // argmax(cat([x, flip(x[:, 1:])], dim=1), dim=1) -> int64 [3]
  Problem p;
  p.name = "idx";
  p.inputs = {spec("in0", {3, 4})};
  p.outputs = {spec("out", {3}, mblast::DType::i64)};
  json g = {{"nodes",
             {ph("x", "in0", {3, 4}), call("s", "aten.slice.Tensor", {nref("x"), 1, 1, 4}, {3, 3}),
              call("f", "aten.flip.default", {nref("s"), {1}}, {3, 3}),
              call("c", "aten.cat.default", {json::array({nref("x"), nref("f")}), 1}, {3, 7}),
              call("neg", "aten.neg.default", {nref("c")}, {3, 7}),
              call("a", "aten.argmax.default", {nref("neg"), 1}, {3}, "i64"), output(nref("a"))}}};
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].reduce, ReduceOp::ArgMax);
  // The C dialect checks the output's dtype: int64 here; run through a float view is not possible,
  // so check the source's shape instead: one loop, the flipped index.
  const std::string src = emit_rvv(s, p);
  EXPECT_NE(src.find("best"), std::string::npos);
  EXPECT_NE(src.find("int64_t* restrict out0"), std::string::npos);
}

TEST(Lower, ConstantTensorsInsideTheGraphCarryTheirValues) {
  // minimum(x, tensor(0.5)) * tensor([1, -2, inf]): a 0-dim constant and a small table, as the
  // ATen capture writes them (get_attr nodes with their values).
  Problem p;
  p.name = "constants";
  p.inputs = {spec("in0", {2, 3})};
  p.outputs = {spec("out", {2, 3})};
  json half = {{"name", "c0"},          {"op", "get_attr"},       {"target", "_tensor_constant0"},
               {"args", json::array()}, {"shape", json::array()}, {"dtype", "f32"},
               {"value", {0.5}}};
  json table = {{"name", "c1"}, {"op", "get_attr"}, {"target", "_tensor_constant1"},  {"args", json::array()},
                {"shape", {3}}, {"dtype", "f32"},   {"value", args(1.0, -2.0, "inf")}};
  json g = {{"nodes",
             {ph("x", "in0", {2, 3}), half, call("m", "aten.minimum.default", args(nref("x"), nref("c0")), {2, 3}),
              table, call("y", "aten.mul.Tensor", args(nref("m"), nref("c1")), {2, 3}), output(nref("y"))}}};
  const auto s = lowered(g, p);
  ASSERT_FALSE(s.kernels.empty());
  Host h(emit_rvv(s, p));
  std::vector<float> x = {0.1f, 0.7f, -3.0f, 2.0f, 0.25f, 0.5f};
  std::vector<std::vector<float>> ins = {x}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  const float scale[3] = {1.0f, -2.0f, INFINITY};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(outs[0][i], std::min(x[i], 0.5f) * scale[i % 3]) << "element " << i;
  // Without values (a constant larger than the capture carries), a one-line reason.
  table.erase("value");
  g["nodes"][3] = table;
  const auto refused = lower_graph(g, p);
  EXPECT_FALSE(refused.program);
  EXPECT_NE(refused.error.find("get_attr"), std::string::npos) << refused.error;
}

TEST(Lower, BoolInputsAreOneByteMasks) {
  // cumsum(x * mask, 1) with a torch.bool mask (one byte per element, 0 or 1).
  Problem p;
  p.name = "masked";
  p.inputs = {spec("in0", {2, 4}), spec("in1", {2, 4}, mblast::DType::boolean)};
  p.outputs = {spec("out", {2, 4})};
  json g = {{"nodes",
             {ph("x", "in0", {2, 4}), ph("m", "in1", {2, 4}, "bool"),
              call("xm", "aten.mul.Tensor", args(nref("x"), nref("m")), {2, 4}),
              call("cs", "aten.cumsum.default", args(nref("xm"), 1), {2, 4}), output(nref("cs"))}}};
  const auto s = lowered(g, p);
  Host h(emit_rvv(s, p));
  const auto x = random(8, 5);
  const unsigned char mask[8] = {1, 0, 1, 1, 0, 0, 1, 0};
  std::vector<std::vector<float>> ins = {x, std::vector<float>(8)}, pars, outs;
  std::memcpy(ins[1].data(), mask, sizeof mask);  // the bool tensor's bytes, at the start of its buffer
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int r = 0; r < 2; ++r) {
    float acc = 0;
    for (int j = 0; j < 4; ++j) {
      const size_t i = static_cast<size_t>(r * 4 + j);
      acc += mask[i] ? x[i] : 0.0f;
      EXPECT_FLOAT_EQ(outs[0][i], acc) << "element " << i;
    }
  }
}

TEST(Lower, DropoutIsTheIdentityOnlyInEvalMode) {
  Problem p;
  p.name = "dropout";
  p.inputs = {spec("in0", {4})};
  p.outputs = {spec("out", {4})};
  auto graph = [](bool train) {
    return json{{"nodes",
                 {ph("x", "in0", {4}), call("d", "aten.dropout.default", args(nref("x"), 0.25, train), {4}),
                  output(nref("d"))}}};
  };
  EXPECT_TRUE(lower_graph(graph(false), p).program) << lower_graph(graph(false), p).error;
  const auto train = lower_graph(graph(true), p);
  EXPECT_FALSE(train.program);
  EXPECT_NE(train.error.find("random"), std::string::npos) << train.error;
  json draw = {
      {"nodes",
       {ph("x", "in0", {4}), call("m", "aten.bernoulli_.float", args(nref("x"), 0.75), {4}), output(nref("m"))}}};
  const auto refused = lower_graph(draw, p);
  EXPECT_NE(refused.error.find("a random draw (bernoulli_"), std::string::npos) << refused.error;
}

TEST(Lower, InPlaceOpsRebindTheirArgumentAndStackPicksByIndex) {
  // c = clone(x); sigmoid_(c); stack([x, c, x * 2], 1): the in-place op's argument holds its
  // result from there on, as an RNN cell traced by make_fx writes it.
  Problem p;
  p.name = "inplace";
  p.inputs = {spec("in0", {3})};
  p.outputs = {spec("out", {3, 3})};
  json g = {{"nodes",
             {ph("x", "in0", {3}), call("c", "aten.clone.default", args(nref("x")), {3}),
              call("s", "aten.sigmoid_.default", args(nref("c")), {3}),
              call("d", "aten.mul.Tensor", args(nref("x"), 2.0), {3}),
              call("st", "aten.stack.default", args(json::array({nref("x"), nref("c"), nref("d")}), 1), {3, 3}),
              output(nref("st"))}}};
  const auto s = lowered(g, p);
  Host h(emit_rvv(s, p));
  std::vector<float> x = {-1.0f, 0.5f, 2.0f};
  std::vector<std::vector<float>> ins = {x}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(outs[0][i * 3 + 0], x[i]);
    EXPECT_NEAR(outs[0][i * 3 + 1], 1.0 / (1.0 + std::exp(-x[i])), 1e-6);
    EXPECT_FLOAT_EQ(outs[0][i * 3 + 2], 2 * x[i]);
  }
}

TEST(Lower, UnknownOpIsNamedWithItsNode) {
  Problem p;
  p.name = "bad";
  p.inputs = {spec("in0", {4})};
  p.outputs = {spec("out", {4})};
  json g = {
      {"nodes",
       {ph("x", "in0", {4}), call("weird_1", "aten.frobnicate.default", {nref("x")}, {4}), output(nref("weird_1"))}}};
  const auto l = lower_graph(g, p);
  EXPECT_FALSE(l.program);
  EXPECT_EQ(l.error, "op aten.frobnicate.default has no lowering (node weird_1)");
  // An op nothing depends on is not lowered at all.
  json g2 = {{"nodes",
              {ph("x", "in0", {4}), call("weird_1", "aten.frobnicate.default", {nref("x")}, {4}),
               call("e", "aten.exp.default", {nref("x")}, {4}), output(nref("e"))}}};
  EXPECT_TRUE(lower_graph(g2, p).program);
}

TEST(Lower, SharedExpensiveProducerIsMaterialisedOnce) {
  // y = tanh(exp(x) * 3 + sin(x) ...) read by two consumers: a temporary, not recomputed.
  Problem p;
  p.name = "shared";
  p.inputs = {spec("in0", {8})};
  p.outputs = {spec("o1", {8}), spec("o2", {8})};
  json nodes = json::array({ph("x", "in0", {8})});
  std::string prev = "x";
  for (int i = 0; i < 8; ++i) {
    const std::string n = "e" + std::to_string(i);
    nodes.push_back(call(n, i % 2 ? "aten.sin.default" : "aten.exp.default", args(nref(prev)), {8}));
    const std::string m = "m" + std::to_string(i);
    nodes.push_back(call(m, "aten.mul.Tensor", args(nref(n), 0.5), {8}));
    prev = m;
  }
  nodes.push_back(call("a", "aten.add.Tensor", args(nref(prev), 1.0), {8}));
  nodes.push_back(call("b", "aten.sub.Tensor", args(nref(prev), 1.0), {8}));
  nodes.push_back(output(args(nref("a"), nref("b"))));
  json g = json::object();
  g["nodes"] = nodes;
  const auto s = lowered(g, p);
  if (s.kernels.empty()) std::cerr << g.dump() << "\n";
  EXPECT_EQ(s.temps.size(), 1u);
  EXPECT_EQ(s.kernels.size(), 3u);
  Host h(emit_rvv(s, p));
  const auto x = random(8, 7);
  std::vector<std::vector<float>> ins = {x}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (size_t i = 0; i < 8; ++i) {
    double v = x[i];
    for (int k = 0; k < 8; ++k) v = (k % 2 ? std::sin(v) : std::exp(v)) * 0.5;
    EXPECT_NEAR(outs[0][i], v + 1, 1e-4);
    EXPECT_NEAR(outs[1][i], v - 1, 1e-4);
  }
}

TEST(Lower, ContractionsAreTiledPerWorkItem) {
  // mm(a [8, 12], b [12, 16]): b is read along the output's last dim, so a work item holds lanes
  // of it; linear-style mm(a, w.T) reads both operands along k: partial sums over k instead.
  Problem p;
  p.name = "tiles";
  p.inputs = {spec("in0", {8, 12}), spec("in1", {12, 16}), spec("in2", {16, 12})};
  p.outputs = {spec("o1", {8, 16}), spec("o2", {8, 16})};
  json g = json::object();
  g["nodes"] =
      args(ph("a", "in0", {8, 12}), ph("b", "in1", {12, 16}), ph("w", "in2", {16, 12}),
           call("mm1", "aten.mm.default", args(nref("a"), nref("b")), {8, 16}),
           call("t", "aten.permute.default", args(nref("w"), args(1, 0)), {12, 16}),
           call("mm2", "aten.mm.default", args(nref("a"), nref("t")), {8, 16}), output(args(nref("mm1"), nref("mm2"))));
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].lane_var, 1);  // the output's columns
  EXPECT_EQ(s.kernels[0].lanes, 8);
  EXPECT_EQ(s.kernels[0].block_var, 0);
  EXPECT_EQ(s.kernels[0].items, 8 * 16 / 8 / 4);
  EXPECT_EQ(s.kernels[1].lane_var, 2);  // k, as partial sums
  EXPECT_EQ(s.kernels[1].lanes, 4);
  EXPECT_EQ(s.kernels[0].acc, DType::F32);
  Host h(emit_rvv(s, p));
  const auto a = random(96, 11), b = random(192, 12), w = random(192, 13);
  std::vector<std::vector<float>> ins = {a, b, w}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 16; ++j) {
      double w1 = 0, w2 = 0;
      for (int k = 0; k < 12; ++k) {
        w1 += static_cast<double>(a[static_cast<size_t>(i * 12 + k)]) * b[static_cast<size_t>(k * 16 + j)];
        w2 += static_cast<double>(a[static_cast<size_t>(i * 12 + k)]) * w[static_cast<size_t>(j * 12 + k)];
      }
      EXPECT_NEAR(outs[0][static_cast<size_t>(i * 16 + j)], w1, 1e-4) << i << "," << j;
      EXPECT_NEAR(outs[1][static_cast<size_t>(i * 16 + j)], w2, 1e-4) << i << "," << j;
    }
}

TEST(Lower, RowMaxInPartialLanesKeepsNaN) {
  // amax over a row of 16 split into lanes: a NaN in any lane is the row's maximum.
  Problem p;
  p.name = "rowmax";
  p.inputs = {spec("in0", {3, 16})};
  p.outputs = {spec("out", {3})};
  json g = json::object();
  g["nodes"] =
      args(ph("x", "in0", {3, 16}), call("m", "aten.amax.default", args(nref("x"), args(1)), {3}), output(nref("m")));
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_GT(s.kernels[0].lanes, 1);
  Host h(emit_rvv(s, p));
  auto x = random(48, 14);
  x[16 + 5] = NAN;
  std::vector<std::vector<float>> ins = {x}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int r = 0; r < 3; ++r) {
    float want = -INFINITY;
    for (int j = 0; j < 16; ++j) want = std::max(want, x[static_cast<size_t>(r * 16 + j)]);
    if (r == 1)
      EXPECT_TRUE(std::isnan(outs[0][1]));
    else
      EXPECT_EQ(outs[0][static_cast<size_t>(r)], want);
  }
}

TEST(Lower, FewLongReductionsAreSplitIntoPartials) {
  // Two row sums of 16384 terms: chunks reduced in parallel into a temporary, then combined.
  Problem p;
  p.name = "longsum";
  p.inputs = {spec("in0", {2, 16384})};
  p.outputs = {spec("out", {2})};
  json g = json::object();
  g["nodes"] = args(ph("x", "in0", {2, 16384}), call("s", "aten.sum.dim_IntList", args(nref("x"), args(1)), {2}),
                    output(nref("s")));
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 2u);
  ASSERT_EQ(s.temps.size(), 1u);
  EXPECT_EQ(s.program.tensors[static_cast<size_t>(s.kernels[0].tensor)].shape, (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(s.kernels[1].reduce_extents, (std::vector<int64_t>{64}));
  Host h(emit_rvv(s, p));
  const auto x = random(2 * 16384, 16);
  std::vector<std::vector<float>> ins = {x}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int r = 0; r < 2; ++r) {
    double want = 0;
    for (int j = 0; j < 16384; ++j) want += x[static_cast<size_t>(r * 16384 + j)];
    EXPECT_NEAR(outs[0][static_cast<size_t>(r)], want, 1e-3);
  }
}

TEST(Lower, PartialsCutTheFirstReductionVariableThatDivides) {
  // sum over dims 0 and 2 of [3, 4, 2048]: 3 has no even split, so the chunks cut dim 2.
  Problem p;
  p.name = "bnsum";
  p.inputs = {spec("in0", {3, 4, 2048})};
  p.outputs = {spec("out", {4})};
  json g = json::object();
  g["nodes"] = args(ph("x", "in0", {3, 4, 2048}), call("s", "aten.sum.dim_IntList", args(nref("x"), args(0, 2)), {4}),
                    output(nref("s")));
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].reduce_extents, (std::vector<int64_t>{3, 2048 / 64}));
  Host h(emit_rvv(s, p));
  const auto x = random(3 * 4 * 2048, 17);
  std::vector<std::vector<float>> ins = {x}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int c = 0; c < 4; ++c) {
    double want = 0;
    for (int n = 0; n < 3; ++n)
      for (int j = 0; j < 2048; ++j) want += x[static_cast<size_t>((n * 4 + c) * 2048 + j)];
    EXPECT_NEAR(outs[0][static_cast<size_t>(c)], want, 1e-3);
  }
}

TEST(Lower, ScansWalkEachLineOnce) {
  // cumsum along dim 1, a reversed cumprod along dim 0 (flip, scan, flip): one work item per line.
  Problem p;
  p.name = "scans";
  p.inputs = {spec("in0", {4, 6})};
  p.outputs = {spec("o1", {4, 6}), spec("o2", {4, 6})};
  json g = json::object();
  g["nodes"] =
      args(ph("x", "in0", {4, 6}), call("cs", "aten.cumsum.default", args(nref("x"), 1), {4, 6}),
           call("f", "aten.flip.default", args(nref("x"), args(0)), {4, 6}),
           call("cp", "aten.cumprod.default", args(nref("f"), 0), {4, 6}),
           call("g", "aten.flip.default", args(nref("cp"), args(0)), {4, 6}), output(args(nref("cs"), nref("g"))));
  const auto s = lowered(g, p);
  ASSERT_EQ(s.kernels.size(), 3u);  // two scans, the flip of the second into its output
  EXPECT_EQ(s.kernels[0].scan_dim, 1);
  EXPECT_EQ(s.kernels[0].items, 4);
  EXPECT_EQ(s.kernels[1].scan_dim, 0);
  EXPECT_EQ(s.kernels[1].items, 6);
  Host h(emit_rvv(s, p));
  const auto x = random(24, 15);
  std::vector<std::vector<float>> ins = {x}, pars, outs;
  ASSERT_EQ(h.run(p, ins, pars, outs), 0);
  for (int r = 0; r < 4; ++r) {
    double acc = 0;
    for (int j = 0; j < 6; ++j) {
      acc += x[static_cast<size_t>(r * 6 + j)];
      EXPECT_NEAR(outs[0][static_cast<size_t>(r * 6 + j)], acc, 1e-5) << r << "," << j;
    }
  }
  for (int j = 0; j < 6; ++j) {
    double acc = 1;
    for (int r = 3; r >= 0; --r) {
      acc *= x[static_cast<size_t>(r * 6 + j)];
      EXPECT_NEAR(outs[1][static_cast<size_t>(r * 6 + j)], acc, 1e-5) << r << "," << j;
    }
  }
}

}  // namespace
}  // namespace mblast::lower

namespace mblast::lower {
namespace {

// A program with every kind of kernel: a convolution (reduction with a bounds predicate), an
// argmax, a softmax's row statistics, temporaries, an int64 output.
std::pair<Schedule, Problem> mixed_program() {
  Problem p;
  p.name = "mixed";
  p.inputs = {spec("in0", {1, 4, 5, 5})};
  p.parameters = {spec("w", {6, 2, 3, 3})};
  p.outputs = {spec("o1", {1, 6, 3, 3}), spec("o2", {1, 3, 3}, mblast::DType::i64)};
  json g = json::object();
  g["nodes"] = args(
      ph("x", "in0", {1, 4, 5, 5}), ph("w", "w", {6, 2, 3, 3}),
      call("c", "aten.convolution.default",
           args(nref("x"), nref("w"), nullptr, args(2, 2), args(1, 1), args(1, 1), false, args(0, 0), 2), {1, 6, 3, 3}),
      call("sm", "aten._softmax.default", args(nref("c"), 1, false), {1, 6, 3, 3}),
      call("am", "aten.argmax.default", args(nref("c"), 1), {1, 3, 3}, "i64"), output(args(nref("sm"), nref("am"))));
  const auto l = lower_graph(g, p);
  if (!l.program) ADD_FAILURE() << l.error;
  return {l.program ? schedule(*l.program) : Schedule{}, p};
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(LowerDialects, CudaCompilesWithNvcc) {
  const char* nvcc = "/usr/local/cuda/bin/nvcc";
  if (!std::filesystem::exists(nvcc)) GTEST_SKIP() << "no nvcc at " << nvcc;
  const auto [s, p] = mixed_program();
  ASSERT_GE(s.kernels.size(), 3u);
  const std::string src = emit_cuda(s, p);
  const auto file = write_temp("lower.cu", src);
  const std::string obj = file + ".o", log = file + ".log";
  const std::string cmd = std::string(nvcc) + " -std=c++17 -c -Xcompiler -fPIC -I" + MBLAST_SOURCE_DIR +
                          "/include -o " + obj + " " + file + " >" + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream l(log);
  EXPECT_EQ(rc, 0) << std::string(std::istreambuf_iterator<char>(l), {}) << "\n" << src;
  std::filesystem::remove(file);
  std::filesystem::remove(obj);
  std::filesystem::remove(log);
}

// Kernel 1 of S replaced by SOURCE, a candidate whose tensors are that kernel's buffers.
Stitches stitch_kernel_one(const Schedule& s, const std::string& source) {
  GroupCall g;
  g.kernel = 1;
  g.name = s.kernels[1].name;
  g.source = source;
  const auto args = kernel_args(s, s.kernels[1]);
  auto shape_of = [&](const std::string& b) {
    for (size_t t = 0; t < s.buffer.size(); ++t)
      if (s.buffer[t] == b) return s.program.tensors[t].shape;
    return std::vector<int64_t>{1};
  };
  for (size_t i = 1; i < args.size(); ++i)
    (args[i].rfind("par", 0) == 0 ? g.group.parameters : g.group.inputs).push_back(spec(args[i], shape_of(args[i])));
  g.group.outputs = {spec(args[0], shape_of(args[0]))};
  return {g};
}

// A group candidate with the names every candidate uses (a helper mb_fail, kSource, a kernel): in
// its namespace they do not collide with the model's.
const char* const kCudaGroup = R"CU(#include <mblast/abi.h>
#include <cuda_runtime.h>
#include <cstdio>
static char g_err[64];
static int mb_fail(const char* m) { std::snprintf(g_err, sizeof g_err, "%s", m); return -1; }
__global__ void k(float* o, long long n) { long long i = blockIdx.x * 256LL + threadIdx.x; if (i < n) o[i] = 1.0f; }
extern "C" int mblast_prepare(const mblast_context*, const mblast_tensor*, int32_t, void** state) { *state = nullptr; return 0; }
extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor*, int32_t, const mblast_tensor*, int32_t,
                          mblast_tensor* out, int32_t) {
  const long long n = (long long)(out[0].nbytes / 4);
  k<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)ctx->cuda_stream>>>((float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : mb_fail("launch");
}
extern "C" void mblast_release(const mblast_context*, void*) {}
)CU";

TEST(LowerDialects, StitchedCudaCompilesWithNvcc) {
  const char* nvcc = "/usr/local/cuda/bin/nvcc";
  if (!std::filesystem::exists(nvcc)) GTEST_SKIP() << "no nvcc at " << nvcc;
  const auto [s, p] = mixed_program();
  const std::string src = emit_cuda(s, p, stitch_kernel_one(s, kCudaGroup));
  EXPECT_NE(src.find("mb_stitch0::mb_stitch0_run"), std::string::npos);
  const auto file = write_temp("stitched.cu", src);
  const std::string obj = file + ".o", log = file + ".log";
  const std::string cmd = std::string(nvcc) + " -std=c++17 -c -Xcompiler -fPIC -I" + MBLAST_SOURCE_DIR +
                          "/include -o " + obj + " " + file + " >" + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream l(log);
  EXPECT_EQ(rc, 0) << std::string(std::istreambuf_iterator<char>(l), {}) << "\n" << src;
  std::filesystem::remove(file);
  std::filesystem::remove(obj);
  std::filesystem::remove(log);
}

TEST(LowerDialects, OpenclHostCodeCompiles) {
  if (!std::filesystem::exists("/usr/include/CL/cl.h")) GTEST_SKIP() << "no OpenCL headers";
  const auto [s, p] = mixed_program();
  const std::string src = emit_opencl(s, p);
  EXPECT_NE(src.find("clBuildProgram"), std::string::npos);
  const auto file = write_temp("lower.opencl.cpp", src);
  const std::string log = file + ".log";
  const std::string cmd =
      std::string("c++ -std=c++17 -fsyntax-only -I") + MBLAST_SOURCE_DIR + "/include " + file + " >" + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream l(log);
  EXPECT_EQ(rc, 0) << std::string(std::istreambuf_iterator<char>(l), {}) << "\n" << src;
  std::filesystem::remove(file);
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace mblast::lower
