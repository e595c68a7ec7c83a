// From an LLM's answer to a candidate source file: find the code, check it can be the ABI of
// include/mblast/abi.h. Both are pure functions of their text.
#pragma once

#include <optional>
#include <string>

namespace mblast::llm {

// The candidate source in an answer. Fenced blocks (``` or ~~~, tagged cpp, c++, c, cuda, cu,
// opencl, cl, h or untagged; others such as python are ignored) that define the entry point
// (`int mblast_run(`, or for opencl also MBLAST_OPENCL_CANDIDATE( of opencl_candidate.h) are
// candidates, the largest wins. An answer without such a block that is itself code defining the
// entry point is taken, prose lines before and after it trimmed. nullopt when there is none.
std::optional<std::string> extract_candidate_code(const std::string& text, const std::string& backend);

// "" when the code can be a candidate of the backend ("cuda", "opencl", "rvv"), else a
// one-line reason: no entry point; a header of another backend (rvv including CUDA or OpenCL,
// ...); C++ linkage for mblast_run in a .cu/.cpp candidate; extern "C" in a C (rvv) candidate
// without #ifdef __cplusplus. Comments and string literals are not looked at.
std::string check_candidate_abi(const std::string& code, const std::string& backend);

}  // namespace mblast::llm
