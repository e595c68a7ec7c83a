// Comparison of a candidate's output with the reference, by the rules of DESIGN.md
// "Measurement". Runs in the driver, never in the process that ran the candidate.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "mblast/problem.h"
#include "mblast/protocol.h"

namespace mblast {

struct OutputCheck {
  protocol::FailureKind kind = protocol::FailureKind::none;
  std::string reason;  // empty when ok
  size_t total = 0;
  size_t matched = 0;      // within atol + rtol*|expected|
  size_t unwritten = 0;    // still holding the poison pattern
  size_t non_finite = 0;   // NaN/Inf where the reference is finite
  double max_abs_err = 0;  // over written, finite elements
  double max_rel_err = 0;
  size_t worst_index = 0;
  bool ok() const { return kind == protocol::FailureKind::none; }
};

// Compares got against expected (same spec). `poison` is the byte the runner filled the
// output with before the call (an element equal to it, bit for bit, counts as unwritten unless
// the reference has that very value). Integers compare exactly.
OutputCheck check_output(const TensorSpec& spec, const Tolerance& tol, std::span<const std::byte> got,
                         std::span<const std::byte> expected, std::byte poison);

// Two runs on the same inputs must agree within tolerance (used for the second-run rule).
OutputCheck check_agreement(const TensorSpec& spec, const Tolerance& tol, std::span<const std::byte> first,
                            std::span<const std::byte> second);

// Index -> "[i, j, k]" for messages.
std::string index_string(const TensorSpec& spec, size_t flat);

}  // namespace mblast
