// Tunable parameters a user declares in their own kernel, so the builtin policy can tune it:
//
//   #define TILE 16   // mblast:tune 8 16 32
//   #define WG 128    // mblast:tune 64 128 256 action=opencl.work-group-size-from-kernel-info
//
// A `#define NAME VALUE` line with a `mblast:tune` comment lists the values to try (the
// current one need not be among them); `action=` names the KB action the knob belongs to
// (default: the backend's block/work-group size action). Documented in docs/optimize.md.
#pragma once

#include <string>
#include <vector>

#include "mblast/policy/variants.h"

namespace mblast::loop {

struct Tunable {
  std::string name, current, action;
  std::vector<std::string> values;
  size_t line = 0;  // 0-based line of the #define
};

// The annotated knobs of a source. Throws UserError for a malformed annotation (no values,
// a value that is not a single token), naming the line.
std::vector<Tunable> parse_tunables(const std::string& source);

// Variants of `source` over the knobs: every combination when there are at most `max_variants`,
// else each knob varied alone around the current values. The unchanged source is not included.
std::vector<policy::Variant> tunable_variants(const std::string& source, const std::string& backend,
                                              const std::string& extension, size_t max_variants = 64);

}  // namespace mblast::loop
