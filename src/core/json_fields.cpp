#include "mblast/json_fields.h"

#include <algorithm>
#include <vector>

#include "mblast/error.h"

namespace mblast {

using nlohmann::json;

namespace {

bool has_type(const json& v, unsigned types) {
  return ((types & kString) && v.is_string()) || ((types & kInteger) && v.is_number_integer()) ||
         ((types & kNumber) && v.is_number()) || ((types & kBoolean) && v.is_boolean()) ||
         ((types & kObject) && v.is_object()) || ((types & kArray) && v.is_array());
}

[[noreturn]] void wrong_type(std::string_view path, unsigned types, const char* hint, const json& got) {
  std::string expected = expected_types(types);
  if (hint) expected += std::string(" (") + hint + ")";
  throw UserError(std::string(path) + ": expected " + expected + ", got " + describe_json_value(got));
}

// "inputs[].shape[]" -> {"inputs", "[]", "shape", "[]"}.
std::vector<std::string> split_rule(std::string_view path) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(std::move(cur));
    cur.clear();
  };
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '.') {
      flush();
    } else if (path.substr(i, 2) == "[]") {
      flush();
      out.emplace_back("[]");
      ++i;
    } else {
      cur += path[i];
    }
  }
  flush();
  return out;
}

void check_rule(const json& node, const std::vector<std::string>& parts, size_t i, const std::string& where,
                const FieldRule& rule, bool null_is_absent) {
  if (i == parts.size()) {
    if (null_is_absent && node.is_null()) return;
    if (!has_type(node, rule.types)) wrong_type(where, rule.types, rule.hint, node);
    return;
  }
  // A container of the wrong type is its own rule's to report (rules list parents first).
  const std::string& p = parts[i];
  if (p == "[]") {
    if (!node.is_array()) return;
    for (size_t k = 0; k < node.size(); ++k)
      check_rule(node[k], parts, i + 1, json_path(where, k), rule, null_is_absent);
  } else if (p == "*") {
    if (!node.is_object()) return;
    for (auto it = node.begin(); it != node.end(); ++it)
      check_rule(*it, parts, i + 1, json_path(where, it.key()), rule, null_is_absent);
  } else {
    if (!node.is_object()) return;
    auto it = node.find(p);
    if (it == node.end()) return;
    check_rule(*it, parts, i + 1, json_path(where, p), rule, null_is_absent);
  }
}

const json* present(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

}  // namespace

std::string expected_types(unsigned types) {
  static const std::pair<unsigned, const char*> names[] = {{kString, "a string"},  {kInteger, "an integer"},
                                                           {kNumber, "a number"},  {kBoolean, "true or false"},
                                                           {kObject, "an object"}, {kArray, "an array"}};
  std::string out;
  for (const auto& [bit, name] : names)
    if (types & bit) out += (out.empty() ? "" : " or ") + std::string(name);
  return out;
}

std::string describe_json_value(const json& v) {
  // dump() escapes newlines, so the message stays one line; long values are cut.
  auto shown = [&] {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    return s.size() > 48 ? s.substr(0, 45) + "..." : s;
  };
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::string:
      return "the string " + shown();
    case json::value_t::object:
      return v.empty() ? "an empty object" : "an object";
    case json::value_t::array:
      return v.empty() ? "an empty array" : "an array";
    case json::value_t::discarded:
      return "nothing";
    default:
      return "the number " + shown();
  }
}

void check_field_types(const json& j, std::initializer_list<FieldRule> rules, bool null_is_absent) {
  for (const FieldRule& r : rules) check_rule(j, split_rule(r.path), 0, "", r, null_is_absent);
}

std::string string_field(const json& j, std::string_view key, std::string_view fallback, std::string_view parent) {
  const json* v = present(j, key);
  if (!v) return std::string(fallback);
  if (!v->is_string()) wrong_type(json_path(parent, key), kString, nullptr, *v);
  return v->get<std::string>();
}

int64_t integer_field(const json& j, std::string_view key, int64_t fallback, std::string_view parent, int64_t min,
                      int64_t max) {
  const json* v = present(j, key);
  return v ? integer_value(*v, json_path(parent, key), min, max) : fallback;
}

int64_t integer_value(const json& v, std::string_view path, int64_t min, int64_t max) {
  if (!v.is_number_integer()) wrong_type(path, kInteger, nullptr, v);
  // An unsigned value above INT64_MAX reads as negative through get<int64_t>: check it first.
  const bool huge = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  const int64_t x = huge ? INT64_MAX : v.get<int64_t>();
  if (huge || x < min || x > max)
    throw UserError(std::string(path) + ": expected an integer from " + std::to_string(min) + " to " +
                    std::to_string(max) + ", got " + describe_json_value(v));
  return x;
}

double number_field(const json& j, std::string_view key, double fallback, std::string_view parent) {
  const json* v = present(j, key);
  if (!v) return fallback;
  if (!v->is_number()) wrong_type(json_path(parent, key), kNumber, nullptr, *v);
  return v->get<double>();
}

std::string json_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

std::string json_path(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

json parse_json_text(const std::string& text) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw UserError("empty, not JSON");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // The library's message quotes what it read (perhaps binary); line and column are enough.
    const size_t at = e.byte == 0 ? 0 : std::min<size_t>(e.byte - 1, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw UserError("not valid JSON (line " + std::to_string(line) + ", column " + std::to_string(column) + ")");
  }
}

}  // namespace mblast
