// OpenCL candidates for a chain plan: each stage's kernels made by the generator of its kind,
// enqueued in order on the runner's queue (an in-order queue, so each stage sees the previous
// one's results), the temporaries between them created once in mblast_prepare. All stages'
// kernels share one program: each stage's kernels are renamed mb_s<i>_..., and its #defines
// (they name sizes: M, N, R, ...) are undone after it.
#include <algorithm>

#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

// The kernels of stage `i` under their stage-unique names (every kernel is declared "void mb_<name>(").
std::string stage_kernels(const std::string& kernels, size_t i) {
  const std::string from = "void mb_", to = fmt::format("void mb_s{}_", i);
  std::string out = kernels;
  for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size())) out.replace(at, from.size(), to);
  return out;
}

Design compose(const KernelPlan& chain, const std::vector<const Design*>& parts) {
  Design d;
  d.family = "opencl.chain";
  d.params = {{"stages", nlohmann::json::array()}};
  for (const auto& t : chain.temps) d.temps.push_back(static_cast<int64_t>(t.numel()));
  d.description = fmt::format("{} kernels in order: ", parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const Design& p = *parts[i];
    const KernelPlan& stage = chain.stages[i];
    d.params["stages"].push_back({{"family", p.family}, {"params", p.params}});
    d.description += (i ? "; then " : "") + p.description;
    for (const auto& a : p.actions)
      if (std::find(d.actions.begin(), d.actions.end(), a) == d.actions.end()) d.actions.push_back(a);
    if (!p.kernels.empty())
      d.kernels += fmt::format("// stage {}: {}\n{}\n{}\n", i, stage.summary(), stage_kernels(p.kernels, i), gpu::undefs(p.kernels));
    // The stage writes its temporary (the last one the output) and reads earlier temporaries
    // where its plan reads inputs from first_temp on.
    auto buffer = [&](const std::string& b) -> std::string {
      if (b == "out") return i + 1 < parts.size() ? fmt::format("tmp{}", i) : b;
      if (b.starts_with("in")) {
        const int index = std::stoi(b.substr(2));
        if (index >= chain.first_temp) return fmt::format("tmp{}", index - chain.first_temp);
      }
      return b;
    };
    for (Launch l : p.launches) {
      if (!l.gemm) l.kernel = fmt::format("mb_s{}_{}", i, l.kernel.substr(3));
      for (auto& a : l.args) a = buffer(a);
      d.launches.push_back(std::move(l));
    }
  }
  return d;
}

}  // namespace

std::vector<Design> chain_designs(const KernelPlan& plan, const Problem& problem) {
  if (plan.kind != "chain" || plan.stages.empty()) return {};
  std::vector<std::vector<Design>> per_stage;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    std::vector<Design> ds = designs_for(plan.stages[i], stage_problem(problem, plan, i));
    if (ds.empty()) return {};  // a stage no generator makes: no chain
    sizes.push_back(ds.size());
    per_stage.push_back(std::move(ds));
  }
  std::vector<Design> out;
  for (const auto& combo : gpu::chain_combinations(sizes)) {
    std::vector<const Design*> parts;
    for (size_t i = 0; i < combo.size(); ++i) parts.push_back(&per_stage[i][combo[i]]);
    out.push_back(compose(plan, parts));
  }
  return out;
}

}  // namespace mblast::policy::opencl
