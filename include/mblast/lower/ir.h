// The lowering pipeline's IR (issue 39): tensors with dtypes and shapes, each computed tensor
// defined by one expression over its output index variables, optionally reduced over extra
// index variables. Loads take index expressions (affine, or data dependent for gathers), so
// views, permutes, broadcasts, slices, concatenations and padding are index maps, not copies;
// matmul, convolution and pooling are reductions whose bodies load through index maps.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mblast::lower {

enum class DType { F32, F64, I64, I32, Bool, U8, I8 };

const char* dtype_name(DType t);
bool is_float(DType t);
// "f32" -> F32; throws std::runtime_error on a name it does not know.
DType dtype_from_name(const std::string& s);

struct Node;
using E = std::shared_ptr<const Node>;

// One expression node. Integer index arithmetic uses the same nodes (dtype I64).
struct Node {
  enum class Kind { Const, Var, Load, Unary, Binary, Select, Cast };
  Kind kind = Kind::Const;
  DType dtype = DType::F32;
  double fval = 0;      // Const (float dtypes)
  int64_t ival = 0;     // Const (integer and bool dtypes)
  int var = -1;         // Var: the index variable's number
  int tensor = -1;      // Load: the tensor's id
  std::string op;       // Unary / Binary: the operation ("exp", "add", "lt", "floordiv", ...)
  std::vector<E> args;  // Load: one index per dimension; Unary 1, Binary 2, Select 3 (cond, a, b), Cast 1
};

// Builders (with constant folding of index arithmetic).
E fconst(double v, DType t = DType::F32);
E iconst(int64_t v, DType t = DType::I64);
E var(int v);
E load(int tensor, std::vector<E> idx, DType t);
E unary(const std::string& op, E a, DType t);
E unary(const std::string& op, E a);  // same dtype as a
E binary(const std::string& op, E a, E b, DType t);
E binary(const std::string& op, E a, E b);  // arithmetic: a's dtype; comparisons: Bool
E select(E c, E a, E b);
E cast(E a, DType t);
// Index helpers (I64).
E add(E a, E b);
E sub(E a, E b);
E mul(E a, E b);
E floordiv(E a, E b);
E mod(E a, E b);  // Python's modulo (non-negative for a positive divisor)
E lt(E a, E b);
E ge(E a, E b);
E land(E a, E b);

bool is_const(const E& e, int64_t* v = nullptr);
bool is_comparison(const std::string& op);
int node_count(const E& e);
// Every Var k replaced by subst[k] (vars beyond subst's size are kept).
E substitute(const E& e, const std::vector<E>& subst);
// Every Load of `tensor` replaced by fn(index expressions).
template <class F>
E replace_loads(const E& e, int tensor, F fn);

enum class ReduceOp { None, Sum, Prod, Max, Min, ArgMax, ArgMin };
const char* reduce_name(ReduceOp r);

struct Tensor {
  enum class Role { Input, Param, Computed };
  std::string name;  // the graph node's name, or the problem's tensor name for inputs/params
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  Role role = Role::Computed;
  int arg_index = -1;  // Input / Param: the position in the problem's inputs / parameters
  // Computed: body over vars 0..rank-1 (the output index) and, with a reduction, rank..rank+k-1
  // running over `reduce_extents`. ArgMax/ArgMin yield the linear index over the reduced vars.
  E body;
  ReduceOp reduce = ReduceOp::None;
  std::vector<int64_t> reduce_extents;
  // A scan (cumsum, cumprod) along this output dim: element i of a line is `reduce` over the body
  // at 0..i of that dim (reduce Sum or Prod, no reduce_extents). -1: not a scan.
  int scan_dim = -1;
  // The strides torch had for it when traced (graph.json "strides"); empty when unknown.
  std::vector<int64_t> traced_strides;
  // Bookkeeping for plan output: the aten op that produced it.
  std::string origin;
  // A step of a loop (Program::loops): dim 0 is the step. The loop's tensors are computed one
  // step at a time, each step's slices in the order the tensors were created, so a body may load
  // the loop's tensors at earlier steps (itself included) and those created before it at this one
  // (a recurrent layer's state). -1: computed at once.
  int loop = -1;
  int64_t numel() const;
};

// A host-side loop over the steps of its tensors' dim 0, in increasing order or, `reverse`,
// decreasing (a recurrent layer's backward direction).
struct Loop {
  int64_t steps = 0;
  bool reverse = false;
};

struct Program {
  // A deque: lowering functions hold references to tensors while they add more.
  std::deque<Tensor> tensors;
  std::vector<int> outputs;  // tensor ids, in the problem's output order
  std::vector<Loop> loops;   // Tensor::loop indexes these
  int add(Tensor t) {
    tensors.push_back(std::move(t));
    return static_cast<int>(tensors.size()) - 1;
  }
};

// ---- implementation of the template ----
E rebuild(const E& e, std::vector<E> args);
template <class F>
E replace_loads(const E& e, int tensor, F fn) {
  if (e->args.empty()) return e;
  std::vector<E> args;
  args.reserve(e->args.size());
  bool changed = false;
  for (const auto& a : e->args) {
    args.push_back(replace_loads(a, tensor, fn));
    changed = changed || args.back() != a;
  }
  if (e->kind == Node::Kind::Load && e->tensor == tensor) return fn(args);
  return changed ? rebuild(e, std::move(args)) : e;
}

}  // namespace mblast::lower
