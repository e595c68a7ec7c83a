// Recognising a problem's computation from its graph (include/mblast/policy/kernel_plan.h).
//
// The graph is walked once, in order. Every node becomes a symbolic value: a problem tensor
// (placeholder / get_attr), an elementwise expression over the output's elements, or the
// result of the one producer a plan may have (matmul, reduction, softmax). Elementwise work
// after the producer becomes its epilogue. Anything else ends the walk with the reason.
#include "mblast/policy/kernel_plan.h"

#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace mblast::policy {

namespace {

int64_t numel_of(const std::vector<int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t.empty() ? "scalar" : t;
}

// The last component of a qualified name: "torch.nn.functional.relu" -> "relu".
std::string last_name(const std::string& target) {
  auto dot = target.rfind('.');
  return dot == std::string::npos ? target : target.substr(dot + 1);
}

struct Unsupported {
  std::string reason;
};

// What a graph node evaluates to.
struct Value {
  enum class Kind { Tensor, Scalar, Expr, Producer } kind = Kind::Scalar;
  bool is_param = false;   // Tensor
  int index = -1;          // Tensor: problem tensor index
  std::vector<int64_t> shape;
  double scalar = 0;       // Scalar
  int node = -1;           // Expr / Producer: expression node id (Producer: the Acc leaf)
  bool transposed = false; // Tensor viewed with its last two dims swapped

  static Value constant(double v) {
    Value r;
    r.scalar = v;
    return r;
  }
  static Value tensor(bool param, int i, std::vector<int64_t> s) {
    Value r;
    r.kind = Kind::Tensor;
    r.is_param = param;
    r.index = i;
    r.shape = std::move(s);
    return r;
  }
};

class Walker {
 public:
  Walker(const Problem& p, KernelPlan& plan) : p_(p), plan_(plan) {}

  void run(const nlohmann::json& graph) {
    if (!graph.is_object() || !graph.contains("nodes") || !graph["nodes"].is_array())
      throw Unsupported{"graph.json has no node list"};
    if (p_.outputs.size() != 1) throw Unsupported{fmt::format("{} outputs; the generators make one", p_.outputs.size())};
    for (const auto& t : p_.inputs)
      if (t.dtype != DType::f32) throw Unsupported{"input " + t.name + " is not f32"};
    for (const auto& t : p_.parameters)
      if (t.dtype != DType::f32) throw Unsupported{"parameter " + t.name + " is not f32"};
    if (p_.outputs[0].dtype != DType::f32) throw Unsupported{"the output is not f32"};
    plan_.out_shape = p_.outputs[0].shape;
    plan_.out_numel = numel_of(plan_.out_shape);
    for (const auto& n : graph["nodes"]) {
      std::string op = n.value("op", ""), name = n.value("name", "");
      if (op == "output") {
        finish(n);
        return;
      }
      values_[name] = evaluate(n, op);
    }
    throw Unsupported{"graph.json has no output node"};
  }

 private:
  const Problem& p_;
  KernelPlan& plan_;
  std::map<std::string, Value> values_;
  bool have_producer_ = false;

  int add(ExprNode n) {
    plan_.expr.nodes.push_back(std::move(n));
    return static_cast<int>(plan_.expr.nodes.size()) - 1;
  }

  std::optional<Value> tensor_named(const std::string& name) {
    for (size_t i = 0; i < p_.inputs.size(); ++i)
      if (p_.inputs[i].name == name) return Value::tensor(false, static_cast<int>(i), p_.inputs[i].shape);
    for (size_t i = 0; i < p_.parameters.size(); ++i)
      if (p_.parameters[i].name == name) return Value::tensor(true, static_cast<int>(i), p_.parameters[i].shape);
    return std::nullopt;
  }

  Value arg_value(const nlohmann::json& a) {
    if (a.is_object() && a.contains("node")) {
      auto it = values_.find(a["node"].get<std::string>());
      if (it == values_.end()) throw Unsupported{"a node uses " + a["node"].get<std::string>() + " before it is defined"};
      return it->second;
    }
    if (a.is_number()) return Value::constant(a.get<double>());
    if (a.is_boolean()) return Value::constant(a.get<bool>() ? 1.0 : 0.0);
    throw Unsupported{"an argument that is neither a node nor a number: " + a.dump()};
  }

  // The index map of a tensor of shape `t` broadcast against the output shape.
  IndexMap index_map(const std::vector<int64_t>& t_in, const std::string& what) {
    const auto& out = plan_.out_shape;
    std::vector<int64_t> t = t_in;
    while (!t.empty() && t.front() == 1 && t.size() > out.size()) t.erase(t.begin());
    if (t.size() > out.size())
      throw Unsupported{what + " has more dims than the output" +
                        (have_producer_ ? std::string() : " (work before a matmul / reduction is not fused by the generators)")};
    t.insert(t.begin(), out.size() - t.size(), 1);
    int first = -1, last = -1;
    for (size_t d = 0; d < out.size(); ++d) {
      if (t[d] == 1 && out[d] != 1) continue;
      if (t[d] != out[d])
        throw Unsupported{fmt::format("{} [{}] does not broadcast to the output [{}]{}", what, shape_text(t_in), shape_text(out),
                                      have_producer_ ? "" : " (work before a matmul / reduction is not fused by the generators)")};
      if (first < 0) first = static_cast<int>(d);
      else if (last != static_cast<int>(d) - 1) throw Unsupported{what + " broadcasts over non-adjacent dims"};
      last = static_cast<int>(d);
    }
    IndexMap m;
    if (first < 0) return m;  // a scalar
    m.div = 1;
    for (size_t d = last + 1; d < out.size(); ++d) m.div *= out[d];
    m.mod = 1;
    for (int d = first; d <= last; ++d) m.mod *= out[d];
    return m;
  }

  // An expression node for v over the output's elements.
  int as_expr(const Value& v, const std::string& what) {
    switch (v.kind) {
      case Value::Kind::Expr:
      case Value::Kind::Producer:
        return v.node;
      case Value::Kind::Scalar: {
        ExprNode n;
        n.kind = ExprNode::Kind::Const;
        n.value = v.scalar;
        return add(n);
      }
      case Value::Kind::Tensor: {
        if (v.transposed) throw Unsupported{what + ": a transposed tensor in elementwise work"};
        ExprNode n;
        n.kind = v.is_param ? ExprNode::Kind::Param : ExprNode::Kind::Input;
        n.tensor = v.index;
        n.index = index_map(v.shape, what);
        return add(n);
      }
    }
    return -1;
  }

  Value unary(const std::string& op, const Value& x, double a = 0, double b = 0) {
    if (x.kind == Value::Kind::Scalar) throw Unsupported{op + " of a constant"};
    ExprNode n;
    n.kind = ExprNode::Kind::Unary;
    n.op = op;
    n.value = a;
    n.value2 = b;
    n.args = {as_expr(x, op)};
    Value r;
    r.kind = Value::Kind::Expr;
    r.node = add(n);
    r.shape = x.shape;
    return r;
  }

  Value binary(const std::string& op, const Value& x, const Value& y) {
    if (x.kind == Value::Kind::Scalar && y.kind == Value::Kind::Scalar) {
      double r = op == "add" ? x.scalar + y.scalar : op == "sub" ? x.scalar - y.scalar
               : op == "mul" ? x.scalar * y.scalar : op == "div" ? x.scalar / y.scalar
               : op == "max" ? std::max(x.scalar, y.scalar) : std::min(x.scalar, y.scalar);
      return Value::constant(r);
    }
    ExprNode n;
    n.kind = ExprNode::Kind::Binary;
    n.op = op;
    n.args = {as_expr(x, op), as_expr(y, op)};
    Value r;
    r.kind = Value::Kind::Expr;
    r.node = add(n);
    r.shape = x.shape.size() >= y.shape.size() ? x.shape : y.shape;
    return r;
  }

  Value producer_result() {
    if (have_producer_) throw Unsupported{"more than one matmul / reduction / softmax (a multi-kernel graph)"};
    have_producer_ = true;
    ExprNode acc;
    acc.kind = ExprNode::Kind::Acc;
    Value r;
    r.kind = Value::Kind::Producer;
    r.node = add(acc);
    r.shape = plan_.out_shape;
    return r;
  }

  // A producer reads problem tensors only (no prologue), and nothing may come before it.
  const Value& producer_operand(const Value& v, const std::string& what) {
    if (v.kind != Value::Kind::Tensor)
      throw Unsupported{what + " of a computed value (work before a matmul / reduction is not fused by the generators)"};
    if (!plan_.expr.nodes.empty()) throw Unsupported{what + " after elementwise work"};
    return v;
  }

  static int normalise_dim(int64_t dim, size_t rank) {
    if (dim < 0) dim += static_cast<int64_t>(rank);
    if (dim < 0 || dim >= static_cast<int64_t>(rank)) throw Unsupported{"a dim out of range"};
    return static_cast<int>(dim);
  }

  void set_reduce_shape(const Value& x, int dim) {
    plan_.source = x.index;
    plan_.rshape = {};
    for (int d = 0; d < static_cast<int>(x.shape.size()); ++d) {
      if (d < dim) plan_.rshape.outer *= x.shape[d];
      else if (d == dim) plan_.rshape.reduce = x.shape[d];
      else plan_.rshape.inner *= x.shape[d];
    }
  }

  Value reduction(const std::string& op, const Value& xin, const nlohmann::json& dim_arg) {
    const Value& x = producer_operand(xin, op);
    if (x.is_param || x.transposed) throw Unsupported{op + " of a parameter"};
    if (dim_arg.is_null()) throw Unsupported{op + " over every dim (a full reduction)"};
    int64_t dim = 0;
    if (dim_arg.is_array()) {
      if (dim_arg.size() != 1) throw Unsupported{op + " over several dims"};
      dim = dim_arg[0].get<int64_t>();
    } else {
      dim = dim_arg.get<int64_t>();
    }
    set_reduce_shape(x, normalise_dim(dim, x.shape.size()));
    if (plan_.rshape.outer * plan_.rshape.inner != plan_.out_numel) throw Unsupported{op + ": the output is not the reduced tensor"};
    plan_.kind = "reduce";
    plan_.reduce_op = op;
    return producer_result();
  }

  Value softmax(const std::string& kind, const Value& xin, int64_t dim) {
    const Value& x = producer_operand(xin, kind);
    if (x.is_param) throw Unsupported{kind + " of a parameter"};
    set_reduce_shape(x, normalise_dim(dim, x.shape.size()));
    if (numel_of(x.shape) != plan_.out_numel) throw Unsupported{kind + ": the output is not the softmax"};
    plan_.kind = kind;
    return producer_result();
  }

  // LayerNorm over the trailing dims `normalized` of x; weight and bias (when given) become
  // epilogue leaves broadcast along the rows.
  Value layer_norm(const Value& xin, const nlohmann::json& normalized, const std::optional<Value>& w,
                   const std::optional<Value>& b, double eps) {
    const Value& x = producer_operand(xin, "layer_norm");
    if (x.is_param || x.transposed) throw Unsupported{"layer_norm of a parameter"};
    std::vector<int64_t> dims;
    if (normalized.is_number_integer()) dims.push_back(normalized.get<int64_t>());
    else if (normalized.is_array())
      for (const auto& d : normalized) dims.push_back(d.get<int64_t>());
    if (dims.empty() || dims.size() > x.shape.size()) throw Unsupported{"layer_norm without a normalized_shape it can read"};
    int64_t cols = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (x.shape[x.shape.size() - dims.size() + i] != dims[i]) throw Unsupported{"layer_norm: normalized_shape is not x's trailing dims"};
      cols *= dims[i];
    }
    if (numel_of(x.shape) != plan_.out_numel) throw Unsupported{"layer_norm: the output is not the normalised tensor"};
    plan_.source = x.index;
    plan_.rshape = {plan_.out_numel / cols, cols, 1};
    plan_.kind = "layernorm";
    plan_.eps = eps;
    Value r = producer_result();
    if (w) r = binary("mul", r, *w);
    if (b) r = binary("add", r, *b);
    return r;
  }

  Value matmul(const Value& a_in, const Value& b_in, bool b_is_linear_weight) {
    const Value& a = producer_operand(a_in, "matmul");
    const Value& b = producer_operand(b_in, "matmul");
    if (a.shape.size() < 2 || b.shape.size() < 2) throw Unsupported{"matmul of a vector (matvec is not generated)"};
    if (a.shape.size() > 3 || b.shape.size() > 3) throw Unsupported{"matmul with more than one batch dim"};
    bool at = a.transposed, bt = b.transposed != b_is_linear_weight;
    auto dims = [](const Value& v, bool t) {
      size_t r = v.shape.size();
      int64_t rows = v.shape[r - 2], cols = v.shape[r - 1];
      if (t) std::swap(rows, cols);
      return std::pair{rows, cols};
    };
    auto [m, ka] = dims(a, at);
    auto [kb, n] = dims(b, bt);
    if (ka != kb) throw Unsupported{fmt::format("matmul inner dims differ ({} vs {})", ka, kb)};
    int64_t batch_a = a.shape.size() == 3 ? a.shape[0] : 1, batch_b = b.shape.size() == 3 ? b.shape[0] : 1;
    if (batch_a != batch_b && batch_a != 1 && batch_b != 1) throw Unsupported{"matmul batch dims differ"};
    plan_.kind = "matmul";
    plan_.a = a.index;
    plan_.b = b.index;
    plan_.a_is_param = a.is_param;
    plan_.b_is_param = b.is_param;
    plan_.a_transposed = at;
    plan_.b_transposed = bt;
    plan_.m = m;
    plan_.n = n;
    plan_.k = ka;
    plan_.batch = std::max(batch_a, batch_b);
    plan_.a_batched = a.shape.size() == 3;
    plan_.b_batched = b.shape.size() == 3;
    if (plan_.batch * m * n != plan_.out_numel) throw Unsupported{"matmul: the output is not the product"};
    return producer_result();
  }

  // args[i] or kwargs[key]; null when neither is given.
  static nlohmann::json arg(const nlohmann::json& n, size_t i, const char* key) {
    const auto& args = n["args"];
    if (args.is_array() && args.size() > i) return args[i];
    if (n["kwargs"].is_object() && n["kwargs"].contains(key)) return n["kwargs"][key];
    return nullptr;
  }

  Value transposed(const Value& v) {
    if (v.kind != Value::Kind::Tensor || v.shape.size() < 2) throw Unsupported{"a transpose of a computed value"};
    Value t = v;
    t.transposed = !t.transposed;
    std::swap(t.shape[t.shape.size() - 1], t.shape[t.shape.size() - 2]);
    return t;
  }

  Value call(const std::string& fn, const nlohmann::json& n, const nlohmann::json& attributes) {
    auto x = [&](size_t i, const char* key) { return arg_value(arg(n, i, key)); };
    static const std::map<std::string, std::string> kUnary = {
        {"relu", "relu"}, {"relu_", "relu"}, {"sigmoid", "sigmoid"}, {"tanh", "tanh"}, {"exp", "exp"},
        {"log", "log"}, {"sqrt", "sqrt"}, {"rsqrt", "rsqrt"}, {"abs", "abs"}, {"neg", "neg"},
        {"silu", "silu"}, {"relu6", "relu6"}, {"softplus", "softplus"}, {"ReLU", "relu"}, {"Sigmoid", "sigmoid"},
        {"Tanh", "tanh"}, {"SiLU", "silu"}, {"ReLU6", "relu6"}, {"Softplus", "softplus"}, {"Identity", ""}};
    static const std::map<std::string, std::string> kBinary = {
        {"add", "add"}, {"iadd", "add"}, {"sub", "sub"}, {"isub", "sub"}, {"mul", "mul"}, {"imul", "mul"},
        {"truediv", "div"}, {"div", "div"}, {"itruediv", "div"}, {"maximum", "max"}, {"minimum", "min"}};
    if (auto it = kUnary.find(fn); it != kUnary.end()) {
      if (it->second.empty()) return x(0, "input");
      return unary(it->second, x(0, "input"));
    }
    if (auto it = kBinary.find(fn); it != kBinary.end()) {
      Value a = x(0, "input"), b = x(1, "other");
      nlohmann::json alpha = arg(n, 2, "alpha");
      if (!alpha.is_null() && alpha.is_number() && alpha.get<double>() != 1.0) {
        if (it->second != "add" && it->second != "sub") throw Unsupported{fn + " with alpha"};
        b = binary("mul", b, Value::constant(alpha.get<double>()));
      }
      return binary(it->second, a, b);
    }
    if (fn == "rsub") return binary("sub", x(1, "other"), x(0, "input"));
    if (fn == "gelu" || fn == "GELU") {
      nlohmann::json approx = attributes.is_object() && attributes.contains("approximate") ? attributes["approximate"]
                                                                                             : arg(n, 1, "approximate");
      bool tanh_form = approx.is_string() && approx.get<std::string>() == "tanh";
      return unary(tanh_form ? "gelu_tanh" : "gelu", x(0, "input"));
    }
    if (fn == "leaky_relu" || fn == "LeakyReLU") {
      nlohmann::json s = attributes.is_object() && attributes.contains("negative_slope") ? attributes["negative_slope"]
                                                                                          : arg(n, 1, "negative_slope");
      return unary("leaky_relu", x(0, "input"), s.is_number() ? s.get<double>() : 0.01);
    }
    if (fn == "clamp" || fn == "clip" || fn == "hardtanh" || fn == "Hardtanh") {
      nlohmann::json lo, hi;
      if (attributes.is_object() && attributes.contains("min_val")) lo = attributes["min_val"], hi = attributes["max_val"];
      else if (fn == "hardtanh") lo = arg(n, 1, "min_val"), hi = arg(n, 2, "max_val");
      else lo = arg(n, 1, "min"), hi = arg(n, 2, "max");
      if (fn.starts_with("hardtanh") || fn == "Hardtanh") {
        if (lo.is_null()) lo = -1.0;
        if (hi.is_null()) hi = 1.0;
      }
      double l = lo.is_number() ? lo.get<double>() : -INFINITY, h = hi.is_number() ? hi.get<double>() : INFINITY;
      if ((!lo.is_null() && !lo.is_number()) || (!hi.is_null() && !hi.is_number())) throw Unsupported{"clamp by a tensor"};
      return unary("clamp", x(0, "input"), l, h);
    }
    if (fn == "Dropout" || fn == "dropout") {
      double p = attributes.is_object() && attributes.contains("p") ? attributes["p"].get<double>() : 0.5;
      if (p != 0.0) throw Unsupported{"dropout with p > 0 (random)"};
      return x(0, "input");
    }
    if (fn == "sum" || fn == "mean" || fn == "amax" || fn == "amin") {
      std::string op = fn == "amax" ? "max" : fn == "amin" ? "min" : fn;
      return reduction(op, x(0, "input"), arg(n, 1, "dim"));
    }
    if (fn == "softmax" || fn == "log_softmax" || fn == "Softmax" || fn == "LogSoftmax") {
      nlohmann::json dim = attributes.is_object() && attributes.contains("dim") ? attributes["dim"] : arg(n, 1, "dim");
      if (!dim.is_number_integer()) throw Unsupported{fn + " without a dim"};
      std::string kind = fn == "softmax" || fn == "Softmax" ? "softmax" : "log_softmax";
      return softmax(kind, x(0, "input"), dim.get<int64_t>());
    }
    if (fn == "layer_norm") {
      auto opt = [&](size_t i, const char* key) -> std::optional<Value> {
        nlohmann::json a = arg(n, i, key);
        if (a.is_null()) return std::nullopt;
        return arg_value(a);
      };
      nlohmann::json eps = arg(n, 4, "eps");
      return layer_norm(x(0, "input"), arg(n, 1, "normalized_shape"), opt(2, "weight"), opt(3, "bias"),
                        eps.is_number() ? eps.get<double>() : 1e-5);
    }
    if (fn == "matmul" || fn == "mm" || fn == "bmm") return matmul(x(0, "input"), x(1, "other"), false);
    if (fn == "t" || fn == "T") return transposed(x(0, "input"));
    if (fn == "transpose") {
      Value v = x(0, "input");
      int r = static_cast<int>(v.shape.size());
      int d0 = normalise_dim(arg(n, 1, "dim0").get<int64_t>(), r), d1 = normalise_dim(arg(n, 2, "dim1").get<int64_t>(), r);
      if (std::min(d0, d1) != r - 2 || std::max(d0, d1) != r - 1) throw Unsupported{"a transpose of other than the last two dims"};
      return transposed(v);
    }
    if (fn == "linear") {
      Value out = matmul(x(0, "input"), x(1, "weight"), true);
      nlohmann::json bias = arg(n, 2, "bias");
      if (!bias.is_null()) return binary("add", out, arg_value(bias));
      return out;
    }
    if (fn == "addmm") {  // bias + a @ b
      Value bias = x(0, "input");
      Value out = matmul(x(1, "mat1"), x(2, "mat2"), false);
      return binary("add", out, bias);
    }
    throw Unsupported{"op " + fn + " is not one the generators know"};
  }

  Value evaluate(const nlohmann::json& n, const std::string& op) {
    const std::string target = n.value("target", "");
    if (op == "placeholder" || op == "get_attr") {
      if (n.contains("constant")) return arg_value(n["constant"]);
      std::string tensor = n.value("tensor", op == "get_attr" ? target : "");
      auto v = tensor_named(tensor);
      if (!v) throw Unsupported{"node " + n.value("name", "") + " names no problem tensor"};
      return *v;
    }
    if (op == "call_function" || op == "call_method") {
      std::string fn = last_name(target);
      if (fn.ends_with(".default") || target.starts_with("aten.")) {
        // torch.export names: aten.relu.default -> relu
        std::string t = target.starts_with("aten.") ? target.substr(5) : target;
        fn = t.substr(0, t.find('.'));
        if (fn == "_softmax") fn = "softmax";
        if (fn == "_log_softmax") fn = "log_softmax";
      }
      return call(fn, n, nullptr);
    }
    if (op == "call_module") {
      std::string type = last_name(n.value("module", ""));
      const nlohmann::json attrs = n.value("attributes", nlohmann::json::object());
      if (type == "Linear") {
        auto w = tensor_named(target + ".weight");
        if (!w) throw Unsupported{"Linear " + target + " has no weight tensor"};
        Value out = matmul(arg_value(n["args"][0]), *w, true);
        if (auto b = tensor_named(target + ".bias")) return binary("add", out, *b);
        return out;
      }
      if (type == "LayerNorm") {
        const double eps = attrs.contains("eps") && attrs["eps"].is_number() ? attrs["eps"].get<double>() : 1e-5;
        nlohmann::json shape = attrs.contains("normalized_shape") ? attrs["normalized_shape"] : nlohmann::json();
        return layer_norm(arg_value(n["args"][0]), shape, tensor_named(target + ".weight"), tensor_named(target + ".bias"), eps);
      }
      return call(type, n, attrs);
    }
    throw Unsupported{"a node of kind " + op};
  }

  void finish(const nlohmann::json& out) {
    nlohmann::json a = out["args"];
    while (a.is_array()) {
      if (a.size() != 1) throw Unsupported{"the graph returns several values"};
      a = a[0];
    }
    Value v = arg_value(a);
    if (v.kind == Value::Kind::Tensor) throw Unsupported{"the output is an input unchanged"};
    if (v.kind == Value::Kind::Scalar) throw Unsupported{"the output is a constant"};
    if (numel_of(v.shape) != plan_.out_numel && !v.shape.empty())
      throw Unsupported{fmt::format("the graph's result [{}] is not the output [{}]", shape_text(v.shape), shape_text(plan_.out_shape))};
    plan_.expr.root = v.node;
    if (!have_producer_) plan_.kind = "elementwise";
    prune();
  }

  // Keeps only the nodes the root uses (a traced graph may compute values it never returns).
  void prune() {
    auto& nodes = plan_.expr.nodes;
    std::vector<bool> used(nodes.size(), false);
    used[plan_.expr.root] = true;
    for (int i = plan_.expr.root; i >= 0; --i)
      if (used[i])
        for (int a : nodes[i].args) used[a] = true;
    if (have_producer_) {
      bool acc_used = false;
      for (size_t i = 0; i < nodes.size(); ++i) acc_used |= used[i] && nodes[i].kind == ExprNode::Kind::Acc;
      if (!acc_used) throw Unsupported{"the producer's result is not used"};
    }
    std::vector<int> remap(nodes.size(), -1);
    std::vector<ExprNode> kept;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!used[i]) continue;
      ExprNode n = nodes[i];
      for (int& a : n.args) a = remap[a];
      remap[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(n));
    }
    plan_.expr.root = remap[plan_.expr.root];
    nodes = std::move(kept);
  }
};

const char* kind_name(ExprNode::Kind k) {
  switch (k) {
    case ExprNode::Kind::Input: return "input";
    case ExprNode::Kind::Param: return "param";
    case ExprNode::Kind::Const: return "const";
    case ExprNode::Kind::Acc: return "acc";
    case ExprNode::Kind::Unary: return "unary";
    case ExprNode::Kind::Binary: return "binary";
  }
  return "?";
}

std::string literal(double v, const Dialect& d) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  std::string s = fmt::format("{:.9g}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return "(" + s + d.float_suffix + ")";
}

}  // namespace

bool Expr::is_identity_epilogue() const {
  return root >= 0 && nodes[root].kind == ExprNode::Kind::Acc;
}

std::vector<int> Expr::inputs_used() const {
  std::vector<int> r;
  for (const auto& n : nodes)
    if (n.kind == ExprNode::Kind::Input && std::find(r.begin(), r.end(), n.tensor) == r.end()) r.push_back(n.tensor);
  return r;
}

std::vector<int> Expr::params_used() const {
  std::vector<int> r;
  for (const auto& n : nodes)
    if (n.kind == ExprNode::Kind::Param && std::find(r.begin(), r.end(), n.tensor) == r.end()) r.push_back(n.tensor);
  return r;
}

std::string render_expr(const Expr& e, const Dialect& d, const std::function<std::string(const ExprNode&)>& leaf,
                        int root) {
  if (root < 0) root = e.root;
  const ExprNode& n = e.nodes.at(root);
  auto f = [&](const char* name) { return std::string(name) + (d.suffix_f_functions ? "f" : ""); };
  auto sub = [&](int i) { return render_expr(e, d, leaf, n.args.at(i)); };
  auto lit = [&](double v) { return literal(v, d); };
  switch (n.kind) {
    case ExprNode::Kind::Input:
    case ExprNode::Kind::Param:
    case ExprNode::Kind::Acc:
      return leaf(n);
    case ExprNode::Kind::Const:
      return lit(n.value);
    case ExprNode::Kind::Binary: {
      std::string a = sub(0), b = sub(1);
      if (n.op == "add") return "(" + a + " + " + b + ")";
      if (n.op == "sub") return "(" + a + " - " + b + ")";
      if (n.op == "mul") return "(" + a + " * " + b + ")";
      if (n.op == "div") return "(" + a + " / " + b + ")";
      if (n.op == "max") return f("fmax") + "(" + a + ", " + b + ")";
      if (n.op == "min") return f("fmin") + "(" + a + ", " + b + ")";
      break;
    }
    case ExprNode::Kind::Unary: {
      std::string x = sub(0);
      if (n.op == "neg") return "(-" + x + ")";
      if (n.op == "relu") return f("fmax") + "(" + x + ", " + lit(0) + ")";
      if (n.op == "relu6") return f("fmin") + "(" + f("fmax") + "(" + x + ", " + lit(0) + "), " + lit(6) + ")";
      if (n.op == "clamp") {
        std::string r = x;
        if (!std::isinf(n.value)) r = f("fmax") + "(" + r + ", " + lit(n.value) + ")";
        if (!std::isinf(n.value2)) r = f("fmin") + "(" + r + ", " + lit(n.value2) + ")";
        return r;
      }
      if (n.op == "sigmoid") return "(" + lit(1) + " / (" + lit(1) + " + " + f("exp") + "(-" + x + ")))";
      if (n.op == "silu") return "(" + x + " / (" + lit(1) + " + " + f("exp") + "(-" + x + ")))";
      if (n.op == "tanh" || n.op == "exp" || n.op == "log" || n.op == "sqrt") return f(n.op.c_str()) + "(" + x + ")";
      if (n.op == "rsqrt") return "(" + lit(1) + " / " + f("sqrt") + "(" + x + "))";
      if (n.op == "abs") return f("fabs") + "(" + x + ")";
      if (n.op == "gelu") return "(" + lit(0.5) + " * " + x + " * (" + lit(1) + " + " + f("erf") + "(" + x + " * " + lit(M_SQRT1_2) + ")))";
      if (n.op == "gelu_tanh")
        return "(" + lit(0.5) + " * " + x + " * (" + lit(1) + " + " + f("tanh") + "(" + lit(0.7978845608028654) + " * (" + x +
               " + " + lit(0.044715) + " * " + x + " * " + x + " * " + x + "))))";
      if (n.op == "leaky_relu") return "(" + x + " > " + lit(0) + " ? " + x + " : " + lit(n.value) + " * " + x + ")";
      if (n.op == "softplus")
        return "(" + x + " > " + lit(20) + " ? " + x + " : " + f("log1p") + "(" + f("exp") + "(" + x + ")))";
      break;
    }
  }
  return "/* unknown op " + n.op + " */";
}

nlohmann::json KernelPlan::to_json() const {
  nlohmann::json j = {{"kind", kind}, {"out_shape", out_shape}};
  if (!reason.empty()) j["reason"] = reason;
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& node : expr.nodes) {
    nlohmann::json e = {{"kind", kind_name(node.kind)}};
    if (!node.op.empty()) e["op"] = node.op;
    if (node.tensor >= 0) e["tensor"] = node.tensor, e["div"] = node.index.div, e["mod"] = node.index.mod;
    if (node.kind == ExprNode::Kind::Const || node.op == "leaky_relu" || node.op == "clamp") e["value"] = node.value;
    if (node.op == "clamp") e["value2"] = node.value2;
    if (!node.args.empty()) e["args"] = node.args;
    nodes.push_back(e);
  }
  j["expr"] = {{"nodes", nodes}, {"root", expr.root}};
  if (is_row_kind(kind)) {
    j["source"] = source;
    if (kind == "layernorm") j["eps"] = eps;
    j["outer"] = rshape.outer, j["reduce"] = rshape.reduce, j["inner"] = rshape.inner;
    if (!reduce_op.empty()) j["reduce_op"] = reduce_op;
  }
  if (kind == "matmul") {
    j["a"] = {{"tensor", a}, {"param", a_is_param}, {"transposed", a_transposed}, {"batched", a_batched}};
    j["b"] = {{"tensor", b}, {"param", b_is_param}, {"transposed", b_transposed}, {"batched", b_batched}};
    j["batch"] = batch, j["m"] = m, j["n"] = n, j["k"] = k;
  }
  return j;
}

std::string KernelPlan::summary() const {
  std::string s;
  if (kind == "unsupported") return "unsupported: " + reason;
  if (kind == "elementwise") s = fmt::format("elementwise over {} ({} expression nodes)", shape_text(out_shape), expr.nodes.size());
  else if (kind == "reduce") s = fmt::format("{} over [{}, {}, {}] (outer, reduce, inner)", reduce_op, rshape.outer, rshape.reduce, rshape.inner);
  else if (kind == "softmax" || kind == "log_softmax" || kind == "layernorm")
    s = fmt::format("{} over [{}, {}, {}] (outer, reduce, inner)", kind, rshape.outer, rshape.reduce, rshape.inner);
  else if (kind == "matmul")
    s = fmt::format("matmul {}{}x{}x{}{}{}", batch > 1 ? std::to_string(batch) + "x" : "", m, n, k,
                    a_transposed ? " A^T" : "", b_transposed ? " B^T" : "");
  if (kind != "elementwise" && !expr.empty() && !expr.is_identity_epilogue()) {
    std::set<std::string> ops;
    for (const auto& node : expr.nodes)
      if (!node.op.empty()) ops.insert(node.op);
    std::string list;
    for (const auto& o : ops) list += (list.empty() ? "" : ", ") + o;
    s += " + epilogue(" + list + ")";
  }
  return s;
}

KernelPlan plan_kernel(const Problem& problem, const nlohmann::json& graph) {
  KernelPlan plan;
  try {
    Walker(problem, plan).run(graph);
  } catch (const Unsupported& u) {
    KernelPlan bad;
    bad.kind = "unsupported";
    bad.reason = u.reason;
    return bad;
  } catch (const nlohmann::json::exception& e) {
    KernelPlan bad;
    bad.kind = "unsupported";
    bad.reason = std::string("graph.json: ") + e.what();
    return bad;
  }
  return plan;
}

KernelPlan plan_kernel(const Problem& problem) {
  auto file = problem.dir / "graph.json";
  std::ifstream in(file);
  if (!in) {
    KernelPlan bad;
    bad.reason = "the problem has no graph.json (its module could not be traced, or it was written by hand without one)";
    return bad;
  }
  nlohmann::json graph = nlohmann::json::parse(in, nullptr, false);
  if (graph.is_discarded()) {
    KernelPlan bad;
    bad.reason = "graph.json is not valid JSON";
    return bad;
  }
  return plan_kernel(problem, graph);
}

}  // namespace mblast::policy
