// User-declared tunables (include/mblast/loop/tunables.h).
#include "mblast/loop/tunables.h"

#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "mblast/error.h"

namespace mblast::loop {

namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string default_action(const std::string& backend) {
  if (backend == "cuda") return "cuda.block-size-tuning";
  if (backend == "opencl") return "opencl.work-group-size-from-kernel-info";
  return "rvv.strip-mining-vsetvl";
}

std::string with_values(const std::vector<std::string>& lines, const std::vector<Tunable>& knobs,
                        const std::vector<std::string>& values, bool trailing_newline) {
  std::vector<std::string> out = lines;
  static const std::regex define(R"(^(\s*#\s*define\s+\w+\s+)(\S+)(.*)$)");
  for (size_t i = 0; i < knobs.size(); ++i)
    out[knobs[i].line] = std::regex_replace(out[knobs[i].line], define, "$01" + values[i] + "$3");
  std::string s;
  for (size_t i = 0; i < out.size(); ++i) s += out[i] + (i + 1 < out.size() || trailing_newline ? "\n" : "");
  return s;
}

}  // namespace

std::vector<Tunable> parse_tunables(const std::string& source) {
  static const std::regex define(R"(^\s*#\s*define\s+(\w+)\s+(\S+)\s*(?://|/\*)\s*mblast:tune\b(.*?)(\*/)?\s*$)");
  std::vector<Tunable> knobs;
  auto lines = split_lines(source);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("mblast:tune") == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_match(lines[i], m, define))
      throw UserError(
          fmt::format("line {}: a mblast:tune comment must follow `#define NAME VALUE` on the same line", i + 1));
    Tunable t;
    t.name = m[1];
    t.current = m[2];
    t.line = i;
    std::istringstream words(m[3].str());
    for (std::string w; words >> w;) {
      if (w.starts_with("action="))
        t.action = w.substr(7);
      else
        t.values.push_back(w);
    }
    if (t.values.empty()) throw UserError(fmt::format("line {}: mblast:tune for {} lists no values", i + 1, t.name));
    knobs.push_back(std::move(t));
  }
  return knobs;
}

std::vector<policy::Variant> tunable_variants(const std::string& source, const std::string& backend,
                                              const std::string& extension, size_t max_variants) {
  auto knobs = parse_tunables(source);
  std::vector<policy::Variant> out;
  if (knobs.empty()) return out;
  for (auto& k : knobs)
    if (k.action.empty()) k.action = default_action(backend);
  auto lines = split_lines(source);
  bool trailing_newline = !source.empty() && source.back() == '\n';
  std::vector<std::string> current;
  for (const auto& k : knobs) current.push_back(k.current);
  auto make = [&](const std::vector<std::string>& values) {
    if (values == current) return;
    policy::Variant v;
    v.family = "tunables";
    v.extension = extension;
    std::vector<std::string> parts;
    for (size_t i = 0; i < knobs.size(); ++i) {
      v.params[knobs[i].name] = values[i];
      if (values[i] != knobs[i].current) {
        parts.push_back(knobs[i].name + "=" + values[i]);
        if (std::find(v.actions.begin(), v.actions.end(), knobs[i].action) == v.actions.end())
          v.actions.push_back(knobs[i].action);
      }
    }
    std::string desc;
    for (const auto& p : parts) desc += (desc.empty() ? "" : ", ") + p;
    v.description = "the kernel's own tunables: " + desc;
    v.source = with_values(lines, knobs, values, trailing_newline);
    out.push_back(std::move(v));
  };
  size_t combos = 1;
  for (const auto& k : knobs) combos = std::min<size_t>(combos * k.values.size(), max_variants + 1);
  if (combos <= max_variants) {
    std::vector<size_t> idx(knobs.size(), 0);
    for (;;) {
      std::vector<std::string> values;
      for (size_t i = 0; i < knobs.size(); ++i) values.push_back(knobs[i].values[idx[i]]);
      make(values);
      size_t d = 0;
      while (d < knobs.size() && ++idx[d] == knobs[d].values.size()) idx[d++] = 0;
      if (d == knobs.size()) break;
    }
  } else {
    for (size_t i = 0; i < knobs.size(); ++i)
      for (const auto& value : knobs[i].values) {
        auto values = current;
        values[i] = value;
        make(values);
      }
  }
  return out;
}

}  // namespace mblast::loop
