// Prompt files (prompts/*.md) rendered with the loop's values (prompts/README.md).
#pragma once

#include <map>
#include <string>

namespace mblast::loop {

struct RenderedPrompt {
  std::string system, user;
  std::string hash;  // content hash of system + user: the prompt an experience answered
};

// Renders <data dir>/prompts/<name>.md. Each value is cut to its budget (source code 24000
// characters, everything else 6000) with a marker saying so. Throws Error for a missing file, a
// file without the two sections, or a {{placeholder}} without a value.
RenderedPrompt render_prompt(const std::string& name, const std::map<std::string, std::string>& values);

}  // namespace mblast::loop
