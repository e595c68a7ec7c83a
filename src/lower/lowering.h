// Internal to src/lower: the context one aten node is lowered in, and the per-family tables.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/lower/ir.h"

namespace mblast::lower {

// The value of a graph node or of an argument: a tensor, a scalar, a list, or nothing.
struct Val {
  enum class Kind { None, Tensor, Scalar, List } kind = Kind::None;
  int t = -1;
  E s;
  std::vector<Val> items;
  static Val tensor(int id) {
    Val v;
    v.kind = Kind::Tensor;
    v.t = id;
    return v;
  }
  static Val scalar(E e) {
    Val v;
    v.kind = Kind::Scalar;
    v.s = std::move(e);
    return v;
  }
  static Val list(std::vector<Val> items) {
    Val v;
    v.kind = Kind::List;
    v.items = std::move(items);
    return v;
  }
};

// A reason the node cannot be lowered (the message is one line, without the node's name).
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Ctx {
  Program& p;
  const nlohmann::json& node;
  std::map<std::string, Val>& values;

  // Arguments by position, else by keyword, else `fallback`.
  Val arg(size_t i, const char* kw = nullptr) const;
  bool has(size_t i, const char* kw = nullptr) const;
  const nlohmann::json& raw(size_t i, const char* kw = nullptr) const;  // null when absent
  int64_t int_arg(size_t i, const char* kw, int64_t fallback) const;
  double num_arg(size_t i, const char* kw, double fallback) const;
  bool bool_arg(size_t i, const char* kw, bool fallback) const;
  std::vector<int64_t> ints_arg(size_t i, const char* kw, std::vector<int64_t> fallback = {}) const;
  int tensor_arg(size_t i, const char* kw = nullptr) const;  // throws Unsupported when not a tensor

  // What the node produces, from the traced metadata (output `k` of a multi-output node).
  std::vector<int64_t> shape(int k = -1) const;
  DType dtype(int k = -1) const;

  const Tensor& T(int id) const { return p.tensors[static_cast<size_t>(id)]; }
  int rank(int id) const { return static_cast<int>(T(id).shape.size()); }
  // A computed tensor named after this node.
  int compute(std::vector<int64_t> shape, DType t, E body, ReduceOp r = ReduceOp::None,
              std::vector<int64_t> extents = {}, const std::string& suffix = "") const;
  // A tensor operand read at the output index `idx` of a tensor of rank idx.size(), with
  // numpy broadcasting (right-aligned; dims of size 1 read index 0); a scalar as itself.
  E at(const Val& v, const std::vector<E>& idx) const;
  E at(int t, const std::vector<E>& idx) const { return at(Val::tensor(t), idx); }
  std::string name() const;
};

// "aten.add.Tensor" -> "add"; "_operator.getitem" -> "getitem"; "mblast.rnn.default" -> "mblast.rnn".
std::string op_key(const std::string& target);
// An op whose result shares its argument's storage (select, slice, permute, view, ...): by op_key.
bool is_view_op(const std::string& key);
std::vector<E> out_vars(size_t rank);         // Var 0..rank-1
int norm_dim(int64_t d, int rank);            // a negative dim counted from the end
DType promote(const std::vector<DType>& ts);  // the wider of float / integer / bool

using LowerFn = std::function<Val(Ctx&)>;
using Table = std::map<std::string, LowerFn>;
void add_pointwise(Table& t);
void add_shape(Table& t);
void add_reduce(Table& t);
void add_linalg(Table& t);     // matmul, convolution, pooling, normalisation, resize
void add_recurrent(Table& t);  // mblast.rnn: RNN, LSTM and GRU stacks as loops over the steps

// Reduction helper: `body_at(idx)` gives the value at the input index `idx` (rank of x); reduces
// over `dims` of the input `shape`, keeping them as size-1 dims when `keepdim`.
int reduce_dims(const Ctx& c, const std::vector<int64_t>& in_shape, std::vector<int64_t> dims, bool keepdim,
                ReduceOp op, DType out, const std::function<E(const std::vector<E>&)>& body_at,
                const std::string& suffix = "");

}  // namespace mblast::lower
