// Recognising a problem's computation from its graph (include/mblast/policy/kernel_plan.h).
//
// The graph is walked once, in order. Every node becomes a symbolic value: a problem tensor
// (placeholder / get_attr), an elementwise expression, or the result of a producer (matmul,
// reduction, softmax, layernorm). Elementwise work after a producer becomes its epilogue; a
// graph that needs more than one kernel becomes a chain of such stages joined by temporaries.
// Anything else ends the walk with the reason.
#include "mblast/policy/kernel_plan.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

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

// torch.finfo(torch.float32).eps: RMSNorm's eps when none is given.
constexpr double kF32Epsilon = 1.1920928955078125e-07;

struct Unsupported {
  std::string reason;
};

// What a graph node evaluates to.
struct Value {
  enum class Kind { Tensor, Scalar, Expr, Producer } kind = Kind::Scalar;
  bool is_param = false;  // Tensor
  int index = -1;         // Tensor: problem tensor index (inputs past the problem's are temporaries)
  std::vector<int64_t> shape;
  double scalar = 0;        // Scalar
  int node = -1;            // Expr / Producer: expression node id in its stage (Producer: the Acc leaf)
  int stage = -1;           // Expr / Producer: the stage whose expression holds `node`
  bool transposed = false;  // Tensor viewed with its last two dims swapped
  // Tensor: a strided view of problem tensor `index` (a permute, a transpose of other dims, a
  // select): element (i_0, ..., i_r) of `shape` is element offset + sum_d i_d * strides[d] of
  // the tensor's memory. Empty: the tensor itself, dense (or `transposed`).
  std::vector<int64_t> strides;
  int64_t offset = 0;
  bool is_view() const { return kind == Kind::Tensor && !strides.empty(); }
  // Not the dense row-major tensor `index` itself: a view, or the tensor with its last two dims
  // swapped. Whatever reads only dense memory reads gathered(*this) instead.
  bool strided() const { return is_view() || transposed; }

  bool computed() const { return kind == Kind::Expr || kind == Kind::Producer; }

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

// A kernel_size, stride, padding or dilation argument: an int, [int] or [int, int], as (h, w);
// null gives (dflt, dflt). For a 1-d op the height is dflt and a pair is refused. nullopt: none
// of these.
std::optional<std::pair<int64_t, int64_t>> int_or_pair(const nlohmann::json& v, int64_t dflt, bool one_d) {
  if (v.is_null()) return std::make_pair(dflt, dflt);
  const nlohmann::json* one = v.is_number_integer()                                       ? &v
                              : v.is_array() && v.size() == 1 && v[0].is_number_integer() ? &v[0]
                                                                                          : nullptr;
  if (one) return std::make_pair(one_d ? dflt : one->get<int64_t>(), one->get<int64_t>());
  if (!one_d && v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer())
    return std::make_pair(v[0].get<int64_t>(), v[1].get<int64_t>());
  return std::nullopt;
}

// True when `from` broadcasts (numpy rules) to exactly `to`.
bool broadcasts_to(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

// The shape two operands broadcast to (numpy rules); throws when they do not.
std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                                     const std::string& what) {
  std::vector<int64_t> r(std::max(x.size(), y.size()), 1);
  for (size_t i = 0; i < r.size(); ++i) {
    const int64_t a = i < r.size() - x.size() ? 1 : x[i - (r.size() - x.size())];
    const int64_t b = i < r.size() - y.size() ? 1 : y[i - (r.size() - y.size())];
    if (a != b && a != 1 && b != 1)
      throw Unsupported{fmt::format("{}: shapes {} and {} do not broadcast", what, shape_text(x), shape_text(y))};
    r[i] = a == 1 ? b : a;
  }
  return r;
}

// Walks the graph into stages. A stage is one plan: at most one producer (matmul, reduction,
// softmax, layernorm) with the elementwise work after it as its epilogue, or elementwise work
// alone. A stage ends, its value written to a temporary that later stages read like an input,
// when a producer needs a computed operand, when a second producer starts, or when a value of a
// larger shape than the stage's producer makes would join it. A graph of one stage is that
// stage's plan; of several, a chain.
class Walker {
 public:
  Walker(const Problem& p, KernelPlan& plan) : p_(p), out_(plan), first_temp_(static_cast<int>(p.inputs.size())) {}

  void run(const nlohmann::json& graph) {
    if (!graph.is_object() || !graph.contains("nodes") || !graph["nodes"].is_array())
      throw Unsupported{"graph.json has no node list"};
    if (p_.outputs.size() != 1)
      throw Unsupported{fmt::format("{} outputs; the generators make one", p_.outputs.size())};
    // Inputs and parameters must be f32 where the graph reads them (tensor_named); others, such
    // as BatchNorm's int64 num_batches_tracked, are passed to the kernel and left alone.
    // An int64 output is an argmax's indices (finish() checks that it is).
    if (p_.outputs[0].dtype != DType::f32 && p_.outputs[0].dtype != DType::i64)
      throw Unsupported{"the output is neither f32 nor int64"};
    for (const auto& n : graph["nodes"]) {
      std::string op = n.value("op", ""), name = n.value("name", "");
      if (op == "output") {
        finish(n);
        return;
      }
      if (op == "call_function" && last_name(n.value("target", "")) == "pad") {
        padded_[name] = zero_pad(n);
        continue;
      }
      values_[name] = evaluate(n, op);
    }
    throw Unsupported{"graph.json has no output node"};
  }

 private:
  const Problem& p_;
  KernelPlan& out_;
  const int first_temp_;
  std::map<std::string, Value> values_;
  // F.pad results, kept apart: only a convolution may read one, as padding of its input's width.
  struct Padded {
    Value v;  // the unpadded value
    int64_t left = 0, right = 0;
  };
  std::map<std::string, Padded> padded_;

  // The stage being built, and those finished (each wrote temps_[i]).
  KernelPlan cur_;
  bool have_producer_ = false;
  int stage_id_ = 0;
  std::vector<KernelPlan> done_;
  std::vector<TensorSpec> temps_;
  std::map<std::pair<int, int>, int> materialised_;  // (stage, node) -> temp index
  // (tensor, offset, shape, strides) of a view -> the temp its gather stage wrote
  std::map<std::tuple<int, int64_t, std::vector<int64_t>, std::vector<int64_t>>, int> gathers_;
  std::vector<std::vector<int64_t>> leaf_shape_;  // per node of cur_: a leaf's tensor shape
  std::vector<std::string> leaf_what_;            // per node of cur_: the op that read the leaf
  std::optional<Value> last_;                     // the latest value computed in cur_

  int add(ExprNode n, std::vector<int64_t> shape = {}, std::string what = {}) {
    cur_.expr.nodes.push_back(std::move(n));
    leaf_shape_.push_back(std::move(shape));
    leaf_what_.push_back(std::move(what));
    return static_cast<int>(cur_.expr.nodes.size()) - 1;
  }

  Value computed(Value::Kind kind, int node, std::vector<int64_t> shape) {
    Value r;
    r.kind = kind;
    r.node = node;
    r.stage = stage_id_;
    r.shape = std::move(shape);
    last_ = r;
    return r;
  }

  std::optional<Value> tensor_named(const std::string& name) {
    for (size_t i = 0; i < p_.inputs.size(); ++i) {
      if (p_.inputs[i].name != name) continue;
      if (p_.inputs[i].dtype != DType::f32) throw Unsupported{"input " + name + " is not f32"};
      return Value::tensor(false, static_cast<int>(i), p_.inputs[i].shape);
    }
    for (size_t i = 0; i < p_.parameters.size(); ++i) {
      if (p_.parameters[i].name != name) continue;
      if (p_.parameters[i].dtype != DType::f32) throw Unsupported{"parameter " + name + " is not f32"};
      return Value::tensor(true, static_cast<int>(i), p_.parameters[i].shape);
    }
    return std::nullopt;
  }

  Value arg_value(const nlohmann::json& a) {
    if (a.is_object() && a.contains("node") && padded_.count(a["node"].get<std::string>()))
      throw Unsupported{"F.pad feeding something other than a convolution"};
    if (a.is_object() && a.contains("node")) {
      auto it = values_.find(a["node"].get<std::string>());
      if (it == values_.end())
        throw Unsupported{"a node uses " + a["node"].get<std::string>() + " before it is defined"};
      return it->second;
    }
    if (a.is_number()) return Value::constant(a.get<double>());
    if (a.is_boolean()) return Value::constant(a.get<bool>() ? 1.0 : 0.0);
    throw Unsupported{"an argument that is neither a node nor a number: " + a.dump()};
  }

  // A value computed in a finished stage is read from the temporary that stage wrote. Views
  // stay views (for the shape ops and matmul operands; resolve() makes them dense).
  Value resolve_view(const Value& v) {
    if (!v.computed() || v.stage == stage_id_) return v;
    auto it = materialised_.find({v.stage, v.node});
    if (it == materialised_.end())
      throw Unsupported{
          "a value is used after a later kernel started and was not kept (a graph with branches the chain does not "
          "order)"};
    return Value::tensor(false, first_temp_ + it->second, v.shape);
  }
  // resolve_view, with a strided view copied into a dense temporary first.
  Value resolve(const Value& v) {
    Value r = resolve_view(v);
    return r.is_view() ? gathered(r) : r;
  }

  static std::vector<int64_t> row_major(const std::vector<int64_t>& shape) {
    std::vector<int64_t> st(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
    return st;
  }
  // A tensor (dense, transposed or a view) as an explicit strided view.
  static Value view_of(const Value& v) {
    if (v.is_view()) return v;
    Value r = v;
    std::vector<int64_t> stored = v.shape;
    if (v.transposed) std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
    r.strides = row_major(stored);
    if (v.transposed) std::swap(r.strides[r.strides.size() - 1], r.strides[r.strides.size() - 2]);
    r.transposed = false;
    r.offset = 0;
    return r;
  }
  // The plainest form of a view: the dense tensor, or it with its last two dims swapped.
  static Value simplified(Value v) {
    if (!v.is_view() || v.offset != 0) return v;
    if (v.strides == row_major(v.shape)) {
      v.strides.clear();
      return v;
    }
    const size_t r = v.shape.size();
    if (r >= 2) {
      std::vector<int64_t> stored = v.shape;
      std::swap(stored[r - 1], stored[r - 2]);
      std::vector<int64_t> st = row_major(stored);
      std::swap(st[r - 1], st[r - 2]);
      if (st == v.strides) {
        v.strides.clear();
        v.transposed = true;
      }
    }
    return v;
  }
  // A view (or a transposed tensor) copied into a dense temporary by a gather stage of its own,
  // placed before the stage being built (it reads only tensors that exist already). The same
  // view gathered twice is copied once.
  Value gathered(const Value& vin) {
    const Value v = view_of(vin);
    if (v.is_param) throw Unsupported{"a permuted or sliced parameter"};
    const auto key = std::make_tuple(v.index, v.offset, v.shape, v.strides);
    auto it = gathers_.find(key);
    if (it != gathers_.end()) return Value::tensor(false, first_temp_ + it->second, v.shape);
    KernelPlan g;
    set_gather(g, v);
    ExprNode acc;
    acc.kind = ExprNode::Kind::Acc;
    g.expr.nodes.push_back(acc);
    g.expr.root = 0;
    const int t = static_cast<int>(temps_.size());
    temps_.push_back(TensorSpec{fmt::format("mb_tmp{}", t), DType::f32, v.shape});
    done_.push_back(std::move(g));
    gathers_[key] = t;
    return Value::tensor(false, first_temp_ + t, v.shape);
  }
  static void set_gather(KernelPlan& g, const Value& v) {
    g.kind = "gather";
    g.source = v.index;
    g.gather_shape = v.shape;
    g.gather_strides = v.strides;
    g.gather_offset = v.offset;
    g.out_shape = v.shape;
    g.out_numel = numel_of(v.shape);
  }

  // Ends the current stage with `v` (computed in it) as its result, written to a new temporary.
  Value materialise(const Value& v) {
    if (cur_.kind == "argmax")
      throw Unsupported{"argmax's int64 indices read by later work (only an argmax as the output is generated)"};
    const int t = static_cast<int>(temps_.size());
    end_stage(v);
    temps_.push_back(TensorSpec{fmt::format("mb_tmp{}", t), DType::f32, v.shape});
    materialised_[{v.stage, v.node}] = t;
    done_.push_back(std::move(cur_));
    cur_ = KernelPlan();
    have_producer_ = false;
    leaf_shape_.clear();
    leaf_what_.clear();
    last_.reset();
    ++stage_id_;
    return Value::tensor(false, first_temp_ + t, v.shape);
  }

  // Makes `root` the stage's result: unused nodes dropped, leaves indexed against its shape.
  void end_stage(const Value& root) {
    cur_.expr.root = root.node;
    if (!have_producer_) {  // a producer's stage has its shape from producer_result()
      cur_.kind = "elementwise";
      cur_.out_shape = root.shape;
      cur_.out_numel = numel_of(root.shape);
    }
    prune();
    for (size_t i = 0; i < cur_.expr.nodes.size(); ++i) {
      auto& n = cur_.expr.nodes[i];
      if (n.kind == ExprNode::Kind::Input || n.kind == ExprNode::Kind::Param)
        n.index = index_map(leaf_shape_[i], cur_.out_shape, leaf_what_[i]);
    }
  }

  // The index map of a tensor of shape `t` broadcast against the stage's result shape `out`.
  static IndexMap index_map(const std::vector<int64_t>& t_in, const std::vector<int64_t>& out,
                            const std::string& what) {
    std::vector<int64_t> t = t_in;
    while (!t.empty() && t.front() == 1 && t.size() > out.size()) t.erase(t.begin());
    if (t.size() > out.size()) throw Unsupported{what + " has more dims than the result it is part of"};
    t.insert(t.begin(), out.size() - t.size(), 1);
    int first = -1, last = -1;
    for (size_t d = 0; d < out.size(); ++d) {
      if (t[d] == 1 && out[d] != 1) continue;
      if (t[d] != out[d])
        throw Unsupported{
            fmt::format("{} [{}] does not broadcast to the result [{}]", what, shape_text(t_in), shape_text(out))};
      if (first < 0)
        first = static_cast<int>(d);
      else if (last != static_cast<int>(d) - 1)
        throw Unsupported{what + " broadcasts over non-adjacent dims"};
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

  // An expression node for v in the current stage.
  int as_expr(const Value& vin, const std::string& what) {
    const Value v = resolve(vin);
    switch (v.kind) {
      case Value::Kind::Expr:
      case Value::Kind::Producer:
        if (cur_.kind == "argmax")
          throw Unsupported{"work on argmax's int64 indices (only an argmax as the output is generated)"};
        return v.node;
      case Value::Kind::Scalar: {
        ExprNode n;
        n.kind = ExprNode::Kind::Const;
        n.value = v.scalar;
        return add(n);
      }
      case Value::Kind::Tensor: {
        if (v.transposed) return as_expr(gathered(v), what);
        ExprNode n;
        n.kind = v.is_param ? ExprNode::Kind::Param : ExprNode::Kind::Input;
        n.tensor = v.index;
        return add(n, v.shape, what);
      }
    }
    return -1;
  }

  // Before elementwise work of result shape `shape` joins the current stage: a stage with a
  // producer has that producer's shape, so a larger result starts a new stage (the operand
  // computed here, or else the stage's latest value, kept in a temporary).
  void make_room(std::vector<Value*> operands, const std::vector<int64_t>& shape) {
    if (!have_producer_ || numel_of(shape) == cur_.out_numel) return;
    // A smaller value that broadcasts to the producer's result (per-channel batch-norm statistics,
    // say) is computed per output element in this stage: nothing needs room.
    if (numel_of(shape) < cur_.out_numel && broadcasts_to(shape, cur_.out_shape)) return;
    for (Value* v : operands)
      if (v->computed() && v->stage == stage_id_) {
        *v = materialise(*v);
        return;
      }
    if (last_) materialise(*last_);
  }

  Value unary(const std::string& op, const Value& xin, double a = 0, double b = 0) {
    Value x = resolve(xin);
    if (x.kind == Value::Kind::Scalar) throw Unsupported{op + " of a constant"};
    make_room({&x}, x.shape);
    ExprNode n;
    n.kind = ExprNode::Kind::Unary;
    n.op = op;
    n.value = a;
    n.value2 = b;
    n.args = {as_expr(x, op)};
    const int id = add(n);
    return computed(Value::Kind::Expr, id, x.shape);
  }

  Value binary(const std::string& op, const Value& xin, const Value& yin) {
    Value x = resolve(xin), y = resolve(yin);
    if (x.kind == Value::Kind::Scalar && y.kind == Value::Kind::Scalar) {
      double r = op == "add"   ? x.scalar + y.scalar
                 : op == "sub" ? x.scalar - y.scalar
                 : op == "mul" ? x.scalar * y.scalar
                 : op == "div" ? x.scalar / y.scalar
                 : op == "max" ? std::max(x.scalar, y.scalar)
                               : std::min(x.scalar, y.scalar);
      return Value::constant(r);
    }
    const auto shape = broadcast_shape(x.shape, y.shape, op);
    make_room({&x, &y}, shape);
    ExprNode n;
    n.kind = ExprNode::Kind::Binary;
    n.op = op;
    n.args = {as_expr(x, op), as_expr(y, op)};
    const int id = add(n);
    return computed(Value::Kind::Expr, id, shape);
  }

  // A producer reads tensors: a value computed in this stage is kept in a temporary first, and a
  // view is copied dense (a transposed tensor too, except for matmul, which reads either).
  Value producer_operand(const Value& vin, const std::string& what) {
    Value v = resolve_view(vin);
    if (v.kind == Value::Kind::Scalar) throw Unsupported{what + " of a constant"};
    if (v.computed()) v = materialise(v);
    if (v.strided()) return gathered(v);
    return v;
  }
  // A matmul operand: as producer_operand, but a transposed tensor is read as it is, and a view
  // whose last two dims swapped have dense rows (k.transpose(-2, -1) of a permuted k) is copied
  // in that order and read transposed: the copy stays coalesced and the matmul reads B^T.
  Value matmul_operand(const Value& vin) {
    Value v = resolve_view(vin);
    if (v.kind == Value::Kind::Scalar) throw Unsupported{"matmul of a constant"};
    if (v.computed()) v = materialise(v);
    if (!v.is_view()) return v;
    const size_t r = v.shape.size();
    if (r >= 2 && v.strides[r - 1] != 1 && v.strides[r - 2] == 1) {
      Value sw = v;
      std::swap(sw.shape[r - 1], sw.shape[r - 2]);
      std::swap(sw.strides[r - 1], sw.strides[r - 2]);
      Value t = gathered(sw);
      t.transposed = true;
      std::swap(t.shape[r - 1], t.shape[r - 2]);
      return t;
    }
    return gathered(v);
  }

  // The producer's result, in a stage of its own (the current one ends first if it has work).
  Value producer_result(std::vector<int64_t> shape) {
    if (have_producer_ || !cur_.expr.nodes.empty()) {
      if (!last_) throw Unsupported{"a stage with nodes but no value"};
      materialise(*last_);
    }
    have_producer_ = true;
    cur_.out_shape = shape;
    cur_.out_numel = numel_of(shape);
    ExprNode acc;
    acc.kind = ExprNode::Kind::Acc;
    const int id = add(acc);
    return computed(Value::Kind::Producer, id, std::move(shape));
  }

  static int normalise_dim(int64_t dim, size_t rank) {
    if (dim < 0) dim += static_cast<int64_t>(rank);
    if (dim < 0 || dim >= static_cast<int64_t>(rank)) throw Unsupported{"a dim out of range"};
    return static_cast<int>(dim);
  }

  // Dims first..last (contiguous in memory) reduced: the dims before are `outer`, those after `inner`.
  static ReduceShape reduce_shape(const Value& x, int first, int last) {
    ReduceShape r;
    r.reduce = 1;
    for (int d = 0; d < static_cast<int>(x.shape.size()); ++d) {
      if (d < first)
        r.outer *= x.shape[d];
      else if (d <= last)
        r.reduce *= x.shape[d];
      else
        r.inner *= x.shape[d];
    }
    return r;
  }
  static ReduceShape reduce_shape(const Value& x, int dim) { return reduce_shape(x, dim, dim); }

  // The operands are resolved (and kept in temporaries) before the producer's stage begins, so
  // a stage's plan fields are set after producer_result().
  Value reduction(const std::string& op, const Value& xin, const nlohmann::json& dim_arg, bool keepdim) {
    const Value x = producer_operand(xin, op);
    if (x.is_param) throw Unsupported{op + " of a parameter"};
    if (dim_arg.is_null()) throw Unsupported{op + " over every dim (a full reduction)"};
    // One dim, or several adjacent ones (a global average pool: mean over (2, 3)): one reduction
    // over their product, the dims being contiguous in memory.
    std::vector<int> dims;
    for (const auto& v : dim_arg.is_array() ? dim_arg : nlohmann::json::array({dim_arg})) {
      if (!v.is_number_integer()) throw Unsupported{op + " over a dim that is not an int"};
      dims.push_back(normalise_dim(v.get<int64_t>(), x.shape.size()));
    }
    if (dims.empty()) throw Unsupported{op + " over every dim (a full reduction)"};
    std::sort(dims.begin(), dims.end());
    for (size_t i = 1; i < dims.size(); ++i)
      if (dims[i] != dims[i - 1] + 1) throw Unsupported{op + " over several dims that are not adjacent"};
    std::vector<int64_t> shape;
    for (int d = 0; d < static_cast<int>(x.shape.size()); ++d) {
      const bool reduced = d >= dims.front() && d <= dims.back();
      if (!reduced)
        shape.push_back(x.shape[static_cast<size_t>(d)]);
      else if (keepdim)
        shape.push_back(1);
    }
    Value r = producer_result(shape);
    cur_.kind = "reduce";
    cur_.reduce_op = op;
    cur_.source = x.index;
    cur_.rshape = reduce_shape(x, dims.front(), dims.back());
    return r;
  }

  // 2-D max or average pooling of an NCHW tensor (ceil_mode and return_indices refused).
  // `k`, `stride`, `pad`, `dil` are ints or [h, w] pairs; a null stride is the kernel size.
  Value pool2d(const std::string& op, const Value& xin, const nlohmann::json& k, const nlohmann::json& stride,
               const nlohmann::json& pad, const nlohmann::json& dil, bool count_include_pad) {
    const Value x = producer_operand(xin, op + "_pool2d");
    if (x.is_param) throw Unsupported{op + "_pool2d of a parameter"};
    if (x.shape.size() != 4 && x.shape.size() != 3)
      throw Unsupported{op + "_pool2d of a tensor that is not [N,] C, H, W"};
    auto pair = [&](const nlohmann::json& v, int64_t dflt, const char* what) {
      if (auto p = int_or_pair(v, dflt, false)) return *p;
      throw Unsupported{fmt::format("{}_pool2d: {} is not an int or a pair", op, what)};
    };
    PoolShape ps;
    const size_t r = x.shape.size();
    ps.h = x.shape[r - 2], ps.w = x.shape[r - 1];
    ps.planes = numel_of(x.shape) / (ps.h * ps.w);
    std::tie(ps.kh, ps.kw) = pair(k, 1, "kernel_size");
    const bool no_stride = stride.is_null() || (stride.is_array() && stride.empty());
    std::tie(ps.sh, ps.sw) = no_stride ? std::pair{ps.kh, ps.kw} : pair(stride, 1, "stride");
    std::tie(ps.ph, ps.pw) = pair(pad, 0, "padding");
    std::tie(ps.dh, ps.dw) = pair(dil, 1, "dilation");
    if (ps.kh < 1 || ps.kw < 1 || ps.sh < 1 || ps.sw < 1 || ps.dh < 1 || ps.dw < 1 || ps.ph < 0 || ps.pw < 0 ||
        2 * ps.ph > ps.kh || 2 * ps.pw > ps.kw)
      throw Unsupported{op + "_pool2d with a window PyTorch refuses"};
    ps.out_h = window_out(ps.h, ps.kh, ps.sh, ps.ph, ps.dh);
    ps.out_w = window_out(ps.w, ps.kw, ps.sw, ps.pw, ps.dw);
    if (ps.out_h < 1 || ps.out_w < 1) throw Unsupported{op + "_pool2d: the window is larger than the input"};
    ps.count_include_pad = count_include_pad;
    std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 2);
    shape.push_back(ps.out_h);
    shape.push_back(ps.out_w);
    Value res = producer_result(shape);
    cur_.kind = "pool";
    cur_.pool_op = op;
    cur_.source = x.index;
    cur_.pool = ps;
    return res;
  }

  // F.pad(x, (left, right)) with zeros, of the last dim (a causal conv's left padding); pads of
  // more dims, other modes and other values are refused.
  Padded zero_pad(const nlohmann::json& n) {
    const nlohmann::json pad = arg(n, 1, "pad"), mode = arg(n, 2, "mode"), value = arg(n, 3, "value");
    if (mode.is_string() && mode.get<std::string>() != "constant")
      throw Unsupported{"F.pad in mode " + mode.get<std::string>()};
    if (!value.is_null() && !(value.is_number() && value.get<double>() == 0.0))
      throw Unsupported{"F.pad with a value other than 0"};
    if (!pad.is_array() || pad.size() % 2 || pad.empty())
      throw Unsupported{"F.pad without a list of (begin, end) pairs"};
    for (size_t i = 0; i < pad.size(); ++i)
      if (!pad[i].is_number_integer() || pad[i].get<int64_t>() < 0 || (i >= 2 && pad[i].get<int64_t>() != 0))
        throw Unsupported{"F.pad of more than the last dim, or negative (cropping)"};
    return {arg_value(arg(n, 0, "input")), pad[0].get<int64_t>(), pad[1].get<int64_t>()};
  }

  // A convolution's input: a value, or an F.pad of one (its padding joins the conv's).
  Padded conv_input(const nlohmann::json& a) {
    if (a.is_object() && a.contains("node")) {
      auto it = padded_.find(a["node"].get<std::string>());
      if (it != padded_.end()) return it->second;
    }
    return {arg_value(a), 0, 0};
  }

  // A direct convolution of an NCHW (or NCL: height 1) tensor by a weight tensor; the bias, when
  // given, joins the epilogue per output channel. Zero padding only; `k` comes from the weight.
  Value conv(const Padded& in, const Value& w, const std::optional<Value>& bias, const nlohmann::json& stride,
             const nlohmann::json& pad, const nlohmann::json& dil, int64_t groups) {
    const Value x = producer_operand(in.v, "conv");
    if (x.is_param) throw Unsupported{"conv of a parameter tensor"};
    if (w.kind != Value::Kind::Tensor) throw Unsupported{"conv of a computed weight"};
    if (w.strided()) throw Unsupported{"conv of a weight view (transposed, permuted or selected)"};
    const bool one_d = x.shape.size() == 3;
    if ((x.shape.size() != 4 && !one_d) || w.shape.size() != x.shape.size())
      throw Unsupported{"conv of a tensor that is not N, C, [H,] W"};
    auto pair = [&](const nlohmann::json& v, int64_t dflt, const char* what) {
      if (auto p = int_or_pair(v, dflt, one_d)) return *p;
      throw Unsupported{std::string("conv: ") + what + " is not an int or a pair (or a string padding)"};
    };
    ConvShape c;
    c.n = x.shape[0], c.cin = x.shape[1], c.h = one_d ? 1 : x.shape[2], c.w = x.shape.back();
    c.cout = w.shape[0], c.groups = groups;
    c.kh = one_d ? 1 : w.shape[2], c.kw = w.shape.back();
    std::tie(c.sh, c.sw) = pair(stride, 1, "stride");
    std::tie(c.ph, c.pw) = pair(pad, 0, "padding");
    std::tie(c.dh, c.dw) = pair(dil, 1, "dilation");
    if (one_d) c.sh = 1, c.ph = 0, c.dh = 1;
    if (in.left || in.right) {  // an F.pad before: zeros either way
      if (c.pw < 0) throw Unsupported{"conv with a geometry PyTorch refuses"};
      c.pw_right = c.pw + in.right;
      c.pw += in.left;
    }
    if (groups < 1 || c.cin % groups || c.cout % groups || w.shape[1] != c.cin / groups)
      throw Unsupported{"conv: weight and groups disagree"};
    if (c.sh < 1 || c.sw < 1 || c.dh < 1 || c.dw < 1 || c.ph < 0 || c.pw < 0)
      throw Unsupported{"conv with a geometry PyTorch refuses"};
    c.out_h = window_out(c.h, c.kh, c.sh, c.ph, c.dh);
    c.out_w = window_out(c.w, c.kw, c.sw, c.pw, c.dw, c.pw_end());
    if (c.out_h < 1 || c.out_w < 1) throw Unsupported{"conv: the kernel is larger than the padded input"};
    return conv_result("conv", x, w, c, one_d, bias);
  }

  // A conv kind's result [n, cout, (out_h,) out_w] as the stage's producer; the bias joins the
  // epilogue per output channel.
  Value conv_result(const char* kind, const Value& x, const Value& w, const ConvShape& c, bool one_d,
                    const std::optional<Value>& bias) {
    std::vector<int64_t> shape = {c.n, c.cout};
    if (!one_d) shape.push_back(c.out_h);
    shape.push_back(c.out_w);
    Value r = producer_result(shape);
    cur_.kind = kind;
    cur_.source = x.index;
    cur_.conv = c;
    cur_.conv_weight = w.index;
    cur_.conv_weight_is_param = w.is_param;
    if (bias) r = binary("add", r, per_channel(*bias, shape.size(), std::string(kind) + " bias"));
    return r;
  }

  // A transposed convolution (ConvTranspose1d/2d, F.conv_transpose1d/2d) of an NCHW (or NCL)
  // tensor: input element (ih, iw) scatters through tap (r, q) to oh = ih * sh - ph + r * dh,
  // ow likewise; the kernels gather, per output element, the taps whose scatter lands on it. The
  // weight is [cin, cout / groups, kh, kw]; output_padding adds rows and columns at the end (it
  // only changes out_h and out_w). The bias joins the epilogue per output channel.
  Value conv_transpose(const Value& xin, const Value& w, const std::optional<Value>& bias, const nlohmann::json& stride,
                       const nlohmann::json& pad, const nlohmann::json& out_pad, const nlohmann::json& dil,
                       int64_t groups) {
    const Value x = producer_operand(xin, "conv_transpose");
    if (x.is_param) throw Unsupported{"conv_transpose of a parameter tensor"};
    if (w.kind != Value::Kind::Tensor) throw Unsupported{"conv_transpose of a computed weight"};
    if (w.strided()) throw Unsupported{"conv_transpose of a weight view (transposed, permuted or selected)"};
    const bool one_d = x.shape.size() == 3;
    if ((x.shape.size() != 4 && !one_d) || w.shape.size() != x.shape.size())
      throw Unsupported{"conv_transpose of a tensor that is not N, C, [H,] W"};
    auto pair = [&](const nlohmann::json& v, int64_t dflt, const char* what) {
      if (auto p = int_or_pair(v, dflt, one_d)) return *p;
      throw Unsupported{std::string("conv_transpose: ") + what + " is not an int or a pair"};
    };
    ConvShape c;
    c.n = x.shape[0], c.cin = x.shape[1], c.h = one_d ? 1 : x.shape[2], c.w = x.shape.back();
    c.groups = groups;
    if (groups < 1 || w.shape[0] != c.cin || c.cin % groups)
      throw Unsupported{"conv_transpose: weight and groups disagree"};
    c.cout = w.shape[1] * groups;
    c.kh = one_d ? 1 : w.shape[2], c.kw = w.shape.back();
    std::tie(c.sh, c.sw) = pair(stride, 1, "stride");
    std::tie(c.ph, c.pw) = pair(pad, 0, "padding");
    std::tie(c.dh, c.dw) = pair(dil, 1, "dilation");
    auto [oph, opw] = pair(out_pad, 0, "output_padding");
    if (one_d) c.sh = 1, c.ph = 0, c.dh = 1, oph = 0;
    if (c.sh < 1 || c.sw < 1 || c.dh < 1 || c.dw < 1 || c.ph < 0 || c.pw < 0 || oph < 0 || opw < 0 ||
        oph >= std::max(c.sh, c.dh) || opw >= std::max(c.sw, c.dw))
      throw Unsupported{"conv_transpose with a geometry PyTorch refuses"};
    c.out_h = transposed_out(c.h, c.kh, c.sh, c.ph, c.dh) + oph;
    c.out_w = transposed_out(c.w, c.kw, c.sw, c.pw, c.dw) + opw;
    if (c.out_h < 1 || c.out_w < 1) throw Unsupported{"conv_transpose: the padding removes every output element"};
    return conv_result("conv_transpose", x, w, c, one_d, bias);
  }

  // logsumexp(x, dim) = log(sum(exp(x - m), dim)) + m with m = amax(x, dim): a max, an
  // elementwise pass and a sum whose epilogue adds m back (kernels the generators know).
  Value logsumexp(const Value& x, const nlohmann::json& dim, const nlohmann::json& keepdim_arg) {
    const bool keepdim = keepdim_arg.is_boolean() && keepdim_arg.get<bool>();
    const Value m = reduction("max", x, dim, true);
    const Value s = reduction("sum", unary("exp", binary("sub", x, m)), dim, keepdim);
    Value kept = resolve(m);  // the max's temporary, its stage over by now
    if (kept.kind != Value::Kind::Tensor) throw Unsupported{"logsumexp: the row maxima were not kept"};
    kept.shape = s.shape;  // the same elements, with or without the reduced dim
    return binary("add", unary("log", s), kept);
  }

  // The index of the first maximum along `dim` (a NaN counts as the maximum, the first one wins:
  // PyTorch's rule); the output is int64, so nothing may follow it.
  Value argmax(const Value& xin, const nlohmann::json& dim, bool keepdim) {
    if (!dim.is_number_integer()) throw Unsupported{"argmax over every element (no dim)"};
    const Value x = producer_operand(xin, "argmax");
    if (x.is_param) throw Unsupported{"argmax of a parameter"};
    const int d = normalise_dim(dim.get<int64_t>(), x.shape.size());
    std::vector<int64_t> shape;
    for (int i = 0; i < static_cast<int>(x.shape.size()); ++i) {
      if (i != d)
        shape.push_back(x.shape[static_cast<size_t>(i)]);
      else if (keepdim)
        shape.push_back(1);
    }
    Value r = producer_result(shape);
    cur_.kind = "argmax";
    cur_.source = x.index;
    cur_.rshape = reduce_shape(x, d);
    return r;
  }

  // The inclusive cumulative sum along `dim`, x seen as [outer, reduce, inner].
  Value cumsum(const Value& xin, int64_t dim) {
    const Value x = producer_operand(xin, "cumsum");
    if (x.is_param) throw Unsupported{"cumsum of a parameter"};
    const int d = normalise_dim(dim, x.shape.size());
    Value r = producer_result(x.shape);
    cur_.kind = "cumsum";
    cur_.source = x.index;
    cur_.rshape = reduce_shape(x, d);
    return r;
  }

  Value softmax(const std::string& kind, const Value& xin, int64_t dim) {
    const Value x = producer_operand(xin, kind);
    if (x.is_param) throw Unsupported{kind + " of a parameter"};
    const int d = normalise_dim(dim, x.shape.size());
    Value r = producer_result(x.shape);
    cur_.kind = kind;
    cur_.source = x.index;
    cur_.rshape = reduce_shape(x, d);
    return r;
  }

  // A per-channel tensor ([C]) viewed as [C, 1, ..., 1] so that it broadcasts along dim 1 of a
  // tensor of rank `rank` (its memory is the same).
  static Value per_channel(const Value& v, size_t rank, const std::string& what) {
    if (v.kind != Value::Kind::Tensor || v.shape.size() != 1 || v.strided())
      throw Unsupported{what + " is not a per-channel tensor"};
    Value r = v;
    r.shape.resize(rank - 1, 1);
    return r;
  }

  // BatchNorm in eval mode: elementwise with the running statistics, per channel (dim 1):
  // (x - mean) * rsqrt(var + eps) * weight + bias.
  Value batch_norm_eval(const Value& x, const Value& mean, const Value& var, const std::optional<Value>& w,
                        const std::optional<Value>& b, double eps) {
    if (x.shape.size() < 2) throw Unsupported{"batch_norm of a tensor without a channel dim"};
    const size_t rank = x.shape.size();
    const Value inv = unary("rsqrt", binary("add", per_channel(var, rank, "running_var"), Value::constant(eps)));
    Value r = binary("mul", binary("sub", x, per_channel(mean, rank, "running_mean")), inv);
    if (w) r = binary("mul", r, per_channel(*w, rank, "weight"));
    if (b) r = binary("add", r, per_channel(*b, rank, "bias"));
    return r;
  }

  // GroupNorm: x [N, C, ...] in `groups` groups of C / groups channels, each group of each sample
  // normalised over its channels and positions: contiguous rows of a layernorm over
  // [N * groups, C / groups * prod(...)]; weight and bias are per channel.
  Value group_norm(const Value& xin, int64_t groups, const std::optional<Value>& w, const std::optional<Value>& b,
                   double eps) {
    const Value x = producer_operand(xin, "group_norm");
    if (x.is_param) throw Unsupported{"group_norm of a parameter"};
    if (x.shape.size() < 2) throw Unsupported{"group_norm of a tensor without a channel dim"};
    if (groups < 1 || x.shape[1] % groups != 0)
      throw Unsupported{fmt::format("group_norm: {} channels in {} groups", x.shape[1], groups)};
    const int64_t rows = x.shape[0] * groups;
    Value r = producer_result(x.shape);
    cur_.kind = "layernorm";
    cur_.source = x.index;
    cur_.rshape = {rows, numel_of(x.shape) / rows, 1};
    cur_.eps = eps;
    if (w) r = binary("mul", r, per_channel(*w, x.shape.size(), "group_norm weight"));
    if (b) r = binary("add", r, per_channel(*b, x.shape.size(), "group_norm bias"));
    return r;
  }

  // LayerNorm over the trailing dims `normalized` of x; weight and bias (when given) become
  // epilogue leaves broadcast along the rows.
  Value layer_norm(const Value& xin, const nlohmann::json& normalized, const std::optional<Value>& w,
                   const std::optional<Value>& b, double eps, bool rms = false) {
    const Value x = producer_operand(xin, "layer_norm");
    if (x.is_param) throw Unsupported{"layer_norm of a parameter"};
    std::vector<int64_t> dims;
    if (normalized.is_number_integer())
      dims.push_back(normalized.get<int64_t>());
    else if (normalized.is_array())
      for (const auto& d : normalized) dims.push_back(d.get<int64_t>());
    if (dims.empty() || dims.size() > x.shape.size())
      throw Unsupported{"layer_norm without a normalized_shape it can read"};
    int64_t cols = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (x.shape[x.shape.size() - dims.size() + i] != dims[i])
        throw Unsupported{"layer_norm: normalized_shape is not x's trailing dims"};
      cols *= dims[i];
    }
    Value r = producer_result(x.shape);
    cur_.kind = "layernorm";
    cur_.source = x.index;
    cur_.rshape = {numel_of(x.shape) / cols, cols, 1};
    cur_.eps = eps;
    cur_.rms = rms;
    if (w) r = binary("mul", r, *w);
    if (b) r = binary("add", r, *b);
    return r;
  }

  Value matmul(const Value& a_in, const Value& b_in, bool b_is_linear_weight) {
    const Value a = matmul_operand(a_in);
    const Value b = matmul_operand(b_in);
    if (a.shape.size() < 2 || b.shape.size() < 2) throw Unsupported{"matmul of a vector (matvec is not generated)"};
    // Leading (batch) dims: a 2-D operand is broadcast over the other's; otherwise both must have
    // the same ones, which a contiguous tensor lays out as one flattened batch dim.
    const std::vector<int64_t> lead_a(a.shape.begin(), a.shape.end() - 2), lead_b(b.shape.begin(), b.shape.end() - 2);
    if (!lead_a.empty() && !lead_b.empty() && lead_a != lead_b)
      throw Unsupported{"matmul batch dims differ (broadcast between batched operands is not generated)"};
    const std::vector<int64_t>& lead = lead_a.empty() ? lead_b : lead_a;
    // A value's shape is its logical one (transposed() swapped it already); only a linear weight,
    // used as W^T, is read with its last two dims swapped here. The flags say how each is stored.
    bool at = a.transposed, bt = b.transposed != b_is_linear_weight;
    auto dims = [](const Value& v, bool t) {
      size_t r = v.shape.size();
      int64_t rows = v.shape[r - 2], cols = v.shape[r - 1];
      if (t) std::swap(rows, cols);
      return std::pair{rows, cols};
    };
    auto [m, ka] = dims(a, false);
    auto [kb, n] = dims(b, b_is_linear_weight);
    if (ka != kb) throw Unsupported{fmt::format("matmul inner dims differ ({} vs {})", ka, kb)};
    int64_t batch = 1;
    for (int64_t d : lead) batch *= d;
    std::vector<int64_t> shape = lead;
    shape.push_back(m);
    shape.push_back(n);
    Value r = producer_result(shape);
    cur_.kind = "matmul";
    cur_.a = a.index;
    cur_.b = b.index;
    cur_.a_is_param = a.is_param;
    cur_.b_is_param = b.is_param;
    cur_.a_transposed = at;
    cur_.b_transposed = bt;
    cur_.m = m;
    cur_.n = n;
    cur_.k = ka;
    cur_.batch = batch;
    cur_.a_batched = !lead_a.empty();
    cur_.b_batched = !lead_b.empty();
    return r;
  }
  // args[i] or kwargs[key]; null when neither is given.
  static nlohmann::json arg(const nlohmann::json& n, size_t i, const char* key) {
    const auto& args = n["args"];
    if (args.is_array() && args.size() > i) return args[i];
    if (n["kwargs"].is_object() && n["kwargs"].contains(key)) return n["kwargs"][key];
    return nullptr;
  }

  // A tensor to take a view of: a computed value is kept in its temporary first.
  Value viewable(const Value& vin, const std::string& what) {
    Value v = resolve_view(vin);
    if (v.computed()) v = materialise(v);
    if (v.kind != Value::Kind::Tensor) throw Unsupported{what + " of a constant"};
    return v;
  }

  // x.permute(perm): dim d of the result is dim perm[d] of x (no copy: a view).
  Value permuted(const Value& vin, const std::vector<int64_t>& perm_in) {
    const Value v = view_of(viewable(vin, "a permute"));
    const size_t r = v.shape.size();
    if (perm_in.size() != r) throw Unsupported{"a permute whose dims are not the tensor's"};
    std::vector<bool> seen(r, false);
    Value p = v;
    for (size_t d = 0; d < r; ++d) {
      const int s = normalise_dim(perm_in[d], r);
      if (seen[static_cast<size_t>(s)]) throw Unsupported{"a permute that repeats a dim"};
      seen[static_cast<size_t>(s)] = true;
      p.shape[d] = v.shape[static_cast<size_t>(s)];
      p.strides[d] = v.strides[static_cast<size_t>(s)];
    }
    return simplified(p);
  }

  Value transposed(const Value& vin, int64_t d0 = -2, int64_t d1 = -1) {
    const Value v = viewable(vin, "a transpose");
    const size_t r = v.shape.size();
    if (r < 2) throw Unsupported{"a transpose of a vector"};
    std::vector<int64_t> perm(r);
    for (size_t d = 0; d < r; ++d) perm[d] = static_cast<int64_t>(d);
    std::swap(perm[static_cast<size_t>(normalise_dim(d0, r))], perm[static_cast<size_t>(normalise_dim(d1, r))]);
    return permuted(v, perm);
  }

  // x.select(dim, index), x[index] for dim 0: a view without that dim.
  Value selected(const Value& vin, int64_t dim, int64_t index) {
    Value v = view_of(viewable(vin, "indexing"));
    const size_t d = static_cast<size_t>(normalise_dim(dim, v.shape.size()));
    if (index < 0) index += v.shape[d];
    if (index < 0 || index >= v.shape[d]) throw Unsupported{"an index out of range"};
    if (v.shape.size() == 1) throw Unsupported{"a single element taken out of a tensor"};
    v.offset += index * v.strides[d];
    v.shape.erase(v.shape.begin() + static_cast<std::ptrdiff_t>(d));
    v.strides.erase(v.strides.begin() + static_cast<std::ptrdiff_t>(d));
    return simplified(v);
  }

  // x.reshape(shape) (view, flatten, unsqueeze, squeeze): the same elements in row-major order.
  // A computed value is kept in its temporary first and a view copied dense, so that the new
  // shape describes memory as it is.
  Value reshaped(const Value& vin, std::vector<int64_t> shape) {
    Value v = resolve_view(vin);
    if (v.kind == Value::Kind::Scalar) throw Unsupported{"a reshape of a constant"};
    const int64_t total = numel_of(v.shape);
    int64_t known = 1, infer = -1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == -1 && infer < 0)
        infer = static_cast<int64_t>(d);
      else if (shape[d] < 0)
        throw Unsupported{"a reshape with a negative size"};
      else
        known *= shape[d];
    }
    if (infer >= 0) {
      if (known == 0 || total % known) throw Unsupported{"a reshape whose -1 cannot be inferred"};
      shape[static_cast<size_t>(infer)] = total / known;
    }
    if (numel_of(shape) != total)
      throw Unsupported{fmt::format("a reshape of [{}] to [{}]", shape_text(v.shape), shape_text(shape))};
    if (shape == v.shape) return v;
    if (v.computed()) v = materialise(v);
    if (v.strided()) v = gathered(v);
    v.shape = std::move(shape);
    return v;
  }

  // The ints of a shape or dims argument: a list, or the call's positional args from `first` on
  // (x.reshape(b, s, 3) and x.reshape((b, s, 3)) alike); x.size(d) results are ints too.
  std::vector<int64_t> int_list(const nlohmann::json& n, size_t first, const char* key) {
    nlohmann::json list = arg(n, first, key);
    const auto& args = n["args"];
    if (!list.is_array()) {
      list = nlohmann::json::array();
      if (args.is_array())
        for (size_t i = first; i < args.size(); ++i) list.push_back(args[i]);
    }
    std::vector<int64_t> out;
    for (const auto& e : list) {
      if (e.is_number_integer()) {
        out.push_back(e.get<int64_t>());
        continue;
      }
      const Value v = arg_value(e);
      if (v.kind != Value::Kind::Scalar || v.scalar != std::floor(v.scalar))
        throw Unsupported{"a shape that is not a list of ints"};
      out.push_back(static_cast<int64_t>(v.scalar));
    }
    return out;
  }

  // The shape ops: views, reshapes and sizes (torch.fx method names and aten names alike).
  std::optional<Value> shape_op(const std::string& fn, const nlohmann::json& n) {
    auto x = [&]() { return arg_value(arg(n, 0, "input")); };
    auto int_arg = [&](size_t i, const char* key, std::optional<int64_t> dflt) -> int64_t {
      const nlohmann::json a = arg(n, i, key);
      if (a.is_number_integer()) return a.get<int64_t>();
      if (a.is_null() && dflt) return *dflt;
      const Value v = a.is_null() ? Value() : arg_value(a);
      if (!a.is_null() && v.kind == Value::Kind::Scalar && v.scalar == std::floor(v.scalar))
        return static_cast<int64_t>(v.scalar);
      throw Unsupported{fn + ": " + key + " is not an int"};
    };
    if (fn == "size" || fn == "sym_size") {
      const Value v = x();
      if (arg(n, 1, "dim").is_null()) throw Unsupported{"size() of every dim (a tuple)"};
      return Value::constant(
          static_cast<double>(v.shape.at(static_cast<size_t>(normalise_dim(int_arg(1, "dim", {}), v.shape.size())))));
    }
    if (fn == "getitem") {
      if (!arg(n, 1, "idx").is_number_integer()) throw Unsupported{"indexing by other than one int (slices, tensors)"};
      return selected(x(), 0, int_arg(1, "idx", {}));
    }
    if (fn == "select") return selected(x(), int_arg(1, "dim", {}), int_arg(2, "index", {}));
    if (fn == "reshape" || fn == "view" || fn == "_unsafe_view")
      return reshaped(x(), int_list(n, 1, fn == "reshape" ? "shape" : "size"));
    if (fn == "permute") return permuted(x(), int_list(n, 1, "dims"));
    if (fn == "t" || fn == "T") return transposed(x());
    if (fn == "transpose") return transposed(x(), int_arg(1, "dim0", {}), int_arg(2, "dim1", {}));
    if (fn == "flatten") {
      const Value v = x();
      const size_t r = std::max<size_t>(v.shape.size(), 1);
      const int s = normalise_dim(int_arg(1, "start_dim", 0), r), e = normalise_dim(int_arg(2, "end_dim", -1), r);
      if (v.shape.empty() || s > e) return reshaped(v, v.shape);
      std::vector<int64_t> shape(v.shape.begin(), v.shape.begin() + s);
      int64_t merged = 1;
      for (int d = s; d <= e; ++d) merged *= v.shape[static_cast<size_t>(d)];
      shape.push_back(merged);
      shape.insert(shape.end(), v.shape.begin() + e + 1, v.shape.end());
      return reshaped(v, shape);
    }
    if (fn == "unsqueeze") {
      const Value v = x();
      std::vector<int64_t> shape = v.shape;
      const int d = normalise_dim(int_arg(1, "dim", {}), shape.size() + 1);
      shape.insert(shape.begin() + d, 1);
      return reshaped(v, shape);
    }
    if (fn == "squeeze") {
      const Value v = x();
      std::vector<int64_t> shape;
      const nlohmann::json dim = arg(n, 1, "dim");
      const int only = dim.is_null() ? -1 : normalise_dim(int_arg(1, "dim", {}), v.shape.size());
      for (size_t d = 0; d < v.shape.size(); ++d)
        if (v.shape[d] != 1 || (only >= 0 && static_cast<int>(d) != only)) shape.push_back(v.shape[d]);
      return reshaped(v, shape);
    }
    if (fn == "contiguous" || fn == "clone") {
      const Value v = resolve_view(x());
      return v.strided() ? gathered(v) : v;
    }
    return std::nullopt;
  }

  Value call(const std::string& fn, const nlohmann::json& n, const nlohmann::json& attributes) {
    auto x = [&](size_t i, const char* key) { return arg_value(arg(n, i, key)); };
    static const std::map<std::string, std::string> kUnary = {
        {"relu", "relu"},         {"relu_", "relu"},  {"sigmoid", "sigmoid"},   {"tanh", "tanh"},
        {"exp", "exp"},           {"log", "log"},     {"sqrt", "sqrt"},         {"rsqrt", "rsqrt"},
        {"abs", "abs"},           {"neg", "neg"},     {"silu", "silu"},         {"relu6", "relu6"},
        {"softplus", "softplus"}, {"ReLU", "relu"},   {"Sigmoid", "sigmoid"},   {"Tanh", "tanh"},
        {"SiLU", "silu"},         {"ReLU6", "relu6"}, {"Softplus", "softplus"}, {"Identity", ""}};
    static const std::map<std::string, std::string> kBinary = {
        {"add", "add"},      {"iadd", "add"},    {"sub", "sub"},     {"isub", "sub"},
        {"mul", "mul"},      {"imul", "mul"},    {"truediv", "div"}, {"div", "div"},
        {"itruediv", "div"}, {"maximum", "max"}, {"minimum", "min"}};
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
    if (fn == "conv2d" || fn == "conv1d") {  // F.conv2d(input, weight, bias, stride, padding, dilation, groups)
      nlohmann::json b = arg(n, 2, "bias"), g = arg(n, 6, "groups");
      return conv(conv_input(arg(n, 0, "input")), x(1, "weight"),
                  b.is_null() ? std::nullopt : std::optional<Value>(arg_value(b)), arg(n, 3, "stride"),
                  arg(n, 4, "padding"), arg(n, 5, "dilation"), g.is_number_integer() ? g.get<int64_t>() : 1);
    }
    if (fn == "conv_transpose2d" || fn == "conv_transpose1d") {
      // F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
      nlohmann::json b = arg(n, 2, "bias"), g = arg(n, 6, "groups");
      return conv_transpose(arg_value(arg(n, 0, "input")), x(1, "weight"),
                            b.is_null() ? std::nullopt : std::optional<Value>(arg_value(b)), arg(n, 3, "stride"),
                            arg(n, 4, "padding"), arg(n, 5, "output_padding"), arg(n, 7, "dilation"),
                            g.is_number_integer() ? g.get<int64_t>() : 1);
    }
    if (fn == "max_pool2d" || fn == "avg_pool2d") {
      // F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
      // F.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
      const bool is_max = fn == "max_pool2d";
      const nlohmann::json ceil = arg(n, is_max ? 5 : 4, "ceil_mode");
      if (ceil.is_boolean() && ceil.get<bool>()) throw Unsupported{fn + " with ceil_mode"};
      if (is_max) {
        const nlohmann::json ri = arg(n, 6, "return_indices");
        if (ri.is_boolean() && ri.get<bool>()) throw Unsupported{fn + " returning indices"};
      } else if (!arg(n, 6, "divisor_override").is_null()) {
        throw Unsupported{fn + " with divisor_override"};
      }
      const nlohmann::json cip = is_max ? nlohmann::json() : arg(n, 5, "count_include_pad");
      return pool2d(is_max ? "max" : "avg", x(0, "input"), arg(n, 1, "kernel_size"), arg(n, 2, "stride"),
                    arg(n, 3, "padding"), is_max ? arg(n, 4, "dilation") : nlohmann::json(1),
                    !cip.is_boolean() || cip.get<bool>());
    }
    if (fn == "group_norm") {  // F.group_norm(input, num_groups, weight, bias, eps)
      nlohmann::json g = arg(n, 1, "num_groups"), eps = arg(n, 4, "eps"), w = arg(n, 2, "weight"),
                     b = arg(n, 3, "bias");
      if (!g.is_number_integer()) throw Unsupported{"group_norm without a number of groups"};
      return group_norm(
          x(0, "input"), g.get<int64_t>(), w.is_null() ? std::nullopt : std::optional<Value>(arg_value(w)),
          b.is_null() ? std::nullopt : std::optional<Value>(arg_value(b)), eps.is_number() ? eps.get<double>() : 1e-5);
    }
    if (fn == "batch_norm") {  // F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
      nlohmann::json training = arg(n, 5, "training"), eps = arg(n, 7, "eps"), w = arg(n, 3, "weight"),
                     b = arg(n, 4, "bias");
      if (!training.is_boolean() || training.get<bool>())
        throw Unsupported{"batch_norm in training mode (batch statistics)"};
      return batch_norm_eval(x(0, "input"), x(1, "running_mean"), x(2, "running_var"),
                             w.is_null() ? std::nullopt : std::optional<Value>(arg_value(w)),
                             b.is_null() ? std::nullopt : std::optional<Value>(arg_value(b)),
                             eps.is_number() ? eps.get<double>() : 1e-5);
    }
    if (fn == "pow" || fn == "square") {  // small integer exponents as products
      nlohmann::json e = fn == "square" ? nlohmann::json(2) : arg(n, 1, "exponent");
      if (!e.is_number() || (e.get<double>() != 2.0 && e.get<double>() != 3.0))
        throw Unsupported{"pow with an exponent other than 2 or 3"};
      Value v = x(0, "input");
      Value sq = binary("mul", v, v);
      return e.get<double>() == 3.0 ? binary("mul", sq, v) : sq;
    }
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
      if (attributes.is_object() && attributes.contains("min_val"))
        lo = attributes["min_val"], hi = attributes["max_val"];
      else if (fn == "hardtanh")
        lo = arg(n, 1, "min_val"), hi = arg(n, 2, "max_val");
      else
        lo = arg(n, 1, "min"), hi = arg(n, 2, "max");
      if (fn.starts_with("hardtanh") || fn == "Hardtanh") {
        if (lo.is_null()) lo = -1.0;
        if (hi.is_null()) hi = 1.0;
      }
      double l = lo.is_number() ? lo.get<double>() : -INFINITY, h = hi.is_number() ? hi.get<double>() : INFINITY;
      if ((!lo.is_null() && !lo.is_number()) || (!hi.is_null() && !hi.is_number()))
        throw Unsupported{"clamp by a tensor"};
      return unary("clamp", x(0, "input"), l, h);
    }
    if (fn == "Dropout" || fn == "dropout") {
      double p = attributes.is_object() && attributes.contains("p") ? attributes["p"].get<double>() : 0.5;
      if (fn == "dropout") {  // F.dropout(input, p=0.5, training=True)
        nlohmann::json pa = arg(n, 1, "p"), training = arg(n, 2, "training");
        p = pa.is_number() ? pa.get<double>() : 0.5;
        if (training.is_boolean() && !training.get<bool>()) p = 0.0;  // not training: the identity
      }
      if (p != 0.0) throw Unsupported{"dropout with p > 0 while training (random)"};
      return x(0, "input");
    }
    if (fn == "argmax") {  // torch.argmax(input, dim=None, keepdim=False)
      const nlohmann::json keepdim = arg(n, 2, "keepdim");
      return argmax(x(0, "input"), arg(n, 1, "dim"), keepdim.is_boolean() && keepdim.get<bool>());
    }
    if (fn == "cumsum") {  // torch.cumsum(input, dim, dtype=None)
      if (!arg(n, 2, "dtype").is_null()) throw Unsupported{"cumsum with a dtype"};
      const nlohmann::json dim = arg(n, 1, "dim");
      if (!dim.is_number_integer()) throw Unsupported{"cumsum without a dim"};
      return cumsum(x(0, "input"), dim.get<int64_t>());
    }
    if (fn == "logsumexp") return logsumexp(x(0, "input"), arg(n, 1, "dim"), arg(n, 2, "keepdim"));
    if (fn == "sum" || fn == "mean" || fn == "amax" || fn == "amin") {
      std::string op = fn == "amax" ? "max" : fn == "amin" ? "min" : fn;
      nlohmann::json keepdim = arg(n, 2, "keepdim");
      return reduction(op, x(0, "input"), arg(n, 1, "dim"), keepdim.is_boolean() && keepdim.get<bool>());
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
    if (fn == "rms_norm") {  // F.rms_norm(input, normalized_shape, weight=None, eps=None)
      nlohmann::json w = arg(n, 2, "weight"), eps = arg(n, 3, "eps");
      return layer_norm(x(0, "input"), arg(n, 1, "normalized_shape"),
                        w.is_null() ? std::nullopt : std::optional(arg_value(w)), std::nullopt,
                        eps.is_number() ? eps.get<double>() : kF32Epsilon, true);
    }
    if (fn == "matmul" || fn == "mm" || fn == "bmm") return matmul(x(0, "input"), x(1, "other"), false);
    if (auto v = shape_op(fn, n)) return *v;
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
      if (type == "Conv2d" || type == "Conv1d") {
        auto at = [&](const char* key) { return attrs.contains(key) ? attrs[key] : nlohmann::json(); };
        if (at("transposed").is_boolean() && at("transposed").get<bool>()) throw Unsupported{type + " transposed"};
        if (at("padding_mode").is_string() && at("padding_mode").get<std::string>() != "zeros")
          throw Unsupported{type + " with padding_mode " + at("padding_mode").get<std::string>()};
        auto w = tensor_named(target + ".weight");
        if (!w) throw Unsupported{type + " " + target + " has no weight tensor"};
        const nlohmann::json g = at("groups");
        return conv(conv_input(n["args"][0]), *w, tensor_named(target + ".bias"), at("stride"), at("padding"),
                    at("dilation"), g.is_number_integer() ? g.get<int64_t>() : 1);
      }
      if (type == "ConvTranspose2d" || type == "ConvTranspose1d") {
        auto at = [&](const char* key) { return attrs.contains(key) ? attrs[key] : nlohmann::json(); };
        if (at("padding_mode").is_string() && at("padding_mode").get<std::string>() != "zeros")
          throw Unsupported{type + " with padding_mode " + at("padding_mode").get<std::string>()};
        auto w = tensor_named(target + ".weight");
        if (!w) throw Unsupported{type + " " + target + " has no weight tensor"};
        const nlohmann::json g = at("groups");
        return conv_transpose(arg_value(n["args"][0]), *w, tensor_named(target + ".bias"), at("stride"), at("padding"),
                              at("output_padding"), at("dilation"), g.is_number_integer() ? g.get<int64_t>() : 1);
      }
      if (type == "MaxPool2d" || type == "AvgPool2d") {
        const bool is_max = type == "MaxPool2d";
        auto at = [&](const char* key) { return attrs.contains(key) ? attrs[key] : nlohmann::json(); };
        if (at("ceil_mode").is_boolean() && at("ceil_mode").get<bool>()) throw Unsupported{type + " with ceil_mode"};
        if (at("return_indices").is_boolean() && at("return_indices").get<bool>())
          throw Unsupported{type + " returning indices"};
        if (!at("divisor_override").is_null()) throw Unsupported{type + " with divisor_override"};
        const nlohmann::json cip = at("count_include_pad");
        return pool2d(is_max ? "max" : "avg", arg_value(n["args"][0]), at("kernel_size"), at("stride"), at("padding"),
                      is_max ? at("dilation") : nlohmann::json(1), !cip.is_boolean() || cip.get<bool>());
      }
      if (type == "GroupNorm") {
        const double eps = attrs.contains("eps") && attrs["eps"].is_number() ? attrs["eps"].get<double>() : 1e-5;
        if (!attrs.contains("num_groups") || !attrs["num_groups"].is_number_integer())
          throw Unsupported{"GroupNorm without num_groups"};
        return group_norm(arg_value(n["args"][0]), attrs["num_groups"].get<int64_t>(), tensor_named(target + ".weight"),
                          tensor_named(target + ".bias"), eps);
      }
      if (type == "RMSNorm") {  // torch >= 2.4; eps None (not recorded) is float32's machine epsilon
        const double eps = attrs.contains("eps") && attrs["eps"].is_number() ? attrs["eps"].get<double>() : kF32Epsilon;
        nlohmann::json shape = attrs.contains("normalized_shape") ? attrs["normalized_shape"] : nlohmann::json();
        return layer_norm(arg_value(n["args"][0]), shape, tensor_named(target + ".weight"), std::nullopt, eps, true);
      }
      if (type == "LayerNorm") {
        const double eps = attrs.contains("eps") && attrs["eps"].is_number() ? attrs["eps"].get<double>() : 1e-5;
        nlohmann::json shape = attrs.contains("normalized_shape") ? attrs["normalized_shape"] : nlohmann::json();
        return layer_norm(arg_value(n["args"][0]), shape, tensor_named(target + ".weight"),
                          tensor_named(target + ".bias"), eps);
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
    const Value given = arg_value(a);
    Value raw = resolve_view(given);
    // The output is a view of a tensor (a permute of an input, of a computed value's temporary):
    // the last stage copies it, with the view's offset and strides.
    if (raw.kind == Value::Kind::Tensor && raw.strided()) {
      const Value v = view_of(raw);
      if (v.is_param) throw Unsupported{"a permuted or sliced parameter"};
      raw = producer_result(v.shape);
      set_gather(cur_, v);
    }
    const int64_t want = numel_of(p_.outputs[0].shape);
    if (raw.kind == Value::Kind::Scalar) throw Unsupported{"the output is a constant"};
    if (numel_of(raw.shape) != want)
      throw Unsupported{fmt::format("the graph's result [{}] is not the output [{}]", shape_text(raw.shape),
                                    shape_text(p_.outputs[0].shape))};
    const bool last_temp = raw.kind == Value::Kind::Tensor && !raw.is_param &&
                           raw.index == first_temp_ + static_cast<int>(temps_.size()) - 1;
    if (last_temp && !have_producer_ && cur_.expr.nodes.empty()) {
      // The last finished stage wrote the output, reshaped after (x.view(...) of its result): it
      // is the last stage again, writing the output instead of a temporary.
      cur_ = std::move(done_.back());
      done_.pop_back();
      temps_.pop_back();
    } else {
      if (given.computed() && given.stage != stage_id_)
        throw Unsupported{"the output is a value computed before the graph's last kernel"};
      if (raw.kind == Value::Kind::Tensor) throw Unsupported{"the output is an input unchanged"};
      if (raw.stage != stage_id_) throw Unsupported{"the output is a value computed before the graph's last kernel"};
      end_stage(raw);
    }
    cur_.out_shape = p_.outputs[0].shape;  // same elements, row-major: the linear indices agree
    const bool int_out = p_.outputs[0].dtype == DType::i64;
    if (int_out != (cur_.kind == "argmax"))
      throw Unsupported{int_out ? "the int64 output is not an argmax's" : "an argmax's indices as a float output"};
    if (int_out && !done_.empty()) throw Unsupported{"an argmax after other kernels (only a lone argmax is generated)"};
    if (done_.empty()) {
      out_ = std::move(cur_);
      return;
    }
    done_.push_back(std::move(cur_));
    fuse_rms_norms();
    drop_unread_stages();
    if (done_.size() == 1) {
      out_ = std::move(done_[0]);
      return;
    }
    out_.kind = "chain";
    out_.out_shape = p_.outputs[0].shape;
    out_.out_numel = want;
    out_.stages = std::move(done_);
    out_.temps = std::move(temps_);
    out_.first_temp = first_temp_;
  }

  // Keeps only the nodes the root uses (a traced graph may compute values it never returns),
  // carrying the leaves' shapes along.
  void prune() {
    auto& nodes = cur_.expr.nodes;
    std::vector<bool> used(nodes.size(), false);
    used[cur_.expr.root] = true;
    for (int i = cur_.expr.root; i >= 0; --i)
      if (used[i])
        for (int a : nodes[i].args) used[a] = true;
    if (have_producer_) {
      bool acc_used = false;
      for (size_t i = 0; i < nodes.size(); ++i) acc_used |= used[i] && nodes[i].kind == ExprNode::Kind::Acc;
      if (!acc_used) throw Unsupported{"the producer's result is not used"};
    }
    std::vector<int> remap(nodes.size(), -1);
    std::vector<ExprNode> kept;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::string> whats;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!used[i]) continue;
      ExprNode n = nodes[i];
      for (int& a : n.args) a = remap[a];
      remap[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(n));
      shapes.push_back(std::move(leaf_shape_[i]));
      whats.push_back(std::move(leaf_what_[i]));
    }
    cur_.expr.root = remap[cur_.expr.root];
    nodes = std::move(kept);
    leaf_shape_ = std::move(shapes);
    leaf_what_ = std::move(whats);
  }

  // Every input index a stage reads (its producer's operands and its leaves).
  static std::vector<int*> input_refs(KernelPlan& s) {
    std::vector<int*> r;
    if (is_row_kind(s.kind) || s.kind == "pool" || is_conv_kind(s.kind) || s.kind == "gather" || s.kind == "cumsum" ||
        s.kind == "argmax")
      r.push_back(&s.source);
    if (is_conv_kind(s.kind) && !s.conv_weight_is_param) r.push_back(&s.conv_weight);
    if (s.kind == "matmul") {
      if (!s.a_is_param) r.push_back(&s.a);
      if (!s.b_is_param) r.push_back(&s.b);
    }
    for (auto& n : s.expr.nodes)
      if (n.kind == ExprNode::Kind::Input) r.push_back(&n.tensor);
    return r;
  }

  // RMSNorm written out, x * rsqrt(mean(x * x, -1, keepdim) + eps) or x / sqrt(...): three
  // stages (x * x into a temporary, its row means with + eps and rsqrt (sqrt) as the epilogue,
  // then x times (over) that per-row value and whatever follows) become one layernorm without
  // the mean (`rms`), the multiply (divide) by the per-row value its Acc. The two stages before
  // are left for drop_unread_stages() to drop when nothing else reads their temporaries.
  void fuse_rms_norms() {
    auto temp_of = [&](int tensor) { return tensor >= first_temp_ ? tensor - first_temp_ : -1; };
    for (size_t k = 0; k < done_.size(); ++k) {
      KernelPlan& last = done_[k];
      if (last.kind != "elementwise") continue;
      auto& nodes = last.expr.nodes;
      for (size_t m = 0; m < nodes.size(); ++m) {
        const ExprNode& mul = nodes[m];
        const bool divide = mul.op == "div";  // x / sqrt(mean + eps): x must be the numerator
        if (mul.kind != ExprNode::Kind::Binary || (mul.op != "mul" && !divide)) continue;
        for (int side = 0; side < (divide ? 1 : 2); ++side) {
          const ExprNode& x = nodes[static_cast<size_t>(mul.args[static_cast<size_t>(side)])];
          const ExprNode& r = nodes[static_cast<size_t>(mul.args[static_cast<size_t>(1 - side)])];
          if (x.kind != ExprNode::Kind::Input || !x.index.identity(last.out_numel) || r.kind != ExprNode::Kind::Input)
            continue;
          const int j = temp_of(r.tensor);  // the stage that wrote the per-row value
          if (j < 0 || static_cast<size_t>(j) >= k) continue;
          const KernelPlan& mean = done_[static_cast<size_t>(j)];
          const int64_t rows = mean.rshape.outer, cols = mean.rshape.reduce;
          if (mean.kind != "reduce" || mean.reduce_op != "mean" || mean.rshape.inner != 1 ||
              rows * cols != last.out_numel || r.index.div != cols || r.index.mod != rows)
            continue;
          const std::optional<double> eps = inverse_root_plus_eps(mean.expr, divide ? "sqrt" : "rsqrt");
          const int i = temp_of(mean.source);  // the stage that wrote x * x
          if (!eps || i < 0) continue;
          const KernelPlan& square = done_[static_cast<size_t>(i)];
          if (square.kind != "elementwise" || !is_square_of(square.expr, x.tensor, square.out_numel)) continue;
          int uses_of_r = 0;
          for (const auto& n : nodes) uses_of_r += n.kind == ExprNode::Kind::Input && n.tensor == r.tensor;
          if (uses_of_r != 1) continue;
          const int source = x.tensor;
          last.kind = "layernorm";
          last.rms = true;
          last.source = source;
          last.rshape = {rows, cols, 1};
          last.eps = *eps;
          nodes[m] = ExprNode{};
          nodes[m].kind = ExprNode::Kind::Acc;
          compact(last.expr);
          break;
        }
        if (last.kind != "elementwise") break;
      }
    }
  }

  // eps when `e` is root_op(Acc + eps) (either order of the sum), root_op rsqrt or sqrt.
  static std::optional<double> inverse_root_plus_eps(const Expr& e, const std::string& root_op) {
    if (e.root < 0) return std::nullopt;
    const ExprNode& root = e.nodes[static_cast<size_t>(e.root)];
    if (root.kind != ExprNode::Kind::Unary || root.op != root_op) return std::nullopt;
    const ExprNode& sum = e.nodes[static_cast<size_t>(root.args[0])];
    if (sum.kind != ExprNode::Kind::Binary || sum.op != "add") return std::nullopt;
    const ExprNode& a = e.nodes[static_cast<size_t>(sum.args[0])];
    const ExprNode& b = e.nodes[static_cast<size_t>(sum.args[1])];
    if (a.kind == ExprNode::Kind::Acc && b.kind == ExprNode::Kind::Const) return b.value;
    if (b.kind == ExprNode::Kind::Acc && a.kind == ExprNode::Kind::Const) return a.value;
    return std::nullopt;
  }

  // True when `e` is x * x of input `tensor`, read element by element.
  static bool is_square_of(const Expr& e, int tensor, int64_t numel) {
    if (e.root < 0) return false;
    const ExprNode& root = e.nodes[static_cast<size_t>(e.root)];
    if (root.kind != ExprNode::Kind::Binary || root.op != "mul") return false;
    for (int a : root.args) {
      const ExprNode& n = e.nodes[static_cast<size_t>(a)];
      if (n.kind != ExprNode::Kind::Input || n.tensor != tensor || !n.index.identity(numel)) return false;
    }
    return true;
  }

  // Drops the nodes the root no longer uses, keeping the order (arguments before users).
  static void compact(Expr& e) {
    std::vector<bool> used(e.nodes.size(), false);
    used[static_cast<size_t>(e.root)] = true;
    for (int i = e.root; i >= 0; --i)
      if (used[static_cast<size_t>(i)])
        for (int a : e.nodes[static_cast<size_t>(i)].args) used[static_cast<size_t>(a)] = true;
    std::vector<int> renumber(e.nodes.size(), -1);
    std::vector<ExprNode> kept;
    for (size_t i = 0; i < e.nodes.size(); ++i) {
      if (!used[i]) continue;
      renumber[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(e.nodes[i]));
      for (int& a : kept.back().args) a = renumber[static_cast<size_t>(a)];
    }
    e.root = renumber[static_cast<size_t>(e.root)];
    e.nodes = std::move(kept);
  }

  // A stage whose temporary no later stage reads (a value kept for a use that never came) is
  // dropped, and the temporaries renumbered.
  void drop_unread_stages() {
    const size_t n = done_.size();
    std::vector<bool> needed(n, false);
    needed[n - 1] = true;
    for (size_t i = n; i-- > 0;) {
      if (!needed[i]) continue;
      for (int* ref : input_refs(done_[i]))
        if (*ref >= first_temp_) needed[static_cast<size_t>(*ref - first_temp_)] = true;
    }
    std::vector<int> renumber(n, -1);
    std::vector<KernelPlan> stages;
    std::vector<TensorSpec> temps;
    for (size_t i = 0; i < n; ++i) {
      if (!needed[i]) continue;
      if (i + 1 < n) {
        renumber[i] = static_cast<int>(temps.size());
        temps.push_back(temps_[i]);
        temps.back().name = fmt::format("mb_tmp{}", renumber[i]);
      }
      stages.push_back(std::move(done_[i]));
    }
    for (auto& s : stages)
      for (int* ref : input_refs(s))
        if (*ref >= first_temp_) *ref = first_temp_ + renumber[static_cast<size_t>(*ref - first_temp_)];
    done_ = std::move(stages);
    temps_ = std::move(temps);
  }
};

const char* kind_name(ExprNode::Kind k) {
  switch (k) {
    case ExprNode::Kind::Input:
      return "input";
    case ExprNode::Kind::Param:
      return "param";
    case ExprNode::Kind::Const:
      return "const";
    case ExprNode::Kind::Acc:
      return "acc";
    case ExprNode::Kind::Unary:
      return "unary";
    case ExprNode::Kind::Binary:
      return "binary";
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

bool Expr::is_identity_epilogue() const { return root >= 0 && nodes[root].kind == ExprNode::Kind::Acc; }

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
      if (n.op == "gelu")
        return "(" + lit(0.5) + " * " + x + " * (" + lit(1) + " + " +
               (d.erf_function.empty() ? f("erf") : d.erf_function) + "(" + x + " * " + lit(M_SQRT1_2) + ")))";
      if (n.op == "gelu_tanh")
        return "(" + lit(0.5) + " * " + x + " * (" + lit(1) + " + " + f("tanh") + "(" + lit(0.7978845608028654) +
               " * (" + x + " + " + lit(0.044715) + " * " + x + " * " + x + " * " + x + "))))";
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
  if (kind == "chain") {
    j["first_temp"] = first_temp;
    j["temps"] = temps;
    j["stages"] = nlohmann::json::array();
    for (const auto& s : stages) j["stages"].push_back(s.to_json());
    return j;
  }
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
    if (rms) j["rms"] = true;
    j["outer"] = rshape.outer, j["reduce"] = rshape.reduce, j["inner"] = rshape.inner;
    if (!reduce_op.empty()) j["reduce_op"] = reduce_op;
  }
  if (kind == "pool") {
    j["source"] = source;
    j["pool_op"] = pool_op;
    j["pool"] = {{"planes", pool.planes},
                 {"h", pool.h},
                 {"w", pool.w},
                 {"out_h", pool.out_h},
                 {"out_w", pool.out_w},
                 {"kernel", {pool.kh, pool.kw}},
                 {"stride", {pool.sh, pool.sw}},
                 {"padding", {pool.ph, pool.pw}},
                 {"dilation", {pool.dh, pool.dw}},
                 {"count_include_pad", pool.count_include_pad}};
  }
  if (is_conv_kind(kind)) {
    j["source"] = source;
    j["weight"] = {{"tensor", conv_weight}, {"param", conv_weight_is_param}};
    j["conv"] = {{"n", conv.n},
                 {"cin", conv.cin},
                 {"cout", conv.cout},
                 {"groups", conv.groups},
                 {"h", conv.h},
                 {"w", conv.w},
                 {"out_h", conv.out_h},
                 {"out_w", conv.out_w},
                 {"kernel", {conv.kh, conv.kw}},
                 {"stride", {conv.sh, conv.sw}},
                 {"padding", {conv.ph, conv.pw}},
                 {"dilation", {conv.dh, conv.dw}}};
    if (!conv.symmetric()) j["conv"]["padding_right"] = conv.pw_end();
  }
  if (kind == "row_map") {
    j["source"] = source;
    j["outer"] = rshape.outer, j["reduce"] = rshape.reduce, j["inner"] = rshape.inner;
    j["reduce_op"] = reduce_op;
  }
  if (kind == "cumsum" || kind == "argmax") {
    j["source"] = source;
    j["outer"] = rshape.outer, j["reduce"] = rshape.reduce, j["inner"] = rshape.inner;
  }
  if (kind == "gather") {
    j["source"] = source;
    j["gather"] = {{"shape", gather_shape}, {"strides", gather_strides}, {"offset", gather_offset}};
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
  if (kind == "chain") {
    s = fmt::format("chain of {} kernels:", stages.size());
    for (size_t i = 0; i < stages.size(); ++i) s += (i ? " -> " : " ") + stages[i].summary();
    return s;
  }
  if (kind == "elementwise")
    s = fmt::format("elementwise over {} ({} expression nodes)", shape_text(out_shape), expr.nodes.size());
  else if (kind == "reduce")
    s = fmt::format("{} over [{}, {}, {}] (outer, reduce, inner)", reduce_op, rshape.outer, rshape.reduce,
                    rshape.inner);
  else if (kind == "softmax" || kind == "log_softmax" || kind == "layernorm")
    s = fmt::format("{} over [{}, {}, {}] (outer, reduce, inner)", rms ? "rmsnorm" : kind, rshape.outer, rshape.reduce,
                    rshape.inner);
  else if (kind == "pool")
    s = fmt::format("{} pool {}x{} stride {}x{} over {} planes of {}x{} -> {}x{}", pool_op, pool.kh, pool.kw, pool.sh,
                    pool.sw, pool.planes, pool.h, pool.w, pool.out_h, pool.out_w);
  else if (kind == "conv")
    s = fmt::format("conv {}x{} stride {}x{} of [{}, {}, {}, {}] to {} channels{}", conv.kh, conv.kw, conv.sh, conv.sw,
                    conv.n, conv.cin, conv.h, conv.w, conv.cout,
                    conv.groups > 1 ? fmt::format(" in {} groups", conv.groups) : "");
  else if (kind == "conv_transpose")
    s = fmt::format("conv_transpose {}x{} stride {}x{} of [{}, {}, {}, {}] to {} channels, {}x{}{}", conv.kh, conv.kw,
                    conv.sh, conv.sw, conv.n, conv.cin, conv.h, conv.w, conv.cout, conv.out_h, conv.out_w,
                    conv.groups > 1 ? fmt::format(" in {} groups", conv.groups) : "");
  else if (kind == "row_map")
    s = fmt::format("{} of each of {} rows of {}, then every element with its row's", reduce_op, rshape.outer,
                    rshape.reduce);
  else if (kind == "argmax")
    s = fmt::format("argmax over [{}, {}, {}] (outer, reduce, inner), int64 indices", rshape.outer, rshape.reduce,
                    rshape.inner);
  else if (kind == "cumsum")
    s = fmt::format("cumsum over [{}, {}, {}] (outer, reduce, inner)", rshape.outer, rshape.reduce, rshape.inner);
  else if (kind == "gather")
    s = fmt::format("copy of {} (strides {}, offset {})", shape_text(gather_shape), shape_text(gather_strides),
                    gather_offset);
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

double KernelPlan::rough_cost() const {
  auto d = [](int64_t v) { return static_cast<double>(v); };
  double elements = d(out_numel), flops = 0;
  if (kind == "chain") {
    double sum = 0;
    for (const auto& s : stages) sum += s.rough_cost();
    return sum;
  } else if (kind == "elementwise") {
    elements += d(out_numel) * static_cast<double>(expr.inputs_used().size());
  } else if (is_row_kind(kind) || kind == "row_map" || kind == "cumsum" || kind == "argmax") {
    elements += d(rshape.outer) * d(rshape.reduce) * d(rshape.inner);
  } else if (kind == "pool") {
    elements += d(pool.planes) * d(pool.h) * d(pool.w);
  } else if (kind == "conv") {
    const double per_out = d(conv.cin / std::max<int64_t>(conv.groups, 1)) * d(conv.kh) * d(conv.kw);
    elements += d(conv.n) * d(conv.cin) * d(conv.h) * d(conv.w) + d(conv.cout) * per_out;
    flops = 2 * d(out_numel) * per_out;
  } else if (kind == "conv_transpose") {  // every input element meets every tap once
    const double taps = d(conv.cout / std::max<int64_t>(conv.groups, 1)) * d(conv.kh) * d(conv.kw);
    elements += d(conv.n) * d(conv.cin) * d(conv.h) * d(conv.w) + d(conv.cin) * taps;
    flops = 2 * d(conv.n) * d(conv.cin) * d(conv.h) * d(conv.w) * taps;
  } else if (kind == "matmul") {
    elements += (a_batched ? d(batch) : 1) * d(m) * d(k) + (b_batched ? d(batch) : 1) * d(k) * d(n);
    flops = 2 * d(batch) * d(m) * d(n) * d(k);
  } else if (kind == "gather") {
    elements += d(out_numel);
  }
  return std::max(4 * elements, flops / 16);
}

Problem stage_problem(const Problem& problem, const KernelPlan& chain, size_t i) {
  Problem p = problem;
  p.inputs.insert(p.inputs.end(), chain.temps.begin(), chain.temps.end());
  if (i + 1 < chain.stages.size()) p.outputs = {chain.temps.at(i)};
  return p;
}

std::optional<KernelPlan> fuse_row_map(const KernelPlan& chain) {
  if (chain.kind != "chain" || chain.stages.size() != 2 || chain.temps.size() != 1) return std::nullopt;
  const KernelPlan& red = chain.stages[0];
  const KernelPlan& map = chain.stages[1];
  const int64_t rows = red.rshape.outer, cols = red.rshape.reduce;
  if (red.kind != "reduce" || red.rshape.inner != 1 || red.out_numel != rows || red.source < 0 ||
      red.source >= chain.first_temp)
    return std::nullopt;
  if (map.kind != "elementwise" || map.expr.empty() || map.out_numel != rows * cols) return std::nullopt;
  const int temp = chain.first_temp;  // the reduction's result, as the elementwise stage reads it
  // Element i of the [rows, cols] result belongs to row i / cols: the index map of a value per row.
  auto per_row = [&](const IndexMap& m) { return (m.div == cols && m.mod == rows) || (rows == 1 && m.mod == 1); };

  KernelPlan f;
  f.kind = "row_map";
  f.out_shape = map.out_shape;
  f.out_numel = map.out_numel;
  f.source = red.source;
  f.rshape = red.rshape;
  f.reduce_op = red.reduce_op;
  // The reduction's epilogue first, its Acc the row's statistic and its leaves (read once per
  // row of the reduction's [rows] result) re-indexed against the [rows, cols] output.
  auto& nodes = f.expr.nodes;
  std::vector<int> moved(red.expr.nodes.size(), -1);
  for (size_t i = 0; i < red.expr.nodes.size(); ++i) {
    ExprNode n = red.expr.nodes[i];
    for (int& a : n.args) a = moved[static_cast<size_t>(a)];
    if (n.kind == ExprNode::Kind::Input || n.kind == ExprNode::Kind::Param) {
      if (n.kind == ExprNode::Kind::Input && n.tensor >= chain.first_temp) return std::nullopt;
      n.index.div *= cols;
    }
    moved[i] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(n));
  }
  int stat = red.expr.empty() ? -1 : moved[static_cast<size_t>(red.expr.root)];
  if (stat < 0) {
    ExprNode acc;
    acc.kind = ExprNode::Kind::Acc;
    stat = static_cast<int>(nodes.size());
    nodes.push_back(acc);
  }
  // Then the elementwise work, every read of the temporary replaced by the statistic.
  std::vector<int> mapped(map.expr.nodes.size(), -1);
  for (size_t i = 0; i < map.expr.nodes.size(); ++i) {
    ExprNode n = map.expr.nodes[i];
    if (n.kind == ExprNode::Kind::Acc) return std::nullopt;
    if (n.kind == ExprNode::Kind::Input && n.tensor == temp) {
      if (!per_row(n.index)) return std::nullopt;
      mapped[i] = stat;
      continue;
    }
    if (n.kind == ExprNode::Kind::Input && n.tensor > temp) return std::nullopt;
    for (int& a : n.args) a = mapped[static_cast<size_t>(a)];
    mapped[i] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(n));
  }
  f.expr.root = mapped[static_cast<size_t>(map.expr.root)];
  return f;
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
    bad.reason =
        "the problem has no graph.json (its module could not be traced, or it was written by hand without one)";
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
