#include "mblast/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

namespace mblast {

using protocol::FailureKind;

std::string index_string(const TensorSpec& spec, size_t flat) {
  std::vector<int64_t> idx(spec.shape.size());
  for (size_t d = spec.shape.size(); d-- > 0;) {
    const auto extent = static_cast<size_t>(std::max<int64_t>(spec.shape[d], 1));
    idx[d] = static_cast<int64_t>(flat % extent);
    flat /= extent;
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

namespace {
std::string num(double v) {
  std::ostringstream o;
  o.precision(7);
  o << v;
  return o.str();
}

// What one stretch of elements contributed; stretches merge in order.
struct Partial {
  size_t matched = 0, unwritten = 0, non_finite = 0;
  size_t first_unwritten, first_nonfinite, first_bad, worst_index = 0;
  double max_abs_err = 0, max_rel_err = 0, worst_excess = -1;
  explicit Partial(size_t n) : first_unwritten(n), first_nonfinite(n), first_bad(n) {}

  void merge(const Partial& o) {
    matched += o.matched;
    unwritten += o.unwritten;
    non_finite += o.non_finite;
    first_unwritten = std::min(first_unwritten, o.first_unwritten);
    first_nonfinite = std::min(first_nonfinite, o.first_nonfinite);
    first_bad = std::min(first_bad, o.first_bad);
    max_abs_err = std::max(max_abs_err, o.max_abs_err);
    max_rel_err = std::max(max_rel_err, o.max_rel_err);
    if (o.worst_excess > worst_excess) {  // a later stretch wins only when strictly worse, as in one pass
      worst_excess = o.worst_excess;
      worst_index = o.worst_index;
    }
  }
};

template <size_t ES>
struct WordOf;
template <>
struct WordOf<1> {
  using type = uint8_t;
};
template <>
struct WordOf<2> {
  using type = uint16_t;
};
template <>
struct WordOf<4> {
  using type = uint32_t;
};
template <>
struct WordOf<8> {
  using type = uint64_t;
};

// The common case of a block of elements, with no branch and no per-element bookkeeping:
// every element within its bound, none holding the poison. Adds the block's
// largest errors and returns true; returns false, adding nothing, when any element needs the
// per-element accounting of compare_range (an error, a poison, a NaN or an Inf in either).
template <size_t ES, typename Load>
bool clean_block(const Tolerance& tol, const std::byte* got, const std::byte* ref, int poison, size_t begin, size_t end,
                 Load load, Partial& c) {
  using Word = typename WordOf<ES>::type;
  Word pattern;
  std::memset(&pattern, poison < 0 ? 0 : poison, ES);
  const bool check_poison = poison >= 0;
  bool flagged = false;
  double max_abs = 0, max_rel = 0;
  for (size_t i = begin; i < end; ++i) {
    const double e = load(ref, i), v = load(got, i);
    Word w;
    std::memcpy(&w, got + i * ES, ES);
    const double err = std::fabs(v - e), mag = std::fabs(e);
    // NaN or Inf anywhere makes err NaN or Inf and fails this comparison.
    const bool within = err <= tol.atol + tol.rtol * mag;
    flagged |= (!within) | (check_poison & (w == pattern));
    max_abs = err > max_abs ? err : max_abs;
    const double rel = (mag > 0 ? err : 0.0) / (mag > 0 ? mag : 1.0);  // no division by zero, no branch
    max_rel = rel > max_rel ? rel : max_rel;
  }
  if (flagged) return false;
  c.matched += end - begin;
  c.max_abs_err = std::max(c.max_abs_err, max_abs);
  c.max_rel_err = std::max(c.max_rel_err, max_rel);
  return true;
}

// The per-element loop, instantiated per element size and loader so its work is a load and a
// compare. `poison` < 0: no unwritten detection.
template <size_t ES, typename Load>
void compare_elements(const Tolerance& tol, bool is_float, const std::byte* got, const std::byte* ref, int poison,
                      size_t n, size_t begin, size_t end, Load load, Partial& c) {
  std::byte pattern[ES];
  std::memset(pattern, poison < 0 ? 0 : poison, ES);
  for (size_t i = begin; i < end; ++i) {
    const std::byte* g = got + i * ES;
    const double e = load(ref, i);
    const double v = load(got, i);
    if (poison >= 0 && std::memcmp(g, pattern, ES) == 0 && std::memcmp(ref + i * ES, pattern, ES) != 0) {
      ++c.unwritten;
      if (c.first_unwritten == n) c.first_unwritten = i;
      continue;
    }
    if (is_float && std::isfinite(e) && !std::isfinite(v)) {
      ++c.non_finite;
      if (c.first_nonfinite == n) c.first_nonfinite = i;
      continue;
    }
    if (is_float && !std::isfinite(e)) {  // the reference itself is NaN/Inf: must match in kind
      const bool same = (std::isnan(e) && std::isnan(v)) || (std::isinf(e) && v == e);
      if (same)
        ++c.matched;
      else if (c.first_bad == n)
        c.first_bad = i;
      continue;
    }
    const double err = std::fabs(v - e), mag = std::fabs(e);
    const double bound = tol.atol + tol.rtol * mag;
    if (err > c.max_abs_err) c.max_abs_err = err;
    if (mag > 0 && err / mag > c.max_rel_err) c.max_rel_err = err / mag;  // as clean_block computes it
    if (err <= bound) {
      ++c.matched;
    } else {
      if (err - bound > c.worst_excess) {
        c.worst_excess = err - bound;
        c.worst_index = i;
      }
      if (c.first_bad == n) c.first_bad = i;
    }
  }
}

// One stretch: block by block, the fast path first and the exact accounting where it declines.
// Every element's contribution is the same either way, so the result is that of one pass.
template <size_t ES, typename Load>
Partial compare_range(const Tolerance& tol, bool is_float, const std::byte* got, const std::byte* ref, int poison,
                      size_t n, size_t begin, size_t end, Load load) {
  Partial c(n);
  constexpr size_t kBlock = 1024;
  for (size_t b = begin; b < end; b += kBlock) {
    const size_t e = std::min(end, b + kBlock);
    if (!clean_block<ES>(tol, got, ref, poison, b, e, load, c))
      compare_elements<ES>(tol, is_float, got, ref, poison, n, b, e, load, c);
  }
  return c;
}

// Large outputs are compared in stretches on several threads (a full-size output has hundreds
// of millions of elements, checked after every run); the result is the same as one pass.
template <size_t ES, typename Load>
OutputCheck compare_as(const TensorSpec& spec, const Tolerance& tol, std::span<const std::byte> got,
                       std::span<const std::byte> ref, int poison, const char* what, Load load) {
  OutputCheck c;
  const size_t n = spec.numel();
  c.total = n;
  if (got.size() != spec.nbytes() || ref.size() != spec.nbytes()) {
    c.kind = FailureKind::runner_error;
    c.reason = "output '" + spec.name + "' has " + std::to_string(got.size()) + " bytes, expected " +
               std::to_string(spec.nbytes());
    return c;
  }
  const bool is_float = dtype_is_float(spec.dtype);
  constexpr size_t kStretch = size_t{1} << 22;
  const size_t threads =
      std::min<size_t>({(n + kStretch - 1) / kStretch, std::max(1u, std::thread::hardware_concurrency()), 16});
  Partial all(n);
  if (threads <= 1) {
    all = compare_range<ES>(tol, is_float, got.data(), ref.data(), poison, n, 0, n, load);
  } else {
    std::vector<Partial> parts(threads, Partial(n));
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        parts[t] = compare_range<ES>(tol, is_float, got.data(), ref.data(), poison, n, n * t / threads,
                                     n * (t + 1) / threads, load);
      });
    for (auto& th : pool) th.join();
    for (const auto& p : parts) all.merge(p);
  }
  c.matched = all.matched;
  c.unwritten = all.unwritten;
  c.non_finite = all.non_finite;
  c.max_abs_err = all.max_abs_err;
  c.max_rel_err = all.max_rel_err;
  c.worst_index = all.worst_index;
  auto at = [&](size_t i) { return "'" + spec.name + "'" + index_string(spec, i); };
  if (c.unwritten > 0) {
    c.kind = FailureKind::unwritten_output;
    c.reason = std::to_string(c.unwritten) + " of " + std::to_string(n) + " elements of " + at(all.first_unwritten) +
               " onward were never written (still hold the poison written before the call)";
    c.worst_index = all.first_unwritten;
  } else if (c.non_finite > 0) {
    c.kind = FailureKind::nan_or_inf;
    c.reason = std::to_string(c.non_finite) + " elements are NaN or Inf where the reference is finite, first at " +
               at(all.first_nonfinite);
    c.worst_index = all.first_nonfinite;
  } else if (static_cast<double>(c.matched) < tol.min_match * static_cast<double>(n)) {
    c.kind = FailureKind::wrong_output;
    const size_t w = c.worst_index;
    c.reason = std::to_string(n - c.matched) + " of " + std::to_string(n) + " elements " + what + "; worst at " +
               at(w) + ": got " + num(element_as_double(spec.dtype, got.data(), w)) + ", expected " +
               num(element_as_double(spec.dtype, ref.data(), w)) + " (atol " + num(tol.atol) + ", rtol " +
               num(tol.rtol) + ", need " + num(tol.min_match * 100) + "% within)";
  }
  return c;
}

// Integers and bools: every element byte for byte (no tolerance; an int64 beyond 2^53 would
// round as a double). Errors are reported as doubles.
template <size_t ES>
OutputCheck compare_exact(const TensorSpec& spec, std::span<const std::byte> got, std::span<const std::byte> ref,
                          int poison, const char* what) {
  OutputCheck c;
  const size_t n = spec.numel();
  c.total = n;
  if (got.size() != spec.nbytes() || ref.size() != spec.nbytes()) {
    c.kind = FailureKind::runner_error;
    c.reason = "output '" + spec.name + "' has " + std::to_string(got.size()) + " bytes, expected " +
               std::to_string(spec.nbytes());
    return c;
  }
  std::byte pattern[ES];
  std::memset(pattern, poison < 0 ? 0 : poison, ES);
  size_t first_unwritten = n, first_bad = n;
  const bool is_bool = spec.dtype == DType::boolean;
  for (size_t i = 0; i < n; ++i) {
    const std::byte* g = got.data() + i * ES;
    const std::byte* e = ref.data() + i * ES;
    if (std::memcmp(g, e, ES) == 0) {
      ++c.matched;
      continue;
    }
    // A bool byte other than 0 or 1 equal to the poison was never written; for integers the
    // poison is a value like any other, so it counts as unwritten only where the reference differs.
    if (poison >= 0 && std::memcmp(g, pattern, ES) == 0) {
      ++c.unwritten;
      if (first_unwritten == n) first_unwritten = i;
      continue;
    }
    const double want = element_as_double(spec.dtype, ref.data(), i);
    const double err = std::fabs(element_as_double(spec.dtype, got.data(), i) - want), mag = std::fabs(want);
    c.max_abs_err = std::max(c.max_abs_err, err);
    if (mag > 0) c.max_rel_err = std::max(c.max_rel_err, err / mag);
    if (first_bad == n) first_bad = i;
  }
  auto at = [&](size_t i) { return "'" + spec.name + "'" + index_string(spec, i); };
  if (c.unwritten > 0) {
    c.kind = FailureKind::unwritten_output;
    c.reason = std::to_string(c.unwritten) + " of " + std::to_string(n) + " elements of " + at(first_unwritten) +
               " onward were never written (still hold the poison written before the call)";
    c.worst_index = first_unwritten;
  } else if (c.matched < n) {
    c.kind = FailureKind::wrong_output;
    c.worst_index = first_bad;
    c.reason = std::to_string(n - c.matched) + " of " + std::to_string(n) + " elements " + what + "; first at " +
               at(first_bad) + ": got " + num(element_as_double(spec.dtype, got.data(), first_bad)) + ", expected " +
               num(element_as_double(spec.dtype, ref.data(), first_bad)) + " (" + std::string(dtype_name(spec.dtype)) +
               (is_bool ? ": every element must be exactly 0 or 1 and equal)" : ": integers must be equal)");
  }
  return c;
}

template <typename T>
double load_plain(const std::byte* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}

OutputCheck compare(const TensorSpec& spec, const Tolerance& tol, std::span<const std::byte> got,
                    std::span<const std::byte> ref, int poison, const char* what) {
  auto any = [&](auto es_tag) {
    constexpr size_t ES = decltype(es_tag)::value;
    return compare_as<ES>(spec, tol, got, ref, poison, what,
                          [t = spec.dtype](const std::byte* p, size_t i) { return element_as_double(t, p, i); });
  };
  if (!dtype_is_float(spec.dtype)) {  // exact, whatever tolerance problem.json gives
    switch (dtype_size(spec.dtype)) {
      case 8:
        return compare_exact<8>(spec, got, ref, poison, what);
      case 4:
        return compare_exact<4>(spec, got, ref, poison, what);
      case 2:
        return compare_exact<2>(spec, got, ref, poison, what);
      default:
        return compare_exact<1>(spec, got, ref, poison, what);
    }
  }
  switch (spec.dtype) {
    case DType::f32:
      return compare_as<4>(spec, tol, got, ref, poison, what,
                           [](const std::byte* p, size_t i) { return load_plain<float>(p, i); });
    case DType::f64:
      return compare_as<8>(spec, tol, got, ref, poison, what,
                           [](const std::byte* p, size_t i) { return load_plain<double>(p, i); });
    case DType::i32:
      return compare_as<4>(spec, tol, got, ref, poison, what,
                           [](const std::byte* p, size_t i) { return load_plain<int32_t>(p, i); });
    case DType::f16:
    case DType::bf16:
      return any(std::integral_constant<size_t, 2>{});
    case DType::i64:
      return any(std::integral_constant<size_t, 8>{});
    default:
      return any(std::integral_constant<size_t, 1>{});
  }
}
}  // namespace

OutputCheck check_output(const TensorSpec& spec, const Tolerance& tol, std::span<const std::byte> got,
                         std::span<const std::byte> expected, std::byte poison) {
  return compare(spec, tol, got, expected, static_cast<int>(poison), "differ from the reference");
}

OutputCheck check_agreement(const TensorSpec& spec, const Tolerance& tol, std::span<const std::byte> first,
                            std::span<const std::byte> second) {
  OutputCheck c = compare(spec, tol, second, first, -1, "differ between two runs on the same inputs");
  if (c.kind == FailureKind::wrong_output || c.kind == FailureKind::nan_or_inf) c.kind = FailureKind::nondeterministic;
  return c;
}

}  // namespace mblast
