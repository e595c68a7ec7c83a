// OpenCL candidates for a chain plan: each stage's kernels made by the generator of its kind,
// enqueued in order on the runner's queue (an in-order queue, so each stage sees the previous
// one's results), the temporaries between them created once in mblast_prepare. All stages'
// kernels share one program: each stage's kernels are renamed mb_s<i>_..., and its #defines
// (they name sizes: M, N, R, ...) are undone after it.
#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

// The kernels of stage `i` under their stage-unique names (every kernel is declared "void mb_<name>(").
std::string stage_kernels(const std::string& kernels, size_t i) {
  return gpu::replace_all(kernels, "void mb_", fmt::format("void mb_s{}_", i));
}

Design compose(const KernelPlan& chain, const std::vector<const Design*>& parts) {
  Design d;
  gpu::describe_chain(parts, "opencl.chain", &d);
  for (const auto& t : chain.temps) d.temps.push_back(static_cast<int64_t>(t.numel()));
  for (size_t i = 0; i < parts.size(); ++i) {
    const Design& p = *parts[i];
    const KernelPlan& stage = chain.stages[i];
    if (!p.kernels.empty())
      d.kernels += fmt::format("// stage {}: {}\n{}\n{}\n", i, stage.summary(), stage_kernels(p.kernels, i),
                               gpu::undefs(p.kernels));
    // The stage's own temporaries (an im2col buffer) come after the chain's and earlier stages'.
    const size_t own_base = d.temps.size();
    d.temps.insert(d.temps.end(), p.temps.begin(), p.temps.end());
    // The stage writes its temporary (the last one the output) and reads earlier temporaries
    // where its plan reads inputs from first_temp on.
    auto buffer = [&](const std::string& b) -> std::string {
      if (b.starts_with("tmp")) return fmt::format("tmp{}", own_base + static_cast<size_t>(std::stoi(b.substr(3))));
      if (b == "out") return i + 1 < parts.size() ? fmt::format("tmp{}", i) : b;
      if (b.starts_with("in")) {
        const int index = std::stoi(b.substr(2));
        if (index >= chain.first_temp) return fmt::format("tmp{}", index - chain.first_temp);
      }
      return b;
    };
    for (auto [from, to] : {std::pair{&p.launches, &d.launches}, std::pair{&p.prepare_launches, &d.prepare_launches}})
      for (Launch l : *from) {
        if (!l.gemm) l.kernel = fmt::format("mb_s{}_{}", i, l.kernel.substr(3));
        for (auto& a : l.args) a = buffer(a);
        to->push_back(std::move(l));
      }
  }
  return d;
}

}  // namespace

std::vector<Design> chain_designs(const KernelPlan& plan, const Problem& problem, bool cpu_device) {
  return gpu::compose_chain<Design>(
      plan, problem, [&](const KernelPlan& p, const Problem& q) { return designs_for(p, q, cpu_device); },
      [&](const std::vector<const Design*>& parts) { return compose(plan, parts); });
}

}  // namespace mblast::policy::opencl
