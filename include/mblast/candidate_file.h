// A candidate file as the user gives it: refused with one line before the build when it is not
// source text, and a failed build's log kept whole while one line of it is shown.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "mblast/error.h"

namespace mblast {

// Why these bytes are not a source file (an ELF, PNG, ZIP… by its magic number; NUL or other
// control bytes; mostly invalid UTF-8), or "" when they may be source. Looks at the first 4 KiB.
std::string not_source_reason(std::string_view bytes);

// The candidate's source; throws UserError with one line naming the file when it cannot be read,
// is a folder, is empty, is too large for a kernel source, or is not source text.
std::string read_candidate_source(const std::filesystem::path& file);

// The refusal of a file that exists but holds no source text (binary, control bytes, empty, too
// large): a candidate's failure where a loop wrote it, not the user's input error.
class NotSourceError : public UserError {
 public:
  using UserError::UserError;
};

// The compiler's first error line of a build log ("file:3:5: error: ..." from gcc, clang, nvcc,
// or a linker's undefined reference), else its last non-empty line (a build cut short says so
// there: "[mblast] nvcc did not finish within 180 s"); cut to one line of at
// most 300 characters. Where the line begins with the runner's build folder path of the source
// (gone once the build failed), that path is replaced by `shown_as` when it is not empty.
std::string first_error_line(std::string_view log, const std::string& shown_as = "");

// Writes a build log to <cache>/build-logs/<content hash>.log (once per distinct log) and returns
// its path; an empty path when it cannot be written (the log is still in the JSON result).
std::filesystem::path keep_build_log(const std::string& log);

}  // namespace mblast
