// Type checks for the JSON files a user writes (problem.json, target files): a wrong-typed field
// is reported as one line naming the field's path and the type it must have, never as the JSON
// library's exception text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mblast {

// The JSON types a field may have; a rule may allow several (e.g. kString | kInteger).
enum JsonTypes : unsigned {
  kString = 1u << 0,
  kInteger = 1u << 1,
  kNumber = 1u << 2,  // an integer or a real
  kBoolean = 1u << 3,
  kObject = 1u << 4,
  kArray = 1u << 5,
};

// One field of a file's schema. `path` is dotted; "[]" stands for every element of an array and
// "*" for every key of an object: "inputs[].shape[]", "tolerance.*.atol". `hint` (optional) is
// added to the expected type: "a string (a dtype name such as f32)".
struct FieldRule {
  const char* path;
  unsigned types;
  const char* hint = nullptr;
};

// "a string", "an integer or a string".
std::string expected_types(unsigned types);
// What a value is, for a message: "the number 7", "the string \"512\"", "an array", "null".
std::string describe_json_value(const nlohmann::json& v);

// Throws UserError("PATH: expected TYPE, got WHAT") for the first field of `j` that a rule names
// and whose type the rule does not allow. Absent fields pass (required ones are the caller's
// to check). With `null_is_absent`, a null field passes too (a user's target file may delete a
// built-in field with null, as JSON merge patch does). Fields no rule names are not checked.
void check_field_types(const nlohmann::json& j, std::initializer_list<FieldRule> rules, bool null_is_absent = false);

// j[key] as a string/integer/number/bool, or `fallback` when absent; throws UserError
// "PATH: expected ..." when present with another type. `parent` is the object's own path ("" at
// the top level). Integers must fit the range asked for.
std::string string_field(const nlohmann::json& j, std::string_view key, std::string_view fallback,
                         std::string_view parent = "");
int64_t integer_field(const nlohmann::json& j, std::string_view key, int64_t fallback, std::string_view parent = "",
                      int64_t min = INT32_MIN, int64_t max = INT32_MAX);
// The same check for a value already in hand (an array's element), `path` being its path.
int64_t integer_value(const nlohmann::json& v, std::string_view path, int64_t min = INT32_MIN, int64_t max = INT32_MAX);
double number_field(const nlohmann::json& j, std::string_view key, double fallback, std::string_view parent = "");

// "inputs" + "shape" -> "inputs.shape"; "" + "name" -> "name"; "inputs" + 0 -> "inputs[0]".
std::string json_path(std::string_view parent, std::string_view key);
std::string json_path(std::string_view parent, size_t index);

// Parses `text` as JSON; throws UserError "not valid JSON (line L, column C)" (no library text).
nlohmann::json parse_json_text(const std::string& text);

}  // namespace mblast
