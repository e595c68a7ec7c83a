// Which of a generator's variants a correctness test evaluates.
//
// The variants of one family share one code path; their parameters pick the numbers in it
// (vector widths, tiles, LMUL, work-group sizes) and the switches (math modes, online or two-pass).
// Evaluating the full product of a family's grid on pocl or under QEMU costs minutes per problem
// in CI, so by default a test evaluates a covering subset: the first and the last variant of every
// family, then, greedily, the variant that runs the most not-yet-run parameter values, until every
// value of every (flattened) parameter of every family has run at least once.
// MBLAST_TEST_EVERY_VARIANT=1 evaluates every variant; tools/gpu_check.sh sets it on GPU machines.
#pragma once

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mblast/policy/variants.h"

namespace mblast::policy {

inline bool every_variant_requested() {
  const char* v = std::getenv("MBLAST_TEST_EVERY_VARIANT");
  return v && std::string(v) == "1";
}

// The features a variant runs: its family, and family + each flattened parameter with its value.
inline std::set<std::string> variant_features(const Variant& v) {
  std::set<std::string> f = {v.family};
  const nlohmann::json flat = v.params.flatten();  // kept: items() refers to it
  for (const auto& [key, value] : flat.items()) f.insert(v.family + " " + key + "=" + value.dump());
  return f;
}

// Indices into `vs`, ascending: all of them when `every`, else the covering subset.
inline std::vector<size_t> variants_to_evaluate(const std::vector<Variant>& vs,
                                                bool every = every_variant_requested()) {
  if (every) {
    std::vector<size_t> all(vs.size());
    for (size_t i = 0; i < vs.size(); ++i) all[i] = i;
    return all;
  }

  std::set<size_t> pick;
  std::map<std::string, std::pair<size_t, size_t>> ends;  // family -> (first, last)
  for (size_t i = 0; i < vs.size(); ++i) {
    auto [it, fresh] = ends.emplace(vs[i].family, std::make_pair(i, i));
    if (!fresh) it->second.second = i;
  }
  for (const auto& [family, fl] : ends) pick.insert({fl.first, fl.second});

  std::set<std::string> missing;
  for (const auto& v : vs)
    for (const auto& f : variant_features(v)) missing.insert(f);
  for (size_t i : pick)
    for (const auto& f : variant_features(vs[i])) missing.erase(f);
  while (!missing.empty()) {
    size_t best = vs.size(), best_gain = 0;
    for (size_t i = 0; i < vs.size(); ++i) {
      if (pick.count(i)) continue;
      size_t gain = 0;
      for (const auto& f : variant_features(vs[i])) gain += missing.count(f);
      if (gain > best_gain) best = i, best_gain = gain;
    }
    if (best == vs.size()) break;  // cannot happen: every missing feature belongs to some variant
    pick.insert(best);
    for (const auto& f : variant_features(vs[best])) missing.erase(f);
  }
  return {pick.begin(), pick.end()};
}

}  // namespace mblast::policy
