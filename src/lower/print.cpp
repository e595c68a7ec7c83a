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
      case DType::F32:
        return "float";
      case DType::F64:
        return "double";
      case DType::I64:
        return i64;
      case DType::I32:
        return "int";
      case DType::Bool:
        return "int";
      case DType::U8:
        return "int";
      case DType::I8:
        return "int";
    }
    return "float";
  };
  d.storage = [i64, u8](DType t) -> std::string {
    switch (t) {
      case DType::F32:
        return "float";
      case DType::F64:
        return "double";
      case DType::I64:
        return i64;
      case DType::I32:
        return "int";
      case DType::Bool:
        return u8;
      case DType::U8:
        return u8;
      case DType::I8:
        return "signed char";
    }
    return "float";
  };
  return d;
}

bool nonneg(const E& e) {
  switch (e->kind) {
    case Node::Kind::Var:
      return true;
    case Node::Kind::Const:
      return !is_float(e->dtype) && e->ival >= 0;
    case Node::Kind::Binary:
      if (e->op == "add" || e->op == "mul" || e->op == "floordiv" || e->op == "mod")
        return nonneg(e->args[0]) && nonneg(e->args[1]);
      if (e->op == "min") return nonneg(e->args[0]) && nonneg(e->args[1]);
      if (e->op == "max") return nonneg(e->args[0]) || nonneg(e->args[1]);
      return false;
    case Node::Kind::Select:
      return nonneg(e->args[1]) && nonneg(e->args[2]);
    default:
      return false;
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
        if (e->dtype == DType::I64)
          return e->ival < 0 ? fmt::format("(({}){})", ty(DType::I64), e->ival) : std::to_string(e->ival);
        return e->ival < 0 ? "(" + std::to_string(e->ival) + ")" : std::to_string(e->ival);
      case Node::Kind::Var:
        return var_name(e->var);
      case Node::Kind::Load: {
        const auto& buf = s.buffer[static_cast<size_t>(e->tensor)];
        if (buf.empty())
          throw std::logic_error("load of an inlined tensor " + s.program.tensors[static_cast<size_t>(e->tensor)].name);
        return fmt::format("{}[{}]", buf, buffer_index(e));
      }
      case Node::Kind::Cast: {
        const DType from = e->args[0]->dtype;
        if (e->dtype == DType::Bool) return fmt::format("({} != 0)", p(e->args[0]));
        if (!is_float(e->dtype) && is_float(from))  // torch truncates toward zero; out of range is undefined there too
          return fmt::format("(({}){})", ty(e->dtype), p(e->args[0]));
        return fmt::format("(({}){})", ty(e->dtype), p(e->args[0]));
      }
      case Node::Kind::Select:
        return fmt::format("({} ? {} : {})", p(e->args[0]), p(e->args[1]), p(e->args[2]));
      case Node::Kind::Unary:
        return unary_text(e);
      case Node::Kind::Binary:
        return binary_text(e);
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
    static const std::map<std::string, std::string> infix = {{"add", "+"}, {"sub", "-"},  {"mul", "*"},  {"eq", "=="},
                                                             {"ne", "!="}, {"lt", "<"},   {"le", "<="},  {"gt", ">"},
                                                             {"ge", ">="}, {"and", "&&"}, {"or", "||"},  {"band", "&"},
                                                             {"bor", "|"}, {"bxor", "^"}, {"shl", "<<"}, {"shr", ">>"}};
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
    if (op == "fmod")
      return is_float(t) ? fmt::format("{}({}, {})", fn("fmod", t), x, y) : fmt::format("({} % {})", x, y);
    if (op == "max" || op == "min")
      return fmt::format("mb_{}_{}({}, {})", op, is_float(t) ? dtype_name(t) : "i64", x, y);
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

std::string print_expr(const E& e, const Schedule& s, const Dialect& d,
                       const std::function<std::string(int)>& var_name) {
  return Printer{s, d, var_name}.p(e);
}

namespace {

std::string init_of(ReduceOp r, DType at, const Dialect& d) {
  switch (r) {
    case ReduceOp::Sum:
      return is_float(at) ? float_literal(0, at) : "0";
    case ReduceOp::Prod:
      return is_float(at) ? float_literal(1, at) : "1";
    case ReduceOp::Max:
    case ReduceOp::ArgMax:
      if (is_float(at)) return float_literal(-HUGE_VAL, at);
      if (at == DType::Bool) return "0";
      if (r == ReduceOp::ArgMax && d.name == "opencl") return "LONG_MIN";
      return "(" + d.type(at) + ")(-9223372036854775807LL - 1)";
    case ReduceOp::Min:
    case ReduceOp::ArgMin:
      if (is_float(at)) return float_literal(HUGE_VAL, at);
      if (at == DType::Bool) return "1";
      if (r == ReduceOp::ArgMin && d.name == "opencl") return "LONG_MAX";
      return "(" + d.type(at) + ")9223372036854775807LL";
    default:
      return "0";
  }
}

// `acc` updated with the value `v` (an expression or a name).
std::string update(ReduceOp r, const std::string& acc, const std::string& v, bool fl) {
  switch (r) {
    case ReduceOp::Sum:
      return fmt::format("{} += {};", acc, v);
    case ReduceOp::Prod:
      return fmt::format("{} *= {};", acc, v);
    // NaN wins and stays (torch's max / min propagate it).
    case ReduceOp::Max:
      return fmt::format("if ({1} > {0}{2}) {0} = {1};", acc, v, fl ? " || isnan(" + v + ")" : "");
    case ReduceOp::Min:
      return fmt::format("if ({1} < {0}{2}) {0} = {1};", acc, v, fl ? " || isnan(" + v + ")" : "");
    default:
      return "";
  }
}

// Declarations of the output index variables i0.. from the work item's number `gid`, last dim
// fastest; dim `skip` is left out (a scan's), dim v steps by step[v] (a tile's base).
std::string decompose(const Tensor& t, const std::string& it, const std::string& gid, const std::string& in, int skip,
                      const std::vector<int>& step) {
  const int rank = static_cast<int>(t.shape.size());
  std::vector<int> dims;
  for (int v = 0; v < rank; ++v)
    if (v != skip) dims.push_back(v);
  if (dims.empty()) return "";
  std::string o = fmt::format("{}{} rest = {};\n", in, it, gid);
  for (size_t q = dims.size(); q-- > 0;) {
    const int v = dims[q];
    const int64_t n = t.shape[static_cast<size_t>(v)] / step[static_cast<size_t>(v)];
    const int sv = step[static_cast<size_t>(v)];
    const std::string scale = sv > 1 ? fmt::format(" * {}", sv) : "";
    if (q == 0)
      o += fmt::format("{}const {} i{} = rest{};\n", in, it, v, scale);
    else {
      o += fmt::format("{}const {} i{} = (rest % {}){};\n", in, it, v, n, scale);
      o += fmt::format("{}rest /= {};\n", in, n);
    }
  }
  return o;
}

// The linear element index of the output at i0.. with dim `a` offset by `da`, dim `b` by `db`.
std::string linear(const Tensor& t, int a, int da, int b, int db) {
  std::string o;
  int64_t stride = 1;
  for (int v = static_cast<int>(t.shape.size()); v-- > 0;) {
    std::string term = "i" + std::to_string(v);
    const int off = (v == a ? da : 0) + (v == b ? db : 0);
    if (off) term = fmt::format("({} + {})", term, off);
    if (stride != 1) term = fmt::format("{} * {}", term, stride);
    o = o.empty() ? term : term + " + " + o;
    stride *= t.shape[static_cast<size_t>(v)];
  }
  return o.empty() ? "0" : o;
}

}  // namespace

std::string kernel_body(const Schedule& s, const Kernel& k, const Dialect& d, const std::string& gid,
                        const std::string& in) {
  const auto& t = s.program.tensors[static_cast<size_t>(k.tensor)];
  const int rank = static_cast<int>(t.shape.size());
  const std::string it = d.type(DType::I64);
  auto name = [rank](int v) { return v < rank ? "i" + std::to_string(v) : "r" + std::to_string(v - rank); };
  const Printer pr{s, d, name};
  const std::string buf = s.buffer[static_cast<size_t>(k.tensor)];
  const std::string st = d.storage(t.dtype);
  const DType vt = k.body->dtype;
  const bool fl = is_float(vt);
  std::string o;
  if (k.scan_dim >= 0) {
    // One line per work item, walked in order; each element stores the running value.
    const int sd = k.scan_dim;
    o += decompose(t, it, gid, in, sd, std::vector<int>(static_cast<size_t>(rank), 1));
    o += fmt::format("{}{} acc = {};\n", in, d.type(k.acc), init_of(k.reduce, k.acc, d));
    o += fmt::format("{}for ({} i{} = 0; i{} < {}; ++i{}) {{\n", in, it, sd, sd, t.shape[static_cast<size_t>(sd)], sd);
    o += fmt::format("{}  {}\n", in, update(k.reduce, "acc", fmt::format("({})({})", d.type(k.acc), pr.p(k.body)), fl));
    o += fmt::format("{}  {}[{}] = ({})acc;\n", in, buf, linear(t, -1, 0, -1, 0), st);
    o += in + "}\n";
    return o;
  }
  std::vector<int> step(static_cast<size_t>(rank), 1);
  const bool out_lanes = k.lane_var >= 0 && k.lane_var < rank;
  if (out_lanes) step[static_cast<size_t>(k.lane_var)] = k.lanes;
  if (k.block_var >= 0) step[static_cast<size_t>(k.block_var)] = k.block;
  o += decompose(t, it, gid, in, -1, step);
  if (k.reduce == ReduceOp::None) {
    o += fmt::format("{}{}[{}] = ({})({});\n", in, buf, gid, st, pr.p(k.body));
    return o;
  }
  const bool arg = k.reduce == ReduceOp::ArgMax || k.reduce == ReduceOp::ArgMin;
  const DType at = arg ? vt : k.acc;
  const int nred = static_cast<int>(k.reduce_extents.size());
  if (arg) {
    o += fmt::format("{}{} acc = {};\n", in, d.type(at), init_of(k.reduce, at, d));
    o += fmt::format("{}{} best = 0;\n", in, it);
    std::string ind = in;
    for (int r = 0; r < nred; ++r) {
      const int64_t e = k.reduce_extents[static_cast<size_t>(r)];
      o += fmt::format("{}for ({} r{} = 0; r{} < {}; ++r{}) {{\n", ind, it, r, r, e, r);
      ind += "  ";
    }
    o += fmt::format("{}const {} v = {};\n", ind, d.type(vt), pr.p(k.body));
    std::string lin = "r0";
    for (int r = 1; r < nred; ++r)
      lin = fmt::format("({} * {} + r{})", lin, k.reduce_extents[static_cast<size_t>(r)], r);
    const char* cmp = k.reduce == ReduceOp::ArgMax ? ">" : "<";
    // The first extreme wins; a NaN is the extreme (torch's rule), the first NaN kept.
    if (fl)
      o += fmt::format("{}if (!isnan(acc) && (v {} acc || isnan(v) || ({} == 0))) {{ acc = v; best = {}; }}\n", ind,
                       cmp, lin, lin);
    else
      o += fmt::format("{}if (v {} acc || {} == 0) {{ acc = v; best = {}; }}\n", ind, cmp, lin, lin);
    for (int r = nred; r-- > 0;) {
      ind.resize(ind.size() - 2);
      o += ind + "}\n";
    }
    o += fmt::format("{}{}[{}] = ({})best;\n", in, buf, gid, st);
    return o;
  }
  // A tile of block x lanes independent accumulators acc<b>_<l>; each copy of the body reads
  // the block variable at +b and the lane variable at +l.
  const int B = k.block_var >= 0 ? k.block : 1, L = k.lane_var >= 0 ? k.lanes : 1;
  for (int b = 0; b < B; ++b)
    for (int l = 0; l < L; ++l)
      o += fmt::format("{}{} acc{}_{} = {};\n", in, d.type(at), b, l, init_of(k.reduce, at, d));
  std::string ind = in;
  for (int r = 0; r < nred; ++r) {
    const bool lane_here = k.lane_var == rank + r;
    const int64_t e = k.reduce_extents[static_cast<size_t>(r)];
    o += fmt::format("{}for ({} r{} = 0; r{} < {}; r{} += {}) {{\n", ind, it, r, r, e, r, lane_here ? L : 1);
    ind += "  ";
  }
  for (int b = 0; b < B; ++b)
    for (int l = 0; l < L; ++l) {
      auto copy_name = [&](int v) {
        std::string n = name(v);
        const int off = (v == k.lane_var ? l : 0) + (v == k.block_var ? b : 0);
        return off ? fmt::format("({} + {})", n, off) : n;
      };
      const Printer pc{s, d, copy_name};
      o += fmt::format("{}{{ const {} v = ({})({}); {} }}\n", ind, d.type(at), d.type(at), pc.p(k.body),
                       update(k.reduce, fmt::format("acc{}_{}", b, l), "v", fl));
    }
  for (int r = nred; r-- > 0;) {
    ind.resize(ind.size() - 2);
    o += ind + "}\n";
  }
  if (B == 1 && L == 1) {
    // One output per work item: its linear index is the work item's (a store the compiler sees
    // as consecutive across work items).
    o += fmt::format("{}{}[{}] = ({})acc0_0;\n", in, buf, gid, st);
    return o;
  }
  for (int b = 0; b < B; ++b) {
    if (out_lanes || L == 1) {
      for (int l = 0; l < L; ++l)
        o += fmt::format("{}{}[{}] = ({})acc{}_{};\n", in, buf,
                         linear(t, k.lane_var, out_lanes ? l : 0, k.block_var, b), st, b, l);
      continue;
    }
    // Partial accumulators of the reduction lanes combined pairwise.
    for (int w = 1; w < L; w *= 2)
      for (int l = 0; l + w < L; l += 2 * w) {
        const std::string a = fmt::format("acc{}_{}", b, l), c = fmt::format("acc{}_{}", b, l + w);
        o += fmt::format("{}{}\n", in, update(k.reduce, a, c, fl));
      }
    o += fmt::format("{}{}[{}] = ({})acc{}_0;\n", in, buf, linear(t, -1, 0, k.block_var, b), st, b);
  }
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
  s += fmt::format(
      "{0} {1} mb_floordiv({1} a, {1} b) {{ const {1} q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : "
      "q; }}\n",
      q, i);
  s += fmt::format(
      "{0} {1} mb_mod({1} a, {1} b) {{ const {1} r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }}\n",
      q, i);
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
