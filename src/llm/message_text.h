// Shaping text that ends up in one-line messages: errors, logs.
#pragma once

#include <string>
#include <string_view>

namespace mblast::llm {

// Control characters and runs of white space become one space; cut to max_chars (with "...").
std::string one_line(std::string_view text, size_t max_chars = 200);

// Every occurrence of secret (when it is not empty) replaced by "<redacted>".
std::string redact(std::string text, const std::string& secret);

}  // namespace mblast::llm
