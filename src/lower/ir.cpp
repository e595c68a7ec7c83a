// The IR's expression builders: small constant folding for index arithmetic, so that the index
// maps of views and broadcasts print as short expressions.
#include "mblast/lower/ir.h"

#include <stdexcept>

namespace mblast::lower {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::I64:
      return "i64";
    case DType::I32:
      return "i32";
    case DType::Bool:
      return "bool";
    case DType::U8:
      return "u8";
    case DType::I8:
      return "i8";
  }
  return "?";
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F64; }

DType dtype_from_name(const std::string& s) {
  if (s == "f32" || s == "float32" || s == "torch.float32") return DType::F32;
  if (s == "f64" || s == "float64" || s == "torch.float64") return DType::F64;
  if (s == "i64" || s == "int64" || s == "torch.int64") return DType::I64;
  if (s == "i32" || s == "int32" || s == "torch.int32") return DType::I32;
  if (s == "bool" || s == "torch.bool") return DType::Bool;
  if (s == "u8" || s == "uint8" || s == "torch.uint8") return DType::U8;
  if (s == "i8" || s == "int8" || s == "torch.int8") return DType::I8;
  throw std::runtime_error("dtype " + s + " is not supported by the lowering");
}

const char* reduce_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::None:
      return "none";
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::ArgMax:
      return "argmax";
    case ReduceOp::ArgMin:
      return "argmin";
  }
  return "?";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

namespace {
std::shared_ptr<Node> make(Node::Kind k, DType t) {
  auto n = std::make_shared<Node>();
  n->kind = k;
  n->dtype = t;
  return n;
}
}  // namespace

E fconst(double v, DType t) {
  auto n = make(Node::Kind::Const, t);
  if (is_float(t))
    n->fval = v;
  else
    n->ival = static_cast<int64_t>(v);
  return n;
}

E iconst(int64_t v, DType t) {
  auto n = make(Node::Kind::Const, t);
  if (is_float(t))
    n->fval = static_cast<double>(v);
  else
    n->ival = v;
  return n;
}

E var(int v) {
  auto n = make(Node::Kind::Var, DType::I64);
  n->var = v;
  return n;
}

E load(int tensor, std::vector<E> idx, DType t) {
  auto n = make(Node::Kind::Load, t);
  n->tensor = tensor;
  n->args = std::move(idx);
  return n;
}

bool is_comparison(const std::string& op) {
  return op == "eq" || op == "ne" || op == "lt" || op == "le" || op == "gt" || op == "ge" || op == "and" ||
         op == "or" || op == "xor";
}

E unary(const std::string& op, E a, DType t) {
  auto n = make(Node::Kind::Unary, t);
  n->op = op;
  n->args = {std::move(a)};
  return n;
}

E unary(const std::string& op, E a) {
  const DType t = (op == "not" || op == "isnan" || op == "isinf") ? DType::Bool : a->dtype;
  return unary(op, std::move(a), t);
}

bool is_const(const E& e, int64_t* v) {
  if (e->kind != Node::Kind::Const || is_float(e->dtype)) return false;
  if (v) *v = e->ival;
  return true;
}

E binary(const std::string& op, E a, E b, DType t) {
  int64_t x = 0, y = 0;
  const bool ints = !is_float(t) && t != DType::Bool;
  if (ints && is_const(a, &x) && is_const(b, &y)) {
    if (op == "add") return iconst(x + y, t);
    if (op == "sub") return iconst(x - y, t);
    if (op == "mul") return iconst(x * y, t);
    if (op == "floordiv" && y > 0) return iconst(x >= 0 ? x / y : -((-x + y - 1) / y), t);
    if (op == "mod" && y > 0) return iconst(((x % y) + y) % y, t);
  }
  if (ints) {
    if (op == "add" && is_const(a, &x) && x == 0) return b;
    if ((op == "add" || op == "sub") && is_const(b, &y) && y == 0) return a;
    if (op == "mul" && ((is_const(a, &x) && x == 0) || (is_const(b, &y) && y == 0))) return iconst(0, t);
    if (op == "mul" && is_const(a, &x) && x == 1) return b;
    if (op == "mul" && is_const(b, &y) && y == 1) return a;
    if (op == "floordiv" && is_const(b, &y) && y == 1) return a;
    if (op == "mod" && is_const(b, &y) && y == 1) return iconst(0, t);
  }
  auto n = make(Node::Kind::Binary, t);
  n->op = op;
  n->args = {std::move(a), std::move(b)};
  return n;
}

E binary(const std::string& op, E a, E b) {
  const DType t = is_comparison(op) ? DType::Bool : a->dtype;
  return binary(op, std::move(a), std::move(b), t);
}

E select(E c, E a, E b) {
  int64_t v = 0;
  if (c->kind == Node::Kind::Const && is_const(c, &v)) return v ? a : b;
  auto n = make(Node::Kind::Select, a->dtype);
  n->args = {std::move(c), std::move(a), std::move(b)};
  return n;
}

E cast(E a, DType t) {
  if (a->dtype == t) return a;
  if (a->kind == Node::Kind::Const) {
    if (is_float(t)) return fconst(is_float(a->dtype) ? a->fval : static_cast<double>(a->ival), t);
    if (t == DType::Bool) return iconst(is_float(a->dtype) ? a->fval != 0 : a->ival != 0, t);
    if (!is_float(a->dtype)) return iconst(a->ival, t);
  }
  auto n = make(Node::Kind::Cast, t);
  n->args = {std::move(a)};
  return n;
}

E add(E a, E b) { return binary("add", std::move(a), std::move(b), DType::I64); }
E sub(E a, E b) { return binary("sub", std::move(a), std::move(b), DType::I64); }
E mul(E a, E b) { return binary("mul", std::move(a), std::move(b), DType::I64); }
E floordiv(E a, E b) { return binary("floordiv", std::move(a), std::move(b), DType::I64); }
E mod(E a, E b) { return binary("mod", std::move(a), std::move(b), DType::I64); }
E lt(E a, E b) { return binary("lt", std::move(a), std::move(b), DType::Bool); }
E ge(E a, E b) { return binary("ge", std::move(a), std::move(b), DType::Bool); }
E land(E a, E b) {
  int64_t v = 0;
  if (is_const(a, &v) && v) return b;
  if (is_const(b, &v) && v) return a;
  return binary("and", std::move(a), std::move(b), DType::Bool);
}

int node_count(const E& e) {
  int n = 1;
  for (const auto& a : e->args) n += node_count(a);
  return n;
}

E rebuild(const E& e, std::vector<E> args) {
  switch (e->kind) {
    case Node::Kind::Load:
      return load(e->tensor, std::move(args), e->dtype);
    case Node::Kind::Unary:
      return unary(e->op, args[0], e->dtype);
    case Node::Kind::Binary:
      return binary(e->op, args[0], args[1], e->dtype);
    case Node::Kind::Select:
      return select(args[0], args[1], args[2]);
    case Node::Kind::Cast:
      return cast(args[0], e->dtype);
    default:
      return e;
  }
}

E substitute(const E& e, const std::vector<E>& subst) {
  if (e->kind == Node::Kind::Var)
    return e->var >= 0 && static_cast<size_t>(e->var) < subst.size() && subst[e->var] ? subst[e->var] : e;
  if (e->args.empty()) return e;
  std::vector<E> args;
  args.reserve(e->args.size());
  bool changed = false;
  for (const auto& a : e->args) {
    args.push_back(substitute(a, subst));
    changed = changed || args.back() != a;
  }
  return changed ? rebuild(e, std::move(args)) : e;
}

}  // namespace mblast::lower
