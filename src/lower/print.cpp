// The C-like printer every dialect shares: expressions (OpenCL C, CUDA C++ and C agree on
// operators and ternaries; they differ in type names and in the float math functions' names)
// and the body of a kernel for one output element: index decomposition, reduction loops, store.
#include <cmath>
#include <cstdio>
#include <set>

#include <fmt/format.h>

#include "mblast/lower/lower.h"

namespace mblast::lower {

namespace {

Dialect make(const std::string& name, const std::string& i64, const std::string& u8, bool suffix) {
  Dialect d;
  d.name = name;
  d.float_suffix_functions = suffix;
  d.type = [i64](DType t) -> std::string {
    switch (t) {
      case DType::F32: return "float";
      case DType::F64: return "double";
      case DType::I64: return i64;
      case DType::I32: return "int";
      case DType::Bool: return "int";
      case DType::U8: return "int";
      case DType::I8: return "int";
    }
    return "float";
  };
  d.storage = [i64, u8](DType t) -> std::string {
    switch (t) {
      case DType::F32: return "float";
      case DType::F64: return "double";
      case DType::I64: return i64;
      case DType::I32: return "int";
      case DType::Bool: return u8;
      case DType::U8: return u8;
      case DType::I8: return "signed char";
    }
    return "float";
  };
  return d;
}

bool nonneg(const E& e) {
  switch (e->kind) {
    case Node::Kind::Var: return true;
    case Node::Kind::Const: return !is_float(e->dtype) && e->ival >= 0;
    case Node::Kind::Binary:
      if (e->op == "add" || e->op == "mul" || e->op == "floordiv" || e->op == "mod") return nonneg(e->args[0]) && nonneg(e->args[1]);
      if (e->op == "min") return nonneg(e->args[0]) && nonneg(e->args[1]);
      if (e->op == "max") return nonneg(e->args[0]) || nonneg(e->args[1]);
      return false;
    case Node::Kind::Select: return nonneg(e->args[1]) && nonneg(e->args[2]);
    default: return false;
  }
}

std::string float_literal(double v, DType t) {
  if (std::isnan(v)) return t == DType::F32 ? "NAN" : "((double)NAN)";
  if (std::isinf(v)) return std::string(v < 0 ? "(-" : "(") + (t == DType::F32 ? "INFINITY)" : "((double)INFINITY))");
  char buf[64];
  std::snprintf(buf, sizeof buf, t == DType::F32 ? "%.9g" : "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  if (t == DType::F32) s += "f";
  return v < 0 ? "(" + s + ")" : s;
}

struct Printer {
  const Schedule& s;
  const Dialect& d;
  const std::function<std::string(int)>& var_name;

  std::string fn(const std::string& name, DType t) const {
    if (t == DType::F32 && d.float_suffix_functions) return name + "f";
    return name;
  }
  std::string ty(DType t) const { return d.type(t); }

  std::string buffer_index(const E& e) const {
    const auto& t = s.program.tensors[static_cast<size_t>(e->tensor)];
    E lin = iconst(0);
    int64_t stride = 1;
    for (size_t k = t.shape.size(); k-- > 0;) {
      if (k < e->args.size()) lin = add(lin, mul(e->args[k], iconst(stride)));
      stride *= t.shape[k];
    }
    return p(lin);
  }

  std::string p(const E& e) const {
    switch (e->kind) {
      case Node::Kind::Const:
        if (is_float(e->dtype)) return float_literal(e->fval, e->dtype);
        if (e->dtype == DType::I64) return e->ival < 0 ? fmt::format("(({}){})", ty(DType::I64), e->ival) : std::to_string(e->ival);
        return e->ival < 0 ? "(" + std::to_string(e->ival) + ")" : std::to_string(e->ival);
      case Node::Kind::Var: return var_name(e->var);
      case Node::Kind::Load: {
        const auto& buf = s.buffer[static_cast<size_t>(e->tensor)];
        if (buf.empty()) throw std::logic_error("load of an inlined tensor " + s.program.tensors[static_cast<size_t>(e->tensor)].name);
        return fmt::format("{}[{}]", buf, buffer_index(e));
      }
      case Node::Kind::Cast: {
        const DType from = e->args[0]->dtype;
        if (e->dtype == DType::Bool) return fmt::format("({} != 0)", p(e->args[0]));
        if (!is_float(e->dtype) && is_float(from))  // torch truncates toward zero; out of range is undefined there too
          return fmt::format("(({}){})", ty(e->dtype), p(e->args[0]));
        return fmt::format("(({}){})", ty(e->dtype), p(e->args[0]));
      }
      case Node::Kind::Select: return fmt::format("({} ? {} : {})", p(e->args[0]), p(e->args[1]), p(e->args[2]));
      case Node::Kind::Unary: return unary_text(e);
      case Node::Kind::Binary: return binary_text(e);
    }
    return "0";
  }

  std::string unary_text(const E& e) const {
    const auto& op = e->op;
    const E& a = e->args[0];
    const DType t = a->dtype;
    const std::string x = p(a);
    if (op == "neg") return "(-" + x + ")";
    if (op == "not") return "(!" + x + ")";
    if (op == "bnot") return "(~" + x + ")";
    if (op == "reciprocal") return fmt::format("({} / {})", float_literal(1, e->dtype), x);
    if (op == "rsqrt") return fmt::format("({} / {}({}))", float_literal(1, e->dtype), fn("sqrt", t), x);
    if (op == "sign") return fmt::format("(({})(({} > 0) - ({} < 0)))", ty(e->dtype), x, x);
    if (!is_float(t)) {
      if (op == "abs") return fmt::format("({0} < 0 ? -{0} : {0})", x);
      if (op == "floor" || op == "ceil" || op == "trunc" || op == "rint") return x;
      if (op == "isnan" || op == "isinf") return "0";
      return fmt::format("(({}){}((double){}))", ty(e->dtype), op, x);
    }
    if (op == "isnan" || op == "isinf") return fmt::format("({}({}) != 0)", op, x);
    if (op == "abs") return fmt::format("{}({})", fn("fabs", t), x);
    return fmt::format("{}({})", fn(op, t), x);
  }

  std::string binary_text(const E& e) const {
    const auto& op = e->op;
    const E& a = e->args[0];
    const E& b = e->args[1];
    const DType t = a->dtype;
    const std::string x = p(a), y = p(b);
    static const std::map<std::string, std::string> infix = {
        {"add", "+"}, {"sub", "-"}, {"mul", "*"},  {"eq", "=="}, {"ne", "!="}, {"lt", "<"},  {"le", "<="}, {"gt", ">"},
        {"ge", ">="}, {"and", "&&"}, {"or", "||"}, {"band", "&"}, {"bor", "|"}, {"bxor", "^"}, {"shl", "<<"}, {"shr", ">>"}};
    if (auto it = infix.find(op); it != infix.end()) return fmt::format("({} {} {})", x, it->second, y);
    if (op == "xor") return fmt::format("(({} != 0) != ({} != 0))", x, y);
    if (op == "div") {
      if (is_float(e->dtype)) return fmt::format("({} / {})", x, y);
      return fmt::format("mb_floordiv({}, {})", x, y);
    }
    if (op == "idiv") return fmt::format("({} / {})", x, y);
    if (op == "floordiv") {
      if (nonneg(a) && nonneg(b)) return fmt::format("({} / {})", x, y);
      return fmt::format("mb_floordiv({}, {})", x, y);
    }
    if (op == "mod" || (op == "remainder" && !is_float(t))) {
      if (nonneg(a) && nonneg(b)) return fmt::format("({} % {})", x, y);
      return fmt::format("mb_mod({}, {})", x, y);
    }
    if (op == "remainder") return fmt::format("mb_remainder_{}({}, {})", dtype_name(t), x, y);
    if (op == "fmod") return is_float(t) ? fmt::format("{}({}, {})", fn("fmod", t), x, y) : fmt::format("({} % {})", x, y);
    if (op == "max" || op == "min") return fmt::format("mb_{}_{}({}, {})", op, is_float(t) ? dtype_name(t) : "i64", x, y);
    if (op == "pow") {
      if (!is_float(e->dtype)) return fmt::format("(({})pow((double){}, (double){}))", ty(e->dtype), x, y);
      return fmt::format("{}({}, {})", fn("pow", e->dtype), x, y);
    }
    if (op == "atan2" || op == "copysign") return fmt::format("{}({}, {})", fn(op, e->dtype), x, y);
    throw std::logic_error("no printing for binary op " + op);
  }
};

}  // namespace

const Dialect& c_dialect() {
  static const Dialect d = make("c", "int64_t", "unsigned char", true);
  return d;
}
const Dialect& cuda_dialect() {
  static const Dialect d = make("cuda", "long long", "unsigned char", true);
  return d;
}
const Dialect& opencl_dialect() {
  static const Dialect d = make("opencl", "long", "uchar", false);
  return d;
}

std::string print_expr(const E& e, const Schedule& s, const Dialect& d, const std::function<std::string(int)>& var_name) {
  return Printer{s, d, var_name}.p(e);
}

std::string kernel_body(const Schedule& s, const Kernel& k, const Dialect& d, const std::string& gid, const std::string& in) {
  const auto& t = s.program.tensors[static_cast<size_t>(k.tensor)];
  const int rank = static_cast<int>(t.shape.size());
  const std::string it = d.type(DType::I64);
  auto name = [rank](int v) { return v < rank ? "i" + std::to_string(v) : "r" + std::to_string(v - rank); };
  const Printer pr{s, d, name};
  std::string o;
  // The output index from the linear one, last dim fastest.
  if (rank > 0) {
    o += fmt::format("{}{} rest = {};\n", in, it, gid);
    for (int v = rank - 1; v >= 0; --v) {
      const int64_t n = t.shape[static_cast<size_t>(v)];
      if (v == 0) o += fmt::format("{}const {} i0 = rest;\n", in, it);
      else {
        o += fmt::format("{}const {} i{} = rest % {};\n", in, it, v, n);
        o += fmt::format("{}rest /= {};\n", in, n);
      }
    }
  }
  const std::string store = fmt::format("{}[{}]", s.buffer[static_cast<size_t>(k.tensor)], gid);
  const std::string st = d.storage(t.dtype);
  if (k.reduce == ReduceOp::None) {
    o += fmt::format("{}{} = ({})({});\n", in, store, st, pr.p(k.body));
    return o;
  }
  const DType vt = k.body->dtype;
  // Float sums and products accumulate in double: the result then stays within the
  // reference's own rounding whatever the reduction's length (a schedule choice to revisit
  // with tiled, pairwise reductions).
  const bool arg = k.reduce == ReduceOp::ArgMax || k.reduce == ReduceOp::ArgMin;
  DType at = vt;
  if ((k.reduce == ReduceOp::Sum || k.reduce == ReduceOp::Prod) && vt == DType::F32) at = DType::F64;
  if ((k.reduce == ReduceOp::Sum || k.reduce == ReduceOp::Prod) && !is_float(vt)) at = DType::I64;
  std::string init;
  switch (k.reduce) {
    case ReduceOp::Sum: init = is_float(at) ? float_literal(0, at) : "0"; break;
    case ReduceOp::Prod: init = is_float(at) ? float_literal(1, at) : "1"; break;
    case ReduceOp::Max:
    case ReduceOp::ArgMax: init = is_float(at) ? float_literal(-HUGE_VAL, at) : (at == DType::Bool ? "0" : "(" + d.type(at) + ")(-9223372036854775807LL - 1)"); break;
    case ReduceOp::Min:
    case ReduceOp::ArgMin: init = is_float(at) ? float_literal(HUGE_VAL, at) : (at == DType::Bool ? "1" : "(" + d.type(at) + ")9223372036854775807LL"); break;
    default: break;
  }
  if (arg && !is_float(at) && d.name == "opencl") init = k.reduce == ReduceOp::ArgMax ? "LONG_MIN" : "LONG_MAX";
  o += fmt::format("{}{} acc = {};\n", in, d.type(at), init);
  if (arg) o += fmt::format("{}{} best = 0;\n", in, it);
  std::string ind = in;
  const int nred = static_cast<int>(k.reduce_extents.size());
  for (int r = 0; r < nred; ++r) {
    o += fmt::format("{}for ({} r{} = 0; r{} < {}; ++r{}) {{\n", ind, it, r, r, k.reduce_extents[static_cast<size_t>(r)], r);
    ind += "  ";
  }
  o += fmt::format("{}const {} v = {};\n", ind, d.type(vt), pr.p(k.body));
  const bool fl = is_float(vt);
  switch (k.reduce) {
    case ReduceOp::Sum: o += fmt::format("{}acc += v;\n", ind); break;
    case ReduceOp::Prod: o += fmt::format("{}acc *= v;\n", ind); break;
    case ReduceOp::Max: o += fmt::format("{}if (v > acc{}) acc = v;\n", ind, fl ? " || isnan(v)" : ""); break;
    case ReduceOp::Min: o += fmt::format("{}if (v < acc{}) acc = v;\n", ind, fl ? " || isnan(v)" : ""); break;
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin: {
      std::string lin = "r0";
      for (int r = 1; r < nred; ++r) lin = fmt::format("({} * {} + r{})", lin, k.reduce_extents[static_cast<size_t>(r)], r);
      const char* cmp = k.reduce == ReduceOp::ArgMax ? ">" : "<";
      // The first extreme wins; a NaN is the extreme (torch's rule), the first NaN kept.
      if (fl)
        o += fmt::format("{}if (!isnan(acc) && (v {} acc || isnan(v) || ({} == 0))) {{ acc = v; best = {}; }}\n", ind, cmp, lin, lin);
      else
        o += fmt::format("{}if (v {} acc || {} == 0) {{ acc = v; best = {}; }}\n", ind, cmp, lin, lin);
      break;
    }
    default: break;
  }
  for (int r = nred; r-- > 0;) {
    ind.resize(ind.size() - 2);
    o += ind + "}\n";
  }
  o += fmt::format("{}{} = ({})({});\n", in, store, st, arg ? "best" : "acc");
  return o;
}

namespace {
void collect(const E& e, const Schedule& s, std::set<std::string>& out) {
  if (e->kind == Node::Kind::Load) out.insert(s.buffer[static_cast<size_t>(e->tensor)]);
  for (const auto& a : e->args) collect(a, s, out);
}
}  // namespace

std::vector<std::string> kernel_reads(const Schedule& s, const Kernel& k) {
  std::set<std::string> b;
  collect(k.body, s, b);
  b.erase(s.buffer[static_cast<size_t>(k.tensor)]);
  return {b.begin(), b.end()};
}

}  // namespace mblast::lower

namespace mblast::lower {

std::string helper_functions(const Dialect& d, const std::string& q) {
  const std::string i = d.type(DType::I64);
  std::string s;
  s += fmt::format("{0} {1} mb_floordiv({1} a, {1} b) {{ const {1} q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }}\n", q, i);
  s += fmt::format("{0} {1} mb_mod({1} a, {1} b) {{ const {1} r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }}\n", q, i);
  s += fmt::format("{0} {1} mb_max_i64({1} a, {1} b) {{ return a > b ? a : b; }}\n", q, i);
  s += fmt::format("{0} {1} mb_min_i64({1} a, {1} b) {{ return a < b ? a : b; }}\n", q, i);
  for (const char* t : {"float", "double"}) {
    const std::string n = std::string(t) == "float" ? "f32" : "f64";
    const std::string f = std::string(t) == "float" && d.float_suffix_functions ? "floorf" : "floor";
    // NaN propagates (torch.maximum / minimum, relu of NaN).
    s += fmt::format("{0} {1} mb_max_{2}({1} a, {1} b) {{ return (a != a || a > b) ? a : b; }}\n", q, t, n);
    s += fmt::format("{0} {1} mb_min_{2}({1} a, {1} b) {{ return (a != a || a < b) ? a : b; }}\n", q, t, n);
    s += fmt::format("{0} {1} mb_remainder_{2}({1} a, {1} b) {{ return a - {3}(a / b) * b; }}\n", q, t, n, f);
  }
  return s;
}

}  // namespace mblast::lower
