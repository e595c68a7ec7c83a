// The performance state of a kernel on a target, as a numeric signature, and the distance
// between two signatures that retrieval ranks states by (docs/knowledge-base.md "Retrieval").
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mblast::kb {

// Unknown numbers are std::nullopt: they cost a fixed share of their weight in the distance,
// the same for every state, so a partial query ("memory-bound softmax on sm_90") still ranks.
struct StateSignature {
  std::string backend;   // cuda | opencl | rvv
  std::string arch;      // target family within the backend: sm_90, adreno-a7xx, rv64gcv_zvfh-vlen256
  std::string target;    // target name (h100); "" when the state is not tied to one
  std::string op_class;  // elementwise, reduction, softmax, norm, scan, matmul, conv, attention, ...
  std::optional<double> arithmetic_intensity;  // counted FLOPs per byte moved (> 0)
  std::optional<double> bandwidth_fraction;    // achieved / peak bandwidth (0..1)
  std::optional<double> compute_fraction;      // achieved / peak FLOP rate (0..1)
  std::optional<double> utilisation;           // occupancy (GPU) or vector utilisation (RVV), 0..1
  std::string bottleneck;                      // memory | compute | latency | balanced | "" (unknown)

  // "cuda:sm_90": the key statistics are kept per.
  std::string target_family() const;
  // The discretised signature that keys policy statistics, e.g. "reduction/softmax|memory|ai-2|sol1":
  // op group/op class, bottleneck, floor(log2 intensity) clamped to [-4, 10], and the
  // speed-of-light quartile max(bandwidth, compute fraction). Unknown parts are "?".
  std::string cluster() const;
};

// Weights of the distance terms (docs/knowledge-base.md). All >= 0.
struct DistanceWeights {
  double backend = 2.0;        // different backend
  double arch = 0.5;           // same backend, different arch
  double op_class = 1.0;       // different op class (half when in the same op group)
  double bottleneck = 1.0;     // different bottleneck (half when one side is "balanced")
  double log_intensity = 0.5;  // per decade of arithmetic intensity, capped at 3 decades
  double bandwidth = 1.0;      // per unit of bandwidth fraction
  double compute = 1.0;        // per unit of compute fraction
  double utilisation = 0.5;    // per unit of occupancy / vector utilisation
  double unknown_share = 0.5;  // share of a term's full weight charged when either side is unknown
};

// Symmetric, >= 0, 0 for identical signatures. The target name is not a term: preferring the
// same target is the job of the transfer discount in retrieval.
double signature_distance(const StateSignature& a, const StateSignature& b, const DistanceWeights& w = {});

// "reduction" for softmax/norm/scan/reduction, "contraction" for matmul/conv/attention,
// "elementwise", "data_movement" for transpose/gather/scatter/copy/concat; else the class itself.
std::string op_class_group(std::string_view op_class);

// memory | compute | latency | balanced from the speed-of-light fractions: latency when both are
// below 0.3, balanced when both are at least 0.6, else the larger one.
std::string classify_bottleneck(double bandwidth_fraction, double compute_fraction);

// The arch string mblast uses for a target description (targets/*.json): "sm_" + arch.sm for
// CUDA, family-generation for OpenCL (else "generic"), march[_zvfh]-vlenN for RVV.
std::string arch_of_target_spec(const std::string& backend, const std::string& spec_json);

}  // namespace mblast::kb
