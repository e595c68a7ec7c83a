// Generators of opencl candidates for the builtin policy (include/mblast/policy/variants.h).
#include "mblast/policy/variants.h"

namespace mblast::policy {

std::vector<Variant> opencl_variants(const KernelPlan&, const Problem&, const Target&) { return {}; }

}  // namespace mblast::policy
