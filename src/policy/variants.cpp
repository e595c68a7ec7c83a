// Dispatch of the builtin policy's generators by backend.
#include "mblast/policy/variants.h"

namespace mblast::policy {

std::vector<Variant> generate_variants(const KernelPlan& plan, const Problem& problem, const Target& target) {
  if (plan.kind == "unsupported") return {};
  if (target.backend == "opencl") return opencl_variants(plan, problem, target);
  if (target.backend == "cuda") return cuda_variants(plan, problem, target);
  if (target.backend == "rvv") return rvv_variants(plan, problem, target);
  return {};
}

}  // namespace mblast::policy
