// Text made safe inside XML and HTML (include/mblast/driver/markup.h).
#include "mblast/driver/markup.h"

#include <fmt/format.h>

namespace mblast {

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string escape_markup(std::string_view s, const MarkupRules& rules) {
  std::string out;
  out.reserve(s.size() + 16);
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    uint32_t cp = b[i];
    size_t len = 1;
    if (cp >= 0x80) {
      len = cp >= 0xF0 && cp <= 0xF4 ? 4 : cp >= 0xE0 && cp <= 0xEF ? 3 : cp >= 0xC2 && cp <= 0xDF ? 2 : 0;
      bool ok = len > 0 && i + len <= n;
      uint32_t v = len == 4 ? cp & 0x07 : len == 3 ? cp & 0x0F : cp & 0x1F;
      for (size_t k = 1; ok && k < len; ++k) {
        if ((b[i + k] & 0xC0) != 0x80) ok = false;
        v = (v << 6) | (b[i + k] & 0x3F);
      }
      if (ok &&
          ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF)))
        ok = false;
      if (!ok) {
        out += "\xEF\xBF\xBD";
        ++i;
        continue;
      }
      cp = v;
    }
    i += len;
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += rules.apostrophe;
        break;
      default:
        if (!rules.keep(cp))
          out += "\xEF\xBF\xBD";
        else if (rules.as_reference && rules.as_reference(cp))
          out += fmt::format("&#{};", cp);
        else
          append_utf8(out, cp);
    }
  }
  return out;
}

}  // namespace mblast
