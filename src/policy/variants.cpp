// Dispatch of the builtin policy's generators by backend.
#include "mblast/policy/variants.h"

#include <fmt/format.h>

#include "mblast/lower/dialects.h"

namespace mblast::policy {

namespace {

std::vector<Variant> backend_variants(const KernelPlan& plan, const Problem& problem, const Target& target) {
  if (target.backend == "opencl") return opencl_variants(plan, problem, target);
  if (target.backend == "cuda") return cuda_variants(plan, problem, target);
  if (target.backend == "rvv") return rvv_variants(plan, problem, target);
  return {};
}

}  // namespace

std::optional<Variant> lowered_variant(const Problem& problem, const Target& target, std::string* reason) {
  const char* ext = target.backend == "opencl" ? ".opencl.cpp"
                    : target.backend == "cuda" ? ".cuda.cu"
                    : target.backend == "rvv"  ? ".rvv.c"
                                               : nullptr;
  if (!ext) {
    if (reason) *reason = "the lowering pipeline has no dialect for backend " + target.backend;
    return std::nullopt;
  }
  const auto lowered = lower::lower_problem(problem);
  if (!lowered.program) {
    if (reason) *reason = lowered.error;
    return std::nullopt;
  }
  try {
    const auto sched = lower::schedule(*lowered.program);
    Variant v;
    v.family = "lower.generic";
    v.actions = {target.backend + ".lower-generic"};
    v.description =
        fmt::format("the lowering pipeline: {} kernel(s), a work item per element, scan line or reduction tile",
                    sched.kernels.size());
    v.extension = ext;
    v.source = target.backend == "opencl" ? lower::emit_opencl(sched, problem)
               : target.backend == "cuda" ? lower::emit_cuda(sched, problem)
                                          : lower::emit_rvv(sched, problem);
    return v;
  } catch (const std::exception& e) {
    if (reason) *reason = e.what();  // the callers say it is the lowering pipeline's
    return std::nullopt;
  }
}

std::vector<Variant> generate_variants(const KernelPlan& plan, const Problem& problem, const Target& target) {
  if (plan.kind == "unsupported") {
    // No generator recognises the graph: the lowering pipeline's candidate, when it lowers.
    if (auto lv = lowered_variant(problem, target)) return {std::move(*lv)};
    return {};
  }
  // A chain of a row statistic and the elementwise work that reads it: as one kernel first (no
  // temporary, one launch; on CUDA the row read once), then the chain's kernels.
  std::vector<Variant> v;
  if (const auto fused = fuse_row_map(plan)) v = backend_variants(*fused, problem, target);
  for (auto& c : backend_variants(plan, problem, target)) v.push_back(std::move(c));
  if (v.empty())
    if (auto lv = lowered_variant(problem, target)) v.push_back(std::move(*lv));
  return v;
}

}  // namespace mblast::policy
