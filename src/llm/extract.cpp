#include "mblast/llm/extract.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

namespace mblast::llm {

namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool space(char c) { return std::isspace(static_cast<unsigned char>(c)); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// Comments become spaces (newlines kept), and so do the contents of string and character
// literals when blank_strings. A literal left open ends at the end of its line, so prose with
// apostrophes cannot swallow the code after it.
std::string strip(std::string_view code, bool blank_strings) {
  std::string out(code);
  size_t i = 0;
  const size_t n = code.size();
  const auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < n; ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  while (i < n) {
    const char c = code[i];
    if (c == '/' && i + 1 < n && code[i + 1] == '/') {
      const size_t end = code.find('\n', i);
      blank(i, end == std::string_view::npos ? n : end);
      i = end == std::string_view::npos ? n : end;
    } else if (c == '/' && i + 1 < n && code[i + 1] == '*') {
      const size_t end = code.find("*/", i + 2);
      const size_t stop = end == std::string_view::npos ? n : end + 2;
      blank(i, stop);
      i = stop;
    } else if (c == 'R' && i + 1 < n && code[i + 1] == '"' &&
               (i == 0 || !ident_char(code[i - 1]) || code[i - 1] == 'L' || code[i - 1] == 'u' || code[i - 1] == 'U' ||
                code[i - 1] == '8')) {
      // Raw string R"delim( ... )delim"
      const size_t open = code.find('(', i + 2);
      if (open == std::string_view::npos || open - (i + 2) > 16) {
        ++i;
        continue;
      }
      const std::string closing = ")" + std::string(code.substr(i + 2, open - (i + 2))) + "\"";
      const size_t end = code.find(closing, open + 1);
      const size_t stop = end == std::string_view::npos ? n : end + closing.size();
      if (blank_strings) blank(open + 1, end == std::string_view::npos ? n : end);
      i = stop;
    } else if (c == '"' || (c == '\'' && (i == 0 || !std::isalnum(static_cast<unsigned char>(code[i - 1]))))) {
      size_t k = i + 1;
      while (k < n && code[k] != c && code[k] != '\n') k += code[k] == '\\' ? 2 : 1;
      k = std::min(k, n);
      if (blank_strings) blank(i + 1, k);
      i = k < n && code[k] == c ? k + 1 : k;
    } else {
      ++i;
    }
  }
  return out;
}

// Position just after the ')' that closes the '(' at open, or npos.
size_t after_parens(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

// "int mblast_run(...) {" in code whose comments and literals are blanked.
bool defines_mblast_run(std::string_view s) {
  const std::string_view name = "mblast_run";
  for (size_t pos = s.find(name); pos != std::string_view::npos; pos = s.find(name, pos + 1)) {
    if (pos > 0 && ident_char(s[pos - 1])) continue;
    size_t k = pos + name.size();
    if (k < s.size() && ident_char(s[k])) continue;
    while (k < s.size() && space(s[k])) ++k;
    if (k >= s.size() || s[k] != '(') continue;
    size_t b = pos;
    while (b > 0 && space(s[b - 1])) --b;
    if (b < 3 || s.substr(b - 3, 3) != "int" || (b > 3 && ident_char(s[b - 4]))) continue;
    size_t after = after_parens(s, k);
    if (after == std::string_view::npos) continue;
    while (after < s.size() && space(s[after])) ++after;
    if (after < s.size() && s[after] == '{') return true;
  }
  return false;
}

// MBLAST_OPENCL_CANDIDATE( used (not #defined) in blanked code.
bool uses_opencl_macro(std::string_view s) {
  const std::string_view name = "MBLAST_OPENCL_CANDIDATE";
  for (size_t pos = s.find(name); pos != std::string_view::npos; pos = s.find(name, pos + 1)) {
    if (pos > 0 && ident_char(s[pos - 1])) continue;
    size_t k = pos + name.size();
    while (k < s.size() && space(s[k])) ++k;
    if (k >= s.size() || s[k] != '(') continue;
    const size_t line = s.rfind('\n', pos);
    const std::string_view before = trim(
        s.substr(line == std::string_view::npos ? 0 : line + 1, pos - (line == std::string_view::npos ? 0 : line + 1)));
    if (before.starts_with("#")) continue;  // the macro's own definition
    return true;
  }
  return false;
}

bool defines_entry(std::string_view code, const std::string& backend) {
  const std::string blanked = strip(code, true);
  return defines_mblast_run(blanked) || (backend == "opencl" && uses_opencl_macro(blanked));
}

struct Fence {
  char ch = 0;
  size_t len = 0;
  std::string info;  // first word of the info string, lower case
};

std::optional<Fence> fence_of(std::string_view line) {
  line = trim(line);
  if (line.size() < 3 || (line[0] != '`' && line[0] != '~')) return std::nullopt;
  Fence f;
  f.ch = line[0];
  while (f.len < line.size() && line[f.len] == f.ch) ++f.len;
  if (f.len < 3) return std::nullopt;
  std::string_view info = trim(line.substr(f.len));
  if (f.ch == '`' && info.find('`') != std::string_view::npos) return std::nullopt;  // inline code
  while (!info.empty() && (info.front() == '{' || info.front() == '.')) info.remove_prefix(1);
  const size_t end = info.find_first_of(" \t{}");
  f.info = lower(std::string(info.substr(0, end)));
  return f;
}

bool other_language(const std::string& tag) {
  static const char* kOthers[] = {"python",   "py",   "python3", "bash",     "sh",    "shell", "console", "zsh",
                                  "json",     "yaml", "yml",     "diff",     "patch", "text",  "txt",     "plaintext",
                                  "markdown", "md",   "make",    "makefile", "cmake", "log",   "output",  "ptx"};
  return std::find(std::begin(kOthers), std::end(kOthers), tag) != std::end(kOthers);
}

struct Block {
  std::string info;
  std::string body;
};

std::vector<Block> fenced_blocks(const std::vector<std::string_view>& lines) {
  std::vector<Block> blocks;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto open = fence_of(lines[i]);
    if (!open) continue;
    Block b;
    b.info = open->info;
    size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      const auto close = fence_of(lines[j]);
      if (close && close->ch == open->ch && close->len >= open->len && close->info.empty()) break;
      b.body.append(lines[j]);
      b.body += '\n';
    }
    blocks.push_back(std::move(b));  // a block left open at the end runs to the end (cut-off answer)
    i = j;
  }
  return blocks;
}

bool looks_like_code_start(std::string_view t) {
  static const char* kStarts[] = {"#",          "//",         "/*",       "extern",  "static", "template", "namespace",
                                  "__global__", "__device__", "typedef",  "struct",  "using",  "int ",     "void ",
                                  "const ",     "inline",     "__kernel", "MBLAST_", "float ", "size_t",   "constexpr"};
  for (const char* s : kStarts)
    if (t.starts_with(s)) return true;
  return false;
}

bool looks_like_code_end(std::string_view t) {
  return t.ends_with("}") || t.ends_with(";") || t.ends_with(")") || t.ends_with("*/") || t.starts_with("#") ||
         t.starts_with("//");
}

std::vector<std::string> includes(std::string_view code) {
  std::vector<std::string> out;
  const std::string s = strip(code, false);
  for (std::string_view line : split_lines(s)) {
    line = trim(line);
    if (!line.starts_with("#")) continue;
    line = trim(line.substr(1));
    if (!line.starts_with("include")) continue;
    line = trim(line.substr(7));
    if (line.size() < 2 || (line[0] != '<' && line[0] != '"')) continue;
    const size_t end = line.find(line[0] == '<' ? '>' : '"', 1);
    if (end != std::string_view::npos) out.emplace_back(line.substr(1, end - 1));
  }
  return out;
}

bool is_cuda_header(const std::string& h) {
  for (const char* p : {"cuda", "cublas", "cudnn", "cufft", "curand", "cusparse", "cub/", "thrust/",
                        "cooperative_groups", "nvrtc", "device_launch_parameters", "mma.h", "cute/", "cutlass/"})
    if (h.rfind(p, 0) == 0) return true;
  return false;
}

bool is_opencl_header(const std::string& h) {
  return h.rfind("CL/", 0) == 0 || h.rfind("OpenCL/", 0) == 0 || h == "mblast/opencl_candidate.h";
}

bool has_token(std::string_view s, std::string_view token) {
  for (size_t pos = s.find(token); pos != std::string_view::npos; pos = s.find(token, pos + 1)) {
    const bool left = pos == 0 || !ident_char(s[pos - 1]);
    const bool right = pos + token.size() >= s.size() || !ident_char(s[pos + token.size()]);
    if (left && right) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> extract_candidate_code(const std::string& raw, const std::string& backend) {
  std::string text = raw;
  text.erase(std::remove(text.begin(), text.end(), '\r'), text.end());
  const std::vector<std::string_view> lines = split_lines(text);
  const std::vector<Block> blocks = fenced_blocks(lines);

  const Block* best = nullptr;
  for (const Block& b : blocks)
    if (!other_language(b.info) && defines_entry(b.body, backend) && (!best || b.body.size() > best->body.size()))
      best = &b;
  if (best) return best->body;
  if (!blocks.empty()) return std::nullopt;

  // No fences: the answer may be the code itself, perhaps with a sentence before or after.
  size_t first = lines.size(), last = 0;
  for (size_t i = 0; i < lines.size(); ++i)
    if (looks_like_code_start(trim(lines[i]))) {
      first = i;
      break;
    }
  for (size_t i = lines.size(); i-- > first;)
    if (looks_like_code_end(trim(lines[i]))) {
      last = i;
      break;
    }
  if (first >= lines.size() || last < first) return std::nullopt;
  std::string code;
  for (size_t i = first; i <= last; ++i) {
    code.append(lines[i]);
    code += '\n';
  }
  if (!defines_entry(code, backend)) return std::nullopt;
  return code;
}

std::string check_candidate_abi(const std::string& code, const std::string& backend) {
  if (backend != "cuda" && backend != "opencl" && backend != "rvv")
    return "unknown backend '" + backend + "' (cuda, opencl, rvv)";
  if (trim(code).empty()) return "the candidate is empty";
  const std::string blanked = strip(code, true);
  const std::string no_comments = strip(code, false);
  const std::vector<std::string> headers = includes(code);
  const auto included = [&](const std::string& h) {
    return std::find(headers.begin(), headers.end(), h) != headers.end();
  };

  const bool run = defines_mblast_run(blanked);
  const bool macro = backend == "opencl" && uses_opencl_macro(blanked);
  if (!run && !macro)
    return backend == "opencl"
               ? "no definition of int mblast_run(...) and no MBLAST_OPENCL_CANDIDATE(...) (include/mblast/abi.h, "
                 "include/mblast/opencl_candidate.h)"
               : "no definition of int mblast_run(...) (the entry point of include/mblast/abi.h)";

  for (const std::string& h : headers) {
    if (backend != "cuda" && is_cuda_header(h))
      return "an " + backend + " candidate cannot include <" + h + "> (a CUDA header)";
    if (backend != "opencl" && is_opencl_header(h))
      return "a " + backend + " candidate cannot include <" + h + "> (an OpenCL header)";
  }
  if (backend == "rvv" && (has_token(blanked, "__global__") || has_token(blanked, "__kernel")))
    return "an rvv candidate is C for the CPU: it cannot define GPU kernels (__global__ / __kernel)";

  const bool extern_c = no_comments.find("extern \"C\"") != std::string::npos;
  if (macro && !included("mblast/opencl_candidate.h"))
    return "MBLAST_OPENCL_CANDIDATE needs #include <mblast/opencl_candidate.h>";
  if (backend == "rvv") {
    if (extern_c && !has_token(blanked, "__cplusplus"))
      return "an rvv candidate is C: extern \"C\" needs #ifdef __cplusplus around it";
  } else if (run && !extern_c && !included("mblast/abi.h") && !included("mblast/opencl_candidate.h")) {
    return "mblast_run would have C++ linkage: #include <mblast/abi.h> or declare it extern \"C\"";
  }
  return "";
}

}  // namespace mblast::llm
