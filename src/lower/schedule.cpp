// The scheduler: which tensors get a kernel of their own and which are computed where they are
// read, and how each kernel's work is split. Producers that are pure index maps or pointwise
// work are inlined into their readers (chains, prologues, epilogues fuse that way); reductions,
// scans, outputs and what several readers share (unless it is cheap) are materialised.
// A pointwise kernel computes one output element per work item; a scan walks one line per work
// item; a reduction (contraction, convolution, pooling, row statistics) computes a register tile
// per work item: `lanes` neighbours along the dim its loads are contiguous in (an output dim, or
// the innermost reduction variable split into independent partial sums) times `block`
// neighbours along an output dim that some loads do not depend on (those loads are shared).
#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "lowering.h"
#include "mblast/lower/lower.h"

namespace mblast::lower {

namespace {

// Inlining an expression of more nodes than this into more than one reader materialises it
// instead: the work would be repeated and the expressions grow with every level of sharing.
constexpr int kCheapNodes = 12;
// No expression grows past this by inlining (very long chains get a temporary in between).
constexpr int kMaxInlinedNodes = 600;
// Nor deeper than this: OpenCL C compilers refuse more than 256 nested brackets, and a deep
// chain (an RNN's steps) is better read from a temporary.
constexpr int kMaxInlinedDepth = 96;
// A schedule of more kernels than this is refused (pocl took over a minute to build 2,316 kernels).
constexpr size_t kMaxKernels = 512;

int depth(const E& e) {
  int d = 0;
  for (const auto& a : e->args) d = std::max(d, depth(a));
  return d + 1;
}

void count_loads(const E& e, std::vector<int>& uses) {
  if (e->kind == Node::Kind::Load) ++uses[static_cast<size_t>(e->tensor)];
  for (const auto& a : e->args) count_loads(a, uses);
}

bool is_index_map(const E& e) {
  if (e->kind == Node::Kind::Cast) return is_index_map(e->args[0]);
  return e->kind == Node::Kind::Load || e->kind == Node::Kind::Const;
}

// Independent accumulators per work item, at most (the copies of the body the kernel holds).
constexpr int kMaxLanes = 8;
constexpr int kMaxBlock = 4;
// Kernels whose body would exceed this many expression nodes once copied per accumulator get
// fewer copies (compile time and register pressure grow with it).
constexpr int kMaxTileNodes = 6000;
// A float sum runs in float while each accumulator adds at most this many terms (its rounding
// error then stays near the reference's own, which also sums in float); longer ones in double.
constexpr int64_t kFloatSumTerms = 4096;

// An integer index expression at given variable values; empty where it is not one (a data
// dependent load, a float).
std::optional<int64_t> eval_index(const E& e, const std::vector<int64_t>& at) {
  switch (e->kind) {
    case Node::Kind::Const:
      if (is_float(e->dtype)) return std::nullopt;
      return e->ival;
    case Node::Kind::Var:
      if (e->var < 0 || static_cast<size_t>(e->var) >= at.size()) return std::nullopt;
      return at[static_cast<size_t>(e->var)];
    case Node::Kind::Cast:
      if (is_float(e->dtype) || is_float(e->args[0]->dtype)) return std::nullopt;
      return eval_index(e->args[0], at);
    case Node::Kind::Select: {
      const auto c = eval_index(e->args[0], at);
      if (!c) return std::nullopt;
      return eval_index(e->args[*c ? 1 : 2], at);
    }
    case Node::Kind::Unary: {
      const auto a = eval_index(e->args[0], at);
      if (!a) return std::nullopt;
      if (e->op == "neg") return -*a;
      if (e->op == "not") return static_cast<int64_t>(!*a);
      return std::nullopt;
    }
    case Node::Kind::Binary: {
      const auto a = eval_index(e->args[0], at), b = eval_index(e->args[1], at);
      if (!a || !b) return std::nullopt;
      const int64_t x = *a, y = *b;
      const auto& op = e->op;
      if (op == "add") return x + y;
      if (op == "sub") return x - y;
      if (op == "mul") return x * y;
      if (op == "floordiv" || op == "div") {
        if (y == 0) return std::nullopt;
        return (x % y != 0 && ((x < 0) != (y < 0))) ? x / y - 1 : x / y;
      }
      if (op == "mod" || op == "remainder") return y == 0 ? std::nullopt : std::optional<int64_t>(((x % y) + y) % y);
      if (op == "min") return std::min(x, y);
      if (op == "max") return std::max(x, y);
      if (op == "eq") return static_cast<int64_t>(x == y);
      if (op == "ne") return static_cast<int64_t>(x != y);
      if (op == "lt") return static_cast<int64_t>(x < y);
      if (op == "le") return static_cast<int64_t>(x <= y);
      if (op == "gt") return static_cast<int64_t>(x > y);
      if (op == "ge") return static_cast<int64_t>(x >= y);
      if (op == "and") return static_cast<int64_t>(x && y);
      if (op == "or") return static_cast<int64_t>(x || y);
      return std::nullopt;
    }
    case Node::Kind::Load:
      return std::nullopt;
  }
  return std::nullopt;
}

// The value loads of a body (not those inside another load's index).
void value_loads(const E& e, std::vector<E>& out) {
  if (e->kind == Node::Kind::Load) {
    out.push_back(e);
    return;
  }
  for (const auto& a : e->args) value_loads(a, out);
}

// The element offset a load reads at `at`, or empty.
std::optional<int64_t> load_offset(const Program& p, const E& ld, const std::vector<int64_t>& at) {
  const auto& t = p.tensors[static_cast<size_t>(ld->tensor)];
  int64_t off = 0, stride = 1;
  for (size_t k = t.shape.size(); k-- > 0;) {
    if (k < ld->args.size()) {
      const auto v = eval_index(ld->args[k], at);
      if (!v) return std::nullopt;
      off += *v * stride;
    }
    stride *= t.shape[k];
  }
  return off;
}

// Per load, how far it moves when variable v steps by one (at the middle of every extent);
// empty where that is not a fixed number.
std::vector<std::optional<int64_t>> strides_of(const Program& p, const std::vector<E>& loads,
                                               const std::vector<int64_t>& ext, int v) {
  std::vector<int64_t> at(ext.size());
  for (size_t k = 0; k < ext.size(); ++k) at[k] = ext[k] / 2;
  std::vector<int64_t> at1 = at;
  const auto sv = static_cast<size_t>(v);
  if (at1[sv] + 1 >= ext[sv] && at1[sv] > 0)
    --at[sv];  // the last index: step from the one before
  else
    ++at1[sv];
  std::vector<std::optional<int64_t>> out;
  for (const auto& ld : loads) {
    const auto a = load_offset(p, ld, at), b = load_offset(p, ld, at1);
    out.push_back(a && b ? std::optional<int64_t>(*b - *a) : std::nullopt);
  }
  return out;
}

int largest_divisor(int64_t n, int at_most) {
  for (int d = at_most; d > 1; d /= 2)
    if (n % d == 0) return d;
  return 1;
}

// The work split of one kernel (the fields of Kernel after `name`).
void split(const Program& p, Kernel& k) {
  const auto& t = p.tensors[static_cast<size_t>(k.tensor)];
  const int rank = static_cast<int>(t.shape.size());
  const int64_t n = std::max<int64_t>(t.numel(), 1);
  const DType vt = k.body->dtype;
  k.scan_dim = t.scan_dim;
  k.items = n;
  int64_t terms = 1;
  for (auto e : k.reduce_extents) terms *= e;
  if (k.scan_dim >= 0) {
    terms = t.shape[static_cast<size_t>(k.scan_dim)];
    k.items = t.shape[static_cast<size_t>(k.scan_dim)] > 0 ? n / t.shape[static_cast<size_t>(k.scan_dim)] : 0;
  }
  // Accumulators: products in double (their rounding compounds), integer sums in 64 bits.
  k.acc = vt;
  if (k.reduce == ReduceOp::Sum || k.reduce == ReduceOp::Prod) {
    if (!is_float(vt))
      k.acc = DType::I64;
    else if (vt == DType::F32 && (k.reduce == ReduceOp::Prod || k.scan_dim >= 0))
      k.acc = DType::F64;
  }
  const bool tileable = k.reduce == ReduceOp::Sum || k.reduce == ReduceOp::Max || k.reduce == ReduceOp::Min;
  if (k.scan_dim >= 0 || !tileable || k.reduce_extents.empty()) {
    if (k.reduce == ReduceOp::Sum && vt == DType::F32 && k.scan_dim < 0 && terms > kFloatSumTerms) k.acc = DType::F64;
    return;
  }
  std::vector<int64_t> ext(t.shape.begin(), t.shape.end());
  ext.insert(ext.end(), k.reduce_extents.begin(), k.reduce_extents.end());
  std::vector<E> loads;
  value_loads(k.body, loads);
  // The lane variable: the last output dim or the innermost reduction variable, whichever more
  // loads read contiguously (the output dim on a tie: its lanes need no final combination).
  auto contiguous = [&](int v) {
    int c = 0;
    for (const auto& st : strides_of(p, loads, ext, v)) c += st && *st == 1;
    return c;
  };
  const int rv = rank + static_cast<int>(k.reduce_extents.size()) - 1;
  const int c_out = rank > 0 ? contiguous(rank - 1) : 0, c_red = contiguous(rv);
  if (c_out > 0 && c_out >= c_red && !(t.loop >= 0 && rank == 1))  // a loop's step dim is not tiled
    k.lane_var = rank - 1;
  else if (c_red > 0)
    k.lane_var = rv;
  if (k.lane_var >= 0) {
    k.lanes = largest_divisor(ext[static_cast<size_t>(k.lane_var)], kMaxLanes);
    if (k.lanes == 1) k.lane_var = -1;
  }
  // The block variable: the output dim (not the lane's) whose copies share the most loads; a
  // load that moves with the lanes is a vector of them, and counts as that many.
  std::vector<int> weight(loads.size(), 1);
  if (k.lane_var >= 0) {
    const auto ls = strides_of(p, loads, ext, k.lane_var);
    for (size_t q = 0; q < loads.size(); ++q) weight[q] = ls[q] && *ls[q] == 0 ? 1 : k.lanes;
  }
  int best = 0;
  for (int v = 0; v < rank; ++v) {
    if (v == k.lane_var || ext[static_cast<size_t>(v)] < 2 || (t.loop >= 0 && v == 0)) continue;
    int shared = 0, moving = 0;
    const auto vs = strides_of(p, loads, ext, v);
    for (size_t q = 0; q < loads.size(); ++q) {
      shared += vs[q] && *vs[q] == 0 ? weight[q] : 0;
      moving += !vs[q] || *vs[q] != 0;
    }
    if (moving > 0 && shared > best && largest_divisor(ext[static_cast<size_t>(v)], kMaxBlock) > 1) {
      best = shared;
      k.block_var = v;
    }
  }
  if (k.block_var >= 0) k.block = largest_divisor(ext[static_cast<size_t>(k.block_var)], kMaxBlock);
  const int nodes = node_count(k.body);
  while (k.block > 1 && nodes * k.lanes * k.block > kMaxTileNodes) k.block /= 2;
  while (k.lanes > 1 && nodes * k.lanes * k.block > kMaxTileNodes) k.lanes /= 2;
  if (k.block == 1) k.block_var = -1;
  if (k.lanes == 1) k.lane_var = -1;
  const bool reduce_lanes = k.lane_var >= rank;
  if (k.lane_var >= 0 && !reduce_lanes) k.items /= k.lanes;
  if (k.block_var >= 0) k.items /= k.block;
  if (k.reduce == ReduceOp::Sum && vt == DType::F32 && terms / (reduce_lanes ? k.lanes : 1) > kFloatSumTerms)
    k.acc = DType::F64;
}

// A reduction with few outputs and many terms per output leaves most of the device idle: its
// outermost reduction variable that divides evenly is cut into chunks, each reduced by a work
// item of its own into a temporary (a new tensor, returned; -1 when the kernel is not split),
// and the kernel itself then reduces the chunks.
constexpr int64_t kFewOutputs = 64;
constexpr int64_t kManyTerms = 4096;
constexpr int kPartials = 64;

int partial_reduction(Schedule& s, const Kernel& k) {
  const auto& t = s.program.tensors[static_cast<size_t>(k.tensor)];
  if (t.scan_dim >= 0 || t.loop >= 0 || k.reduce_extents.empty()) return -1;
  if (k.reduce != ReduceOp::Sum && k.reduce != ReduceOp::Max && k.reduce != ReduceOp::Min) return -1;
  int64_t terms = 1;
  for (auto e : k.reduce_extents) terms *= e;
  if (std::max<int64_t>(t.numel(), 1) >= kFewOutputs || terms < kManyTerms) return -1;
  const int rank = static_cast<int>(t.shape.size());
  const int nred = static_cast<int>(k.reduce_extents.size());
  int cut = -1, parts = 1;
  for (int r = 0; r < nred && cut < 0; ++r) {
    parts = largest_divisor(k.reduce_extents[static_cast<size_t>(r)], kPartials);
    if (parts >= 4) cut = r;
  }
  if (cut < 0) return -1;
  const int64_t chunk = k.reduce_extents[static_cast<size_t>(cut)] / parts;
  // Partial tensor: output vars 0..rank-1 and the chunk (rank); reduction vars from rank + 1.
  std::vector<E> subst = out_vars(static_cast<size_t>(rank));
  for (int r = 0; r < nred; ++r) {
    E v = var(rank + 1 + r);
    subst.push_back(r == cut ? add(mul(var(rank), iconst(chunk)), v) : v);
  }
  Tensor pt;
  pt.name = t.name + "_part";
  const DType vt = k.body->dtype;
  // Sums of float chunks are stored in double until they are combined (the body keeps its dtype:
  // the chunk's accumulator is chosen by its length, as for any kernel).
  pt.dtype = k.reduce == ReduceOp::Sum && vt == DType::F32 ? DType::F64 : vt;
  pt.shape = t.shape;
  pt.shape.push_back(parts);
  pt.body = substitute(k.body, subst);
  pt.reduce = k.reduce;
  pt.reduce_extents = k.reduce_extents;
  pt.reduce_extents[static_cast<size_t>(cut)] = chunk;
  pt.origin = t.origin;
  const int id = s.program.add(std::move(pt));
  s.buffer.push_back(fmt::format("tmp{}", s.temps.size()));
  s.temps.push_back(id);
  return id;
}

}  // namespace

Schedule schedule(const Program& p) {
  Schedule s;
  s.program = p;
  const size_t n = p.tensors.size();
  s.buffer.assign(n, "");
  // Live tensors: what the outputs read, transitively.
  std::vector<bool> live(n, false);
  std::vector<int> stack(p.outputs.begin(), p.outputs.end());
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    if (live[static_cast<size_t>(t)]) continue;
    live[static_cast<size_t>(t)] = true;
    const auto& x = p.tensors[static_cast<size_t>(t)];
    if (!x.body) continue;
    std::vector<int> u(n, 0);
    count_loads(x.body, u);
    for (size_t k = 0; k < n; ++k)
      if (u[k]) stack.push_back(static_cast<int>(k));
  }
  std::vector<int> uses(n, 0);
  for (size_t t = 0; t < n; ++t)
    if (live[t] && p.tensors[t].body) count_loads(p.tensors[t].body, uses);

  std::vector<int> output_of(n, -1);
  for (size_t k = 0; k < p.outputs.size(); ++k) output_of[static_cast<size_t>(p.outputs[k])] = static_cast<int>(k);

  // Tensors are created producers first, so one pass in id order sees every producer decided.
  std::vector<E> inlined(n);
  std::vector<bool> inline_it(n, false);
  for (size_t t = 0; t < n; ++t) {
    const auto& x = p.tensors[t];
    if (!live[t]) continue;
    if (x.role == Tensor::Role::Input) {
      s.buffer[t] = fmt::format("in{}", x.arg_index);
      continue;
    }
    if (x.role == Tensor::Role::Param) {
      s.buffer[t] = fmt::format("par{}", x.arg_index);
      continue;
    }
    std::function<E(const E&)> walk = [&](const E& e) -> E {
      if (e->kind == Node::Kind::Load && e->args.empty() && inline_it[static_cast<size_t>(e->tensor)])
        return inlined[static_cast<size_t>(e->tensor)];  // a 0-dim producer
      if (e->args.empty()) return e;
      std::vector<E> args;
      bool changed = false;
      for (const auto& a : e->args) {
        args.push_back(walk(a));
        changed = changed || args.back() != a;
      }
      if (e->kind == Node::Kind::Load && inline_it[static_cast<size_t>(e->tensor)])
        return substitute(inlined[static_cast<size_t>(e->tensor)], args);
      return changed ? rebuild(e, std::move(args)) : e;
    };
    const E body = walk(x.body);
    inlined[t] = body;
    const int size = node_count(body);
    const bool pointwise = x.reduce == ReduceOp::None && output_of[t] < 0;
    inline_it[t] = pointwise && x.loop < 0 && size <= kMaxInlinedNodes && depth(body) <= kMaxInlinedDepth &&
                   (uses[t] <= 1 || size <= kCheapNodes || is_index_map(body));
  }
  // An output that is its producer read element by element: the producer's kernel writes it.
  std::vector<int> fused_into(n, -1);
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const auto o = static_cast<size_t>(p.outputs[k]);
    const E& b = inlined[o];
    if (b->kind != Node::Kind::Load) continue;
    const auto src = static_cast<size_t>(b->tensor);
    const auto& st = p.tensors[src];
    if (st.role != Tensor::Role::Computed || inline_it[src] || uses[src] != 1 || st.loop >= 0 ||
        st.dtype != p.tensors[o].dtype || st.shape != p.tensors[o].shape || output_of[src] >= 0)
      continue;
    bool identity = true;
    for (size_t d = 0; d < b->args.size(); ++d)
      identity = identity && b->args[d]->kind == Node::Kind::Var && b->args[d]->var == static_cast<int>(d);
    if (identity) fused_into[src] = static_cast<int>(o);
  }
  int tmp = 0;
  for (size_t t = 0; t < n; ++t) {
    const auto& x = p.tensors[t];
    if (!live[t] || x.role != Tensor::Role::Computed || inline_it[t]) continue;
    if (fused_into[t] >= 0) {
      s.buffer[t] = fmt::format("out{}", output_of[static_cast<size_t>(fused_into[t])]);
      continue;
    }
    if (output_of[t] >= 0) {
      const E& b = inlined[t];
      if (b->kind == Node::Kind::Load && fused_into[static_cast<size_t>(b->tensor)] == static_cast<int>(t)) {
        s.buffer[t] = fmt::format("out{}", output_of[t]);
        continue;
      }
      s.buffer[t] = fmt::format("out{}", output_of[t]);
    } else {
      s.buffer[t] = fmt::format("tmp{}", tmp++);
      s.temps.push_back(static_cast<int>(t));
    }
  }
  for (size_t t = 0; t < n; ++t) {
    const auto& x = p.tensors[t];
    if (!live[t] || x.role != Tensor::Role::Computed || inline_it[t]) continue;
    if (output_of[t] >= 0 && inlined[t]->kind == Node::Kind::Load &&
        fused_into[static_cast<size_t>(inlined[t]->tensor)] == static_cast<int>(t))
      continue;  // written by its producer's kernel
    Kernel k;
    k.tensor = static_cast<int>(t);
    k.body = inlined[t];
    k.reduce = x.reduce;
    k.reduce_extents = x.reduce_extents;
    k.output = fused_into[t] >= 0 ? output_of[static_cast<size_t>(fused_into[t])] : output_of[t];
    std::string base = x.name;
    for (auto& ch : base)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    if (fused_into[t] >= 0) {
      // The kernel writes the output's buffer with the output's dtype.
      s.program.tensors[t].dtype = p.tensors[static_cast<size_t>(fused_into[t])].dtype;
    }
    if (const int part = partial_reduction(s, k); part >= 0) {
      // The partial results first, into a temporary of their own; this kernel then combines them.
      Kernel pk;
      pk.tensor = part;
      pk.body = s.program.tensors[static_cast<size_t>(part)].body;
      pk.reduce = k.reduce;
      pk.reduce_extents = s.program.tensors[static_cast<size_t>(part)].reduce_extents;
      pk.name = fmt::format("k{}_{}_part", s.kernels.size(), base);
      split(s.program, pk);
      s.kernels.push_back(std::move(pk));
      k.body = load(
          part,
          [&] {
            auto idx = out_vars(x.shape.size());
            idx.push_back(var(static_cast<int>(x.shape.size())));
            return idx;
          }(),
          s.program.tensors[static_cast<size_t>(part)].dtype);
      k.reduce_extents = {s.program.tensors[static_cast<size_t>(part)].shape.back()};
    }
    k.name = fmt::format("k{}_{}", s.kernels.size(), base);
    split(s.program, k);
    if (x.loop >= 0) {
      k.loop = x.loop;
      k.items /= std::max<int64_t>(x.shape.at(0), 1);  // per step
    }
    s.kernels.push_back(std::move(k));
  }
  // A loop's kernels run as one host-side loop: they must be adjacent (its tensors are created
  // one after another, and what they read from outside the loop before them).
  std::set<int> closed;
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const int l = s.kernels[i].loop;
    if (l < 0 || !s.opens_loop(i)) continue;
    if (!closed.insert(l).second)
      throw std::runtime_error(fmt::format("loop {}: its kernels are not adjacent (kernel {})", l, s.kernels[i].name));
  }
  if (s.kernels.size() > kMaxKernels)
    throw std::runtime_error(fmt::format(
        "{} kernels, more than {}: the graph is a loop unrolled (a recurrent cell stepped by a Python loop, say; the "
        "pipeline's loop construct covers nn.RNN, nn.LSTM and nn.GRU layers); a program that large takes minutes to "
        "build",
        s.kernels.size(), kMaxKernels));
  return s;
}

std::string Schedule::summary() const {
  std::string out;
  for (const auto& k : kernels) {
    const auto& t = program.tensors[static_cast<size_t>(k.tensor)];
    std::string shape;
    for (size_t d = 0; d < t.shape.size(); ++d) shape += (d ? ", " : "") + std::to_string(t.shape[d]);
    int64_t red = 1;
    for (auto e : k.reduce_extents) red *= e;
    out += fmt::format("  {} -> {} [{}] {}", k.name, buffer[static_cast<size_t>(k.tensor)], shape, dtype_name(t.dtype));
    if (k.scan_dim >= 0)
      out += fmt::format(", {} scan along dim {}", reduce_name(k.reduce), k.scan_dim);
    else if (k.reduce != ReduceOp::None)
      out += fmt::format(", {} over {} per element", reduce_name(k.reduce), red);
    if (k.lanes > 1 || k.block > 1) out += fmt::format(", {}x{} tile per work item", k.block, k.lanes);
    out += fmt::format(", {} expression nodes\n", node_count(k.body));
  }
  return out;
}

}  // namespace mblast::lower
