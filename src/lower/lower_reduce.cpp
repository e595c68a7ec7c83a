// Reductions over any dims (sum, mean, prod, amax / amin, max / min with indices, argmax /
// argmin, var / std, logsumexp, any / all, vector norms), the softmax family and scans
// (cumsum, cumprod: a scan along one dim), and the
// NLL loss (a gather of the target's class).
#include <cmath>
#include <limits>

#include "lowering.h"

namespace mblast::lower {

namespace {

std::vector<int64_t> dims_arg(const Ctx& c, size_t i, const char* kw) {
  const auto& a = c.raw(i, kw);
  if (a.is_null()) return {};
  if (a.is_number_integer()) return {a.get<int64_t>()};
  return c.ints_arg(i, kw);
}

// sum / prod / amax / amin over `dims` of x, the node's traced output as the result.
int reduce_of(Ctx& c, int x, const std::vector<int64_t>& dims, bool keepdim, ReduceOp op, DType out,
              const std::function<E(E)>& f = nullptr, const std::string& suffix = "") {
  const Tensor& s = c.T(x);
  const DType t = (op == ReduceOp::Sum || op == ReduceOp::Prod) && !is_float(out) ? DType::I64 : out;
  return reduce_dims(
      c, s.shape, dims, keepdim, op, out,
      [&](const std::vector<E>& idx) {
        E v = cast(load(x, idx, s.dtype), op == ReduceOp::Max || op == ReduceOp::Min ? s.dtype : t);
        return f ? f(v) : v;
      },
      suffix);
}

int64_t count_of(const Tensor& s, const std::vector<int64_t>& dims) {
  if (dims.empty()) return s.numel();
  int64_t n = 1;
  for (auto d : dims) n *= s.shape[static_cast<size_t>(norm_dim(d, static_cast<int>(s.shape.size())))];
  return n;
}

// A pointwise tensor of the node's shape over another tensor of the same shape.
int map(Ctx& c, int x, DType t, const std::function<E(E)>& f, const std::string& suffix = "", int k = -1) {
  const auto& s = c.T(x);
  const auto idx = out_vars(s.shape.size());
  (void)k;
  return c.compute(s.shape, t, f(load(x, idx, s.dtype)), ReduceOp::None, {}, suffix);
}

Val sum(Ctx& c) {
  const int x = c.tensor_arg(0);
  return Val::tensor(reduce_of(c, x, dims_arg(c, 1, "dim"), c.bool_arg(2, "keepdim", false), ReduceOp::Sum, c.dtype()));
}

Val mean(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto dims = dims_arg(c, 1, "dim");
  const DType t = c.dtype();
  const int s = reduce_of(c, x, dims, c.bool_arg(2, "keepdim", false), ReduceOp::Sum, t, nullptr, "_sum");
  const double n = static_cast<double>(count_of(c.T(x), dims));
  return Val::tensor(map(c, s, t, [&](E v) { return binary("div", v, fconst(n, t)); }));
}

// var / std with a correction (unbiased: 1), over dims; `root` gives std.
int variance(Ctx& c, int x, const std::vector<int64_t>& dims, double correction, bool keepdim, DType t,
             int* mean_out = nullptr) {
  const double n = static_cast<double>(count_of(c.T(x), dims));
  const int s = reduce_of(c, x, dims, true, ReduceOp::Sum, t, nullptr, "_sum");
  const int m = map(
      c, s, t, [&](E v) { return binary("div", v, fconst(n, t)); }, "_mean");
  const auto& xs = c.T(x);
  const int ss = reduce_dims(
      c, xs.shape, dims, keepdim, ReduceOp::Sum, t,
      [&](const std::vector<E>& idx) {
        E d = binary("sub", cast(load(x, idx, xs.dtype), t), c.at(m, idx));
        return binary("mul", d, d);
      },
      "_sq");
  if (mean_out) {
    if (keepdim)
      *mean_out = m;
    else
      *mean_out = reduce_of(
          c, x, dims, false, ReduceOp::Sum, t, [&](E v) { return binary("div", v, fconst(n, t)); }, "_mean2");
  }
  return map(
      c, ss, t, [&](E v) { return binary("div", v, fconst(std::max(n - correction, 0.0), t)); }, "_var");
}

double correction_of(const Ctx& c) {
  // var.correction(x, dim, *, correction, keepdim) / var.dim(x, dim, unbiased, keepdim)
  const auto& k = c.node.value("kwargs", nlohmann::json::object());
  if (k.contains("correction") && !k["correction"].is_null()) return k["correction"].get<double>();
  if (k.contains("unbiased")) return k["unbiased"].get<bool>() ? 1.0 : 0.0;
  const auto& a = c.raw(2, nullptr);
  if (a.is_boolean()) return a.get<bool>() ? 1.0 : 0.0;
  return 1.0;
}

bool keepdim_of(const Ctx& c) {
  const auto& k = c.node.value("kwargs", nlohmann::json::object());
  if (k.contains("keepdim")) return k["keepdim"].get<bool>();
  const auto& a = c.raw(3, nullptr);
  return a.is_boolean() && a.get<bool>();
}

Val var_op(Ctx& c, bool root) {
  const int x = c.tensor_arg(0);
  const int v = variance(c, x, dims_arg(c, 1, "dim"), correction_of(c), keepdim_of(c), c.dtype(root ? -1 : -1));
  if (!root) return Val::tensor(v);
  return Val::tensor(map(
      c, v, c.dtype(), [](E e) { return unary("sqrt", e); }, "_std"));
}

Val var_mean(Ctx& c, bool root) {
  const int x = c.tensor_arg(0);
  int m = -1;
  const DType t = c.dtype(0);
  int v = variance(c, x, dims_arg(c, 1, "dim"), correction_of(c), keepdim_of(c), t, &m);
  if (root)
    v = map(
        c, v, t, [](E e) { return unary("sqrt", e); }, "_std");
  return Val::list({Val::tensor(v), Val::tensor(m)});
}

Val minmax(Ctx& c, bool is_max) {
  const int x = c.tensor_arg(0);
  if (!c.has(1, "dim")) {  // max.default: the whole tensor
    return Val::tensor(reduce_of(c, x, {}, false, is_max ? ReduceOp::Max : ReduceOp::Min, c.dtype()));
  }
  if (c.arg(1).kind == Val::Kind::Tensor) {  // max.other: the elementwise maximum
    const int y = c.tensor_arg(1);
    const auto shape = c.shape();
    const auto idx = out_vars(shape.size());
    return Val::tensor(
        c.compute(shape, c.dtype(),
                  binary(is_max ? "max" : "min", cast(c.at(x, idx), c.dtype()), cast(c.at(y, idx), c.dtype()))));
  }
  const int64_t dim = c.int_arg(1, "dim", 0);
  const bool keep = c.bool_arg(2, "keepdim", false);
  const int v = reduce_of(c, x, {dim}, keep, is_max ? ReduceOp::Max : ReduceOp::Min, c.dtype(0), nullptr, "_values");
  const int i = reduce_dims(
      c, c.T(x).shape, {dim}, keep, is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin, DType::I64,
      [&](const std::vector<E>& idx) { return load(x, idx, c.T(x).dtype); }, "_indices");
  return Val::list({Val::tensor(v), Val::tensor(i)});
}

Val argext(Ctx& c, bool is_max) {
  const int x = c.tensor_arg(0);
  const auto& d = c.raw(1, "dim");
  const bool keep = c.bool_arg(2, "keepdim", false);
  const ReduceOp op = is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin;
  const auto& s = c.T(x);
  if (d.is_null()) {  // over the flattened tensor
    const int64_t n = s.numel();
    std::vector<int64_t> shape = c.shape();
    return Val::tensor(c.compute(shape, DType::I64,
                                 load(
                                     x,
                                     [&] {
                                       std::vector<E> idx(s.shape.size());
                                       E rest = var(static_cast<int>(shape.size()));
                                       for (size_t k = s.shape.size(); k-- > 0;) {
                                         idx[k] = k == 0 ? rest : mod(rest, iconst(s.shape[k]));
                                         rest = floordiv(rest, iconst(s.shape[k]));
                                       }
                                       return idx;
                                     }(),
                                     s.dtype),
                                 op, {n}));
  }
  return Val::tensor(reduce_dims(c, s.shape, {d.get<int64_t>()}, keep, op, DType::I64,
                                 [&](const std::vector<E>& idx) { return load(x, idx, s.dtype); }));
}

Val softmax(Ctx& c, bool log) {
  const int x = c.tensor_arg(0);
  const int64_t dim = c.int_arg(1, "dim", -1);
  const DType t = c.dtype();
  const auto& s = c.T(x);
  const auto idx = out_vars(s.shape.size());
  const int m = reduce_of(c, x, {dim}, true, ReduceOp::Max, s.dtype, nullptr, "_max");
  const int z = reduce_dims(
      c, s.shape, {dim}, true, ReduceOp::Sum, t,
      [&](const std::vector<E>& i) {
        return unary("exp", binary("sub", cast(load(x, i, s.dtype), t), cast(c.at(m, i), t)));
      },
      "_sum");
  E shifted = binary("sub", cast(load(x, idx, s.dtype), t), cast(c.at(m, idx), t));
  E body =
      log ? binary("sub", shifted, unary("log", c.at(z, idx))) : binary("div", unary("exp", shifted), c.at(z, idx));
  return Val::tensor(c.compute(s.shape, t, body));
}

Val logsumexp(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto dims = dims_arg(c, 1, "dim");
  const bool keep = c.bool_arg(2, "keepdim", false);
  const DType t = c.dtype();
  const auto& s = c.T(x);
  const int m = reduce_of(c, x, dims, true, ReduceOp::Max, s.dtype, nullptr, "_max");
  const int z = reduce_dims(
      c, s.shape, dims, keep, ReduceOp::Sum, t,
      [&](const std::vector<E>& i) {
        // An infinite maximum would make x - max NaN: shift by 0 then (torch's rule).
        E mx = cast(c.at(m, i), t);
        mx = select(unary("isinf", mx), fconst(0, t), mx);
        return unary("exp", binary("sub", cast(load(x, i, s.dtype), t), mx));
      },
      "_sum");
  const int mk = reduce_of(c, x, dims, keep, ReduceOp::Max, s.dtype, nullptr, "_max2");
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  E mx = cast(c.at(mk, idx), t);
  mx = select(unary("isinf", mx), fconst(0, t), mx);
  return Val::tensor(c.compute(shape, t, binary("add", unary("log", c.at(z, idx)), mx)));
}

Val any_all(Ctx& c, bool any) {
  const int x = c.tensor_arg(0);
  const auto dims = dims_arg(c, 1, "dim");
  const bool keep = c.bool_arg(2, "keepdim", false);
  const auto& s = c.T(x);
  return Val::tensor(reduce_dims(c, s.shape, dims, keep, any ? ReduceOp::Max : ReduceOp::Min, DType::Bool,
                                 [&](const std::vector<E>& i) { return cast(load(x, i, s.dtype), DType::Bool); }));
}

// A scan is its own kernel kind (Tensor::scan_dim): each line is walked once, in order, rather
// than every element reducing its whole prefix (quadratic in the line's length).
Val scan(Ctx& c, bool prod) {
  const int x = c.tensor_arg(0);
  const auto& s = c.T(x);
  const int r = static_cast<int>(s.shape.size());
  const DType t = c.dtype();
  const auto idx = out_vars(s.shape.size());
  const int id = c.compute(s.shape, t, cast(load(x, idx, s.dtype), t), prod ? ReduceOp::Prod : ReduceOp::Sum, {});
  if (r > 0)
    c.p.tensors[static_cast<size_t>(id)].scan_dim = norm_dim(c.int_arg(1, "dim", 0), r);
  else
    c.p.tensors[static_cast<size_t>(id)].reduce = ReduceOp::None;  // a 0-dim scan is the value itself
  return Val::tensor(id);
}

Val vector_norm(Ctx& c) {
  // linalg_vector_norm(x, ord=2, dim=None, keepdim=False) / norm.ScalarOpt_dim(x, p, dim, keepdim)
  const int x = c.tensor_arg(0);
  const double ord = c.num_arg(1, "ord", c.num_arg(1, "p", 2));
  const auto dims = dims_arg(c, 2, "dim");
  const bool keep = c.bool_arg(3, "keepdim", false);
  const DType t = c.dtype();
  if (std::isinf(ord))
    return Val::tensor(
        reduce_of(c, x, dims, keep, ord > 0 ? ReduceOp::Max : ReduceOp::Min, t, [](E v) { return unary("abs", v); }));
  const int s = reduce_of(
      c, x, dims, keep, ReduceOp::Sum, t,
      [&](E v) {
        if (ord == 1) return unary("abs", v);
        if (ord == 2) return binary("mul", v, v);
        if (ord == 0) return cast(binary("ne", v, fconst(0, t)), t);
        return binary("pow", unary("abs", v), fconst(ord, t));
      },
      "_sum");
  if (ord == 1 || ord == 0) return Val::tensor(s);
  return Val::tensor(
      map(c, s, t, [&](E v) { return ord == 2 ? unary("sqrt", v) : binary("pow", v, fconst(1.0 / ord, t)); }));
}

// nll_loss_forward(x [N, C] or [C], target [N] or [], weight, reduction, ignore_index) -> (loss, total_weight)
Val nll_loss(Ctx& c) {
  const int x = c.tensor_arg(0);
  const int tg = c.tensor_arg(1, "target");
  const Val w = c.arg(2, "weight");
  const int64_t reduction = c.int_arg(3, "reduction", 1);
  const int64_t ignore = c.int_arg(4, "ignore_index", -100);
  const auto& xs = c.T(x);
  const DType t = c.dtype(0);
  if (xs.shape.size() != 2 && xs.shape.size() != 1) throw Unsupported("nll_loss over more than 2 dims");
  const bool batched = xs.shape.size() == 2;
  const int64_t n = batched ? xs.shape[0] : 1;
  auto cls_at = [&](E i) {
    return cast(load(tg, batched ? std::vector<E>{i} : std::vector<E>{}, c.T(tg).dtype), DType::I64);
  };
  auto weight_at = [&](E cls) -> E {
    E ok = binary("ne", cls, iconst(ignore), DType::Bool);
    E wv =
        w.kind == Val::Kind::Tensor ? cast(load(w.t, {select(ok, cls, iconst(0))}, c.T(w.t).dtype), t) : fconst(1, t);
    return select(ok, wv, fconst(0, t));
  };
  auto term = [&](E i) {
    E cls = cls_at(i);
    E ok = binary("ne", cls, iconst(ignore), DType::Bool);
    E xv = cast(
        load(x, batched ? std::vector<E>{i, select(ok, cls, iconst(0))} : std::vector<E>{select(ok, cls, iconst(0))},
             xs.dtype),
        t);
    return binary("mul", unary("neg", xv), weight_at(cls));
  };
  if (reduction == 0) {
    const int l = c.compute({n}, t, term(var(0)), ReduceOp::None, {}, "_loss");
    const int tw = c.compute({}, t, fconst(0, t), ReduceOp::None, {}, "_w");
    return Val::list({Val::tensor(l), Val::tensor(tw)});
  }
  const int s = c.compute({}, t, term(var(0)), ReduceOp::Sum, {n}, "_sum");
  const int tw = c.compute({}, t, weight_at(cls_at(var(0))), ReduceOp::Sum, {n}, "_total_weight");
  if (reduction == 1) {
    const int l = c.compute({}, t, binary("div", load(s, {}, t), load(tw, {}, t)), ReduceOp::None, {}, "_mean");
    return Val::list({Val::tensor(l), Val::tensor(tw)});
  }
  return Val::list({Val::tensor(s), Val::tensor(tw)});
}

}  // namespace

void add_reduce(Table& t) {
  t["sum"] = sum;
  t["mean"] = mean;
  t["prod"] = [](Ctx& c) {
    const int x = c.tensor_arg(0);
    const auto& d = c.raw(1, "dim");
    std::vector<int64_t> dims;
    if (d.is_number_integer()) dims = {d.get<int64_t>()};
    return Val::tensor(reduce_of(c, x, dims, c.bool_arg(2, "keepdim", false), ReduceOp::Prod, c.dtype()));
  };
  t["amax"] = [](Ctx& c) {
    const int x = c.tensor_arg(0);
    return Val::tensor(
        reduce_of(c, x, dims_arg(c, 1, "dim"), c.bool_arg(2, "keepdim", false), ReduceOp::Max, c.dtype()));
  };
  t["amin"] = [](Ctx& c) {
    const int x = c.tensor_arg(0);
    return Val::tensor(
        reduce_of(c, x, dims_arg(c, 1, "dim"), c.bool_arg(2, "keepdim", false), ReduceOp::Min, c.dtype()));
  };
  t["max"] = [](Ctx& c) { return minmax(c, true); };
  t["min"] = [](Ctx& c) { return minmax(c, false); };
  t["argmax"] = [](Ctx& c) { return argext(c, true); };
  t["argmin"] = [](Ctx& c) { return argext(c, false); };
  t["var"] = [](Ctx& c) { return var_op(c, false); };
  t["std"] = [](Ctx& c) { return var_op(c, true); };
  t["var_mean"] = [](Ctx& c) { return var_mean(c, false); };
  t["std_mean"] = [](Ctx& c) { return var_mean(c, true); };
  t["_softmax"] = [](Ctx& c) { return softmax(c, false); };
  t["softmax"] = t["_softmax"];
  t["_log_softmax"] = [](Ctx& c) { return softmax(c, true); };
  t["log_softmax"] = t["_log_softmax"];
  t["logsumexp"] = logsumexp;
  t["any"] = [](Ctx& c) { return any_all(c, true); };
  t["all"] = [](Ctx& c) { return any_all(c, false); };
  t["cumsum"] = [](Ctx& c) { return scan(c, false); };
  t["cumprod"] = [](Ctx& c) { return scan(c, true); };
  t["linalg_vector_norm"] = vector_norm;
  t["norm"] = vector_norm;
  t["nll_loss_forward"] = nll_loss;
}

}  // namespace mblast::lower
