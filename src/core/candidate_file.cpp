#include "mblast/candidate_file.h"

#include <cstdio>
#include <system_error>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/paths.h"
#include "mblast/tensor.h"

namespace mblast {

namespace fs = std::filesystem;

namespace {

// A kernel source of this size is not one a person or a model wrote; reading it whole into a
// request would only cost memory.
constexpr uintmax_t kMaxSourceBytes = 16u << 20;

struct Magic {
  std::string_view bytes;
  const char* what;
};

// File formats a candidate path may point at by mistake (a built binary, an image, an archive).
// Each magic number is at least 3 bytes or binary, so no C/C++ source starts with one.
constexpr Magic kMagics[] = {
    {std::string_view("\x7f"
                      "ELF",
                      4),
     "an ELF binary (an executable, library or object file)"},
    {std::string_view("\x89PNG\r\n\x1a\n", 8), "a PNG image"},
    {"GIF87a", "a GIF image"},
    {"GIF89a", "a GIF image"},
    {std::string_view("\xff\xd8\xff", 3), "a JPEG image"},
    {std::string_view("PK\x03\x04", 4), "a ZIP archive"},
    {std::string_view("PK\x05\x06", 4), "a ZIP archive"},
    {std::string_view("\x1f\x8b", 2), "gzip-compressed data"},
    {std::string_view("\xfd"
                      "7zXZ\0",
                      6),
     "xz-compressed data"},
    {std::string_view("\x28\xb5\x2f\xfd", 4), "zstd-compressed data"},
    {"%PDF-", "a PDF document"},
    {"!<arch>\n", "an ar archive (a static library)"},
    {std::string_view("\0asm", 4), "a WebAssembly module"},
    {std::string_view("BC\xc0\xde", 4), "LLVM bitcode"},
    {std::string_view("\xcf\xfa\xed\xfe", 4), "a Mach-O binary"},
    {std::string_view("\xca\xfe\xba\xbe", 4), "a Mach-O universal binary or Java class file"},
    {std::string_view("SQLite format 3\0", 16), "an SQLite database"},
    {std::string_view("\x93NUMPY", 6), "a NumPy array file"},
};

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one (overlong forms,
// surrogates and code points above U+10FFFF included, as the JSON protocol would refuse them).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c == 0xE0)
    n = 3, lo = 0xA0;
  else if (c == 0xED)
    n = 3, hi = 0x9F;
  else if (c >= 0xE1 && c <= 0xEF)
    n = 3;
  else if (c == 0xF0)
    n = 4, lo = 0x90;
  else if (c == 0xF4)
    n = 4, hi = 0x8F;
  else if (c >= 0xF1 && c <= 0xF3)
    n = 4;
  else
    return 0;
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

std::string where(std::string_view s, size_t at) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at; ++i) {
    if (s[i] == '\n')
      ++line, col = 1;
    else
      ++col;
  }
  return "offset " + std::to_string(at) + ", line " + std::to_string(line) + ", column " + std::to_string(col);
}

std::string hex_byte(unsigned char c) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", c);
  return b;
}

}  // namespace

std::string not_source_reason(std::string_view bytes) {
  for (const Magic& m : kMagics)
    if (bytes.substr(0, m.bytes.size()) == m.bytes) return std::string(m.what) + ", not source code";
  // The whole file, not only its start: a NUL or a stray byte anywhere would be changed in
  // transit (the request is JSON, which replaces invalid UTF-8) or ignored by the compiler, so
  // the code built would not be the file the user gave.
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == 0) return "binary data, not source code (a NUL byte at " + where(bytes, i) + ")";
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r') || c == 0x7f)
      return "binary data, not source code (control byte " + hex_byte(c) + " at " + where(bytes, i) + ")";
    const size_t n = utf8_sequence(bytes, i);
    if (n == 0)
      return "not UTF-8 text (byte " + hex_byte(c) + " at " + where(bytes, i) +
             "): binary data, or text in another encoding; save it as UTF-8";
    i += n;
  }
  return "";
}

std::string read_candidate_source(const fs::path& file) {
  std::error_code ec;
  const auto st = fs::status(file, ec);
  if (ec || !fs::exists(st)) throw UserError(file.string() + ": no such candidate file");
  if (fs::is_directory(st)) throw UserError(file.string() + ": is a folder, not a candidate source file");
  if (!fs::is_regular_file(st)) throw UserError(file.string() + ": not a regular file (a device, pipe or socket)");
  const uintmax_t size = fs::file_size(file, ec);
  if (!ec && size > kMaxSourceBytes)
    throw NotSourceError(file.string() + ": " + std::to_string(size >> 20) +
                         " MiB, too large for a kernel source (at most " + std::to_string(kMaxSourceBytes >> 20) +
                         " MiB)");
  const std::optional<std::string> s = try_read_file(file);
  if (!s) throw UserError(file.string() + ": cannot read the candidate");
  if (s->find_first_not_of(" \t\r\n") == std::string::npos)
    throw NotSourceError(file.string() + ": the candidate is empty");
  if (std::string why = not_source_reason(*s); !why.empty()) throw NotSourceError(file.string() + ": " + why);
  return *s;
}

std::string first_error_line(std::string_view log, const std::string& shown_as) {
  std::string_view last, chosen;
  for (size_t pos = 0; pos < log.size();) {
    size_t nl = log.find('\n', pos);
    if (nl == std::string_view::npos) nl = log.size();
    std::string_view line = log.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    last = line;
    // gcc, clang: "f.c:3:5: error: ..."; nvcc: "f.cu(3): error: ..."; ld: "...: undefined reference to".
    // The linker's own error line ("collect2: error: ld returned 1") comes after the reference.
    if (line.find("error:") != std::string_view::npos || line.find("error :") != std::string_view::npos ||
        line.find("undefined reference") != std::string_view::npos) {
      chosen = line;
      break;
    }
  }
  // Without an error line (a build cut short, a compiler killed), the last line says why.
  std::string out(chosen.empty() ? last : chosen);
  // The source's path in the runner's build folder (removed after a failed build) means nothing
  // to the user: show their file instead.
  if (!shown_as.empty() && !out.empty() && out[0] == '/') {
    const size_t end = out.find_first_of(":(");
    if (end != std::string::npos && fs::path(out.substr(0, end)).filename().string().rfind("candidate.", 0) == 0)
      out = shown_as + out.substr(end);
  }
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  if (out.size() > 300) out = out.substr(0, 297) + "...";
  return out;
}

fs::path keep_build_log(const std::string& log) {
  const fs::path file = cache_dir() / "build-logs" / (content_hash_hex(log) + ".log");
  std::error_code ec;
  if (fs::exists(file, ec)) return file;
  try {
    write_file_atomically(file, log);
  } catch (const std::exception&) {
    return {};
  }
  return file;
}

}  // namespace mblast
