// Running tools/mblast_kernelbench.py (the PyTorch side of mblast, "the Python helper") from
// the driver commands `import kernelbench`, `baseline` and `export`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "mblast/process.h"

namespace mblast {

// <data dir>/tools/mblast_kernelbench.py. Throws UserError when it is not there.
std::filesystem::path kernelbench_tool_path();

// The interpreter: `python` when not empty, else python_for_tools().
std::string kernelbench_python(const std::string& python);

// Runs `python helper args...` with a time limit. Throws UserError with a one-line reason when
// the interpreter cannot be started or the helper times out; a non-zero exit is left to the
// caller (see kernelbench_tool_failure).
CommandResult run_kernelbench_tool(const std::string& python, const std::vector<std::string>& args,
                                   double timeout_s);

// A fresh path in the temporary folder for the helper's --json-out (not created).
std::filesystem::path kernelbench_json_path(const std::string& what);

// The one line that says why the helper failed: its last "mblast_kernelbench: ..." line
// (without the prefix), else the last line of its output, else the exit status.
std::string kernelbench_tool_failure(const CommandResult& r);

}  // namespace mblast
