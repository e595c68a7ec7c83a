// Text made safe inside XML and HTML (the JUnit report, the HTML report's page and SVG).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mblast {

struct MarkupRules {
  const char* apostrophe;          // "&apos;" (XML) or "&#39;" (HTML)
  bool (*keep)(uint32_t);          // a code point the format accepts; any other becomes U+FFFD
  bool (*as_reference)(uint32_t);  // one written as a character reference (&#10;), or nullptr
};

// Each UTF-8 sequence decoded (an overlong, surrogate or truncated one is U+FFFD), the five
// markup characters as entities, the rest as `rules` say.
std::string escape_markup(std::string_view text, const MarkupRules& rules);

}  // namespace mblast
