// The lowering pipeline's OpenCL dialect: OpenCL C kernels (a work-item per work item of the
// schedule: an element, a line of a scan, a tile of a reduction) in a source string, and the
// host code that builds the program in mblast_prepare, allocates the temporaries there, and sets arguments and enqueues
// each kernel on the runner's queue.
#include <stdexcept>

#include <fmt/format.h>

#include "mblast/lower/dialects.h"

namespace mblast::lower {

std::string emit_opencl(const Schedule& s, const Problem& problem, const Stitches& st) {
  const Dialect& d = opencl_dialect();
  std::string k;
  k += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n\n";
  k += helper_functions(d, "inline");
  for (const auto& kr : s.kernels) {
    k += fmt::format("\n__kernel void {}({}{}) {{\n", kr.name,
                     kernel_params(s, kr,
                                   [&](const std::string& b, DType dt, bool w) {
                                     return fmt::format("__global {}{}* restrict {}", w ? "" : "const ", d.storage(dt),
                                                        b);
                                   }),
                     kr.loop >= 0 ? ", const long mb_step" : "");
    if (kr.loop >= 0) {
      k += "  const long mb_local = (long)get_global_id(0);\n";
      k += loop_gid(kr, "long", "mb_local", "  ");
    } else {
      k += "  const long gid = (long)get_global_id(0);\n";
      k += fmt::format("  if (gid >= {}L) return;\n", kr.items);
    }
    k += kernel_body(s, kr, d, "gid", "  ");
    k += "}\n";
  }
  std::string h = candidate_comment(s, problem, "OpenCL candidate");
  h += "#include <mblast/opencl_candidate.h>\n\n";
  if (!st.empty()) h += stitched_sources(st);
  h += "static const char* kSource = R\"CLC(\n" + k + ")CLC\";\n\n";
  h += fmt::format("enum {{ kKernels = {}, kTemps = {}, kGroups = {} }};\n", std::max<size_t>(s.kernels.size(), 1),
                   std::max<size_t>(s.temps.size(), 1), std::max<size_t>(st.size(), 1));
  h += "static const char* const kNames[kKernels] = {";
  // A stitched group's kernel is not created: its own candidate runs instead.
  for (size_t i = 0; i < s.kernels.size(); ++i)
    h += (i ? ", " : "") + (stitch_of(st, i) >= 0 ? std::string("nullptr") : "\"" + s.kernels[i].name + "\"");
  if (s.kernels.empty()) h += "nullptr";
  h += "};\n";
  h += "static const size_t kTempBytes[kTemps] = {";
  for (size_t i = 0; i < s.temps.size(); ++i) {
    const auto& t = s.program.tensors[static_cast<size_t>(s.temps[i])];
    h += fmt::format("{}{}u * sizeof({})", i ? ", " : "", std::max<int64_t>(t.numel(), 1),
                     t.dtype == DType::F64                                                      ? "double"
                     : t.dtype == DType::I64                                                    ? "long long"
                     : (t.dtype == DType::Bool || t.dtype == DType::U8 || t.dtype == DType::I8) ? "char"
                     : t.dtype == DType::I32                                                    ? "int"
                                                                                                : "float");
  }
  if (s.temps.empty()) h += "0";
  h += "};\n\n";
  h += tensor_checks(problem, "mblast_cl::fail");
  h += R"CXX(
struct mb_state {
  cl_program program = nullptr;
  cl_kernel kernels[kKernels] = {};
  cl_mem tmp[kTemps] = {};
  void* group[kGroups] = {};  // the stitched groups' states
};

static void mb_free(const mblast_context* ctx, mb_state* s) {
  (void)ctx;
  if (!s) return;
)CXX";
  h += stitch_release(st, "s->group");
  h += R"CXX(  for (cl_kernel k : s->kernels)
    if (k) clReleaseKernel(k);
  if (s->program) clReleaseProgram(s->program);
  for (cl_mem m : s->tmp)
    if (m) clReleaseMemObject(m);
  delete s;
}

static int mb_build(const mblast_context* ctx, const mblast_tensor* par, mb_state** out) {
  (void)par;
  *out = nullptr;
  if (!ctx || ctx->backend != MBLAST_BACKEND_OPENCL || !ctx->cl_context || !ctx->cl_device || !ctx->cl_queue)
    return mblast_cl::fail("mblast_context has no OpenCL context, device or queue");
  cl_context context = static_cast<cl_context>(ctx->cl_context);
  cl_device_id device = static_cast<cl_device_id>(ctx->cl_device);
  mb_state* s = new mb_state();
  cl_int err = CL_SUCCESS;
  const char* src = kSource;
  s->program = clCreateProgramWithSource(context, 1, &src, nullptr, &err);
  if (err != CL_SUCCESS) return mb_free(ctx, s), mblast_cl::fail("clCreateProgramWithSource failed with cl_int %d", err);
  err = clBuildProgram(s->program, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    char log[6000] = "";
    clGetProgramBuildInfo(s->program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, nullptr);
    mb_free(ctx, s);
    return mblast_cl::fail("clBuildProgram failed with cl_int %d; build log: %s", err, log);
  }
  for (int i = 0; i < kKernels; ++i) {
    if (!kNames[i]) continue;
    s->kernels[i] = clCreateKernel(s->program, kNames[i], &err);
    if (err != CL_SUCCESS) return mb_free(ctx, s), mblast_cl::fail("clCreateKernel(%s) failed with cl_int %d", kNames[i], err);
  }
  for (int i = 0; i < kTemps; ++i) {
    if (!kTempBytes[i]) continue;
    s->tmp[i] = clCreateBuffer(context, CL_MEM_READ_WRITE, kTempBytes[i], nullptr, &err);
    if (err != CL_SUCCESS) return mb_free(ctx, s), mblast_cl::fail("clCreateBuffer of temporary %d (%zu bytes) failed with cl_int %d", i, kTempBytes[i], err);
  }
)CXX";
  auto mem = [](const std::string& b) {
    if (b.rfind("tmp", 0) == 0) return fmt::format("s->tmp[{}]", b.substr(3));
    if (b.rfind("par", 0) == 0) return fmt::format("static_cast<cl_mem>(par[{}].data)", b.substr(3));
    if (b.rfind("out", 0) == 0) return fmt::format("static_cast<cl_mem>(out[{}].data)", b.substr(3));
    return fmt::format("static_cast<cl_mem>(in[{}].data)", b.substr(2));
  };
  auto as_void = [&](const std::string& b) { return "static_cast<void*>(" + mem(b) + ")"; };
  h += stitch_prepare(st, as_void, "s->group", "mb_free(ctx, s), mblast_cl::fail");
  h += R"CXX(  *out = s;
  return 0;
}

static int mb_launch(cl_command_queue queue, cl_kernel k, const char* name, const cl_mem* args, int n_args, size_t global,
                     const cl_long* step) {
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < n_args && err == CL_SUCCESS; ++i) err = clSetKernelArg(k, (cl_uint)i, sizeof(cl_mem), &args[i]);
  if (step && err == CL_SUCCESS) err = clSetKernelArg(k, (cl_uint)n_args, sizeof(cl_long), step);
  if (err != CL_SUCCESS) return mblast_cl::fail("clSetKernelArg(%s) failed with cl_int %d", name, err);
  err = clEnqueueNDRangeKernel(queue, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) return mblast_cl::fail("clEnqueueNDRangeKernel(%s) failed with cl_int %d", name, err);
  return 0;
}

static int mb_enqueue(const mblast_context* ctx, mb_state* s, const mblast_tensor* in, const mblast_tensor* par, mblast_tensor* out) {
  (void)in;
  (void)par;
  (void)out;
  (void)s;
  cl_command_queue queue = static_cast<cl_command_queue>(ctx->cl_queue);
  (void)queue;
)CXX";
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const auto& kr = s.kernels[i];
    if (const int j = stitch_of(st, i); j >= 0) {
      if (kr.loop >= 0) throw std::runtime_error("a stitched group inside a loop: " + kr.name);
      h += stitch_run(st, static_cast<size_t>(j), as_void, "s->group", "mblast_cl::fail");
      continue;
    }
    const auto args = kernel_args(s, kr);
    h += loop_open(s, i, "cl_long");
    h += "  {\n    const cl_mem args[] = {";
    for (size_t a = 0; a < args.size(); ++a) h += (a ? ", " : "") + mem(args[a]);
    h += "};\n";
    h += fmt::format("    if (mb_launch(queue, s->kernels[{}], \"{}\", args, {}, {}, {}) != 0) return -1;\n  }}\n", i,
                     kr.name, args.size(), std::max<int64_t>(kr.items, 1), kr.loop >= 0 ? "&mb_step" : "nullptr");
    h += loop_close(s, i);
  }
  h += "  return 0;\n}\n";
  h += R"CXX(
extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor* par, int32_t, void** state) {
  mb_state* s = nullptr;
  const int rc = mb_build(ctx, par, &s);
  *state = s;
  return rc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
                          const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (mb_check_tensors(in, n_in, par, n_par, out, n_out) != 0) return -1;
  if (!ctx || ctx->backend != MBLAST_BACKEND_OPENCL || !ctx->cl_queue) return mblast_cl::fail("mblast_context has no OpenCL queue");
  mb_state* s = static_cast<mb_state*>(state);
  if (s) return mb_enqueue(ctx, s, in, par, out);
  // Without mblast_prepare: a transient program and temporaries (OpenCL keeps what the queue needs).
  if (mb_build(ctx, par, &s) != 0) return -1;
  const int rc = mb_enqueue(ctx, s, in, par, out);
  if (rc == 0) clFinish(static_cast<cl_command_queue>(ctx->cl_queue));
  mb_free(ctx, s);
  return rc;
}

extern "C" void mblast_release(const mblast_context* ctx, void* state) { mb_free(ctx, static_cast<mb_state*>(state)); }

extern "C" const char* mblast_last_error(void) { return mblast_cl::error_text(); }
)CXX";
  return h;
}

}  // namespace mblast::lower
