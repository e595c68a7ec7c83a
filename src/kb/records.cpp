#include "mblast/kb/records.h"

#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>
#include <span>

#include <fmt/format.h>

#include "mblast/error.h"
#include "mblast/target.h"
#include "mblast/tensor.h"

namespace mblast::kb {

using nlohmann::json;

namespace {

std::string hash_text(const std::string& s) { return content_hash_hex(std::as_bytes(std::span(s.data(), s.size()))); }

// A predicate value is a string or a non-empty list of strings; true when `value` is one of them.
bool one_of(const json& v, const std::string& value) {
  if (v.is_string()) return v.get<std::string>() == value;
  for (const auto& e : v)
    if (e.is_string() && e.get<std::string>() == value) return true;
  return false;
}

std::optional<int> sm_number(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return std::nullopt;
  int n = 0;
  size_t i = 3;
  for (; i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i])); ++i) n = n * 10 + (arch[i] - '0');
  if (i == 3) return std::nullopt;
  return n;
}

std::optional<int> vlen_of(const std::string& arch) {
  const auto p = arch.find("-vlen");
  if (p == std::string::npos) return std::nullopt;
  try {
    return std::stoi(arch.substr(p + 5));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

const std::set<std::string>& string_keys() {
  static const std::set<std::string> k = {"backend",    "target",   "arch",      "arch_not",
                                          "arch_lacks", "op_class", "bottleneck"};
  return k;
}
const std::set<std::string>& number_keys() {
  static const std::set<std::string> k = {"sm_below", "sm_at_least", "vlen_below"};
  return k;
}

}  // namespace

TargetRecord target_record(const Target& t) {
  TargetRecord r;
  r.name = t.name;
  r.backend = t.backend;
  r.spec = t.spec;
  r.arch = arch_of_target_spec(t.backend, t.spec.dump());
  r.provenance = {"learned", "target description " + t.source.filename().string()};
  return r;
}

void validate_predicate(const json& p) {
  if (!p.is_object()) throw UserError("a constraint predicate must be a JSON object, got: " + p.dump());
  for (const auto& [k, v] : p.items()) {
    if (string_keys().count(k)) {
      const bool ok =
          (v.is_string() && !v.get<std::string>().empty()) ||
          (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); }));
      if (!ok)
        throw UserError(
            fmt::format("constraint predicate key '{}' needs a string or a list of strings, got {}", k, v.dump()));
    } else if (number_keys().count(k)) {
      if (!v.is_number())
        throw UserError(fmt::format("constraint predicate key '{}' needs a number, got {}", k, v.dump()));
    } else {
      throw UserError(
          fmt::format("unknown constraint predicate key '{}' (known: backend, target, arch, arch_not, "
                      "arch_lacks, op_class, bottleneck, sm_below, sm_at_least, vlen_below)",
                      k));
    }
  }
}

bool predicate_matches(const json& p, const StateSignature& s) {
  for (const auto& [k, v] : p.items()) {
    if (k == "backend") {
      if (s.backend.empty() || !one_of(v, s.backend)) return false;
    } else if (k == "target") {
      if (s.target.empty() || !one_of(v, s.target)) return false;
    } else if (k == "arch") {
      if (s.arch.empty() || !one_of(v, s.arch)) return false;
    } else if (k == "arch_not") {
      if (s.arch.empty() || one_of(v, s.arch)) return false;
    } else if (k == "arch_lacks") {
      if (s.arch.empty()) return false;
      const std::vector<std::string> parts =
          v.is_string() ? std::vector<std::string>{v.get<std::string>()} : v.get<std::vector<std::string>>();
      bool lacks_one = false;
      for (const auto& part : parts) lacks_one |= s.arch.find(part) == std::string::npos;
      if (!lacks_one) return false;
    } else if (k == "op_class") {
      if (s.op_class.empty() || !one_of(v, s.op_class)) return false;
    } else if (k == "bottleneck") {
      if (s.bottleneck.empty() || !one_of(v, s.bottleneck)) return false;
    } else if (k == "sm_below" || k == "sm_at_least") {
      const auto sm = sm_number(s.arch);
      if (!sm) return false;
      const double limit = v.get<double>();
      if (k == "sm_below" ? !(*sm < limit) : !(*sm >= limit)) return false;
    } else if (k == "vlen_below") {
      const auto vl = vlen_of(s.arch);
      if (!vl || !(*vl < v.get<double>())) return false;
    } else {
      return false;  // unknown keys never match (validate_predicate rejects them on the way in)
    }
  }
  return true;
}

std::string constraint_id(const std::string& action_id, const json& predicate, const std::string& effect) {
  return hash_text("constraint\n" + action_id + "\n" + predicate.dump() + "\n" + effect);
}

std::string text_version_id(const std::string& subject_kind, const std::string& subject_id, const std::string& field,
                            const std::string& parent_id, const std::string& body) {
  return hash_text("text\n" + subject_kind + "\n" + subject_id + "\n" + field + "\n" + parent_id + "\n" + body);
}

std::string random_id() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    const ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("getrandom failed while making a knowledge-base id");
    }
    got += static_cast<size_t>(n);
  }
  std::string s;
  s.reserve(32);
  for (unsigned char c : b) s += fmt::format("{:02x}", c);
  return s;
}

std::string utc_now_iso() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];  // generous: the compiler cannot bound tm's fields
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace mblast::kb
