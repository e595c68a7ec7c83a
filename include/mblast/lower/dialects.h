// The lowering pipeline's dialects: a complete candidate file (include/mblast/abi.h) from a
// schedule, one per backend, each in its backend's folder (backends/<name>/codegen/).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mblast/lower/lower.h"
#include "mblast/problem.h"

namespace mblast::lower {

// ---- Stitching (optimize-model): a schedule's kernel replaced by a candidate of its own, the
// winner of that fusion group's kernel loop, inside the model's candidate. C++ dialects (CUDA,
// OpenCL host code) put each group's source into a namespace of its own; the C dialect (RVV)
// renames every name the group's file defines at file scope instead. C: the `c` arguments below.
struct GroupCall {
  size_t kernel = 0;   // the schedule's kernel it replaces
  std::string name;    // the group's name, for messages ("k3_convolution")
  std::string source;  // the group's candidate file
  Problem group;       // its tensors, named after the model's buffers ("in0", "tmp2", "par1", "out0")
};
using Stitches = std::vector<GroupCall>;

// The groups' sources: every #include line first, then each body in namespace mb_stitch<j> with
// its entry points renamed mb_stitch<j>_prepare, _run, _release.
std::string stitched_sources(const Stitches& st);
// The same for C: every #include line first, then each body between `#define NAME mb_stitch<j>_NAME`
// for each file-scope name it defines (the entry points become mb_stitch<j>_prepare, _run, ...) and
// the matching #undef lines, its own macros undefined after it.
std::string stitched_sources_c(const Stitches& st);
// Code (for the body of a function returning int) that prepares every group into STATE[j], from
// the model's parameters `par`; FAIL is a printf-like function returning -1.
std::string stitch_prepare(const Stitches& st, const std::function<std::string(const std::string&)>& data_of,
                           const std::string& state, const std::string& fail, bool c = false);
// Code that releases every group's state in STATE[j] (null-safe).
std::string stitch_release(const Stitches& st, const std::string& state, bool c = false);
// A block that runs group J in place of its kernel: the model's buffers seen as its tensors;
// DATA_OF(buffer) is a void* expression of the buffer's storage (device pointer, cl_mem).
std::string stitch_run(const Stitches& st, size_t j, const std::function<std::string(const std::string&)>& data_of,
                       const std::string& state, const std::string& fail, bool c = false);
// The index in ST of the group that replaces kernel K, or -1.
int stitch_of(const Stitches& st, size_t k);

// STITCHES: kernels replaced by the groups' own candidates (empty: the generic kernels only).
std::string emit_opencl(const Schedule& s, const Problem& problem, const Stitches& stitches = {});  // .opencl.cpp
std::string emit_cuda(const Schedule& s, const Problem& problem, const Stitches& stitches = {});    // .cuda.cu
std::string emit_rvv(const Schedule& s, const Problem& problem, const Stitches& stitches = {});     // .rvv.c (C loops)

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
// A kernel in a loop: the statements (at `indent`) that make `gid`, the linear work item, from the
// step argument `mb_step` and the item within the step `local` (of type `it`), after returning
// when `local` is past the step's items. Empty for other kernels.
std::string loop_gid(const Kernel& k, const std::string& it, const std::string& local, const std::string& indent);
// The host's `for` over a loop's steps before kernel i when it opens one (`mb_step` of type
// `it`), the closing brace after kernel i when it closes one; empty otherwise.
std::string loop_open(const Schedule& s, size_t i, const std::string& it);
std::string loop_close(const Schedule& s, size_t i);

}  // namespace mblast::lower
