// Prompt rendering (include/mblast/loop/prompts.h).
#include "mblast/loop/prompts.h"

#include <fstream>
#include <regex>
#include <span>
#include <sstream>

#include <fmt/format.h>

#include "mblast/error.h"
#include "mblast/paths.h"
#include "mblast/tensor.h"

namespace mblast::loop {

namespace {

constexpr size_t kSourceBudget = 24000;
constexpr size_t kValueBudget = 6000;

std::string within_budget(const std::string& name, const std::string& v) {
  size_t budget = name.find("source") != std::string::npos ? kSourceBudget : kValueBudget;
  if (v.size() <= budget) return v;
  return v.substr(0, budget) + fmt::format("\n[... {} more characters not shown]", v.size() - budget);
}

std::string fill(const std::string& text, const std::map<std::string, std::string>& values, const std::string& file) {
  static const std::regex placeholder(R"(\{\{(\w+)\}\})");
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), placeholder);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    out += text.substr(last, static_cast<size_t>(m.position()) - last);
    auto v = values.find(m[1].str());
    if (v == values.end()) throw Error(fmt::format("{}: no value for {{{{{}}}}}", file, m[1].str()));
    out += within_budget(v->first, v->second);
    last = static_cast<size_t>(m.position() + m.length());
  }
  out += text.substr(last);
  return out;
}

}  // namespace

RenderedPrompt render_prompt(const std::string& name, const std::map<std::string, std::string>& values) {
  auto file = data_dir() / "prompts" / (name + ".md");
  std::ifstream in(file);
  if (!in) throw Error("cannot read the prompt file " + file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  size_t sys = text.find("### system\n"), user = text.find("### user\n");
  if (sys == std::string::npos || user == std::string::npos || user < sys)
    throw Error(file.string() + ": needs a '### system' and then a '### user' section");
  RenderedPrompt p;
  p.system = fill(text.substr(sys + 11, user - sys - 11), values, file.string());
  p.user = fill(text.substr(user + 9), values, file.string());
  std::string both = p.system + "\n\x1e\n" + p.user;
  p.hash = content_hash_hex(std::as_bytes(std::span(both.data(), both.size())));
  return p;
}

}  // namespace mblast::loop
