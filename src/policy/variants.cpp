// Dispatch of the builtin policy's generators by backend.
#include "mblast/policy/variants.h"

namespace mblast::policy {

namespace {

std::vector<Variant> backend_variants(const KernelPlan& plan, const Problem& problem, const Target& target) {
  if (target.backend == "opencl") return opencl_variants(plan, problem, target);
  if (target.backend == "cuda") return cuda_variants(plan, problem, target);
  if (target.backend == "rvv") return rvv_variants(plan, problem, target);
  return {};
}

}  // namespace

std::vector<Variant> generate_variants(const KernelPlan& plan, const Problem& problem, const Target& target) {
  if (plan.kind == "unsupported") return {};
  // A chain of a row statistic and the elementwise work that reads it: as one kernel first (no
  // temporary, one launch; on CUDA the row read once), then the chain's kernels.
  std::vector<Variant> v;
  if (const auto fused = fuse_row_map(plan)) v = backend_variants(*fused, problem, target);
  for (auto& c : backend_variants(plan, problem, target)) v.push_back(std::move(c));
  return v;
}

}  // namespace mblast::policy
