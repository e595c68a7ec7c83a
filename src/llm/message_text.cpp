#include "message_text.h"

namespace mblast::llm {

std::string one_line(std::string_view text, size_t max_chars) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
    if (out.size() > max_chars) break;
  }
  if (out.size() <= max_chars) return out;
  // Cut at max_chars without splitting a UTF-8 sequence: if the first byte dropped continues a
  // sequence, drop that sequence's earlier bytes too.
  const bool mid_sequence = (static_cast<unsigned char>(out[max_chars]) & 0xC0) == 0x80;
  out.resize(max_chars);
  if (mid_sequence) {
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty()) out.pop_back();
  }
  return out + "...";
}

std::string redact(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos)) {
    text.replace(pos, secret.size(), "<redacted>");
    pos += 10;
  }
  return text;
}

}  // namespace mblast::llm
