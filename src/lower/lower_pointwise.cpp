// Pointwise aten ops: unary math, binary arithmetic and comparisons, where / masked_fill /
// clamp, casts and copies, activations the decomposition table leaves whole, and tensor
// creation (full, arange). Each is one computed tensor whose body loads its operands with
// broadcasting; the scheduler inlines it into whatever reads it.
#include <cmath>

#include "lowering.h"

namespace mblast::lower {

namespace {

// Operands read at the node's output index, in dtype `t` (nullptr: as they are).
Val pointwise(Ctx& c, const std::vector<Val>& ops, const std::function<E(std::vector<E>&)>& fn, DType compute) {
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  std::vector<E> xs;
  for (const auto& o : ops) xs.push_back(cast(c.at(o, idx), compute));
  return Val::tensor(c.compute(shape, c.dtype(), fn(xs)));
}

DType operand_type(const Ctx& c, const Val& v) {
  if (v.kind == Val::Kind::Tensor) return c.T(v.t).dtype;
  if (v.kind == Val::Kind::Scalar) return v.s->dtype;
  return DType::F32;
}

// The type arithmetic runs in: the result's, unless it is bool (a comparison): then the operands'
// common type, where a scalar does not widen a tensor of the same kind (torch's rule).
DType compute_type(const Ctx& c, const std::vector<Val>& ops) {
  const DType out = c.dtype();
  if (out != DType::Bool) return out;
  std::vector<DType> tensors, scalars;
  for (const auto& o : ops) (o.kind == Val::Kind::Tensor ? tensors : scalars).push_back(operand_type(c, o));
  DType t = promote(tensors);
  const DType s = promote(scalars);
  if (!scalars.empty() && is_float(s) && !is_float(t)) t = s;
  if (tensors.empty()) t = s;
  return t;
}

LowerFn un(const std::string& op) {
  return [op](Ctx& c) {
    const Val x = c.arg(0);
    const DType t = c.dtype() == DType::Bool ? operand_type(c, x) : c.dtype();
    return pointwise(
        c, {x}, [&](std::vector<E>& a) { return unary(op, a[0]); }, t);
  };
}

LowerFn bin(const std::string& op, bool alpha = false, bool reversed = false) {
  return [op, alpha, reversed](Ctx& c) {
    Val a = c.arg(0), b = c.arg(1);
    if (reversed) std::swap(a, b);
    const DType t = compute_type(c, {a, b});
    const bool has_alpha = alpha && c.has(2, "alpha");
    const double al = has_alpha ? c.num_arg(2, "alpha", 1.0) : 1.0;
    return pointwise(
        c, {a, b},
        [&](std::vector<E>& x) {
          E y = x[1];
          if (has_alpha && al != 1.0) y = binary("mul", y, fconst(al, t));
          return binary(op, x[0], y);
        },
        t);
  };
}

E fl(double v, const E& like) { return fconst(v, like->dtype); }

E sigmoid(const E& x) { return binary("div", fl(1, x), binary("add", fl(1, x), unary("exp", unary("neg", x)))); }

E softplus(const E& x, double beta, double threshold) {
  E bx = binary("mul", x, fl(beta, x));
  E sp = binary("div", unary("log1p", unary("exp", bx)), fl(beta, x));
  return select(binary("gt", bx, fl(threshold, x)), x, sp);
}

Val div_op(Ctx& c) {
  const Val a = c.arg(0), b = c.arg(1);
  const auto& rm = c.raw(2, "rounding_mode");
  const std::string mode = rm.is_string() ? rm.get<std::string>() : "";
  const DType out = c.dtype();
  const DType t = is_float(out) ? out : promote({operand_type(c, a), operand_type(c, b)});
  return pointwise(
      c, {a, b},
      [&](std::vector<E>& x) {
        if (mode.empty()) return binary("div", x[0], x[1]);
        if (is_float(t)) return unary(mode == "floor" ? "floor" : "trunc", binary("div", x[0], x[1]));
        return binary(mode == "floor" ? "floordiv" : "idiv", x[0], x[1]);
      },
      t);
}

Val where_op(Ctx& c) {
  const Val cond = c.arg(0), a = c.arg(1), b = c.arg(2);
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  const DType t = c.dtype();
  return Val::tensor(
      c.compute(shape, t, select(cast(c.at(cond, idx), DType::Bool), cast(c.at(a, idx), t), cast(c.at(b, idx), t))));
}

Val masked_fill(Ctx& c) {
  const Val x = c.arg(0), mask = c.arg(1), v = c.arg(2);
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  const DType t = c.dtype();
  return Val::tensor(
      c.compute(shape, t, select(cast(c.at(mask, idx), DType::Bool), cast(c.at(v, idx), t), cast(c.at(x, idx), t))));
}

Val clamp(Ctx& c, bool has_min, bool has_max, size_t min_at = 1, size_t max_at = 2) {
  const Val x = c.arg(0);
  const Val lo = has_min ? c.arg(min_at, "min") : Val{}, hi = has_max ? c.arg(max_at, "max") : Val{};
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  const DType t = c.dtype();
  E y = cast(c.at(x, idx), t);
  if (lo.kind != Val::Kind::None) y = binary("max", y, cast(c.at(lo, idx), t));
  if (hi.kind != Val::Kind::None) y = binary("min", y, cast(c.at(hi, idx), t));
  return Val::tensor(c.compute(shape, t, y));
}

Val copy_like(Ctx& c) {
  const Val x = c.arg(0);
  const auto shape = c.shape();
  return Val::tensor(c.compute(shape, c.dtype(), cast(c.at(x, out_vars(shape.size())), c.dtype())));
}

Val full_value(Ctx& c, E v) {
  const auto shape = c.shape();
  return Val::tensor(c.compute(shape, c.dtype(), cast(std::move(v), c.dtype())));
}

LowerFn act(std::function<E(Ctx&, E)> f) {
  return [f](Ctx& c) {
    const Val x = c.arg(0);
    const DType t = c.dtype();
    return pointwise(
        c, {x}, [&](std::vector<E>& a) { return f(c, a[0]); }, t);
  };
}

}  // namespace

void add_pointwise(Table& t) {
  for (const char* op :
       {"abs",  "neg",   "exp",   "log",   "sqrt",  "rsqrt", "sin",   "cos",        "tan",   "tanh",  "erf",
        "erfc", "floor", "ceil",  "trunc", "sign",  "log1p", "expm1", "reciprocal", "asin",  "acos",  "atan",
        "sinh", "cosh",  "asinh", "acosh", "atanh", "exp2",  "log2",  "log10",      "isnan", "isinf", "lgamma"})
    t[op] = un(op);
  t["round"] = un("rint");
  t["sgn"] = un("sign");
  t["logical_not"] = un("not");
  t["bitwise_not"] = [](Ctx& c) {
    const Val x = c.arg(0);
    return pointwise(
        c, {x}, [&](std::vector<E>& a) { return c.dtype() == DType::Bool ? unary("not", a[0]) : unary("bnot", a[0]); },
        c.dtype());
  };
  t["fix"] = un("trunc");
  t["square"] = act([](Ctx&, E x) { return binary("mul", x, x); });
  t["sigmoid"] = act([](Ctx&, E x) { return sigmoid(x); });
  t["relu"] = act([](Ctx&, E x) { return binary("max", x, fl(0, x)); });
  t["relu6"] = act([](Ctx&, E x) { return binary("min", binary("max", x, fl(0, x)), fl(6, x)); });
  t["silu"] = act([](Ctx&, E x) { return binary("mul", x, sigmoid(x)); });
  t["mish"] = act([](Ctx&, E x) { return binary("mul", x, unary("tanh", softplus(x, 1, 20))); });
  t["softplus"] = act([](Ctx& c, E x) { return softplus(x, c.num_arg(1, "beta", 1), c.num_arg(2, "threshold", 20)); });
  t["gelu"] = act([](Ctx& c, E x) {
    const auto& ap = c.raw(1, "approximate");
    if (ap.is_string() && ap.get<std::string>() == "tanh") {
      E inner = binary("mul", fl(std::sqrt(2.0 / M_PI), x),
                       binary("add", x, binary("mul", fl(0.044715, x), binary("mul", x, binary("mul", x, x)))));
      return binary("mul", binary("mul", fl(0.5, x), x), binary("add", fl(1, x), unary("tanh", inner)));
    }
    return binary("mul", binary("mul", fl(0.5, x), x),
                  binary("add", fl(1, x), unary("erf", binary("mul", x, fl(M_SQRT1_2, x)))));
  });
  t["elu"] = act([](Ctx& c, E x) {
    const double alpha = c.num_arg(1, "alpha", 1), scale = c.num_arg(2, "scale", 1),
                 in_scale = c.num_arg(3, "input_scale", 1);
    E neg = binary("mul", fl(alpha, x), unary("expm1", binary("mul", x, fl(in_scale, x))));
    return binary("mul", fl(scale, x), select(binary("gt", x, fl(0, x)), x, neg));
  });
  t["leaky_relu"] = act([](Ctx& c, E x) {
    return select(binary("gt", x, fl(0, x)), x, binary("mul", x, fl(c.num_arg(1, "negative_slope", 0.01), x)));
  });
  t["hardtanh"] = act([](Ctx& c, E x) {
    return binary("min", binary("max", x, fl(c.num_arg(1, "min_val", -1), x)), fl(c.num_arg(2, "max_val", 1), x));
  });
  t["hardsigmoid"] = act([](Ctx&, E x) {
    return binary("div", binary("min", binary("max", binary("add", x, fl(3, x)), fl(0, x)), fl(6, x)), fl(6, x));
  });
  t["hardswish"] = act([](Ctx&, E x) {
    return binary(
        "mul", x,
        binary("div", binary("min", binary("max", binary("add", x, fl(3, x)), fl(0, x)), fl(6, x)), fl(6, x)));
  });
  t["threshold"] = act([](Ctx& c, E x) {
    return select(binary("gt", x, fl(c.num_arg(1, "threshold", 0), x)), x, fl(c.num_arg(2, "value", 0), x));
  });
  t["hardshrink"] = act([](Ctx& c, E x) {
    const double l = c.num_arg(1, "lambd", 0.5);
    return select(binary("gt", unary("abs", x), fl(l, x)), x, fl(0, x));
  });
  t["softshrink"] = act([](Ctx& c, E x) {
    const double l = c.num_arg(1, "lambd", 0.5);
    return select(binary("gt", x, fl(l, x)), binary("sub", x, fl(l, x)),
                  select(binary("lt", x, fl(-l, x)), binary("add", x, fl(l, x)), fl(0, x)));
  });
  t["logit"] = act([](Ctx&, E x) { return unary("log", binary("div", x, binary("sub", fl(1, x), x))); });
  t["add"] = bin("add", true);
  t["sub"] = bin("sub", true);
  t["rsub"] = bin("sub", true, true);
  t["mul"] = bin("mul");
  t["div"] = div_op;
  t["true_divide"] = div_op;
  t["floor_divide"] = [](Ctx& c) {
    const Val a = c.arg(0), b = c.arg(1);
    const DType t2 = c.dtype();
    return pointwise(
        c, {a, b},
        [&](std::vector<E>& x) {
          return is_float(t2) ? unary("floor", binary("div", x[0], x[1])) : binary("floordiv", x[0], x[1]);
        },
        t2);
  };
  t["pow"] = [](Ctx& c) {
    const Val a = c.arg(0), b = c.arg(1);
    const DType t2 = c.dtype();
    return pointwise(
        c, {a, b},
        [&](std::vector<E>& x) {
          double e = 0;
          if (x[1]->kind == Node::Kind::Const) {
            e = is_float(x[1]->dtype) ? x[1]->fval : static_cast<double>(x[1]->ival);
            if (e == 2) return binary("mul", x[0], x[0]);
            if (e == 1) return x[0];
            if (e == 0.5 && is_float(t2)) return unary("sqrt", x[0]);
          }
          return binary("pow", x[0], x[1]);
        },
        t2);
  };
  t["maximum"] = bin("max");
  t["minimum"] = bin("min");
  t["fmax"] = bin("max");
  t["fmin"] = bin("min");
  t["atan2"] = bin("atan2");
  t["fmod"] = bin("fmod");
  t["remainder"] = bin("remainder");
  t["copysign"] = bin("copysign");
  t["hypot"] = [](Ctx& c) {
    const Val a = c.arg(0), b = c.arg(1);
    return pointwise(
        c, {a, b},
        [](std::vector<E>& x) {
          return unary("sqrt", binary("add", binary("mul", x[0], x[0]), binary("mul", x[1], x[1])));
        },
        c.dtype());
  };
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) t[op] = bin(op);
  t["logical_and"] = bin("and");
  t["logical_or"] = bin("or");
  t["logical_xor"] = bin("xor");
  t["bitwise_and"] = [](Ctx& c) { return bin(c.dtype() == DType::Bool ? "and" : "band")(c); };
  t["bitwise_or"] = [](Ctx& c) { return bin(c.dtype() == DType::Bool ? "or" : "bor")(c); };
  t["bitwise_xor"] = [](Ctx& c) { return bin(c.dtype() == DType::Bool ? "xor" : "bxor")(c); };
  t["where"] = where_op;
  t["masked_fill"] = masked_fill;
  t["clamp"] = [](Ctx& c) { return clamp(c, c.has(1, "min"), c.has(2, "max")); };
  t["clip"] = t["clamp"];
  t["clamp_min"] = [](Ctx& c) { return clamp(c, true, false); };
  t["clamp_max"] = [](Ctx& c) { return clamp(c, false, true, 1, 1); };
  t["lerp"] = [](Ctx& c) {
    const Val a = c.arg(0), b = c.arg(1), w = c.arg(2);
    return pointwise(
        c, {a, b, w},
        [](std::vector<E>& x) { return binary("add", x[0], binary("mul", x[2], binary("sub", x[1], x[0]))); },
        c.dtype());
  };
  t["addcmul"] = [](Ctx& c) {
    const Val a = c.arg(0), b = c.arg(1), d = c.arg(2);
    const double v = c.num_arg(3, "value", 1);
    return pointwise(
        c, {a, b, d},
        [&](std::vector<E>& x) { return binary("add", x[0], binary("mul", fl(v, x[0]), binary("mul", x[1], x[2]))); },
        c.dtype());
  };
  t["addcdiv"] = [](Ctx& c) {
    const Val a = c.arg(0), b = c.arg(1), d = c.arg(2);
    const double v = c.num_arg(3, "value", 1);
    return pointwise(
        c, {a, b, d},
        [&](std::vector<E>& x) { return binary("add", x[0], binary("mul", fl(v, x[0]), binary("div", x[1], x[2]))); },
        c.dtype());
  };
  for (const char* op : {"_to_copy", "to", "clone", "contiguous", "alias", "detach", "lift_fresh_copy", "type_as",
                         "_unsafe_view_copy", "view_copy", "positive"})
    t[op] = copy_like;
  // dropout(x, p, train): the identity in eval mode or with p = 0; in training mode random.
  for (const char* op : {"dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"})
    t[op] = [](Ctx& c) {
      if (c.bool_arg(2, "train", true) && c.num_arg(1, "p", 0.5) > 0)
        throw Unsupported("dropout in training mode is random: the reference cannot be matched");
      return copy_like(c);
    };
  t["prims.convert_element_type.default"] = copy_like;
  t["native_dropout"] = [](Ctx& c) {
    if (c.bool_arg(2, "train", true) && c.num_arg(1, "p", 0.5) > 0)
      throw Unsupported("dropout in training mode is random: the reference cannot be matched");
    const Val x = c.arg(0);
    const auto shape = c.shape(0);
    const auto idx = out_vars(shape.size());
    const int out = c.compute(shape, c.dtype(0), cast(c.at(x, idx), c.dtype(0)));
    const int mask = c.compute(shape, DType::Bool, iconst(1, DType::Bool), ReduceOp::None, {}, "_mask");
    return Val::list({Val::tensor(out), Val::tensor(mask)});
  };
  // empty_like: values never read before they are written (a zero tensor serves).
  t["empty_like"] = [](Ctx& c) { return full_value(c, fconst(0)); };
  // Random draws: the reference's values cannot be matched (the decomposition of dropout in
  // training mode draws its mask with bernoulli_).
  for (const char* op :
       {"bernoulli", "bernoulli_", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "normal",
        "normal_", "uniform", "uniform_", "multinomial", "randperm", "exponential_"})
    t[op] = [op](Ctx&) -> Val {
      throw Unsupported(std::string("a random draw (") + op +
                        ", dropout in training mode say): the reference cannot be matched");
    };
  t["full"] = [](Ctx& c) { return full_value(c, c.arg(1, "fill_value").s ? c.arg(1, "fill_value").s : fconst(0)); };
  t["full_like"] = [](Ctx& c) {
    return full_value(c, c.arg(1, "fill_value").s ? c.arg(1, "fill_value").s : fconst(0));
  };
  t["fill"] = [](Ctx& c) {
    const Val v = c.arg(1, "value");
    const auto shape = c.shape();
    return Val::tensor(c.compute(shape, c.dtype(), cast(c.at(v, out_vars(shape.size())), c.dtype())));
  };
  t["scalar_tensor"] = [](Ctx& c) { return full_value(c, c.arg(0).s ? c.arg(0).s : fconst(0)); };
  for (const char* z : {"zeros", "zeros_like", "new_zeros"})
    t[z] = [](Ctx& c) { return full_value(c, fconst(0, DType::F64)); };
  for (const char* z : {"ones", "ones_like", "new_ones"})
    t[z] = [](Ctx& c) { return full_value(c, fconst(1, DType::F64)); };
  t["arange"] = [](Ctx& c) {
    // arange(end) / arange.start(start, end) / arange.start_step(start, end, step)
    const auto n = c.node["args"].size();
    const double start = n >= 2 ? c.num_arg(0, "start", 0) : 0;
    const double step = n >= 3 ? c.num_arg(2, "step", 1) : 1;
    const auto shape = c.shape();
    const DType t2 = c.dtype();
    E v = binary("add", fconst(start, DType::F64), binary("mul", cast(var(0), DType::F64), fconst(step, DType::F64)));
    return Val::tensor(c.compute(shape, t2, cast(v, t2)));
  };
}

}  // namespace mblast::lower
