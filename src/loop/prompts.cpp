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

std::string within_budget(const std::string& name, const std::string& v) {
  return fit_tokens(v, section_budget_tokens(name));
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

size_t estimate_tokens(std::string_view text) { return (text.size() + kCharsPerToken - 1) / kCharsPerToken; }

size_t section_budget_tokens(const std::string& name) {
  // What each section may take of the model's context: the code being rewritten most, the
  // memory of earlier runs next, the short facts least. A section over its budget is cut (code
  // and lists keep their beginning) with a marker saying how much was left out.
  static const std::map<std::string, size_t> budgets = {
      {"parent_source", 6000},  {"source", 6000},        {"past_kernels", 3000}, {"diff", 2500},
      {"knowledge", 1200},      {"rules", 1200},         {"memory", 1000},       {"constraints", 600},
      {"feedback", 1000},       {"problem", 800},        {"target", 400},        {"target_facts", 300},
      {"analysis", 500},        {"state", 300},          {"before_state", 300},  {"after_state", 300},
      {"before_measured", 300}, {"after_measured", 300}, {"outcome", 600},       {"log", 1500},
      {"experiences", 2000},    {"action_texts", 1500},  {"abi_rules", 600}};
  auto it = budgets.find(name);
  return it == budgets.end() ? 200 : it->second;
}

size_t prompt_budget_tokens(const std::string& name) {
  // Sized for a 32k-token context with room for the answer (an actor's answer is a whole file).
  static const std::map<std::string, size_t> budgets = {
      {"actor", 20000}, {"critic", 6000}, {"fix_compile", 9000}, {"state_analysis", 8000}, {"knowledge_update", 5000}};
  auto it = budgets.find(name);
  return it == budgets.end() ? 4000 : it->second;
}

std::string fit_tokens(const std::string& text, size_t tokens) {
  const size_t chars = tokens * kCharsPerToken;
  if (text.size() <= chars) return text;
  const std::string marker = fmt::format("\n[... {} more characters not shown]", text.size());
  const size_t keep = chars > marker.size() + 8 ? chars - marker.size() - 8 : 0;
  return text.substr(0, keep) + fmt::format("\n[... {} more characters not shown]", text.size() - keep);
}

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
