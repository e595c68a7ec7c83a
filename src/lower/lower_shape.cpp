// Shape ops as index maps (no copy): view / reshape (through the linear index), permute,
// transpose, expand, squeeze / unsqueeze, slice, select, cat, split, flip, roll, pad, repeat,
// unfold, tril / triu; and the gathers, whose index is data: index_select, gather, embedding,
// index.Tensor.
#include <functional>
#include <numeric>

#include "lowering.h"

namespace mblast::lower {

namespace {

// A tensor `src` read at index `idx` of the result (rank of src).
Val map_to(Ctx& c, int src, const std::function<std::vector<E>(const std::vector<E>&)>& f, int out_k = -1,
           const std::string& suffix = "") {
  const auto shape = c.shape(out_k);
  const auto idx = out_vars(shape.size());
  const Tensor& s = c.T(src);
  return Val::tensor(c.compute(shape, s.dtype, load(src, f(idx), s.dtype), ReduceOp::None, {}, suffix));
}

// The index of `src_shape` that has the same row-major linear position as `idx` in `shape`.
std::vector<E> relinearise(const std::vector<int64_t>& shape, const std::vector<E>& idx,
                           const std::vector<int64_t>& src_shape) {
  if (shape == src_shape) return idx;
  // Only size-1 dims added or removed (squeeze, unsqueeze, a view that does so): dim to dim.
  std::vector<size_t> a, b;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) a.push_back(d);
  for (size_t d = 0; d < src_shape.size(); ++d)
    if (src_shape[d] != 1) b.push_back(d);
  bool same = a.size() == b.size();
  for (size_t k = 0; same && k < a.size(); ++k) same = shape[a[k]] == src_shape[b[k]];
  if (same) {
    std::vector<E> out(src_shape.size(), iconst(0));
    for (size_t k = 0; k < a.size(); ++k) out[b[k]] = idx[a[k]];
    return out;
  }
  // Dims equal at the front are kept as they are (a reshape of the trailing dims).
  E lin = iconst(0);
  for (size_t d = 0; d < shape.size(); ++d) lin = add(mul(lin, iconst(shape[d])), idx[d]);
  std::vector<E> out(src_shape.size());
  E rest = lin;
  for (size_t d = src_shape.size(); d-- > 0;) {
    out[d] = src_shape[d] == 1 ? iconst(0) : (d == 0 ? rest : mod(rest, iconst(src_shape[d])));
    rest = floordiv(rest, iconst(src_shape[d]));
  }
  return out;
}

Val view(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto shape = c.shape();
  const auto src = c.T(x).shape;
  return map_to(c, x, [&](const std::vector<E>& idx) { return relinearise(shape, idx, src); });
}

Val permute(Ctx& c, std::vector<int64_t> perm) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  return map_to(c, x, [&](const std::vector<E>& idx) {
    std::vector<E> s(static_cast<size_t>(r));
    for (int d = 0; d < r; ++d)
      s[static_cast<size_t>(norm_dim(perm[static_cast<size_t>(d)], r))] = idx[static_cast<size_t>(d)];
    return s;
  });
}

Val expand(Ctx& c) {
  const int x = c.tensor_arg(0);
  return map_to(c, x, [&](const std::vector<E>& idx) {
    const auto& s = c.T(x).shape;
    std::vector<E> o;
    for (size_t d = 0; d < s.size(); ++d) o.push_back(s[d] == 1 ? iconst(0) : idx[idx.size() - s.size() + d]);
    return o;
  });
}

Val slice(Ctx& c) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const int dim = norm_dim(c.int_arg(1, "dim", 0), r);
  const int64_t size = c.T(x).shape[static_cast<size_t>(dim)];
  int64_t start = c.has(2, "start") ? c.int_arg(2, "start", 0) : 0;
  const int64_t step = c.int_arg(4, "step", 1);
  if (start < 0) start += size;
  start = std::clamp<int64_t>(start, 0, size);
  return map_to(c, x, [&](const std::vector<E>& idx) {
    auto s = idx;
    s[static_cast<size_t>(dim)] = add(mul(idx[static_cast<size_t>(dim)], iconst(step)), iconst(start));
    return s;
  });
}

Val select_op(Ctx& c) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const int dim = norm_dim(c.int_arg(1, "dim", 0), r);
  int64_t i = c.int_arg(2, "index", 0);
  if (i < 0) i += c.T(x).shape[static_cast<size_t>(dim)];
  return map_to(c, x, [&](const std::vector<E>& idx) {
    std::vector<E> s(idx.begin(), idx.end());
    s.insert(s.begin() + dim, iconst(i));
    return s;
  });
}

Val cat(Ctx& c) {
  const Val list = c.arg(0, "tensors");
  std::vector<int> xs;
  for (const auto& v : list.items) {
    if (v.kind != Val::Kind::Tensor) throw Unsupported("cat of a non-tensor");
    if (c.T(v.t).numel() == 0) continue;
    xs.push_back(v.t);
  }
  const auto shape = c.shape();
  const int r = static_cast<int>(shape.size());
  const int dim = norm_dim(c.int_arg(1, "dim", 0), r);
  const auto idx = out_vars(shape.size());
  const DType t = c.dtype();
  // Nested selects, last part innermost: off_k <= i < off_k + size_k reads part k.
  std::vector<int64_t> offs;
  int64_t off = 0;
  for (int x : xs) {
    offs.push_back(off);
    off += c.T(x).shape[static_cast<size_t>(dim)];
  }
  if (xs.empty()) throw Unsupported("cat of nothing");
  // A balanced tree of selects on the offset (depth log2 of the parts, not their number: a cat of
  // hundreds of time steps stays within a compiler's nesting limits and costs few compares).
  std::function<E(size_t, size_t)> part = [&](size_t lo, size_t hi) -> E {
    if (hi - lo == 1) {
      auto s = idx;
      s[static_cast<size_t>(dim)] = sub(idx[static_cast<size_t>(dim)], iconst(offs[lo]));
      return cast(load(xs[lo], s, c.T(xs[lo]).dtype), t);
    }
    const size_t mid = lo + (hi - lo) / 2;
    return select(lt(idx[static_cast<size_t>(dim)], iconst(offs[mid])), part(lo, mid), part(mid, hi));
  };
  return Val::tensor(c.compute(shape, t, part(0, xs.size())));
}

// stack(tensors, dim): a new dim of the list's length; element k along it is tensor k.
Val stack(Ctx& c) {
  const Val list = c.arg(0, "tensors");
  const auto shape = c.shape();
  const int r = static_cast<int>(shape.size());
  const int dim = norm_dim(c.int_arg(1, "dim", 0), r);
  const auto idx = out_vars(shape.size());
  const DType t = c.dtype();
  auto rest = idx;
  rest.erase(rest.begin() + dim);
  for (const Val& v : list.items)
    if (v.kind != Val::Kind::Tensor || c.rank(v.t) != r - 1) throw Unsupported("stack of a non-tensor or another rank");
  if (list.items.empty()) throw Unsupported("stack of nothing");
  // A balanced tree of selects, as cat's.
  std::function<E(size_t, size_t)> part = [&](size_t lo, size_t hi) -> E {
    if (hi - lo == 1) return cast(load(list.items[lo].t, rest, c.T(list.items[lo].t).dtype), t);
    const size_t mid = lo + (hi - lo) / 2;
    return select(lt(idx[static_cast<size_t>(dim)], iconst(static_cast<int64_t>(mid))), part(lo, mid), part(mid, hi));
  };
  return Val::tensor(c.compute(shape, t, part(0, list.items.size())));
}

Val split(Ctx& c, bool with_sizes) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const int dim = norm_dim(c.int_arg(2, "dim", 0), r);
  const int64_t n = c.T(x).shape[static_cast<size_t>(dim)];
  std::vector<int64_t> sizes;
  if (with_sizes) {
    sizes = c.ints_arg(1, "split_sizes");
  } else {
    const int64_t each = c.int_arg(1, "split_size", n);
    for (int64_t o = 0; o < n; o += each) sizes.push_back(std::min(each, n - o));
  }
  std::vector<Val> parts;
  int64_t off = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    parts.push_back(map_to(
        c, x,
        [&](const std::vector<E>& idx) {
          auto s = idx;
          s[static_cast<size_t>(dim)] = add(idx[static_cast<size_t>(dim)], iconst(off));
          return s;
        },
        static_cast<int>(k), "_" + std::to_string(k)));
    off += sizes[k];
  }
  return Val::list(std::move(parts));
}

Val unbind(Ctx& c) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const int dim = norm_dim(c.int_arg(1, "dim", 0), r);
  std::vector<Val> parts;
  for (int64_t k = 0; k < c.T(x).shape[static_cast<size_t>(dim)]; ++k)
    parts.push_back(map_to(
        c, x,
        [&](const std::vector<E>& idx) {
          std::vector<E> s(idx.begin(), idx.end());
          s.insert(s.begin() + dim, iconst(k));
          return s;
        },
        static_cast<int>(k), "_" + std::to_string(k)));
  return Val::list(std::move(parts));
}

Val flip(Ctx& c) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const auto dims = c.ints_arg(1, "dims");
  return map_to(c, x, [&](const std::vector<E>& idx) {
    auto s = idx;
    for (auto d0 : dims) {
      const auto d = static_cast<size_t>(norm_dim(d0, r));
      s[d] = sub(iconst(c.T(x).shape[d] - 1), idx[d]);
    }
    return s;
  });
}

Val roll(Ctx& c) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const auto shifts = c.ints_arg(1, "shifts");
  const auto dims = c.ints_arg(2, "dims");
  if (dims.empty()) throw Unsupported("roll without dims (of the flattened tensor)");
  return map_to(c, x, [&](const std::vector<E>& idx) {
    auto s = idx;
    for (size_t k = 0; k < dims.size(); ++k) {
      const auto d = static_cast<size_t>(norm_dim(dims[k], r));
      const int64_t n = c.T(x).shape[d];
      s[d] = mod(add(idx[d], iconst(((-shifts[k]) % n + n) % n)), iconst(n));
    }
    return s;
  });
}

Val pad(Ctx& c) {  // constant_pad_nd(x, pad, value): pad lists (before, after) from the last dim
  const int x = c.tensor_arg(0);
  const auto pads = c.ints_arg(1, "pad");
  const double value = c.num_arg(2, "value", 0);
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  const Tensor& s = c.T(x);
  const size_t r = s.shape.size();
  std::vector<E> src = idx;
  E ok = iconst(1, DType::Bool);
  for (size_t k = 0; k * 2 < pads.size(); ++k) {
    const size_t d = r - 1 - k;
    src[d] = sub(idx[d], iconst(pads[2 * k]));
    ok = land(ok, land(ge(src[d], iconst(0)), lt(src[d], iconst(s.shape[d]))));
  }
  return Val::tensor(c.compute(shape, s.dtype, select(ok, load(x, src, s.dtype), fconst(value, s.dtype))));
}

Val repeat(Ctx& c) {
  const int x = c.tensor_arg(0);
  const auto shape = c.shape();
  const auto& s = c.T(x).shape;
  return map_to(c, x, [&](const std::vector<E>& idx) {
    std::vector<E> o;
    for (size_t d = 0; d < s.size(); ++d) {
      const E i = idx[idx.size() - s.size() + d];
      o.push_back(s[d] == 1 ? iconst(0) : mod(i, iconst(s[d])));
    }
    return o;
  });
}

Val unfold(Ctx& c) {  // x.unfold(dim, size, step): a new last dim of `size`
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const int dim = norm_dim(c.int_arg(1, "dimension", 0), r);
  const int64_t step = c.int_arg(3, "step", 1);
  return map_to(c, x, [&](const std::vector<E>& idx) {
    std::vector<E> s(idx.begin(), idx.end() - 1);
    s[static_cast<size_t>(dim)] = add(mul(idx[static_cast<size_t>(dim)], iconst(step)), idx.back());
    return s;
  });
}

Val tri(Ctx& c, bool lower) {
  const int x = c.tensor_arg(0);
  const int64_t k = c.int_arg(1, "diagonal", 0);
  const auto shape = c.shape();
  const auto idx = out_vars(shape.size());
  const E i = idx[shape.size() - 2], j = idx[shape.size() - 1];
  const DType t = c.T(x).dtype;
  // tril keeps j - i <= k, triu keeps j - i >= k.
  const E d = sub(j, i);
  const E keep = lower ? lt(d, iconst(k + 1)) : ge(d, iconst(k));
  return Val::tensor(c.compute(shape, t, select(keep, load(x, idx, t), fconst(0, t))));
}

// Data-dependent index: a negative index counts from the end.
E wrap(const E& i, int64_t n) { return select(lt(i, iconst(0)), add(i, iconst(n)), i); }

Val index_select(Ctx& c) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const int dim = norm_dim(c.int_arg(1, "dim", 0), r);
  const int ix = c.tensor_arg(2, "index");
  return map_to(c, x, [&](const std::vector<E>& idx) {
    auto s = idx;
    const E i = cast(load(ix, {idx[static_cast<size_t>(dim)]}, c.T(ix).dtype), DType::I64);
    s[static_cast<size_t>(dim)] = wrap(i, c.T(x).shape[static_cast<size_t>(dim)]);
    return s;
  });
}

Val gather(Ctx& c) {
  const int x = c.tensor_arg(0);
  const int r = c.rank(x);
  const int dim = norm_dim(c.int_arg(1, "dim", 0), r);
  const int ix = c.tensor_arg(2, "index");
  return map_to(c, x, [&](const std::vector<E>& idx) {
    auto s = idx;
    s[static_cast<size_t>(dim)] =
        wrap(cast(load(ix, idx, c.T(ix).dtype), DType::I64), c.T(x).shape[static_cast<size_t>(dim)]);
    return s;
  });
}

Val embedding(Ctx& c) {
  const int w = c.tensor_arg(0);
  const int ix = c.tensor_arg(1, "indices");
  const int ir = c.rank(ix);
  return map_to(c, w, [&](const std::vector<E>& idx) {
    std::vector<E> ii(idx.begin(), idx.begin() + ir);
    return std::vector<E>{cast(load(ix, ii, c.T(ix).dtype), DType::I64), idx.back()};
  });
}

// x[i0, i1, ...] with index tensors (None keeps a dim): the index tensors broadcast to one
// shape B; adjacent indexed dims put B in their place, separated ones put B first.
Val index_tensor(Ctx& c) {
  const int x = c.tensor_arg(0);
  const Val list = c.arg(1, "indices");
  const auto& xs = c.T(x).shape;
  std::vector<int> which;  // dims with an index tensor
  std::vector<int> ids(xs.size(), -1);
  for (size_t d = 0; d < list.items.size(); ++d) {
    if (list.items[d].kind == Val::Kind::None) continue;
    if (list.items[d].kind != Val::Kind::Tensor) throw Unsupported("index by a non-tensor");
    ids[d] = list.items[d].t;
    which.push_back(static_cast<int>(d));
  }
  if (which.empty()) throw Unsupported("index without index tensors");
  size_t brank = 0;
  for (int d : which) brank = std::max(brank, c.T(ids[static_cast<size_t>(d)]).shape.size());
  bool adjacent = true;
  for (size_t k = 1; k < which.size(); ++k) adjacent = adjacent && which[k] == which[k - 1] + 1;
  const auto shape = c.shape();
  return map_to(c, x, [&](const std::vector<E>& idx) {
    const size_t bstart = adjacent ? static_cast<size_t>(which[0]) : 0;
    std::vector<E> b(idx.begin() + static_cast<long>(bstart), idx.begin() + static_cast<long>(bstart + brank));
    std::vector<E> s(xs.size());
    size_t o = 0;
    for (size_t d = 0; d < xs.size(); ++d) {
      if (o == bstart && adjacent && ids[d] >= 0) o += brank;
      if (!adjacent && o == 0) o = brank;
      if (ids[d] >= 0) {
        const Tensor& it = c.T(ids[d]);
        std::vector<E> ii;
        for (size_t k = 0; k < it.shape.size(); ++k)
          ii.push_back(it.shape[k] == 1 ? iconst(0) : b[brank - it.shape.size() + k]);
        E v = load(ids[d], ii, it.dtype);
        if (it.dtype == DType::Bool) throw Unsupported("index by a bool mask (its result's size depends on the data)");
        s[d] = wrap(cast(v, DType::I64), xs[d]);
      } else {
        s[d] = idx[o++];
      }
    }
    return s;
  });
}

bool traced_dense(const Tensor& t) {
  if (t.traced_strides.empty()) return true;
  int64_t stride = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] > 1 && t.traced_strides[d] != stride) return false;
    stride *= t.shape[d];
  }
  return true;
}

// The tensor whose dense layout is x's storage: x when torch had it contiguous, else the base of
// the views x came from (out[:, -1, :] selects from a contiguous output), or -1.
int storage_root(const Ctx& c, int x) {
  for (int hop = 0; hop < 32; ++hop) {
    const Tensor& t = c.T(x);
    if (traced_dense(t)) return x;
    if (t.role != Tensor::Role::Computed || !t.body || t.body->kind != Node::Kind::Load || t.reduce != ReduceOp::None ||
        !is_view_op(op_key(t.origin)))
      return -1;
    x = t.body->tensor;
  }
  return -1;
}

// as_strided(x, size, stride, storage_offset): an index map over x's storage, which is the dense
// layout of x, or of the contiguous tensor x is a view of.
Val as_strided(Ctx& c) {
  const int x = storage_root(c, c.tensor_arg(0));
  if (x < 0) throw Unsupported("as_strided of a tensor that was not contiguous when traced, nor a view of one");
  const auto& xs = c.T(x);
  const auto strides = c.ints_arg(2, "stride");
  const int64_t offset = c.int_arg(3, "storage_offset", 0);
  const auto shape = c.shape();
  if (strides.size() != shape.size()) throw Unsupported("as_strided with a stride per dim missing");
  return map_to(c, x, [&](const std::vector<E>& idx) {
    E lin = iconst(offset);
    for (size_t d = 0; d < idx.size(); ++d) lin = add(lin, mul(idx[d], iconst(strides[d])));
    std::vector<E> o(xs.shape.size());
    E rest = lin;
    for (size_t d = xs.shape.size(); d-- > 0;) {
      o[d] = xs.shape[d] == 1 ? iconst(0) : (d == 0 ? rest : mod(rest, iconst(xs.shape[d])));
      rest = floordiv(rest, iconst(xs.shape[d]));
    }
    return o;
  });
}

}  // namespace

void add_shape(Table& t) {
  t["as_strided"] = as_strided;
  for (const char* op : {"view", "_unsafe_view", "reshape", "flatten", "unflatten", "view_as", "reshape_as"})
    t[op] = view;
  t["prims.reshape"] = view;
  t["permute"] = [](Ctx& c) { return permute(c, c.ints_arg(1, "dims")); };
  t["t"] = [](Ctx& c) {
    const int r = c.rank(c.tensor_arg(0));
    return r < 2 ? view(c) : permute(c, {1, 0});
  };
  t["numpy_T"] = [](Ctx& c) {
    std::vector<int64_t> p(static_cast<size_t>(c.rank(c.tensor_arg(0))));
    std::iota(p.rbegin(), p.rend(), 0);
    return permute(c, p);
  };
  t["transpose"] = [](Ctx& c) {
    const int r = c.rank(c.tensor_arg(0));
    std::vector<int64_t> p(static_cast<size_t>(r));
    std::iota(p.begin(), p.end(), 0);
    if (r == 0) return view(c);
    std::swap(p[static_cast<size_t>(norm_dim(c.int_arg(1, "dim0", 0), r))],
              p[static_cast<size_t>(norm_dim(c.int_arg(2, "dim1", 1), r))]);
    return permute(c, p);
  };
  t["expand"] = expand;
  t["expand_as"] = expand;
  t["broadcast_to"] = expand;
  t["squeeze"] = view;
  t["unsqueeze"] = view;
  t["slice"] = slice;
  t["select"] = select_op;
  t["cat"] = cat;
  t["concat"] = cat;
  t["stack"] = stack;
  t["split"] = [](Ctx& c) { return split(c, false); };
  t["split_with_sizes"] = [](Ctx& c) { return split(c, true); };
  // The unsafe_ forms differ only in autograd's view tracking: the same values.
  t["unsafe_split"] = [](Ctx& c) { return split(c, false); };
  t["unsafe_split_with_sizes"] = [](Ctx& c) { return split(c, true); };
  t["unbind"] = unbind;
  t["flip"] = flip;
  t["roll"] = roll;
  t["constant_pad_nd"] = pad;
  t["repeat"] = repeat;
  t["unfold"] = unfold;
  t["tril"] = [](Ctx& c) { return tri(c, true); };
  t["triu"] = [](Ctx& c) { return tri(c, false); };
  t["index_select"] = index_select;
  t["gather"] = gather;
  t["embedding"] = embedding;
  t["index"] = index_tensor;
  t["getitem"] = [](Ctx& c) {
    const Val v = c.arg(0);
    const int64_t k = c.int_arg(1, nullptr, 0);
    if (v.kind != Val::Kind::List || k < 0 || static_cast<size_t>(k) >= v.items.size())
      throw Unsupported("getitem of a non-list");
    return v.items[static_cast<size_t>(k)];
  };
}

}  // namespace mblast::lower
