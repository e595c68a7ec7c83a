// Prompt files (prompts/*.md) rendered with the loop's values (prompts/README.md).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace mblast::loop {

struct RenderedPrompt {
  std::string system, user;
  std::string hash;  // content hash of system + user: the prompt an experience answered
};

// Tokens are estimated at 4 characters each (no tokenizer: budgets are a ceiling, not a count).
inline constexpr size_t kCharsPerToken = 4;
size_t estimate_tokens(std::string_view text);
// The token budget of a prompt section, by its {{placeholder}} name (200 for one not listed).
size_t section_budget_tokens(const std::string& name);
// The token budget of a whole request made from prompts/<name>.md (system and user text): what
// the model's context may hold of it, with room left for the answer. The sections' budgets of
// a prompt add up to less; a test over the suite checks real prompts against both.
size_t prompt_budget_tokens(const std::string& name);
// text cut to `tokens` (estimated), ending with a marker that says how much was left out.
std::string fit_tokens(const std::string& text, size_t tokens);

// Renders <data dir>/prompts/<name>.md. Each value is cut to its section's budget
// (section_budget_tokens) with a marker saying so. Throws Error for a missing file, a file
// without the two sections, or a {{placeholder}} without a value.
RenderedPrompt render_prompt(const std::string& name, const std::map<std::string, std::string>& values);

}  // namespace mblast::loop
