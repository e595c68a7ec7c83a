#pragma once
// Reading optional fields of results JSON (bench rows, eval results) that earlier versions or
// other producers may lack or hold with another type: a missing or mistyped field is "absent".

#include <cmath>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace mblast::json_fields {

// j[key] when j is an object holding a number there.
inline std::optional<double> number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

// j[key] as a number, NaN when absent (for figures that go into plots and tables as "-").
inline double number_or_nan(const nlohmann::json& j, const char* key) { return number(j, key).value_or(NAN); }

// j[key] when j is an object holding a string there, else fallback.
inline std::string text(const nlohmann::json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return fallback;
  return j[key].get<std::string>();
}

}  // namespace mblast::json_fields
