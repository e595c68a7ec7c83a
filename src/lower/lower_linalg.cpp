// Contractions and windows: mm / bmm / addmm / baddbmm / dot / mv as sums over the shared
// index; convolution and transposed convolution in any number of spatial dims (groups,
// stride, padding, dilation) as sums over (input channel of the group, kernel offsets) with a
// bounds predicate; max / average / adaptive pooling; batch, layer and group normalisation
// (statistics as reductions, the rest pointwise); nearest and bilinear resize.
#include <cmath>
#include <limits>

#include "lowering.h"

namespace mblast::lower {

namespace {

E fl(double v, DType t) { return fconst(v, t); }

// C[b.., i, j] = sum_k A[b.., i, k] * B[b.., k, j]
int contract(Ctx& c, int a, int b, DType t, const std::string& suffix = "") {
  const auto& as = c.T(a).shape;
  const auto& bs = c.T(b).shape;
  std::vector<int64_t> shape;
  if (as.size() == 1 && bs.size() == 1) {  // dot
    return c.compute({}, t,
                     binary("mul", cast(load(a, {var(0)}, c.T(a).dtype), t), cast(load(b, {var(0)}, c.T(b).dtype), t)),
                     ReduceOp::Sum, {as[0]}, suffix);
  }
  if (as.size() == 2 && bs.size() == 1) {  // mv
    return c.compute(
        {as[0]}, t,
        binary("mul", cast(load(a, {var(0), var(1)}, c.T(a).dtype), t), cast(load(b, {var(1)}, c.T(b).dtype), t)),
        ReduceOp::Sum, {as[1]}, suffix);
  }
  if (as.size() != bs.size() || as.size() < 2)
    throw Unsupported("a contraction of ranks " + std::to_string(as.size()) + " and " + std::to_string(bs.size()));
  const size_t r = as.size();
  for (size_t d = 0; d + 2 < r; ++d) shape.push_back(std::max(as[d], bs[d]));
  shape.push_back(as[r - 2]);
  shape.push_back(bs[r - 1]);
  const E k = var(static_cast<int>(r));
  std::vector<E> ai, bi;
  for (size_t d = 0; d + 2 < r; ++d) {
    ai.push_back(as[d] == 1 ? iconst(0) : var(static_cast<int>(d)));
    bi.push_back(bs[d] == 1 ? iconst(0) : var(static_cast<int>(d)));
  }
  ai.push_back(var(static_cast<int>(r - 2)));
  ai.push_back(k);
  bi.push_back(k);
  bi.push_back(var(static_cast<int>(r - 1)));
  return c.compute(shape, t, binary("mul", cast(load(a, ai, c.T(a).dtype), t), cast(load(b, bi, c.T(b).dtype), t)),
                   ReduceOp::Sum, {as[r - 1]}, suffix);
}

Val mm(Ctx& c) { return Val::tensor(contract(c, c.tensor_arg(0), c.tensor_arg(1), c.dtype())); }

// beta * bias + alpha * (a @ b)
Val addmm(Ctx& c) {
  const Val bias = c.arg(0);
  const DType t = c.dtype();
  const int prod = contract(c, c.tensor_arg(1), c.tensor_arg(2), t, "_mm");
  const double beta = c.num_arg(3, "beta", 1), alpha = c.num_arg(4, "alpha", 1);
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  E p = load(prod, idx, t);
  if (alpha != 1) p = binary("mul", p, fl(alpha, t));
  E b = cast(c.at(bias, idx), t);
  if (beta != 1) b = binary("mul", b, fl(beta, t));
  return Val::tensor(c.compute(shape, t, beta == 0 ? p : binary("add", b, p)));
}

// convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups)
Val convolution(Ctx& c) {
  const int x = c.tensor_arg(0), w = c.tensor_arg(1);
  const Val bias = c.arg(2, "bias");
  const auto& xs = c.T(x).shape;
  const auto& ws = c.T(w).shape;
  const size_t sd = xs.size() - 2;
  auto expand = [&](std::vector<int64_t> v, int64_t dflt) {
    if (v.empty()) v = {dflt};
    while (v.size() < sd) v.push_back(v.back());
    return v;
  };
  const auto stride = expand(c.ints_arg(3, "stride"), 1), padding = expand(c.ints_arg(4, "padding"), 0),
             dilation = expand(c.ints_arg(5, "dilation"), 1);
  const bool transposed = c.bool_arg(6, "transposed", false);
  const int64_t groups = c.int_arg(8, "groups", 1);
  const auto shape = c.shape();
  const DType t = c.dtype();
  const int rank = static_cast<int>(shape.size());
  const E n = var(0), oc = var(1);
  const E r = var(rank);  // input channel within the group
  std::vector<E> kv;
  std::vector<int64_t> extents;
  E ok = iconst(1, DType::Bool);
  std::vector<E> xi = {n, iconst(0)}, wi;
  if (!transposed) {
    // w: [OC, IC/G, k...]; x channel = g * IC/G + r, g = oc / (OC/G)
    const int64_t icg = ws[1], ocg = shape[1] / groups;
    extents.push_back(icg);
    xi[1] = add(mul(floordiv(oc, iconst(ocg)), iconst(icg)), r);
    wi = {oc, r};
    for (size_t d = 0; d < sd; ++d) {
      const E k = var(rank + 1 + static_cast<int>(d));
      extents.push_back(ws[2 + d]);
      const E i = add(sub(mul(var(2 + static_cast<int>(d)), iconst(stride[d])), iconst(padding[d])),
                      mul(k, iconst(dilation[d])));
      if (padding[d] > 0) ok = land(ok, land(ge(i, iconst(0)), lt(i, iconst(xs[2 + d]))));
      xi.push_back(i);
      wi.push_back(k);
    }
  } else {
    // w: [IC, OC/G, k...]; out[o] += x[i] * w[k] where o = i * s - p + k * dil
    const int64_t ocg = ws[1], icg = xs[1] / groups;
    extents.push_back(icg);
    const E ic = add(mul(floordiv(oc, iconst(ocg)), iconst(icg)), r);
    xi[1] = ic;
    wi = {ic, mod(oc, iconst(ocg))};
    for (size_t d = 0; d < sd; ++d) {
      const E k = var(rank + 1 + static_cast<int>(d));
      extents.push_back(ws[2 + d]);
      const E num = sub(add(var(2 + static_cast<int>(d)), iconst(padding[d])), mul(k, iconst(dilation[d])));
      const E i = floordiv(num, iconst(stride[d]));
      ok = land(ok, land(ge(num, iconst(0)), lt(i, iconst(xs[2 + d]))));
      if (stride[d] > 1) ok = land(ok, binary("eq", mod(num, iconst(stride[d])), iconst(0), DType::Bool));
      xi.push_back(i);
      wi.push_back(k);
    }
  }
  E prod = binary("mul", cast(load(x, xi, c.T(x).dtype), t), cast(load(w, wi, c.T(w).dtype), t));
  const int conv = c.compute(shape, t, select(ok, prod, fl(0, t)), ReduceOp::Sum, extents,
                             bias.kind == Val::Kind::Tensor ? "_conv" : "");
  if (bias.kind != Val::Kind::Tensor) return Val::tensor(conv);
  const auto idx = out_vars(shape.size());
  return Val::tensor(
      c.compute(shape, t, binary("add", load(conv, idx, t), cast(load(bias.t, {idx[1]}, c.T(bias.t).dtype), t))));
}

// 1, 2 or 3 from the op's name (max_pool3d_with_indices, avg_pool1d, ...).
size_t spatial_dims(const Ctx& c) {
  const auto tg = c.node.value("target", std::string());
  return tg.find("3d") != std::string::npos ? 3 : tg.find("1d") != std::string::npos ? 1 : 2;
}

struct Window {
  std::vector<int64_t> kernel, stride, padding, dilation;
};

Window window_args(const Ctx& c, size_t sd, size_t k_at, size_t s_at, size_t p_at, int64_t d_at) {
  auto expand = [&](std::vector<int64_t> v, int64_t dflt) {
    if (v.empty()) v = {dflt};
    while (v.size() < sd) v.push_back(v.back());
    return v;
  };
  Window w;
  w.kernel = expand(c.ints_arg(k_at, "kernel_size"), 1);
  w.stride = c.ints_arg(s_at, "stride");
  w.stride = w.stride.empty() ? w.kernel : expand(w.stride, 1);
  w.padding = expand(c.ints_arg(p_at, "padding"), 0);
  w.dilation = d_at >= 0 ? expand(c.ints_arg(static_cast<size_t>(d_at), "dilation"), 1) : std::vector<int64_t>(sd, 1);
  return w;
}

// max_poolNd_with_indices(x, kernel, stride, padding, dilation, ceil_mode) -> (values, indices)
Val max_pool(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto& xs = c.T(x).shape;
  const bool with_indices = c.node.contains("outputs");
  const auto shape = with_indices ? c.shape(0) : c.shape();
  const size_t sd = spatial_dims(c);
  const Window w = window_args(c, sd, 1, 2, 3, 4);
  const DType t = with_indices ? c.dtype(0) : c.dtype();
  const int rank = static_cast<int>(shape.size());
  const size_t lead = shape.size() - sd;
  std::vector<E> xi;
  for (size_t d = 0; d < lead; ++d) xi.push_back(var(static_cast<int>(d)));
  E ok = iconst(1, DType::Bool);
  E flat = iconst(0);
  for (size_t d = 0; d < sd; ++d) {
    const E k = var(rank + static_cast<int>(d));
    const E i = add(sub(mul(var(static_cast<int>(lead + d)), iconst(w.stride[d])), iconst(w.padding[d])),
                    mul(k, iconst(w.dilation[d])));
    ok = land(ok, land(ge(i, iconst(0)), lt(i, iconst(xs[lead + d]))));
    xi.push_back(i);
    flat = add(mul(flat, iconst(xs[lead + d])), i);
  }
  const E v = select(ok, cast(load(x, xi, c.T(x).dtype), t), fl(-HUGE_VAL, t));
  const int vals = c.compute(shape, t, v, ReduceOp::Max, w.kernel, "_values");
  if (!with_indices) return Val::tensor(vals);
  // The index within the input plane of the maximum: the window's argmax mapped back.
  const int arg = c.compute(shape, DType::I64, v, ReduceOp::ArgMax, w.kernel, "_arg");
  std::vector<E> kk(sd);
  E rest = load(arg, out_vars(shape.size()), DType::I64);
  for (size_t d = sd; d-- > 0;) {
    kk[d] = d == 0 ? rest : mod(rest, iconst(w.kernel[d]));
    rest = floordiv(rest, iconst(w.kernel[d]));
  }
  std::vector<E> subst(static_cast<size_t>(rank) + sd);
  for (size_t d = 0; d < sd; ++d) subst[static_cast<size_t>(rank) + d] = kk[d];
  const int ind = c.compute(shape, DType::I64, substitute(flat, subst), ReduceOp::None, {}, "_indices");
  return Val::list({Val::tensor(vals), Val::tensor(ind)});
}

// avg_poolNd(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
Val avg_pool(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto& xs = c.T(x).shape;
  const auto shape = c.shape();
  const size_t sd = spatial_dims(c);
  const Window w = window_args(c, sd, 1, 2, 3, -1);
  const bool include_pad = c.bool_arg(5, "count_include_pad", true);
  const auto& dv = c.raw(6, "divisor_override");
  const DType t = c.dtype();
  const int rank = static_cast<int>(shape.size());
  const size_t lead = shape.size() - sd;
  std::vector<E> xi;
  for (size_t d = 0; d < lead; ++d) xi.push_back(var(static_cast<int>(d)));
  E ok = iconst(1, DType::Bool);
  E count = iconst(1);
  for (size_t d = 0; d < sd; ++d) {
    const E o = var(static_cast<int>(lead + d));
    const E k = var(rank + static_cast<int>(d));
    const E start = sub(mul(o, iconst(w.stride[d])), iconst(w.padding[d]));
    const E i = add(start, k);
    ok = land(ok, land(ge(i, iconst(0)), lt(i, iconst(xs[lead + d]))));
    xi.push_back(i);
    // torch: end = min(start + k, L + pad); the divisor counts [start, end) with padding, else clipped to [0, L).
    const E end = binary("min", add(start, iconst(w.kernel[d])), iconst(xs[lead + d] + w.padding[d]), DType::I64);
    E n = sub(end, start);
    if (!include_pad)
      n = sub(binary("min", end, iconst(xs[lead + d]), DType::I64), binary("max", start, iconst(0), DType::I64));
    count = mul(count, n);
  }
  const int s =
      c.compute(shape, t, select(ok, cast(load(x, xi, c.T(x).dtype), t), fl(0, t)), ReduceOp::Sum, w.kernel, "_sum");
  const auto idx = out_vars(shape.size());
  E div = dv.is_number() ? fl(dv.get<double>(), t) : cast(count, t);
  return Val::tensor(c.compute(shape, t, binary("div", load(s, idx, t), div)));
}

// _adaptive_avg_poolNd(x, output_size) / adaptive_max_poolNd: window [floor(o L / O), ceil((o + 1) L / O)).
Val adaptive_pool(Ctx& c, bool is_max) {
  const int x = c.tensor_arg(0);
  const auto& xs = c.T(x).shape;
  const auto shape = is_max ? c.shape(0) : c.shape();
  const auto& tg = c.node.value("target", "");
  const size_t sd = tg.find("3d") != std::string::npos ? 3 : tg.find("1d") != std::string::npos ? 1 : 2;
  const DType t = is_max ? c.dtype(0) : c.dtype();
  const int rank = static_cast<int>(shape.size());
  const size_t lead = shape.size() - sd;
  std::vector<E> xi;
  for (size_t d = 0; d < lead; ++d) xi.push_back(var(static_cast<int>(d)));
  E ok = iconst(1, DType::Bool);
  E count = iconst(1);
  std::vector<int64_t> extents;
  for (size_t d = 0; d < sd; ++d) {
    const int64_t L = xs[lead + d], O = shape[lead + d];
    const int64_t kmax = (L + O - 1) / O + 1;
    const E o = var(static_cast<int>(lead + d));
    const E k = var(rank + static_cast<int>(d));
    const E start = floordiv(mul(o, iconst(L)), iconst(O));
    const E end = floordiv(add(mul(add(o, iconst(1)), iconst(L)), iconst(O - 1)), iconst(O));
    const E i = add(start, k);
    ok = land(ok, lt(i, end));
    xi.push_back(i);
    count = mul(count, sub(end, start));
    extents.push_back(std::min(kmax, L));
  }
  if (is_max) {
    const E v = select(ok, cast(load(x, xi, c.T(x).dtype), t), fl(-HUGE_VAL, t));
    const int vals = c.compute(shape, t, v, ReduceOp::Max, extents, "_values");
    const int arg = c.compute(shape, DType::I64, v, ReduceOp::ArgMax, extents, "_arg");
    return Val::list({Val::tensor(vals), Val::tensor(arg)});
  }
  const int s =
      c.compute(shape, t, select(ok, cast(load(x, xi, c.T(x).dtype), t), fl(0, t)), ReduceOp::Sum, extents, "_sum");
  const auto idx = out_vars(shape.size());
  return Val::tensor(c.compute(shape, t, binary("div", load(s, idx, t), cast(count, t))));
}

// Mean and 1/sqrt(var + eps) over the dims `red` of x, kept as size-1 dims.
std::pair<int, int> stats(Ctx& c, int x, const std::vector<int64_t>& red, double eps, DType t) {
  const auto& xs = c.T(x);
  double n = 1;
  for (auto d : red) n *= static_cast<double>(xs.shape[static_cast<size_t>(d)]);
  const int s = reduce_dims(
      c, xs.shape, red, true, ReduceOp::Sum, t, [&](const std::vector<E>& i) { return cast(load(x, i, xs.dtype), t); },
      "_sum");
  std::vector<int64_t> kshape = c.T(s).shape;
  const auto kidx = out_vars(kshape.size());
  const int mean = c.compute(kshape, t, binary("div", load(s, kidx, t), fl(n, t)), ReduceOp::None, {}, "_mean");
  const int ss = reduce_dims(
      c, xs.shape, red, true, ReduceOp::Sum, t,
      [&](const std::vector<E>& i) {
        E d = binary("sub", cast(load(x, i, xs.dtype), t), c.at(mean, i));
        return binary("mul", d, d);
      },
      "_sq");
  const int rstd =
      c.compute(kshape, t, unary("rsqrt", binary("add", binary("div", load(ss, kidx, t), fl(n, t)), fl(eps, t))),
                ReduceOp::None, {}, "_rstd");
  return {mean, rstd};
}

// The stat tensor [kept dims] viewed as `shape` (a reshape of the same elements).
int reshaped(Ctx& c, int s, const std::vector<int64_t>& shape, const std::string& suffix) {
  const auto& ss = c.T(s).shape;
  const auto idx = out_vars(shape.size());
  E lin = iconst(0);
  for (size_t d = 0; d < shape.size(); ++d) lin = add(mul(lin, iconst(shape[d])), idx[d]);
  std::vector<E> si(ss.size());
  E rest = lin;
  for (size_t d = ss.size(); d-- > 0;) {
    si[d] = ss[d] == 1 ? iconst(0) : (d == 0 ? rest : mod(rest, iconst(ss[d])));
    rest = floordiv(rest, iconst(ss[d]));
  }
  return c.compute(shape, c.T(s).dtype, load(s, si, c.T(s).dtype), ReduceOp::None, {}, suffix);
}

// native_layer_norm(x, normalized_shape, weight, bias, eps) -> (out, mean, rstd)
Val layer_norm(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto ns = c.ints_arg(1, "normalized_shape");
  const Val w = c.arg(2, "weight"), b = c.arg(3, "bias");
  const double eps = c.num_arg(4, "eps", 1e-5);
  const auto& xs = c.T(x).shape;
  const DType t = c.dtype(0);
  std::vector<int64_t> red;
  for (size_t d = xs.size() - ns.size(); d < xs.size(); ++d) red.push_back(static_cast<int64_t>(d));
  const auto [mean, rstd] = stats(c, x, red, eps, t);
  const auto idx = out_vars(xs.size());
  std::vector<E> widx(idx.end() - static_cast<long>(ns.size()), idx.end());
  E y = binary("mul", binary("sub", cast(load(x, idx, c.T(x).dtype), t), c.at(mean, idx)), c.at(rstd, idx));
  if (w.kind == Val::Kind::Tensor) y = binary("mul", y, cast(load(w.t, widx, c.T(w.t).dtype), t));
  if (b.kind == Val::Kind::Tensor) y = binary("add", y, cast(load(b.t, widx, c.T(b.t).dtype), t));
  const int out = c.compute(xs, t, y);
  return Val::list({Val::tensor(out), Val::tensor(mean), Val::tensor(rstd)});
}

// native_batch_norm(x, w, b, running_mean, running_var, training, momentum, eps) -> (out, mean, invstd);
// _native_batch_norm_legit_functional / _no_training alike (the running statistics' update is not a result).
Val batch_norm(Ctx& c, int training_at, int eps_at, bool no_training) {
  const int x = c.tensor_arg(0);
  const Val w = c.arg(1, "weight"), b = c.arg(2, "bias"), rm = c.arg(3, "running_mean"), rv = c.arg(4, "running_var");
  const bool training = no_training ? false : c.bool_arg(static_cast<size_t>(training_at), "training", true);
  const double eps = c.num_arg(static_cast<size_t>(eps_at), "eps", 1e-5);
  const auto& xs = c.T(x).shape;
  const DType t = c.dtype(0);
  const auto idx = out_vars(xs.size());
  E mean, rstd;
  int mean_t = -1, rstd_t = -1;
  if (training || rm.kind != Val::Kind::Tensor) {
    std::vector<int64_t> red = {0};
    for (size_t d = 2; d < xs.size(); ++d) red.push_back(static_cast<int64_t>(d));
    std::tie(mean_t, rstd_t) = stats(c, x, red, eps, t);
    mean = c.at(mean_t, idx);
    rstd = c.at(rstd_t, idx);
  } else {
    mean = cast(load(rm.t, {idx[1]}, c.T(rm.t).dtype), t);
    rstd = unary("rsqrt", binary("add", cast(load(rv.t, {idx[1]}, c.T(rv.t).dtype), t), fl(eps, t)));
    mean_t = c.compute({xs[1]}, t, cast(load(rm.t, {var(0)}, c.T(rm.t).dtype), t), ReduceOp::None, {}, "_mean");
    rstd_t =
        c.compute({xs[1]}, t, unary("rsqrt", binary("add", cast(load(rv.t, {var(0)}, c.T(rv.t).dtype), t), fl(eps, t))),
                  ReduceOp::None, {}, "_rstd");
  }
  E y = binary("mul", binary("sub", cast(load(x, idx, c.T(x).dtype), t), mean), rstd);
  if (w.kind == Val::Kind::Tensor) y = binary("mul", y, cast(load(w.t, {idx[1]}, c.T(w.t).dtype), t));
  if (b.kind == Val::Kind::Tensor) y = binary("add", y, cast(load(b.t, {idx[1]}, c.T(b.t).dtype), t));
  const int out = c.compute(xs, t, y);
  std::vector<Val> res = {Val::tensor(out), Val::tensor(reshaped(c, mean_t, {xs[1]}, "_m")),
                          Val::tensor(reshaped(c, rstd_t, {xs[1]}, "_r"))};
  // The functional form also returns the updated running statistics: unchanged here (not results).
  if (c.node.contains("outputs") && c.node["outputs"].size() == 5) {
    res.push_back(rm);
    res.push_back(rv);
  }
  return Val::list(std::move(res));
}

// native_group_norm(x, w, b, N, C, HxW, group, eps) -> (out, mean [N, G], rstd [N, G])
Val group_norm(Ctx& c) {
  const int x = c.tensor_arg(0);
  const Val w = c.arg(1, "weight"), b = c.arg(2, "bias");
  const int64_t n = c.int_arg(3, "N", 1), ch = c.int_arg(4, "C", 1), hw = c.int_arg(5, "HxW", 1),
                g = c.int_arg(6, "group", 1);
  const double eps = c.num_arg(7, "eps", 1e-5);
  const DType t = c.dtype(0);
  const auto& xs = c.T(x).shape;
  // x viewed as [N, G, C/G * HxW]
  const int64_t per = ch / g * hw;
  const int xv = c.compute({n, g, per}, c.T(x).dtype,
                           load(
                               x,
                               [&] {
                                 std::vector<E> idx(xs.size());
                                 E lin = add(mul(add(mul(var(0), iconst(g)), var(1)), iconst(per)), var(2));
                                 E rest = lin;
                                 for (size_t d = xs.size(); d-- > 0;) {
                                   idx[d] = d == 0 ? rest : mod(rest, iconst(xs[d]));
                                   rest = floordiv(rest, iconst(xs[d]));
                                 }
                                 return idx;
                               }(),
                               c.T(x).dtype),
                           ReduceOp::None, {}, "_grouped");
  const auto [mean, rstd] = stats(c, xv, {2}, eps, t);
  const auto idx = out_vars(xs.size());
  const E grp = floordiv(idx[1], iconst(ch / g));
  E y = binary("mul", binary("sub", cast(load(x, idx, c.T(x).dtype), t), load(mean, {idx[0], grp, iconst(0)}, t)),
               load(rstd, {idx[0], grp, iconst(0)}, t));
  if (w.kind == Val::Kind::Tensor) y = binary("mul", y, cast(load(w.t, {idx[1]}, c.T(w.t).dtype), t));
  if (b.kind == Val::Kind::Tensor) y = binary("add", y, cast(load(b.t, {idx[1]}, c.T(b.t).dtype), t));
  const int out = c.compute(xs, t, y);
  return Val::list(
      {Val::tensor(out), Val::tensor(reshaped(c, mean, {n, g}, "_m")), Val::tensor(reshaped(c, rstd, {n, g}, "_r"))});
}

// upsample_nearest{1,2,3}d(x, output_size, scales...): src = floor(o * in / out).
Val upsample_nearest(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto& xs = c.T(x).shape;
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  std::vector<E> si = idx;
  for (size_t d = 2; d < shape.size(); ++d)
    si[d] = binary("min", floordiv(mul(idx[d], iconst(xs[d])), iconst(shape[d])), iconst(xs[d] - 1), DType::I64);
  return Val::tensor(c.compute(shape, c.T(x).dtype, load(x, si, c.T(x).dtype)));
}

// upsample_bilinear2d(x, output_size, align_corners, scales_h, scales_w)
Val upsample_bilinear(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto& xs = c.T(x).shape;
  const auto shape = c.shape();
  const bool align = c.bool_arg(2, "align_corners", false);
  const DType t = c.dtype();
  const auto idx = out_vars(shape.size());
  // Per spatial dim: the source coordinate, its floor i0, i1 = min(i0 + 1, L - 1), and the weight.
  struct Axis {
    E i0, i1, w;
  };
  std::vector<Axis> ax;
  for (size_t d = 2; d < 4; ++d) {
    const double scale = align
                             ? (shape[d] > 1 ? static_cast<double>(xs[d] - 1) / static_cast<double>(shape[d] - 1) : 0.0)
                             : static_cast<double>(xs[d]) / static_cast<double>(shape[d]);
    E src =
        align
            ? binary("mul", cast(idx[d], t), fl(scale, t))
            : binary("max",
                     binary("sub", binary("mul", binary("add", cast(idx[d], t), fl(0.5, t)), fl(scale, t)), fl(0.5, t)),
                     fl(0, t));
    E i0 = binary("min", cast(unary("floor", src), DType::I64), iconst(xs[d] - 1), DType::I64);
    E i1 = binary("min", add(i0, iconst(1)), iconst(xs[d] - 1), DType::I64);
    ax.push_back({i0, i1, binary("sub", src, cast(i0, t))});
  }
  auto at = [&](const E& h, const E& w) { return cast(load(x, {idx[0], idx[1], h, w}, c.T(x).dtype), t); };
  auto lerp = [&](const E& a, const E& b, const E& w) {
    return binary("add", binary("mul", a, binary("sub", fl(1, t), w)), binary("mul", b, w));
  };
  E top = lerp(at(ax[0].i0, ax[1].i0), at(ax[0].i0, ax[1].i1), ax[1].w);
  E bot = lerp(at(ax[0].i1, ax[1].i0), at(ax[0].i1, ax[1].i1), ax[1].w);
  return Val::tensor(c.compute(shape, t, lerp(top, bot, ax[0].w)));
}

}  // namespace

void add_linalg(Table& t) {
  t["mm"] = mm;
  t["bmm"] = mm;
  t["dot"] = mm;
  t["mv"] = mm;
  t["matmul"] = mm;
  t["addmm"] = addmm;
  t["baddbmm"] = addmm;
  t["addmv"] = addmm;
  t["convolution"] = convolution;
  t["max_pool2d_with_indices"] = max_pool;
  t["max_pool3d_with_indices"] = max_pool;
  t["max_pool1d"] = max_pool;
  t["max_pool2d"] = max_pool;
  t["max_pool3d"] = max_pool;
  t["max_pool1d_with_indices"] = max_pool;
  t["avg_pool1d"] = avg_pool;
  t["avg_pool2d"] = avg_pool;
  t["avg_pool3d"] = avg_pool;
  t["_adaptive_avg_pool2d"] = [](Ctx& c) { return adaptive_pool(c, false); };
  t["_adaptive_avg_pool3d"] = [](Ctx& c) { return adaptive_pool(c, false); };
  t["adaptive_max_pool2d"] = [](Ctx& c) { return adaptive_pool(c, true); };
  t["adaptive_max_pool3d"] = [](Ctx& c) { return adaptive_pool(c, true); };
  t["native_layer_norm"] = layer_norm;
  t["native_batch_norm"] = [](Ctx& c) { return batch_norm(c, 5, 7, false); };
  t["_native_batch_norm_legit_functional"] = [](Ctx& c) { return batch_norm(c, 5, 7, false); };
  t["_native_batch_norm_legit"] = [](Ctx& c) { return batch_norm(c, 5, 7, false); };
  t["_native_batch_norm_legit_no_training"] = [](Ctx& c) { return batch_norm(c, 5, 6, true); };
  t["native_group_norm"] = group_norm;
  t["upsample_nearest1d"] = upsample_nearest;
  t["upsample_nearest2d"] = upsample_nearest;
  t["upsample_nearest3d"] = upsample_nearest;
  t["upsample_bilinear2d"] = upsample_bilinear;
}

}  // namespace mblast::lower
