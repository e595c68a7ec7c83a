// The lowering pipeline's dialects: a complete candidate file (include/mblast/abi.h) from a
// schedule, one per backend, each in its backend's folder (backends/<name>/codegen/).
#pragma once

#include <string>

#include "mblast/lower/lower.h"
#include "mblast/problem.h"

namespace mblast::lower {

std::string emit_opencl(const Schedule& s, const Problem& problem);  // .opencl.cpp
std::string emit_cuda(const Schedule& s, const Problem& problem);    // .cuda.cu
std::string emit_rvv(const Schedule& s, const Problem& problem);     // .rvv.c (plain C loops)

// Shared by the dialects (src/lower/host.cpp): the header comment, and a C function
// `mb_check_tensors(in, n_in, par, n_par, out, n_out)` that calls `fail` (printf-like, returns -1)
// on any tensor that is not exactly as the problem declares it. Valid C and C++.
std::string candidate_comment(const Schedule& s, const Problem& problem, const std::string& what);
std::string tensor_checks(const Problem& problem, const std::string& fail);
// `g_err` and `mb_fail(fmt, ...)` (formats into g_err, returns -1) for the C-family dialects;
// VSNPRINTF is "vsnprintf" (C) or "std::vsnprintf" (C++). Needs stdarg and stdio included.
std::string error_reporting(const std::string& vsnprintf_name);
// The kernel's parameter list: its own buffer writable, what it reads const, in `type` spelling
// ("__global float*", "float* __restrict__", ...): fn(buffer, dtype, writable) -> declaration.
std::string kernel_params(const Schedule& s, const Kernel& k,
                          const std::function<std::string(const std::string&, DType, bool)>& decl);
std::vector<std::string> kernel_args(const Schedule& s, const Kernel& k);  // the same order
DType buffer_dtype(const Schedule& s, const std::string& buffer);

}  // namespace mblast::lower
