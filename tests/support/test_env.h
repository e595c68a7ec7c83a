// Shared by the integration suites: where things are, and which targets can run here.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "mblast/measure/evaluate.h"
#include "mblast/target.h"

namespace mblast::testing {

std::filesystem::path source_dir();        // MBLAST_HOME, set by CTest
std::vector<std::string> problem_names();  // problems/* with a problem.json, sorted

// The local targets of a backend that the runner can open here, probed once per process.
// Fills *why with the reasons when there is none.
std::vector<Target> available_targets(const std::string& backend, std::string* why);

// File extension of a candidate for a backend: .cpp, .cu, .c
std::string candidate_extension(const std::string& backend);

// Verification in full, timing short (5 samples or 20 ms, 1 s at most, 2 rotating sets): for
// suites that judge verdicts, not figures.
EvalOptions quick_timing();

// Backends known to the project (whether or not compiled in).
const std::vector<std::string>& all_backend_names();

}  // namespace mblast::testing
