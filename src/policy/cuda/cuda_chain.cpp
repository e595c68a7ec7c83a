// CUDA candidates for a chain plan: each stage's kernels made by the generator of its kind,
// launched in order on the runner's stream, the temporaries between them allocated once in
// mblast_prepare. Each stage's device code lives in its own namespace (kernel names repeat
// between stages) and its #defines are undone after it (they name sizes: M, N, R, ...).
//
// Which combinations of the stages' designs are offered: gpu::chain_combinations.
#include <sstream>

#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

std::string indent(const std::string& code) {
  std::istringstream in(code);
  std::string line, out;
  while (std::getline(in, line)) out += (line.empty() ? "" : "  ") + line + "\n";
  return out;
}

Design compose(const KernelPlan& chain, const std::vector<const Design*>& parts) {
  Design d;
  gpu::describe_chain(parts, "cuda.chain", &d);
  for (const auto& t : chain.temps) d.temps.push_back(static_cast<int64_t>(t.numel()));
  for (size_t i = 0; i < parts.size(); ++i) {
    const Design& p = *parts[i];
    const KernelPlan& stage = chain.stages[i];
    d.cublas = d.cublas || p.cublas;
    d.device_code += fmt::format("// stage {}: {}\nnamespace mb_s{} {{\n\n{}\n}}  // namespace mb_s{}\n{}\n", i, stage.summary(), i,
                                 p.device_code, i, gpu::undefs(p.device_code));
    std::string bind;
    if (i + 1 < parts.size()) bind += fmt::format("    float* out0 = s->tmp[{}];\n", i);
    for (const auto& t : gpu::plan_tensors(stage))
      if (!t.is_param && t.index >= chain.first_temp)
        bind += fmt::format("    const float* {} = s->tmp[{}];\n", gpu::buffer_name(t), t.index - chain.first_temp);
    d.launch_code += fmt::format("  {{  // stage {}: {}\n    using namespace mb_s{};\n{}{}  }}\n", i, p.family, i, bind, indent(p.launch_code));
  }
  return d;
}

}  // namespace

std::vector<Design> chain_designs(const KernelPlan& plan, const Problem& problem) {
  return gpu::compose_chain<Design>(
      plan, problem,
      [](const KernelPlan& stage, const Problem& sp) {
        std::vector<Design> ds = designs_for(stage, sp);
        // One cuBLAS handle serves every stage, in one math mode: FP32 (TF32 stays a single-kernel variant).
        std::erase_if(ds, [](const Design& d) { return d.tf32; });
        return ds;
      },
      [&](const std::vector<const Design*>& parts) { return compose(plan, parts); });
}

}  // namespace mblast::policy::cuda
