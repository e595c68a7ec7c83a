// A user's own kernel as the input of `mblast optimize`: a candidate file in the ABI of its
// backend (include/mblast/abi.h) plus a small JSON spec beside it that names its tensors. mblast
// makes a problem directory from the two: inputs and parameters drawn by the spec, and the
// kernel's own outputs on the target as the reference (docs/optimize.md "Your own kernel").
#pragma once

#include <filesystem>
#include <string>

#include "mblast/measure/evaluate.h"
#include "mblast/target.h"

namespace mblast {

// Whether `file` looks like a kernel of one of the backends (.cu, .cpp/.cc/.cxx, .c).
bool is_kernel_file(const std::filesystem::path& file);

// The spec mblast looks for when none is given: <folder>/<name>.spec.json, where <name> is the
// file name up to its first dot (softmax.cu -> softmax.spec.json), else up to its last dot.
std::filesystem::path default_spec_for(const std::filesystem::path& kernel);

// Makes (or reuses) the problem directory for `kernel` on `target` under `root`, keyed by the
// kernel's and the spec's bytes and the target: problem.json, data/ with the inputs of 3 seeds
// (one signed) and parameters of 2 inits, and the expected outputs captured from the kernel
// itself, run twice per case under the runner's limits. Throws UserError with a one-line reason
// for a bad spec, a kernel for another backend, or a kernel that fails, leaves an output
// unwritten or non-finite, or disagrees with itself; a half-made directory is never reused.
std::filesystem::path prepare_user_problem(const std::filesystem::path& kernel, const std::filesystem::path& spec,
                                           const Target& target, const std::filesystem::path& root,
                                           const EvalOptions& options);

}  // namespace mblast
