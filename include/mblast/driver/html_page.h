// One self-contained HTML page (inline CSS and one small inline script for tooltips; nothing fetched
// from anywhere): sections of headings, paragraphs, inline SVG and tables, every text escaped. Used by
// `mblast report`. Once its script has run, <html> carries data-plots="<number of SVG plots>".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mblast::report {

// Text made safe for HTML (and inline SVG) character data and quoted attribute values: & < > " '
// escaped; invalid UTF-8 and control characters other than tab, LF and CR replaced by U+FFFD.
std::string html_escape(std::string_view text);

class HtmlPage {
 public:
  explicit HtmlPage(std::string title);

  void heading(const std::string& text, int level = 2, const std::string& id = "");
  void paragraph(const std::string& text, const std::string& css_class = "");
  // Markup the caller built from escaped parts (an SVG from svg_plot.h): added as it is.
  void raw(const std::string& markup);
  // A table; every cell is text (escaped). A row shorter than the header is padded with empty cells.
  // A cell "-" or "" is shown dimmed (no data).
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
             const std::string& caption = "");

  std::string str() const;  // the whole document

 private:
  std::string title_, body_;
};

}  // namespace mblast::report
