// plan_kernel: what the builtin policy recognises in a problem's graph, and render_expr.
#include <algorithm>
#include <filesystem>
#include <set>

#include <unistd.h>

#include <gtest/gtest.h>

#include "gpu_common.h"
#include "mblast/driver/plan_command.h"
#include "mblast/error.h"
#include "mblast/policy/kernel_plan.h"
#include "mblast/policy/variants.h"
#include "test_env.h"

namespace mblast::policy {
namespace {

Problem hand_made(const std::string& name) { return load_problem(testing::source_dir() / "problems" / name); }

TEST(KernelPlan, HandMadeProblems) {
  KernelPlan add = plan_kernel(hand_made("vec_add"));
  ASSERT_EQ(add.kind, "elementwise") << add.reason;
  EXPECT_EQ(add.out_numel, 1048576);
  EXPECT_EQ(add.expr.inputs_used(), (std::vector<int>{0, 1}));

  KernelPlan act = plan_kernel(hand_made("act_chain"));
  ASSERT_EQ(act.kind, "elementwise") << act.reason;
  EXPECT_EQ(act.expr.params_used(), (std::vector<int>{0}));
  bool per_column = false;
  for (const auto& n : act.expr.nodes)
    if (n.kind == ExprNode::Kind::Param) per_column = n.index.div == 1 && n.index.mod == 1024;
  EXPECT_TRUE(per_column) << act.to_json().dump();

  KernelPlan sum = plan_kernel(hand_made("row_sum"));
  ASSERT_EQ(sum.kind, "reduce") << sum.reason;
  EXPECT_EQ(sum.reduce_op, "sum");
  EXPECT_EQ(sum.rshape.outer, 2048);
  EXPECT_EQ(sum.rshape.reduce, 1024);
  EXPECT_EQ(sum.rshape.inner, 1);
  EXPECT_TRUE(sum.expr.is_identity_epilogue());

  KernelPlan sm = plan_kernel(hand_made("softmax"));
  ASSERT_EQ(sm.kind, "softmax") << sm.reason;
  EXPECT_EQ(sm.rshape.reduce, 1024);

  KernelPlan mm = plan_kernel(hand_made("matmul"));
  ASSERT_EQ(mm.kind, "matmul") << mm.reason;
  EXPECT_EQ(mm.m, 256);
  EXPECT_EQ(mm.n, 384);
  EXPECT_EQ(mm.k, 512);
  EXPECT_FALSE(mm.a_is_param);
  EXPECT_TRUE(mm.b_is_param);
  EXPECT_FALSE(mm.b_transposed);

  KernelPlan conv = plan_kernel(hand_made("conv2d"));
  ASSERT_EQ(conv.kind, "conv") << conv.reason;
  EXPECT_EQ(conv.conv.cout, 32);
  EXPECT_EQ(conv.conv.kh, 3);
  EXPECT_FALSE(conv.expr.is_identity_epilogue());  // the bias
}

// A Problem with the given tensors, for synthetic graphs.
Problem synthetic(std::vector<TensorSpec> inputs, std::vector<TensorSpec> params, std::vector<int64_t> out) {
  Problem p;
  p.name = "synthetic";
  p.inputs = std::move(inputs);
  p.parameters = std::move(params);
  p.outputs = {TensorSpec{"out0", DType::f32, out}};
  return p;
}

nlohmann::json node(const std::string& name, const std::string& op, const std::string& target, nlohmann::json args,
                    nlohmann::json kwargs = nlohmann::json::object()) {
  return {{"name", name}, {"op", op}, {"target", target}, {"args", args}, {"kwargs", kwargs}};
}

nlohmann::json ref(const std::string& n) { return {{"node", n}}; }

TEST(KernelPlan, LinearModuleWithBiasAndGelu) {
  Problem p = synthetic({{"in0", DType::f32, {64, 128}}},
                        {{"fc.weight", DType::f32, {32, 128}}, {"fc.bias", DType::f32, {32}}}, {64, 32});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json fc = node("fc", "call_module", "fc", {ref("x")});
  fc["module"] = "torch.nn.modules.linear.Linear";
  fc["attributes"] = {{"in_features", 128}, {"out_features", 32}};
  nlohmann::json g = {{"nodes",
                       {x, fc, node("gelu", "call_function", "torch.nn.functional.gelu", {ref("fc")}),
                        node("output", "output", "output", {ref("gelu")})}}};
  KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "matmul") << plan.reason;
  EXPECT_TRUE(plan.b_transposed);  // nn.Linear's weight is [out, in]
  EXPECT_TRUE(plan.b_is_param);
  EXPECT_EQ(plan.m, 64);
  EXPECT_EQ(plan.n, 32);
  EXPECT_EQ(plan.k, 128);
  EXPECT_FALSE(plan.expr.is_identity_epilogue());
  EXPECT_EQ(plan.expr.params_used(), (std::vector<int>{1}));  // the bias
  EXPECT_NE(plan.summary().find("gelu"), std::string::npos) << plan.summary();
}

TEST(KernelPlan, PerChannelBroadcastAndTorchExportNames) {
  Problem p = synthetic({{"in0", DType::f32, {2, 8, 4, 4}}}, {{"bias", DType::f32, {8, 1, 1}}}, {2, 8, 4, 4});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json b = node("b", "placeholder", "p_bias", nlohmann::json::array());
  b["tensor"] = "bias";
  nlohmann::json g = {{"nodes",
                       {x, b, node("add", "call_function", "aten.add.Tensor", {ref("x"), ref("b")}),
                        node("relu", "call_function", "aten.relu.default", {ref("add")}),
                        node("output", "output", "output", {{ref("relu")}})}}};
  KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "elementwise") << plan.reason;
  const ExprNode* leaf = nullptr;
  for (const auto& n : plan.expr.nodes)
    if (n.kind == ExprNode::Kind::Param) leaf = &n;
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(leaf->index.div, 16);  // H*W
  EXPECT_EQ(leaf->index.mod, 8);   // C
}

TEST(KernelPlan, LayerNormModuleAndFunction) {
  Problem p = synthetic({{"in0", DType::f32, {6, 10, 32}}},
                        {{"ln.weight", DType::f32, {32}}, {"ln.bias", DType::f32, {32}}}, {6, 10, 32});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json ln = node("ln", "call_module", "ln", {ref("x")});
  ln["module"] = "torch.nn.modules.normalization.LayerNorm";
  ln["attributes"] = {{"normalized_shape", {32}}, {"eps", 1e-6}, {"elementwise_affine", true}};
  nlohmann::json g = {{"nodes",
                       {x, ln, node("act", "call_function", "torch.nn.functional.silu", {ref("ln")}),
                        node("output", "output", "output", {ref("act")})}}};
  KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "layernorm") << plan.reason;
  EXPECT_EQ(plan.rshape.outer, 60);
  EXPECT_EQ(plan.rshape.reduce, 32);
  EXPECT_EQ(plan.rshape.inner, 1);
  EXPECT_DOUBLE_EQ(plan.eps, 1e-6);
  EXPECT_EQ(plan.expr.params_used(), (std::vector<int>{0, 1}));  // weight and bias in the epilogue
  for (const auto& n : plan.expr.nodes)
    if (n.kind == ExprNode::Kind::Param) EXPECT_EQ(n.index.mod, 32);
  EXPECT_NE(plan.summary().find("layernorm"), std::string::npos) << plan.summary();

  // F.layer_norm over the last two dims, no affine.
  nlohmann::json f = {{"nodes",
                       {x, node("n", "call_function", "torch.nn.functional.layer_norm", {ref("x"), {10, 32}}),
                        node("output", "output", "output", {ref("n")})}}};
  plan = plan_kernel(p, f);
  ASSERT_EQ(plan.kind, "layernorm") << plan.reason;
  EXPECT_EQ(plan.rshape.outer, 6);
  EXPECT_EQ(plan.rshape.reduce, 320);
  EXPECT_DOUBLE_EQ(plan.eps, 1e-5);
  EXPECT_TRUE(plan.expr.is_identity_epilogue());
  // A normalized_shape that is not the trailing dims is refused with the reason.
  nlohmann::json bad = {{"nodes",
                         {x, node("n", "call_function", "torch.nn.functional.layer_norm", {ref("x"), {6}}),
                          node("output", "output", "output", {ref("n")})}}};
  plan = plan_kernel(p, bad);
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("trailing"), std::string::npos) << plan.reason;
}

// Operands transposed in the graph (b.t(), x.transpose(-2, -1)) keep their storage and set the
// plan's flags; the dims are the logical ones (a transposed value is not swapped twice).
TEST(KernelPlan, TransposedOperands) {
  Problem nt = synthetic({{"in0", DType::f32, {128, 512}}, {"in1", DType::f32, {384, 512}}}, {}, {128, 384});
  nlohmann::json a = node("a", "placeholder", "a", nlohmann::json::array());
  a["tensor"] = "in0";
  nlohmann::json b = node("b", "placeholder", "b", nlohmann::json::array());
  b["tensor"] = "in1";
  nlohmann::json g = {{"nodes",
                       {a, b, node("t", "call_method", "t", {ref("b")}),
                        node("mm", "call_function", "torch.matmul", {ref("a"), ref("t")}),
                        node("output", "output", "output", {ref("mm")})}}};
  KernelPlan plan = plan_kernel(nt, g);
  ASSERT_EQ(plan.kind, "matmul") << plan.reason;
  EXPECT_EQ(plan.m, 128);
  EXPECT_EQ(plan.n, 384);
  EXPECT_EQ(plan.k, 512);
  EXPECT_FALSE(plan.a_transposed);
  EXPECT_TRUE(plan.b_transposed);
  EXPECT_FALSE(plan.b_is_param);

  Problem tn = synthetic({{"in0", DType::f32, {4, 64, 32}}, {"in1", DType::f32, {4, 64, 16}}}, {}, {4, 32, 16});
  g = {{"nodes",
        {a, b, node("at", "call_method", "transpose", {ref("a"), -2, -1}),
         node("mm", "call_function", "torch.bmm", {ref("at"), ref("b")}),
         node("output", "output", "output", {ref("mm")})}}};
  plan = plan_kernel(tn, g);
  ASSERT_EQ(plan.kind, "matmul") << plan.reason;
  EXPECT_EQ(plan.batch, 4);
  EXPECT_EQ(plan.m, 32);
  EXPECT_EQ(plan.n, 16);
  EXPECT_EQ(plan.k, 64);
  EXPECT_TRUE(plan.a_transposed);
  EXPECT_FALSE(plan.b_transposed);
}

// Several leading dims (attention's [batch, heads, s, d]) are one flattened batch of a contiguous
// tensor; a 2-D operand is shared by every batch; batched operands with other leading dims are refused.
TEST(KernelPlan, MatmulFlattensLeadingBatchDims) {
  nlohmann::json a = node("a", "placeholder", "a", nlohmann::json::array());
  a["tensor"] = "in0";
  nlohmann::json b = node("b", "placeholder", "b", nlohmann::json::array());
  b["tensor"] = "in1";
  const nlohmann::json g = {{"nodes",
                             {a, b, node("mm", "call_function", "torch.matmul", {ref("a"), ref("b")}),
                              node("output", "output", "output", {ref("mm")})}}};
  KernelPlan plan = plan_kernel(
      synthetic({{"in0", DType::f32, {2, 3, 8, 4}}, {"in1", DType::f32, {2, 3, 4, 5}}}, {}, {2, 3, 8, 5}), g);
  ASSERT_EQ(plan.kind, "matmul") << plan.reason;
  EXPECT_EQ(plan.batch, 6);
  EXPECT_EQ(plan.m, 8);
  EXPECT_EQ(plan.n, 5);
  EXPECT_EQ(plan.k, 4);
  EXPECT_TRUE(plan.a_batched && plan.b_batched);
  EXPECT_EQ(plan.out_shape, (std::vector<int64_t>{2, 3, 8, 5}));

  plan = plan_kernel(synthetic({{"in0", DType::f32, {2, 3, 8, 4}}, {"in1", DType::f32, {4, 5}}}, {}, {2, 3, 8, 5}), g);
  ASSERT_EQ(plan.kind, "matmul") << plan.reason;
  EXPECT_EQ(plan.batch, 6);
  EXPECT_FALSE(plan.b_batched);

  plan =
      plan_kernel(synthetic({{"in0", DType::f32, {2, 3, 8, 4}}, {"in1", DType::f32, {3, 4, 5}}}, {}, {2, 3, 8, 5}), g);
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("batch dims differ"), std::string::npos) << plan.reason;
}

// BatchNorm in eval mode is elementwise with per-channel (dim 1) statistics; the int64 counter
// it carries is not read, so it does not stop the plan; in training mode it is refused.
TEST(KernelPlan, BatchNormEval) {
  Problem p = synthetic({{"in0", DType::f32, {2, 3, 4, 5}}},
                        {{"bn.weight", DType::f32, {3}},
                         {"bn.bias", DType::f32, {3}},
                         {"bn.running_mean", DType::f32, {3}},
                         {"bn.running_var", DType::f32, {3}},
                         {"bn.num_batches_tracked", DType::i64, {1}}},
                        {2, 3, 4, 5});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  std::vector<nlohmann::json> nodes = {x};
  for (std::string t : {"weight", "bias", "running_mean", "running_var"}) {
    nlohmann::json a = node("bn_" + t, "get_attr", "bn." + t, nlohmann::json::array());
    a["tensor"] = "bn." + t;
    nodes.push_back(a);
  }
  auto graph = [&](bool training) {
    nlohmann::json g = {{"nodes", nodes}};
    g["nodes"].push_back(
        node("bn", "call_function", "torch.nn.functional.batch_norm",
             {ref("x"), ref("bn_running_mean"), ref("bn_running_var")},
             {{"weight", ref("bn_weight")}, {"bias", ref("bn_bias")}, {"training", training}, {"eps", 1e-5}}));
    g["nodes"].push_back(node("output", "output", "output", {ref("bn")}));
    return g;
  };
  KernelPlan plan = plan_kernel(p, graph(false));
  ASSERT_EQ(plan.kind, "elementwise") << plan.reason;
  std::vector<int> used = plan.expr.params_used();  // in first-use order
  std::sort(used.begin(), used.end());
  EXPECT_EQ(used, (std::vector<int>{0, 1, 2, 3}));  // not 4, the counter
  for (const auto& n : plan.expr.nodes)
    if (n.kind == ExprNode::Kind::Param) {
      EXPECT_EQ(n.index.div, 20) << "channel = (i / (4 * 5)) % 3";
      EXPECT_EQ(n.index.mod, 3);
    }
  plan = plan_kernel(p, graph(true));
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("training"), std::string::npos) << plan.reason;
}

// logsumexp becomes max -> exp(x - max) -> sum + epilogue(log(acc) + max): the row maxima stay in
// temporary 0, read by the last stage as a row vector whether or not the dim is kept.
TEST(KernelPlan, LogSumExpAsAChain) {
  for (bool keepdim : {false, true}) {
    SCOPED_TRACE(keepdim);
    const std::vector<int64_t> out = keepdim ? std::vector<int64_t>{4, 1} : std::vector<int64_t>{4};
    Problem p = synthetic({{"in0", DType::f32, {4, 6}}}, {}, out);
    nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
    x["tensor"] = "in0";
    nlohmann::json g = {
        {"nodes",
         {x, node("l", "call_function", "torch.logsumexp", {ref("x")}, {{"dim", -1}, {"keepdim", keepdim}}),
          node("output", "output", "output", {ref("l")})}}};
    KernelPlan plan = plan_kernel(p, g);
    ASSERT_EQ(plan.kind, "chain") << plan.reason;
    ASSERT_EQ(plan.stages.size(), 3u) << plan.summary();
    EXPECT_EQ(plan.stages[0].reduce_op, "max");
    EXPECT_EQ(plan.stages[1].kind, "elementwise");
    EXPECT_EQ(plan.stages[2].reduce_op, "sum");
    EXPECT_EQ(plan.temps[0].shape, (std::vector<int64_t>{4, 1}));
    bool reads_max = false;
    for (const auto& n : plan.stages[2].expr.nodes)
      reads_max |=
          n.kind == ExprNode::Kind::Input && n.tensor == plan.first_temp && n.index.div == 1 && n.index.mod == 4;
    EXPECT_TRUE(reads_max) << plan.stages[2].to_json().dump();
  }
}

// GroupNorm: rows of a layernorm are (sample, group) blocks of C / G channels x positions; the
// affine tensors are per channel. Groups that do not divide the channels are refused.
TEST(KernelPlan, GroupNormModule) {
  for (int64_t groups : {4, 5}) {
    SCOPED_TRACE(groups);
    Problem p = synthetic({{"in0", DType::f32, {2, 8, 3, 3}}},
                          {{"gn.weight", DType::f32, {8}}, {"gn.bias", DType::f32, {8}}}, {2, 8, 3, 3});
    nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
    x["tensor"] = "in0";
    nlohmann::json gn = node("gn", "call_module", "gn", {ref("x")});
    gn["module"] = "torch.nn.modules.normalization.GroupNorm";
    gn["attributes"] = {{"num_groups", groups}, {"num_channels", 8}, {"eps", 1e-5}};
    KernelPlan plan = plan_kernel(p, {{"nodes", {x, gn, node("output", "output", "output", {ref("gn")})}}});
    if (groups == 5) {
      EXPECT_EQ(plan.kind, "unsupported");
      EXPECT_NE(plan.reason.find("groups"), std::string::npos) << plan.reason;
      continue;
    }
    ASSERT_EQ(plan.kind, "layernorm") << plan.reason;
    EXPECT_EQ(plan.rshape.outer, 8);    // 2 samples x 4 groups
    EXPECT_EQ(plan.rshape.reduce, 18);  // 2 channels x 3 x 3
    EXPECT_EQ(plan.rshape.inner, 1);
    for (const auto& n : plan.expr.nodes)
      if (n.kind == ExprNode::Kind::Param) {
        EXPECT_EQ(n.index.div, 9);
        EXPECT_EQ(n.index.mod, 8);
      }
  }
}

// The sliding-window output length: PyTorch's floor rule, also when the window does not fit.
TEST(KernelPlan, MeanOverAdjacentDimsIsOneReduction) {
  // A global average pool, x.mean(dim=(2, 3)): one reduction over H * W per (n, c).
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  auto plan_of = [&](const nlohmann::json& dim, bool keepdim, const std::vector<int64_t>& out) {
    Problem p = synthetic({{"in0", DType::f32, {2, 3, 4, 5}}}, {}, out);
    return plan_kernel(p, {{"nodes",
                            {x, node("m", "call_method", "mean", {ref("x")}, {{"dim", dim}, {"keepdim", keepdim}}),
                             node("output", "output", "output", {ref("m")})}}});
  };
  KernelPlan plan = plan_of({2, 3}, false, {2, 3});
  ASSERT_EQ(plan.kind, "reduce") << plan.reason;
  EXPECT_EQ(plan.reduce_op, "mean");
  EXPECT_EQ(plan.rshape.outer, 6);
  EXPECT_EQ(plan.rshape.reduce, 20);
  EXPECT_EQ(plan.rshape.inner, 1);
  plan = plan_of({-2, 1}, true, {2, 1, 1, 5});  // negative, unsorted, keepdim
  ASSERT_EQ(plan.kind, "reduce") << plan.reason;
  EXPECT_EQ(plan.rshape.outer, 2);
  EXPECT_EQ(plan.rshape.reduce, 12);
  EXPECT_EQ(plan.rshape.inner, 5);
  plan = plan_of({1, 3}, false, {2, 4});
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("not adjacent"), std::string::npos) << plan.reason;
}

TEST(KernelPlan, WindowOutputLength) {
  EXPECT_EQ(window_out(32, 3, 2, 1, 1), 16);  // 3x3 stride 2 pad 1
  EXPECT_EQ(window_out(11, 3, 2, 1, 2), 5);   // dilation 2
  EXPECT_EQ(window_out(3, 3, 2, 0, 1), 1);
  EXPECT_EQ(window_out(2, 3, 2, 0, 1), 0);   // one element short: none, not one (truncation would say 1)
  EXPECT_EQ(window_out(3, 5, 2, 0, 1), 0);   // floor(-2 / 2) + 1
  EXPECT_EQ(window_out(1, 5, 1, 0, 1), -3);  // floor(-4 / 1) + 1
}

// Pooling: the module's attributes or the function's arguments give the window; what follows is
// the epilogue; ceil_mode is refused (its output size rule is not generated).
TEST(KernelPlan, Pooling) {
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json mp = node("mp", "call_module", "mp", {ref("x")});
  mp["module"] = "torch.nn.modules.pooling.MaxPool2d";
  mp["attributes"] = {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"dilation", 1}, {"ceil_mode", false}};
  Problem p = synthetic({{"in0", DType::f32, {2, 4, 9, 9}}}, {}, {2, 4, 5, 5});
  KernelPlan plan = plan_kernel(p, {{"nodes",
                                     {x, mp, node("r", "call_function", "torch.relu", {ref("mp")}),
                                      node("output", "output", "output", {ref("r")})}}});
  ASSERT_EQ(plan.kind, "pool") << plan.reason;
  EXPECT_EQ(plan.pool_op, "max");
  EXPECT_EQ(plan.pool.planes, 8);
  EXPECT_EQ(plan.pool.out_h, 5);
  EXPECT_EQ(plan.pool.out_w, 5);
  EXPECT_EQ(plan.pool.sh, 2);
  EXPECT_EQ(plan.pool.ph, 1);
  EXPECT_FALSE(plan.expr.is_identity_epilogue());

  Problem q = synthetic({{"in0", DType::f32, {1, 3, 8, 10}}}, {}, {1, 3, 4, 4});
  plan = plan_kernel(
      q, {{"nodes",
           {x,
            node("ap", "call_function", "torch.nn.functional.avg_pool2d", {ref("x"), nlohmann::json::array({2, 3})},
                 {{"stride", nlohmann::json::array({2, 2})}, {"count_include_pad", false}}),
            node("output", "output", "output", {ref("ap")})}}});
  ASSERT_EQ(plan.kind, "pool") << plan.reason;
  EXPECT_EQ(plan.pool_op, "avg");
  EXPECT_EQ(plan.pool.kh, 2);
  EXPECT_EQ(plan.pool.kw, 3);
  EXPECT_EQ(plan.pool.out_w, 4);
  EXPECT_FALSE(plan.pool.count_include_pad);

  mp["attributes"]["ceil_mode"] = true;
  plan = plan_kernel(p, {{"nodes", {x, mp, node("output", "output", "output", {ref("mp")})}}});
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("ceil_mode"), std::string::npos) << plan.reason;
}

// Convolution modules: the weight gives the kernel, the bias joins the epilogue per channel (and
// what follows, here a ReLU); Conv1d is a conv of height 1; a string padding ('same') is refused.
TEST(KernelPlan, PadBeforeAConvBecomesItsPadding) {
  // A causal conv: F.pad(x, (6, 0)) then Conv1d(kernel 7, padding 1): 7 zeros on the left, 1 on
  // the right, one kernel and no padded copy of x.
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json pad =
      node("pd", "call_function", "torch.nn.functional.pad", {ref("x"), nlohmann::json::array({6, 0})});
  nlohmann::json c1 = node("c1", "call_module", "c1", {ref("pd")});
  c1["module"] = "torch.nn.modules.conv.Conv1d";
  c1["attributes"] = {{"kernel_size", {7}}, {"stride", {1}}, {"padding", {1}}, {"dilation", {1}}, {"groups", 3}};
  Problem p = synthetic({{"in0", DType::f32, {2, 3, 20}}}, {{"c1.weight", DType::f32, {3, 1, 7}}}, {2, 3, 22});
  KernelPlan plan = plan_kernel(p, {{"nodes", {x, pad, c1, node("output", "output", "output", {ref("c1")})}}});
  ASSERT_EQ(plan.kind, "conv") << plan.reason;
  EXPECT_EQ(plan.conv.w, 20);
  EXPECT_EQ(plan.conv.pw, 7);
  EXPECT_EQ(plan.conv.pw_end(), 1);
  EXPECT_FALSE(plan.conv.symmetric());
  EXPECT_EQ(plan.conv.out_w, 22);  // 20 + 7 + 1 - 6

  // Anything else reading the padded tensor is refused, not computed on the unpadded one.
  Problem q = synthetic({{"in0", DType::f32, {2, 3, 20}}}, {}, {2, 3, 26});
  plan = plan_kernel(q, {{"nodes",
                          {x, pad, node("r", "call_function", "torch.relu", {ref("pd")}),
                           node("output", "output", "output", {ref("r")})}}});
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("F.pad"), std::string::npos) << plan.reason;
  // and so are other modes
  pad["kwargs"] = {{"mode", "reflect"}};
  plan = plan_kernel(p, {{"nodes", {x, pad, c1, node("output", "output", "output", {ref("c1")})}}});
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("reflect"), std::string::npos) << plan.reason;
}

TEST(KernelPlan, ConvolutionModules) {
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json cv = node("cv", "call_module", "cv", {ref("x")});
  cv["module"] = "torch.nn.modules.conv.Conv2d";
  cv["attributes"] = {{"kernel_size", {3, 3}}, {"stride", {2, 2}},        {"padding", {1, 1}},  {"dilation", {1, 1}},
                      {"groups", 2},           {"padding_mode", "zeros"}, {"transposed", false}};
  Problem p = synthetic({{"in0", DType::f32, {1, 4, 8, 8}}},
                        {{"cv.weight", DType::f32, {6, 2, 3, 3}}, {"cv.bias", DType::f32, {6}}}, {1, 6, 4, 4});
  KernelPlan plan = plan_kernel(p, {{"nodes",
                                     {x, cv, node("r", "call_function", "torch.relu", {ref("cv")}),
                                      node("output", "output", "output", {ref("r")})}}});
  ASSERT_EQ(plan.kind, "conv") << plan.reason;
  EXPECT_EQ(plan.conv.groups, 2);
  EXPECT_EQ(plan.conv.out_h, 4);
  EXPECT_EQ(plan.conv.out_w, 4);
  EXPECT_EQ(plan.conv_weight, 0);
  EXPECT_TRUE(plan.conv_weight_is_param);
  EXPECT_EQ(plan.expr.params_used(), (std::vector<int>{1}));  // the bias, per output channel
  for (const auto& n : plan.expr.nodes)
    if (n.kind == ExprNode::Kind::Param) EXPECT_EQ(n.index.div, 16);

  nlohmann::json c1 = node("c1", "call_module", "c1", {ref("x")});
  c1["module"] = "torch.nn.modules.conv.Conv1d";
  c1["attributes"] = {{"kernel_size", {5}}, {"stride", {1}}, {"padding", {2}}, {"dilation", {1}}, {"groups", 1}};
  Problem q = synthetic({{"in0", DType::f32, {2, 3, 20}}}, {{"c1.weight", DType::f32, {4, 3, 5}}}, {2, 4, 20});
  plan = plan_kernel(q, {{"nodes", {x, c1, node("output", "output", "output", {ref("c1")})}}});
  ASSERT_EQ(plan.kind, "conv") << plan.reason;
  EXPECT_EQ(plan.conv.h, 1);
  EXPECT_EQ(plan.conv.kh, 1);
  EXPECT_EQ(plan.conv.kw, 5);
  EXPECT_EQ(plan.conv.out_w, 20);

  // A batch norm (eval) and an activation after the conv join its epilogue: one kernel, not a
  // chain (the per-channel statistics are smaller than the conv's result but broadcast to it).
  Problem bn = synthetic({{"in0", DType::f32, {1, 4, 8, 8}}},
                         {{"cv.weight", DType::f32, {6, 2, 3, 3}},
                          {"cv.bias", DType::f32, {6}},
                          {"m", DType::f32, {6}},
                          {"v", DType::f32, {6}}},
                         {1, 6, 4, 4});
  nlohmann::json m = node("m", "get_attr", "m", nlohmann::json::array()),
                 v = node("v", "get_attr", "v", nlohmann::json::array());
  m["tensor"] = "m";
  v["tensor"] = "v";
  plan = plan_kernel(bn, {{"nodes",
                           {x, m, v, cv,
                            node("bn", "call_function", "torch.nn.functional.batch_norm",
                                 {ref("cv"), ref("m"), ref("v")}, {{"training", false}, {"eps", 1e-5}}),
                            node("s", "call_function", "torch.nn.functional.silu", {ref("bn")}),
                            node("output", "output", "output", {ref("s")})}}});
  ASSERT_EQ(plan.kind, "conv") << plan.summary();
  EXPECT_NE(plan.summary().find("silu"), std::string::npos) << plan.summary();

  c1["attributes"]["padding"] = "same";
  plan = plan_kernel(q, {{"nodes", {x, c1, node("output", "output", "output", {ref("c1")})}}});
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("padding"), std::string::npos) << plan.reason;
}

// Transposed convolutions: the weight is [cin, cout / groups, kh, kw], the output size follows
// PyTorch's rule with output_padding added at the end; the bias joins the epilogue per channel.
TEST(KernelPlan, TransposedConvolutionModules) {
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json ct = node("ct", "call_module", "ct", {ref("x")});
  ct["module"] = "torch.nn.modules.conv.ConvTranspose2d";
  ct["attributes"] = {{"kernel_size", {3, 4}},    {"stride", {2, 3}},   {"padding", {1, 2}},
                      {"output_padding", {1, 2}}, {"dilation", {1, 2}}, {"groups", 2},
                      {"padding_mode", "zeros"},  {"transposed", true}};
  // out_h = (5 - 1) * 2 - 2 + 1 * 2 + 1 + 1 = 10, out_w = (4 - 1) * 3 - 4 + 2 * 3 + 1 + 2 = 14
  Problem p = synthetic({{"in0", DType::f32, {2, 4, 5, 4}}},
                        {{"ct.weight", DType::f32, {4, 3, 3, 4}}, {"ct.bias", DType::f32, {6}}}, {2, 6, 10, 14});
  const nlohmann::json graph = {
      {"nodes",
       {x, ct, node("r", "call_function", "torch.relu", {ref("ct")}), node("output", "output", "output", {ref("r")})}}};
  KernelPlan plan = plan_kernel(p, graph);
  ASSERT_EQ(plan.kind, "conv_transpose") << plan.reason;
  EXPECT_EQ(plan.conv.cin, 4);
  EXPECT_EQ(plan.conv.cout, 6);
  EXPECT_EQ(plan.conv.groups, 2);
  EXPECT_EQ(plan.conv.h, 5);
  EXPECT_EQ(plan.conv.out_h, 10);
  EXPECT_EQ(plan.conv.out_w, 14);
  EXPECT_EQ(plan.conv.dw, 2);
  EXPECT_TRUE(plan.conv_weight_is_param);
  EXPECT_EQ(plan.expr.params_used(), (std::vector<int>{1}));  // the bias, per output channel
  for (const auto& n : plan.expr.nodes)
    if (n.kind == ExprNode::Kind::Param) EXPECT_EQ(n.index.div, 140);
  EXPECT_NE(plan.summary().find("conv_transpose 3x4"), std::string::npos) << plan.summary();

  // output_padding must stay below the stride (or dilation): PyTorch refuses it, so does the plan
  ct["attributes"]["output_padding"] = {2, 2};
  plan = plan_kernel(p, {{"nodes", {x, ct, node("output", "output", "output", {ref("ct")})}}});
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("geometry"), std::string::npos) << plan.reason;

  // ConvTranspose1d: height 1; and the functional form
  nlohmann::json c1 = node("c1", "call_module", "c1", {ref("x")});
  c1["module"] = "torch.nn.modules.conv.ConvTranspose1d";
  c1["attributes"] = {{"kernel_size", {4}},    {"stride", {2}},   {"padding", {1}},
                      {"output_padding", {0}}, {"dilation", {1}}, {"groups", 1}};
  Problem q = synthetic({{"in0", DType::f32, {2, 3, 20}}}, {{"c1.weight", DType::f32, {3, 5, 4}}}, {2, 5, 40});
  plan = plan_kernel(q, {{"nodes", {x, c1, node("output", "output", "output", {ref("c1")})}}});
  ASSERT_EQ(plan.kind, "conv_transpose") << plan.reason;
  EXPECT_EQ(plan.conv.h, 1);
  EXPECT_EQ(plan.conv.out_h, 1);
  EXPECT_EQ(plan.conv.out_w, 40);  // (20 - 1) * 2 - 2 + 3 + 1
  nlohmann::json w = node("w", "get_attr", "c1.weight", nlohmann::json::array());
  w["tensor"] = "c1.weight";
  plan = plan_kernel(q, {{"nodes",
                          {x, w,
                           node("f", "call_function", "torch.nn.functional.conv_transpose1d", {ref("x"), ref("w")},
                                {{"stride", 2}, {"padding", 1}}),
                           node("output", "output", "output", {ref("f")})}}});
  ASSERT_EQ(plan.kind, "conv_transpose") << plan.reason;
  EXPECT_EQ(plan.conv.out_w, 40);
}

TEST(KernelPlan, SaysWhyItCannot) {
  Problem p = synthetic({{"in0", DType::f32, {16, 16}}}, {}, {16});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  EXPECT_EQ(plan_kernel(p, nlohmann::json::object()).kind, "unsupported");
  // Two branches of which the first is needed after the second started: the chain keeps only
  // a stage's latest value, so the first is lost; said, not guessed.
  nlohmann::json branches = {
      {"nodes",
       {x, node("a", "call_function", "torch.relu", {ref("x")}), node("b", "call_function", "torch.tanh", {ref("x")}),
        node("s", "call_function", "torch.sum", {ref("b")}, {{"dim", 1}}),
        node("t", "call_function", "torch.sum", {ref("a")}, {{"dim", 1}}),
        node("o", "call_function", "torch.add", {ref("s"), ref("t")}),
        node("output", "output", "output", {ref("o")})}}};
  KernelPlan plan = plan_kernel(p, branches);
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("not kept"), std::string::npos) << plan.reason;
  // The graph's output computed before its last kernel.
  nlohmann::json early = {{"nodes",
                           {x, node("s", "call_function", "torch.sum", {ref("x")}, {{"dim", 1}}),
                            node("m", "call_function", "torch.amax", {ref("x")}, {{"dim", 1}}),
                            node("output", "output", "output", {ref("s")})}}};
  plan = plan_kernel(p, early);
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("before"), std::string::npos) << plan.reason;
}

// F.conv2d reads its weight as a dense tensor: a weight that is a view (here a transpose of its
// first two dims) is refused with that reason, not read as if it were dense.
TEST(KernelPlan, ConvOfAWeightViewIsRefusedAsAView) {
  Problem p = synthetic({{"in0", DType::f32, {1, 4, 8, 8}}}, {{"w", DType::f32, {4, 6, 3, 3}}}, {1, 6, 6, 6});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json w = node("w", "get_attr", "w", nlohmann::json::array());
  w["tensor"] = "w";
  nlohmann::json g = {{"nodes",
                       {x, w, node("wt", "call_method", "transpose", {ref("w"), 0, 1}),
                        node("c", "call_function", "torch.nn.functional.conv2d", {ref("x"), ref("wt")}),
                        node("output", "output", "output", {ref("c")})}}};
  KernelPlan plan = plan_kernel(p, g);
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("weight view"), std::string::npos) << plan.reason;
}

// The graph of x `op` root(mean(x^2, -1, keepdim) + 1e-6) * w over [16, 32]: an RMSNorm with
// ("torch.rsqrt", "operator.mul") or ("torch.sqrt", "operator.truediv").
nlohmann::json rms_norm_graph(const std::string& root, const std::string& op) {
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json w = node("w", "get_attr", "w", nlohmann::json::array());
  w["tensor"] = "w";
  return {{"nodes",
           {x, w, node("sq", "call_method", "pow", {ref("x"), 2}),
            node("ms", "call_method", "mean", {ref("sq")}, {{"dim", -1}, {"keepdim", true}}),
            node("e", "call_function", "operator.add", {ref("ms"), 1e-6}), node("r", "call_function", root, {ref("e")}),
            node("y", "call_function", op, {ref("x"), ref("r")}),
            node("z", "call_function", "operator.mul", {ref("y"), ref("w")}),
            node("output", "output", "output", {ref("z")})}}};
}

// Work before a producer, and a second producer, make a chain of stages joined by temporaries.
TEST(KernelPlan, ChainsOfKernels) {
  Problem p = synthetic({{"in0", DType::f32, {16, 32}}}, {{"w", DType::f32, {32}}}, {16, 32});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  // Not a norm (x times the root mean square), so not one kernel.
  nlohmann::json g = rms_norm_graph("torch.sqrt", "operator.mul");
  KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "chain") << plan.reason;
  ASSERT_EQ(plan.stages.size(), 3u) << plan.summary();
  EXPECT_EQ(plan.first_temp, 1);
  ASSERT_EQ(plan.temps.size(), 2u);
  // x*x into temp 0, its row means (+eps, sqrt) into temp 1 [16, 1], then x * temp1 * w.
  EXPECT_EQ(plan.stages[0].kind, "elementwise");
  EXPECT_EQ(plan.temps[0].shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(plan.stages[1].kind, "reduce");
  EXPECT_EQ(plan.stages[1].reduce_op, "mean");
  EXPECT_EQ(plan.stages[1].source, 1);  // reads temp 0
  EXPECT_EQ(plan.stages[1].rshape.reduce, 32);
  EXPECT_FALSE(plan.stages[1].expr.is_identity_epilogue());  // + eps, sqrt
  EXPECT_EQ(plan.temps[1].shape, (std::vector<int64_t>{16, 1}));
  const KernelPlan& last = plan.stages[2];
  EXPECT_EQ(last.kind, "elementwise");
  EXPECT_EQ(last.out_shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(last.expr.inputs_used(), (std::vector<int>{0, 2}));  // x and temp 1
  for (const auto& n : last.expr.nodes)
    if (n.kind == ExprNode::Kind::Input && n.tensor == 2) EXPECT_EQ(n.index.div, 32);  // one value per row
  Problem s1 = stage_problem(p, plan, 1);
  ASSERT_EQ(s1.inputs.size(), 3u);
  EXPECT_EQ(s1.outputs[0].shape, (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(stage_problem(p, plan, 2).outputs[0].name, "out0");
  EXPECT_NE(plan.summary().find("chain of 3 kernels"), std::string::npos) << plan.summary();
  EXPECT_EQ(plan.to_json()["stages"].size(), 3u);

  // softmax then a product with a parameter matrix: two producers, two stages.
  Problem q = synthetic({{"in0", DType::f32, {16, 32}}}, {{"v", DType::f32, {32, 8}}}, {16, 8});
  nlohmann::json v = node("v", "get_attr", "v", nlohmann::json::array());
  v["tensor"] = "v";
  nlohmann::json two = {
      {"nodes",
       {x, v, node("a", "call_function", "torch.softmax", {ref("x")}, {{"dim", -1}}),
        node("d", "call_function", "torch.nn.functional.dropout", {ref("a")}, {{"p", 0.1}, {"training", false}}),
        node("m", "call_function", "torch.matmul", {ref("d"), ref("v")}),
        node("r", "call_function", "torch.relu", {ref("m")}), node("output", "output", "output", {ref("r")})}}};
  plan = plan_kernel(q, two);
  ASSERT_EQ(plan.kind, "chain") << plan.reason;
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.stages[0].kind, "softmax");
  EXPECT_EQ(plan.stages[1].kind, "matmul");
  EXPECT_EQ(plan.stages[1].a, 1);  // the softmax's temporary
  EXPECT_FALSE(plan.stages[1].a_is_param);
  EXPECT_EQ(plan.stages[1].m, 16);
  EXPECT_EQ(plan.stages[1].n, 8);

  // A stage whose value nothing reads is dropped and the temporaries renumbered: tanh(x) is
  // kept when the sum starts (it is the stage's latest value) but never used.
  nlohmann::json dead = {{"nodes",
                          {x, node("t", "call_function", "torch.tanh", {ref("x")}),
                           node("s", "call_function", "torch.sum", {ref("x")}, {{"dim", 1}}),
                           node("output", "output", "output", {ref("s")})}}};
  Problem r = synthetic({{"in0", DType::f32, {16, 32}}}, {}, {16});
  plan = plan_kernel(r, dead);
  ASSERT_EQ(plan.kind, "reduce") << plan.summary();
  EXPECT_EQ(plan.source, 0);
}

// RMSNorm written out with rsqrt is one kernel: a layernorm without the mean, whose epilogue
// multiplies by the weight; the squares and the row means need no temporaries.
// nn.RMSNorm (torch >= 2.4) and F.rms_norm are the same plan; eps None is float32's epsilon.
TEST(KernelPlan, RmsNormModuleAndFunction) {
  Problem p = synthetic({{"in0", DType::f32, {16, 32}}}, {{"norm.weight", DType::f32, {32}}}, {16, 32});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json mod = node("norm", "call_module", "norm", {ref("x")});
  mod["module"] = "torch.nn.modules.normalization.RMSNorm";
  mod["attributes"] = {{"normalized_shape", {32}}, {"elementwise_affine", true}, {"has_weight", true}};
  KernelPlan m = plan_kernel(p, {{"nodes", {x, mod, node("output", "output", "output", {ref("norm")})}}});
  ASSERT_EQ(m.kind, "layernorm") << m.reason;
  EXPECT_TRUE(m.rms);
  EXPECT_DOUBLE_EQ(m.eps, 1.1920928955078125e-07);
  EXPECT_EQ(m.expr.params_used(), (std::vector<int>{0}));
  nlohmann::json w = node("w", "get_attr", "norm.weight", nlohmann::json::array());
  w["tensor"] = "norm.weight";
  KernelPlan f = plan_kernel(
      p, {{"nodes",
           {x, w, node("y", "call_function", "torch.nn.functional.rms_norm", {ref("x"), {32}, ref("w"), 1e-5}),
            node("output", "output", "output", {ref("y")})}}});
  ASSERT_EQ(f.kind, "layernorm") << f.reason;
  EXPECT_TRUE(f.rms);
  EXPECT_DOUBLE_EQ(f.eps, 1e-5);
  EXPECT_EQ(f.rshape.reduce, 32);
}

TEST(KernelPlan, RmsNormWrittenOutIsOneLayernormWithoutTheMean) {
  Problem p = synthetic({{"in0", DType::f32, {16, 32}}}, {{"w", DType::f32, {32}}}, {16, 32});
  KernelPlan divided = plan_kernel(p, rms_norm_graph("torch.sqrt", "operator.truediv"));  // x / sqrt(...)
  EXPECT_EQ(divided.kind, "layernorm") << divided.reason << " " << divided.summary();
  EXPECT_TRUE(divided.rms);
  KernelPlan plan = plan_kernel(p, rms_norm_graph("torch.rsqrt", "operator.mul"));
  ASSERT_EQ(plan.kind, "layernorm") << plan.reason << " " << plan.summary();
  EXPECT_TRUE(plan.rms);
  EXPECT_EQ(plan.source, 0);
  EXPECT_DOUBLE_EQ(plan.eps, 1e-6);
  EXPECT_EQ(plan.rshape.outer, 16);
  EXPECT_EQ(plan.rshape.reduce, 32);
  EXPECT_EQ(plan.rshape.inner, 1);
  EXPECT_EQ(plan.summary().rfind("rmsnorm over [16, 32, 1]", 0), 0u) << plan.summary();
  EXPECT_TRUE(plan.temps.empty());
  EXPECT_TRUE(plan.expr.inputs_used().empty());               // x only as the source
  EXPECT_EQ(plan.expr.params_used(), (std::vector<int>{0}));  // acc * w
  EXPECT_TRUE(plan.to_json().value("rms", false));
  // A mean square read elsewhere too stays a chain: its temporary is still needed.
  nlohmann::json g = rms_norm_graph("torch.rsqrt", "operator.mul");
  g["nodes"][8] = node("z2", "call_function", "operator.add", {ref("z"), ref("r")});
  g["nodes"].push_back(node("output", "output", "output", {ref("z2")}));
  KernelPlan kept = plan_kernel(p, g);
  ASSERT_EQ(kept.kind, "chain") << kept.reason;
  EXPECT_FALSE(kept.stages.back().rms);
}

// x / (x.sum(-1, keepdim) + 1) over [16, 32] (level2/15 with an epilogue on the sum), or with
// `reduce` and `op` in place of sum and division; `keepdim` false reduces to [16] and unsqueezes.
nlohmann::json row_map_graph(const std::string& reduce, const std::string& op, int64_t dim, bool keepdim) {
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json nodes = {x, node("s", "call_method", reduce, {ref("x")}, {{"dim", dim}, {"keepdim", keepdim}}),
                          node("e", "call_function", "operator.add", {ref("s"), 1.0})};
  if (!keepdim) nodes.push_back(node("u", "call_method", "unsqueeze", {ref("e"), -1}));
  nodes.push_back(node("y", "call_function", op, {ref("x"), ref(keepdim ? "e" : "u")}));
  nodes.push_back(node("output", "output", "output", {ref("y")}));
  return {{"nodes", nodes}};
}

TEST(KernelPlan, ARowStatisticAndTheWorkThatReadsItFuseIntoOneRowMap) {
  Problem p = synthetic({{"in0", DType::f32, {16, 32}}}, {}, {16, 32});
  for (bool keepdim : {true, false}) {
    SCOPED_TRACE(keepdim);
    const KernelPlan chain = plan_kernel(p, row_map_graph("sum", "operator.truediv", -1, keepdim));
    ASSERT_EQ(chain.kind, "chain") << chain.reason << " " << chain.summary();
    ASSERT_EQ(chain.stages.size(), 2u) << chain.summary();
    const auto fused = fuse_row_map(chain);
    ASSERT_TRUE(fused.has_value()) << chain.to_json().dump();
    EXPECT_EQ(fused->kind, "row_map");
    EXPECT_EQ(fused->source, 0);
    EXPECT_EQ(fused->reduce_op, "sum");
    EXPECT_EQ(fused->rshape.outer, 16);
    EXPECT_EQ(fused->rshape.reduce, 32);
    EXPECT_EQ(fused->rshape.inner, 1);
    EXPECT_EQ(fused->out_numel, 16 * 32);
    EXPECT_TRUE(fused->temps.empty());
    // The sum's epilogue moved into the expression; x read element by element (here from a register).
    EXPECT_EQ(gpu::render_at(*fused, kCuda, "i", "stat", "xv"), "(xv / (stat + (1.0f)))");
    EXPECT_EQ(gpu::render_at(*fused, kCuda, "i", "stat"), "(in0[i] / (stat + (1.0f)))");
    EXPECT_EQ(fused->to_json().value("reduce_op", ""), "sum");
    EXPECT_EQ(fused->summary().rfind("sum of each of 16 rows of 32", 0), 0u) << fused->summary();
  }
  // What is not a row statistic and one map of its rows stays a chain.
  const KernelPlan columns = plan_kernel(p, row_map_graph("sum", "operator.truediv", 0, true));  // inner 32
  ASSERT_EQ(columns.kind, "chain") << columns.reason;
  EXPECT_FALSE(fuse_row_map(columns).has_value());
  KernelPlan other_map = plan_kernel(p, row_map_graph("amax", "operator.sub", -1, true));
  ASSERT_EQ(other_map.kind, "chain") << other_map.reason;
  EXPECT_TRUE(fuse_row_map(other_map).has_value());
  for (auto& n : other_map.stages[1].expr.nodes)  // the temporary read as if it were per column
    if (n.kind == ExprNode::Kind::Input && n.tensor == other_map.first_temp) n.index = {1, 16};
  EXPECT_FALSE(fuse_row_map(other_map).has_value());
  Problem lse = synthetic({{"in0", DType::f32, {4, 6}}}, {}, {4, 1});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  const KernelPlan three = plan_kernel(
      lse, {{"nodes",
             {x, node("l", "call_function", "torch.logsumexp", {ref("x")}, {{"dim", -1}, {"keepdim", true}}),
              node("output", "output", "output", {ref("l")})}}});
  ASSERT_EQ(three.kind, "chain") << three.reason;
  EXPECT_FALSE(fuse_row_map(three).has_value());
  EXPECT_FALSE(fuse_row_map(plan_kernel(p, row_map_graph("sum", "operator.truediv", -1, true)).stages[0]).has_value());
}

TEST(KernelPlan, RendersExpressions) {
  KernelPlan act = plan_kernel(hand_made("act_chain"));
  ASSERT_EQ(act.kind, "elementwise");
  std::string c = render_expr(act.expr, kCuda, [](const ExprNode& n) {
    return n.kind == ExprNode::Kind::Input ? std::string("x[i]") : std::string("scale[i % 1024]");
  });
  EXPECT_NE(c.find("tanhf("), std::string::npos) << c;
  EXPECT_NE(c.find("scale[i % 1024]"), std::string::npos) << c;
  std::string cl = render_expr(act.expr, kOpenCL, [](const ExprNode&) { return std::string("v"); });
  EXPECT_NE(cl.find("tanh("), std::string::npos) << cl;
  EXPECT_EQ(cl.find("tanhf("), std::string::npos) << cl;
  EXPECT_NE(cl.find("(0.1f)"), std::string::npos) << cl;  // the leaky_relu slope
}

// Attention written out as in a transformer block: the fused QKV tensor reshaped by sizes read
// from the input, permuted to (3, B, H, S, Dh) and indexed; q, k and v are views, each copied
// dense once by a gather stage (k in its own row order, read as B^T); the context transposed
// back and reshaped is one more gather, the chain's last stage.
TEST(KernelPlan, AttentionHeadsAreViewsCopiedByGatherStages) {
  const int64_t B = 2, S = 5, H = 4, Dh = 6, D = H * Dh;
  Problem p = synthetic({{"in0", DType::f32, {B, S, 3 * D}}}, {}, {B, S, D});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  auto call = [](const std::string& name, const std::string& fn, nlohmann::json args) {
    return node(name, "call_method", fn, std::move(args));
  };
  auto get = [](const std::string& name, const std::string& of, int i) {
    return node(name, "call_function", "_operator.getitem", {ref(of), i});
  };
  nlohmann::json g = {
      {"nodes",
       {x, call("b", "size", {ref("x"), 0}), call("s", "size", {ref("x"), 1}),
        call("r", "reshape", {ref("x"), ref("b"), ref("s"), 3, H, Dh}),
        call("pm", "permute", {ref("r"), 2, 0, 3, 1, 4}), get("q", "pm", 0), get("k", "pm", 1), get("v", "pm", 2),
        call("kt", "transpose", {ref("k"), -2, -1}), node("sc", "call_function", "torch.matmul", {ref("q"), ref("kt")}),
        node("sm", "call_function", "torch.softmax", {ref("sc")}, {{"dim", -1}}),
        node("ctx", "call_function", "torch.matmul", {ref("sm"), ref("v")}),
        call("ct", "transpose", {ref("ctx"), 1, 2}), call("out", "reshape", {ref("ct"), ref("b"), ref("s"), D}),
        node("output", "output", "output", {ref("out")})}}};
  KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "chain") << plan.reason;
  std::vector<std::string> kinds;
  for (const auto& st : plan.stages) kinds.push_back(st.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"gather", "gather", "matmul", "softmax", "gather", "matmul", "gather"}))
      << plan.summary();
  // q = x.reshape(B, S, 3, H, Dh).permute(2, 0, 3, 1, 4)[0]: [B, H, S, Dh] with strides (S*3D, Dh, 3D, 1)
  const KernelPlan& q = plan.stages[0];
  EXPECT_EQ(q.source, 0);
  EXPECT_EQ(q.gather_shape, (std::vector<int64_t>{B, H, S, Dh}));
  EXPECT_EQ(q.gather_strides, (std::vector<int64_t>{S * 3 * D, Dh, 3 * D, 1}));
  EXPECT_EQ(q.gather_offset, 0);
  // k^T is copied as k ([B, H, S, Dh], offset D) and the product reads it transposed
  const KernelPlan& k = plan.stages[1];
  EXPECT_EQ(k.gather_shape, (std::vector<int64_t>{B, H, S, Dh}));
  EXPECT_EQ(k.gather_offset, D);
  const KernelPlan& scores = plan.stages[2];
  EXPECT_TRUE(scores.b_transposed);
  EXPECT_FALSE(scores.a_transposed);
  EXPECT_EQ(scores.batch, B * H);
  EXPECT_EQ(scores.m, S);
  EXPECT_EQ(scores.n, S);
  EXPECT_EQ(scores.k, Dh);
  EXPECT_EQ(plan.stages[4].gather_offset, 2 * D);  // v
  // the context [B, H, S, Dh] read as [B, S, H, Dh]
  const KernelPlan& last = plan.stages[6];
  EXPECT_EQ(last.gather_shape, (std::vector<int64_t>{B, S, H, Dh}));
  EXPECT_EQ(last.gather_strides, (std::vector<int64_t>{H * S * Dh, Dh, S * Dh, 1}));
  EXPECT_EQ(last.out_shape, (std::vector<int64_t>{B, S, D}));

  // A view used twice is copied once; an index past the end, slices and a permuted parameter are refused.
  nlohmann::json twice = {
      {"nodes",
       {x, call("t", "transpose", {ref("x"), 0, 1}), node("a", "call_function", "torch.relu", {ref("t")}),
        node("e", "call_function", "torch.exp", {ref("t")}),
        node("m", "call_function", "operator.add", {ref("a"), ref("e")}),
        node("output", "output", "output", {ref("m")})}}};
  KernelPlan tw = plan_kernel(synthetic({{"in0", DType::f32, {B, S, 3 * D}}}, {}, {S, B, 3 * D}), twice);
  ASSERT_EQ(tw.kind, "chain") << tw.reason;
  ASSERT_EQ(tw.stages.size(), 2u) << tw.summary();
  EXPECT_EQ(tw.stages[0].kind, "gather");
  EXPECT_EQ(tw.stages[1].kind, "elementwise");
  nlohmann::json past = {{"nodes", {x, get("i", "x", 2), node("output", "output", "output", {ref("i")})}}};
  EXPECT_EQ(plan_kernel(synthetic({{"in0", DType::f32, {B, S, 3 * D}}}, {}, {S, 3 * D}), past).kind, "unsupported");
  nlohmann::json sliced = {
      {"nodes",
       {x, node("i", "call_function", "_operator.getitem", {ref("x"), {{"slice", {nullptr, 1, nullptr}}}}),
        node("output", "output", "output", {ref("i")})}}};
  KernelPlan sl = plan_kernel(synthetic({{"in0", DType::f32, {B, S, 3 * D}}}, {}, {1, S, 3 * D}), sliced);
  EXPECT_EQ(sl.kind, "unsupported");
  EXPECT_NE(sl.reason.find("slices"), std::string::npos) << sl.reason;
}

// A permute of a plain input is the whole problem: one gather.
TEST(KernelPlan, APermutedOutputIsOneGather) {
  Problem p = synthetic({{"in0", DType::f32, {3, 7, 9}}}, {}, {9, 3, 7});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json g = {{"nodes",
                       {x, node("pm", "call_method", "permute", {ref("x"), nlohmann::json::array({2, 0, 1})}),
                        node("output", "output", "output", {ref("pm")})}}};
  KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "gather") << plan.reason;
  EXPECT_EQ(plan.gather_shape, (std::vector<int64_t>{9, 3, 7}));
  EXPECT_EQ(plan.gather_strides, (std::vector<int64_t>{1, 63, 9}));
  // x.t() of a matrix followed by work: the transposed input is copied, then the work runs
  Problem m = synthetic({{"in0", DType::f32, {4, 6}}}, {}, {6, 4});
  nlohmann::json y = node("y", "placeholder", "y", nlohmann::json::array());
  y["tensor"] = "in0";
  nlohmann::json h = {
      {"nodes",
       {y, node("t", "call_method", "t", {ref("y")}), node("r", "call_function", "torch.relu", {ref("t")}),
        node("output", "output", "output", {ref("r")})}}};
  KernelPlan tr = plan_kernel(m, h);
  ASSERT_EQ(tr.kind, "chain") << tr.reason;
  EXPECT_EQ(tr.stages[0].kind, "gather");
  EXPECT_EQ(tr.stages[0].gather_strides, (std::vector<int64_t>{1, 6}));
}

// cumsum along any dim, its epilogue fused; with a dtype it is refused.
TEST(KernelPlan, CumsumAlongADim) {
  Problem p = synthetic({{"in0", DType::f32, {4, 5, 6}}}, {}, {4, 5, 6});
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json g = {
      {"nodes",
       {x, node("c", "call_function", "torch.cumsum", {ref("x")}, {{"dim", 1}}),
        node("r", "call_function", "torch.relu", {ref("c")}), node("output", "output", "output", {ref("r")})}}};
  KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "cumsum") << plan.reason;
  EXPECT_EQ(plan.rshape.outer, 4);
  EXPECT_EQ(plan.rshape.reduce, 5);
  EXPECT_EQ(plan.rshape.inner, 6);
  EXPECT_FALSE(plan.expr.is_identity_epilogue());
  g["nodes"][1]["kwargs"]["dtype"] = "torch.float64";
  plan = plan_kernel(p, g);
  EXPECT_EQ(plan.kind, "unsupported");
  EXPECT_NE(plan.reason.find("dtype"), std::string::npos) << plan.reason;
}

// argmax: int64 indices as the output, nothing after it; a float output of an argmax, or work on
// its indices, is refused.
TEST(KernelPlan, ArgmaxOnlyAsTheOutput) {
  nlohmann::json x = node("x", "placeholder", "x", nlohmann::json::array());
  x["tensor"] = "in0";
  nlohmann::json g = {{"nodes",
                       {x, node("a", "call_function", "torch.argmax", {ref("x")}, {{"dim", 1}, {"keepdim", true}}),
                        node("output", "output", "output", {ref("a")})}}};
  Problem p = synthetic({{"in0", DType::f32, {4, 5, 6}}}, {}, {4, 1, 6});
  p.outputs[0].dtype = DType::i64;
  KernelPlan plan = plan_kernel(p, g);
  ASSERT_EQ(plan.kind, "argmax") << plan.reason;
  EXPECT_EQ(plan.rshape.outer, 4);
  EXPECT_EQ(plan.rshape.reduce, 5);
  EXPECT_EQ(plan.rshape.inner, 6);
  Problem f = p;
  f.outputs[0].dtype = DType::f32;
  EXPECT_EQ(plan_kernel(f, g).kind, "unsupported");
  nlohmann::json more = {
      {"nodes",
       {x, node("a", "call_function", "torch.argmax", {ref("x")}, {{"dim", 1}, {"keepdim", true}}),
        node("m", "call_function", "operator.mul", {ref("a"), 2}), node("output", "output", "output", {ref("m")})}}};
  KernelPlan m = plan_kernel(p, more);
  EXPECT_EQ(m.kind, "unsupported");
  EXPECT_NE(m.reason.find("argmax"), std::string::npos) << m.reason;
  // an int64 output that is not an argmax's
  nlohmann::json relu = {
      {"nodes",
       {x, node("r", "call_function", "torch.relu", {ref("x")}), node("output", "output", "output", {ref("r")})}}};
  Problem q = synthetic({{"in0", DType::f32, {4, 5, 6}}}, {}, {4, 5, 6});
  q.outputs[0].dtype = DType::i64;
  EXPECT_EQ(plan_kernel(q, relu).kind, "unsupported");
}

TEST(PlanCommand, WritesEveryGeneratedVariantForATarget) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("mblast_plan_write_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  PlanArgs a;
  a.problems = {(testing::source_dir() / "problems" / "softmax").string()};
  a.target = "pocl-cpu";
  a.write_dir = out.string();
  a.json = true;
  ASSERT_EQ(run_plan(a), 0);
  const Problem p = hand_made("softmax");
  const auto variants = generate_variants(plan_kernel(p), p, find_target("pocl-cpu"));
  ASSERT_FALSE(variants.empty());
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(out / p.name)) files += f.path().extension() == ".cpp";
  EXPECT_EQ(files, variants.size());
  EXPECT_TRUE(std::filesystem::exists(out / p.name / ("0_" + variants[0].family + variants[0].extension)));
  std::filesystem::remove_all(out);
  a.target.clear();  // the variants are per backend
  EXPECT_THROW(run_plan(a), UserError);
}

using Combos = std::vector<std::vector<size_t>>;

TEST(ChainCombinations, WithoutCostsInOrderOfTheIndexSumThenLexicographically) {
  const Combos all = {{0, 0}, {0, 1}, {1, 0}, {0, 2}, {1, 1}, {1, 2}};
  EXPECT_EQ(gpu::chain_combinations({2, 3}), all);
  EXPECT_EQ(gpu::chain_combinations({2, 3}, {5.0, 5.0}), all);  // equal costs: the same
  EXPECT_EQ(gpu::chain_combinations({2, 3}, {}, 3), Combos(all.begin(), all.begin() + 3));
  EXPECT_TRUE(gpu::chain_combinations({2, 0, 3}).empty());  // a stage with no design: no chain
}

TEST(ChainCombinations, AlignedOnesMoveEveryStageThatOffersAValueTogether) {
  using J = nlohmann::json;
  // Three convolutions (strict FP32 first, then FFT where the shape takes it, then TF32) around
  // an elementwise stage: FFT for the two that offer it at once; TF32 for all three; the block
  // size of the one elementwise stage moves nothing together, nor does a parameter that the
  // last stage's first design lacks (its direct kernel's block).
  const std::vector<std::vector<J>> params = {{J{{"math", "fp32"}}, J{{"math", "fp32-fft"}}, J{{"math", "tf32"}}},
                                              {J{{"block", 128}}, J{{"block", 256}}},
                                              {J{{"math", "fp32"}}, J{{"math", "tf32"}}},
                                              {J{{"math", "fp32"}}, J{{"math", "fp32-winograd"}},
                                               J{{"math", "fp32-fft"}}, J{{"math", "tf32"}}, J{{"block", 256}}}};
  const auto aligned = gpu::aligned_combinations(params);
  EXPECT_EQ(aligned, (std::vector<std::vector<size_t>>{{1, 0, 0, 2}, {2, 0, 1, 3}}));
  EXPECT_EQ(gpu::aligned_combinations(params, 1).size(), 1u);
  // Right after the all-first combination, none twice, the cap kept.
  const auto combos = gpu::with_aligned(gpu::chain_combinations({3, 2, 2, 5}), aligned, 6);
  ASSERT_EQ(combos.size(), 6u);
  EXPECT_EQ(combos[0], (std::vector<size_t>{0, 0, 0, 0}));
  EXPECT_EQ(combos[1], aligned[0]);
  EXPECT_EQ(combos[2], aligned[1]);
  EXPECT_EQ(std::set<std::vector<size_t>>(combos.begin(), combos.end()).size(), combos.size());
}

TEST(ChainCombinations, TheCostlyStagesDesignsComeFirstAndFurtherDown) {
  // Stage 1 costs 100 times stage 0: a step down stage 0's list costs sqrt(100) = 10 steps of
  // stage 1, so all four of stage 1's designs come before stage 0's second.
  const Combos first5 = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}};
  EXPECT_EQ(gpu::chain_combinations({3, 4}, {1.0, 100.0}, 5), first5);
  // A long chain: every combination distinct, the all-first one first, and with the one costly
  // stage in the middle, its designs before any other stage leaves its first.
  std::vector<size_t> sizes(18, 3);
  std::vector<double> costs(18, 1.0);
  costs[9] = 64.0;
  const Combos c = gpu::chain_combinations(sizes, costs);
  ASSERT_EQ(c.size(), 16u);
  EXPECT_EQ(c[0], std::vector<size_t>(18, 0));
  EXPECT_EQ(c[1][9], 1u);
  EXPECT_EQ(c[2][9], 2u);
  EXPECT_EQ(std::set<std::vector<size_t>>(c.begin(), c.end()).size(), c.size());
  // Then (penalty 8 each) the other stages' second designs one at a time, before any pair.
  for (size_t i = 3; i < c.size(); ++i) {
    size_t moved = 0;
    for (size_t st = 0; st < 18; ++st) moved += c[i][st] != 0;
    EXPECT_EQ(moved, 1u) << i;
    EXPECT_EQ(c[i][9], 0u) << i;
  }
}

TEST(KernelPlan, RoughCostRanksAConvAboveTheNormAfterIt) {
  KernelPlan conv;
  conv.kind = "conv";
  conv.conv =
      ConvShape{.n = 32, .cin = 512, .cout = 512, .h = 1, .w = 2048, .out_h = 1, .out_w = 2048, .kh = 1, .kw = 3};
  conv.out_numel = 32 * 512 * 2048;
  KernelPlan norm;
  norm.kind = "layernorm";
  norm.rshape = ReduceShape{.outer = 32, .reduce = 512 * 2048, .inner = 1};
  norm.out_numel = 32 * 512 * 2048;
  EXPECT_DOUBLE_EQ(norm.rough_cost(), 4.0 * 2 * 32 * 512 * 2048);             // bytes: read once, write once
  EXPECT_DOUBLE_EQ(conv.rough_cost(), 2.0 * 32 * 512 * 2048 * 512 * 3 / 16);  // FLOPs / 16
  EXPECT_GT(conv.rough_cost(), 10 * norm.rough_cost());
  KernelPlan chain;
  chain.kind = "chain";
  chain.stages = {conv, norm};
  EXPECT_DOUBLE_EQ(chain.rough_cost(), conv.rough_cost() + norm.rough_cost());
}

}  // namespace
}  // namespace mblast::policy
