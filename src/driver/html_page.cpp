#include "mblast/driver/html_page.h"

#include "mblast/driver/markup.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

namespace mblast::report {

namespace {

// Kept as they are: tab, LF, CR and everything printable; controls (C0 other than those, DEL, C1)
// would make an XML parser of the SVG refuse the page, and mean nothing to a reader.
bool allowed(uint32_t cp) {
  if (cp == 0x9 || cp == 0xA || cp == 0xD) return true;
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return false;
  return cp <= 0xD7FF || (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

const char* const kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px 32px; color: #1d2430;
       background: #fff; max-width: 1320px; }
h1 { font-size: 24px; margin: 0 0 6px; }
h2 { font-size: 19px; margin: 30px 0 8px; padding-top: 10px; border-top: 1px solid #d8dde6; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p { margin: 6px 0; max-width: 1100px; }
p.note { color: #5a6475; font-size: 13px; }
p.missing { color: #8a4b00; background: #fff6e5; border-left: 3px solid #e0a030; padding: 4px 8px; }
nav a { margin-right: 14px; }
svg { display: block; margin: 8px 0 4px; max-width: 100%; height: auto; }
svg text { font-family: system-ui, sans-serif; }
table { border-collapse: collapse; margin: 6px 0 14px; font-size: 13px; }
p.caption { color: #5a6475; font-size: 13px; margin: 10px 0 2px; }
th, td { border: 1px solid #d8dde6; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f1f4f8; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.none { color: #a0a8b5; }
tr:hover td { background: #f7f9fc; }
details { margin: 6px 0 12px; }
summary { cursor: pointer; color: #2a5db0; }
#tip { position: absolute; display: none; background: #1d2430; color: #fff; padding: 3px 7px; border-radius: 3px;
       font-size: 12px; pointer-events: none; max-width: 460px; z-index: 10; }
)";

// The one script: a mark's <title> shown at once beside the pointer (the browser's own tooltip
// comes late), and the number of plots set on <html> once the page has run, for tests to read.
const char* const kScript = R"(
(function () {
  var tip = document.createElement("div");
  tip.id = "tip";
  document.body.appendChild(tip);
  document.addEventListener("mousemove", function (e) {
    var mark = e.target.closest ? e.target.closest("circle, rect, text") : null;
    var title = mark ? mark.querySelector(":scope > title") : null;
    if (!title) { tip.style.display = "none"; return; }
    tip.textContent = title.textContent;
    tip.style.display = "block";
    tip.style.left = (e.pageX + 12) + "px";
    tip.style.top = (e.pageY + 12) + "px";
  });
  document.documentElement.setAttribute("data-plots", String(document.querySelectorAll("svg").length));
})();
)";

// A figure, right-aligned: a number, alone or with a unit of letters ("1.5x", "20%", "71.6 us"); not
// an id or a date that starts with digits ("20261207-1219-ab12", "2026-12-07").
bool numeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return false;
  const std::string rest(end);
  if (rest.empty() || rest == "x" || rest == "%") return true;
  if (rest[0] != ' ') return false;
  return std::all_of(rest.begin() + 1, rest.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
}

}  // namespace

std::string html_escape(std::string_view s) { return escape_markup(s, {"&#39;", allowed, nullptr}); }

HtmlPage::HtmlPage(std::string title) : title_(std::move(title)) {}

void HtmlPage::heading(const std::string& text, int level, const std::string& id) {
  level = level < 1 ? 1 : level > 4 ? 4 : level;
  body_ += fmt::format("<h{}{}>{}</h{}>\n", level, id.empty() ? "" : " id=\"" + html_escape(id) + "\"",
                       html_escape(text), level);
}

void HtmlPage::paragraph(const std::string& text, const std::string& css_class) {
  body_ += (css_class.empty() ? "<p>" : "<p class=\"" + html_escape(css_class) + "\">") + html_escape(text) + "</p>\n";
}

void HtmlPage::raw(const std::string& markup) { body_ += markup + "\n"; }

void HtmlPage::table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                     const std::string& caption) {
  // The caption as a paragraph above: a <caption> is as narrow as its table.
  if (!caption.empty()) body_ += "<p class=\"caption\">" + html_escape(caption) + "</p>\n";
  body_ += "<table>";
  body_ += "<thead><tr>";
  for (const auto& h : header) body_ += "<th>" + html_escape(h) + "</th>";
  body_ += "</tr></thead><tbody>\n";
  for (const auto& r : rows) {
    body_ += "<tr>";
    for (size_t i = 0; i < std::max(header.size(), r.size()); ++i) {
      const std::string cell = i < r.size() ? r[i] : "";
      const char* cls = cell.empty() || cell == "-" ? " class=\"none\"" : numeric(cell) ? " class=\"num\"" : "";
      body_ += std::string("<td") + cls + ">" + html_escape(cell) + "</td>";
    }
    body_ += "</tr>\n";
  }
  body_ += "</tbody></table>\n";
}

std::string HtmlPage::str() const {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<link rel=\"icon\" href=\"data:,\">\n<title>" +
         html_escape(title_) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n" + body_ + "<script>" +
         kScript + "</script>\n</body>\n</html>\n";
}

}  // namespace mblast::report
