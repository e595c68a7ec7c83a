// Generators of rvv candidates for the builtin policy (include/mblast/policy/variants.h).
#include "mblast/policy/variants.h"

namespace mblast::policy {

std::vector<Variant> rvv_variants(const KernelPlan&, const Problem&, const Target&) { return {}; }

}  // namespace mblast::policy
