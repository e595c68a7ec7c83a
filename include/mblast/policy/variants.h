// The builtin policy's executable actions: candidate sources generated from a KernelPlan, one
// generator per backend (src/policy/<backend>/), each variant tagged with the knowledge-base
// actions it applies (kb_schema/seed/*.jsonl ids) and its tunable parameters.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/policy/kernel_plan.h"
#include "mblast/target.h"

namespace mblast::policy {

struct Variant {
  // A stable name of the generator family ("opencl.softmax.row-per-group"); with `params`
  // it identifies the variant: the same family and params always give the same source.
  std::string family;
  // KB action ids this variant applies, the main one first ("opencl.local-memory-tiling").
  // Every id must exist in the seed (a test checks).
  std::vector<std::string> actions;
  nlohmann::json params = nlohmann::json::object();  // {"tile": 16, "wg": 128}
  std::string description;                           // one line, for progress and reports
  std::string source;                                // the candidate file's text (include/mblast/abi.h ABI)
  std::string extension;                             // file name suffix: ".opencl.cpp", ".cuda.cu", ".rvv.c"
};

// Every variant the backend's generators make for `plan` on `target` (its parameter grids
// included; a few dozen at most). Empty when the plan's kind is unsupported or the backend has
// no generator for it. Never throws for a supported plan.
std::vector<Variant> opencl_variants(const KernelPlan& plan, const Problem& problem, const Target& target);
std::vector<Variant> cuda_variants(const KernelPlan& plan, const Problem& problem, const Target& target);
std::vector<Variant> rvv_variants(const KernelPlan& plan, const Problem& problem, const Target& target);

// Dispatches on target.backend. A chain that fuse_row_map() makes one row_map plan gets that
// plan's variants first, then the chain's.
// A chain no generator covers (kind "unsupported", or a backend without variants for it) gets the
// lowering pipeline's candidate (family "lower.generic", src/lower) when the ATen graph lowers.
std::vector<Variant> generate_variants(const KernelPlan& plan, const Problem& problem, const Target& target);

// The lowering pipeline's candidate for the problem on the target's backend; nullopt with the
// one-line reason (the unsupported op and its node) otherwise.
std::optional<Variant> lowered_variant(const Problem& problem, const Target& target, std::string* reason = nullptr);

}  // namespace mblast::policy
