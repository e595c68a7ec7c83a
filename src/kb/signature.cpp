#include "mblast/kb/signature.h"

#include "signature_view.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mblast::kb {

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

// Full weight times the difference (capped) when both sides are known, a fixed share otherwise.
double numeric_term(const std::optional<double>& a, const std::optional<double>& b, double weight, double unknown_share,
                    double cap) {
  if (!a || !b) return weight * unknown_share * cap;
  return weight * std::min(std::abs(*a - *b), cap);
}

struct GroupEntry {
  std::string_view op, group;
};
constexpr GroupEntry kGroups[] = {
    {"softmax", "reduction"},          {"norm", "reduction"},          {"layernorm", "reduction"},
    {"rmsnorm", "reduction"},          {"reduction", "reduction"},     {"scan", "reduction"},
    {"logsumexp", "reduction"},        {"matmul", "contraction"},      {"gemm", "contraction"},
    {"gemv", "contraction"},           {"conv", "contraction"},        {"attention", "contraction"},
    {"batched_matmul", "contraction"}, {"elementwise", "elementwise"}, {"activation", "elementwise"},
    {"broadcast", "elementwise"},      {"transpose", "data_movement"}, {"gather", "data_movement"},
    {"scatter", "data_movement"},      {"copy", "data_movement"},      {"concat", "data_movement"},
    {"layout", "data_movement"},
};

// The op group without allocating: a known class maps to its group, anything else to itself.
std::string_view group_view(std::string_view op) {
  for (const auto& g : kGroups)
    if (iequals(op, g.op)) return g.group;
  return op;
}

}  // namespace

// ASCII only, without the C locale's tolower: retrieval calls this for every state it scans.
bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a == b) return true;
  const auto fold = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (size_t i = 0; i < a.size(); ++i)
    if (fold(a[i]) != fold(b[i])) return false;
  return true;
}

SignatureView view_of(const StateSignature& s) {
  SignatureView v{s.backend,          s.arch,       s.op_class, s.bottleneck, std::nullopt, s.bandwidth_fraction,
                  s.compute_fraction, s.utilisation};
  if (s.arithmetic_intensity && *s.arithmetic_intensity > 0) v.log10_intensity = std::log10(*s.arithmetic_intensity);
  return v;
}

double view_distance(const SignatureView& a, const SignatureView& b, const DistanceWeights& w) {
  double d = 0;
  if (!iequals(a.backend, b.backend))
    d += w.backend;
  else if (a.arch.empty() || b.arch.empty())
    d += w.arch * w.unknown_share;
  else if (a.arch != b.arch)
    d += w.arch;

  if (a.op_class.empty() || b.op_class.empty())
    d += w.op_class * w.unknown_share;
  else if (!iequals(a.op_class, b.op_class))
    d += iequals(group_view(a.op_class), group_view(b.op_class)) ? w.op_class * 0.5 : w.op_class;

  if (a.bottleneck.empty() || b.bottleneck.empty())
    d += w.bottleneck * w.unknown_share;
  else if (!iequals(a.bottleneck, b.bottleneck))
    d += (iequals(a.bottleneck, "balanced") || iequals(b.bottleneck, "balanced")) ? w.bottleneck * 0.5 : w.bottleneck;

  d += numeric_term(a.log10_intensity, b.log10_intensity, w.log_intensity, w.unknown_share, 3.0);
  d += numeric_term(a.bandwidth_fraction, b.bandwidth_fraction, w.bandwidth, w.unknown_share, 1.0);
  d += numeric_term(a.compute_fraction, b.compute_fraction, w.compute, w.unknown_share, 1.0);
  d += numeric_term(a.utilisation, b.utilisation, w.utilisation, w.unknown_share, 1.0);
  return d;
}

std::string StateSignature::target_family() const { return backend + ":" + arch; }

std::string StateSignature::cluster() const {
  const std::string op = op_class.empty() ? "?" : lower(op_class);
  std::string key = op_class_group(op) == op ? op : op_class_group(op) + "/" + op;
  key += "|" + (bottleneck.empty() ? std::string("?") : lower(bottleneck));
  if (arithmetic_intensity && *arithmetic_intensity > 0) {
    const int b = std::clamp(static_cast<int>(std::floor(std::log2(*arithmetic_intensity))), -4, 10);
    key += fmt::format("|ai{}", b);
  } else {
    key += "|ai?";
  }
  if (bandwidth_fraction || compute_fraction) {
    const double sol = std::max(bandwidth_fraction.value_or(0), compute_fraction.value_or(0));
    key += fmt::format("|sol{}", std::clamp(static_cast<int>(std::floor(sol * 4)), 0, 3));
  } else {
    key += "|sol?";
  }
  return key;
}

std::string op_class_group(std::string_view op_class) { return lower(group_view(op_class)); }

std::string classify_bottleneck(double bw, double cf) {
  if (bw < 0.3 && cf < 0.3) return "latency";
  if (bw >= 0.6 && cf >= 0.6) return "balanced";
  return bw >= cf ? "memory" : "compute";
}

double signature_distance(const StateSignature& a, const StateSignature& b, const DistanceWeights& w) {
  return view_distance(view_of(a), view_of(b), w);
}

std::string arch_of_target_spec(const std::string& backend, const std::string& spec_json) {
  nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, false);
  if (spec.is_discarded() || !spec.is_object()) return "generic";
  const nlohmann::json arch = spec.value("arch", nlohmann::json::object());
  if (!arch.is_object()) return "generic";
  if (backend == "cuda") {
    if (arch.contains("sm") && arch["sm"].is_string()) return "sm_" + arch["sm"].get<std::string>();
    if (arch.contains("sm") && arch["sm"].is_number_integer()) return "sm_" + std::to_string(arch["sm"].get<int>());
    return "generic";
  }
  if (backend == "rvv") {
    std::string m = arch.value("march", "rv64gcv");
    if (arch.value("zvfh", false) && m.find("zvfh") == std::string::npos) m += "_zvfh";
    return m + "-vlen" + std::to_string(arch.value("vlen", 128));
  }
  if (arch.contains("family") && arch["family"].is_string()) {
    std::string a = arch["family"].get<std::string>();
    if (arch.contains("generation") && arch["generation"].is_string()) a += "-" + arch["generation"].get<std::string>();
    return a;
  }
  return "generic";
}

}  // namespace mblast::kb
