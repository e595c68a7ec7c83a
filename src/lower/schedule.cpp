// The scheduler: which tensors get a kernel of their own and which are computed where they are
// read. Correct first: a kernel computes one output element per thread (work-item, loop
// iteration) with its reduction as loops; producers that are pure index maps or pointwise work
// are inlined into their readers (chains, prologues, epilogues fuse that way); reductions,
// outputs and what several readers share (unless it is cheap) are materialised.
#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "mblast/lower/lower.h"

namespace mblast::lower {

namespace {

// Inlining an expression of more nodes than this into more than one reader materialises it
// instead: the work would be repeated and the expressions grow with every level of sharing.
constexpr int kCheapNodes = 12;
// No expression grows past this by inlining (very long chains get a temporary in between).
constexpr int kMaxInlinedNodes = 600;

void count_loads(const E& e, std::vector<int>& uses) {
  if (e->kind == Node::Kind::Load) ++uses[static_cast<size_t>(e->tensor)];
  for (const auto& a : e->args) count_loads(a, uses);
}

bool is_index_map(const E& e) {
  if (e->kind == Node::Kind::Cast) return is_index_map(e->args[0]);
  return e->kind == Node::Kind::Load || e->kind == Node::Kind::Const;
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
    inline_it[t] = pointwise && size <= kMaxInlinedNodes && (uses[t] <= 1 || size <= kCheapNodes || is_index_map(body));
  }
  // An output that is its producer read element by element: the producer's kernel writes it.
  std::vector<int> fused_into(n, -1);
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const auto o = static_cast<size_t>(p.outputs[k]);
    const E& b = inlined[o];
    if (b->kind != Node::Kind::Load) continue;
    const auto src = static_cast<size_t>(b->tensor);
    const auto& st = p.tensors[src];
    if (st.role != Tensor::Role::Computed || inline_it[src] || uses[src] != 1 || st.dtype != p.tensors[o].dtype ||
        st.shape != p.tensors[o].shape || output_of[src] >= 0)
      continue;
    bool identity = true;
    for (size_t d = 0; d < b->args.size(); ++d) identity = identity && b->args[d]->kind == Node::Kind::Var && b->args[d]->var == static_cast<int>(d);
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
    if (output_of[t] >= 0 && inlined[t]->kind == Node::Kind::Load && fused_into[static_cast<size_t>(inlined[t]->tensor)] == static_cast<int>(t))
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
    k.name = fmt::format("k{}_{}", s.kernels.size(), base);
    if (fused_into[t] >= 0) {
      // The kernel writes the output's buffer with the output's dtype.
      s.program.tensors[t].dtype = p.tensors[static_cast<size_t>(fused_into[t])].dtype;
    }
    s.kernels.push_back(std::move(k));
  }
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
    if (k.reduce != ReduceOp::None) out += fmt::format(", {} over {} per element", reduce_name(k.reduce), red);
    out += fmt::format(", {} expression nodes\n", node_count(k.body));
  }
  return out;
}

}  // namespace mblast::lower
