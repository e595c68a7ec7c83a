// A StateSignature seen through string views and log10(intensity): what retrieval's scan over
// every state computes distances on without copying strings. Private to src/kb.
#pragma once

#include <optional>
#include <string_view>

#include "mblast/kb/signature.h"

namespace mblast::kb {

struct SignatureView {
  std::string_view backend, arch, op_class, bottleneck;
  std::optional<double> log10_intensity, bandwidth_fraction, compute_fraction, utilisation;
};

SignatureView view_of(const StateSignature& s);
double view_distance(const SignatureView& a, const SignatureView& b, const DistanceWeights& w);
bool iequals(std::string_view a, std::string_view b);

}  // namespace mblast::kb
