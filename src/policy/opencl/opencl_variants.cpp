// Generators of OpenCL candidates for the builtin policy (include/mblast/policy/variants.h):
// the dispatch by plan kind, and the host code every generated candidate shares.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy {

namespace opencl {

namespace {

std::string host_code(const Design& d, const Problem& problem) {
  // Distinct kernels in launch order, with the fixed work-group size each needs (0: none).
  std::vector<std::string> names;
  std::vector<int64_t> fixed;
  bool gemm = false;
  std::vector<Launch> all = d.prepare_launches;
  all.insert(all.end(), d.launches.begin(), d.launches.end());
  for (const auto& l : all) {
    if (l.gemm) {
      gemm = true;
      continue;
    }
    auto it = std::find(names.begin(), names.end(), l.kernel);
    const int64_t wg =
        l.local[0] ? l.local[0] * std::max<int64_t>(l.local[1], 1) * std::max<int64_t>(l.local[2], 1) : 0;
    if (it == names.end()) {
      names.push_back(l.kernel);
      fixed.push_back(wg);
    } else {
      auto& f = fixed[static_cast<size_t>(it - names.begin())];
      f = std::max(f, wg);
    }
  }
  const bool have_program = !names.empty();

  std::string s;
  s += "#include <mblast/opencl_candidate.h>\n";
  if (gemm) s += "#include <clblast_c.h>\n";
  s += "\n";
  s += "static const char* kSource = R\"CLC(\n" + d.kernels + ")CLC\";\n\n";
  if (have_program) {
    s += fmt::format("enum {{ kNumKernels = {} }};\n", names.size());
    s += "static const char* const kKernelNames[kNumKernels] = {";
    for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + ("\"" + names[i] + "\"");
    s += "};\n";
    s += "// Work-items per work-group a kernel is launched with (0: chosen at run time).\n";
    s += "static const size_t kFixedWorkGroup[kNumKernels] = {";
    for (size_t i = 0; i < fixed.size(); ++i) s += (i ? ", " : "") + std::to_string(fixed[i]);
    s += "};\n\n";
  }
  s += gpu::host_shape_check(problem, "mblast_cl::fail");
  s += "\n";
  s += "struct mb_state {\n";
  if (have_program) {
    s += "  cl_program program = nullptr;\n";
    s += "  cl_kernel kernels[kNumKernels] = {};\n";
    s += "  size_t info_wg[kNumKernels] = {};  // from CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE and "
         "CL_KERNEL_WORK_GROUP_SIZE\n";
  }
  if (!d.temps.empty())
    s += fmt::format("  cl_mem tmp[{}] = {{}};  // the temporaries between the kernels\n", d.temps.size());
  if (!have_program && d.temps.empty()) s += "  int unused = 0;\n";
  s += "};\n\n";
  s += "static void mb_free(mb_state* s) {\n  if (!s) return;\n";
  if (have_program) {
    s += "  for (cl_kernel k : s->kernels)\n    if (k) clReleaseKernel(k);\n";
    s += "  if (s->program) clReleaseProgram(s->program);\n";
  }
  if (!d.temps.empty()) s += "  for (cl_mem m : s->tmp)\n    if (m) clReleaseMemObject(m);\n";
  s += "  delete s;\n}\n\n";

  s += "static int mb_build(const mblast_context* ctx, mb_state** out) {\n";
  s += "  *out = nullptr;\n";
  s +=
      "  if (!ctx || ctx->backend != MBLAST_BACKEND_OPENCL || !ctx->cl_context || !ctx->cl_device || !ctx->cl_queue)\n";
  s += "    return mblast_cl::fail(\"mblast_context has no OpenCL context, device or queue\");\n";
  s += "  mb_state* s = new mb_state();\n";
  if (have_program) {
    s += R"CXX(  cl_context context = static_cast<cl_context>(ctx->cl_context);
  cl_device_id device = static_cast<cl_device_id>(ctx->cl_device);
  cl_int err = CL_SUCCESS;
  const char* src = kSource;
  s->program = clCreateProgramWithSource(context, 1, &src, nullptr, &err);
  if (err != CL_SUCCESS) return mb_free(s), mblast_cl::fail("clCreateProgramWithSource failed with cl_int %d", err);
  err = clBuildProgram(s->program, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    char log[6000] = "";
    clGetProgramBuildInfo(s->program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, nullptr);
    mb_free(s);
    return mblast_cl::fail("clBuildProgram failed with cl_int %d; build log: %s", err, log);
  }
  for (int i = 0; i < kNumKernels; ++i) {
    s->kernels[i] = clCreateKernel(s->program, kKernelNames[i], &err);
    if (err != CL_SUCCESS) return mb_free(s), mblast_cl::fail("clCreateKernel(%s) failed with cl_int %d", kKernelNames[i], err);
    size_t max_wg = 0, multiple = 0;
    err = clGetKernelWorkGroupInfo(s->kernels[i], device, CL_KERNEL_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, nullptr);
    if (err == CL_SUCCESS)
      err = clGetKernelWorkGroupInfo(s->kernels[i], device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof multiple,
                                     &multiple, nullptr);
    if (err != CL_SUCCESS) return mb_free(s), mblast_cl::fail("clGetKernelWorkGroupInfo(%s) failed with cl_int %d", kKernelNames[i], err);
    if (kFixedWorkGroup[i] > max_wg)
      return mb_free(s), mblast_cl::fail("kernel %s needs work-groups of %zu work-items; this device allows %zu for it",
                                         kKernelNames[i], kFixedWorkGroup[i], max_wg);
    if (multiple == 0) multiple = 1;
    const size_t cap = max_wg < 256 ? max_wg : 256;
    s->info_wg[i] = cap >= multiple ? cap / multiple * multiple : (cap ? cap : 1);
  }
)CXX";
  }
  if (!d.temps.empty()) {
    s += "  {\n";
    s += "    static const size_t kTempBytes[] = {";
    for (size_t i = 0; i < d.temps.size(); ++i) s += (i ? ", " : "") + fmt::format("{}u * sizeof(float)", d.temps[i]);
    s += "};\n";
    s += "    cl_int terr = CL_SUCCESS;\n";
    s += "    for (size_t i = 0; i < sizeof kTempBytes / sizeof kTempBytes[0]; ++i) {\n";
    s += "      s->tmp[i] = clCreateBuffer(static_cast<cl_context>(ctx->cl_context), CL_MEM_READ_WRITE, kTempBytes[i], "
         "nullptr, &terr);\n";
    s += "      if (terr != CL_SUCCESS)\n";
    s += "        return mb_free(s), mblast_cl::fail(\"clCreateBuffer of temporary %zu (%zu bytes) failed with cl_int "
         "%d\", i, kTempBytes[i], terr);\n";
    s += "    }\n  }\n";
  }
  s += "  *out = s;\n  return 0;\n}\n\n";

  // The launches: mb_enqueue the run's, mb_prepare_enqueue the preparation's (parameters only).
  auto mem = [](const std::string& b) { return b == "out" ? std::string("out_mem") : b; };
  auto open_function = [&](const std::vector<Launch>& launches, bool prepare) {
    std::vector<std::string> buffers;
    for (const auto& l : launches)
      for (const auto& b : l.args)
        if (b != "out" && std::find(buffers.begin(), buffers.end(), b) == buffers.end()) buffers.push_back(b);
    if (prepare) {
      s += "static int mb_prepare_enqueue(const mblast_context* ctx, mb_state* s, const mblast_tensor* par) {\n";
      s += "  (void)s;\n  (void)par;\n";
    } else {
      s += "static int mb_enqueue(const mblast_context* ctx, mb_state* s, const mblast_tensor* in, const "
           "mblast_tensor* par,\n";
      s += "                      mblast_tensor* out) {\n";
      s += "  (void)s;\n  (void)in;\n  (void)par;\n";
    }
    s += "  cl_command_queue queue = static_cast<cl_command_queue>(ctx->cl_queue);\n";
    if (!prepare) s += "  cl_mem out_mem = static_cast<cl_mem>(out[0].data);\n";
    for (const auto& b : buffers) {
      if (b.starts_with("tmp")) {
        s += fmt::format("  cl_mem {} = s->tmp[{}];\n", b, b.substr(3));
        continue;
      }
      const bool param = b.starts_with("par");
      s += fmt::format("  cl_mem {} = static_cast<cl_mem>({}[{}].data);\n", b, param ? "par" : "in",
                       b.substr(param ? 3 : 2));
    }
  };
  auto emit_gemm = [&](const Launch& l) {
    const ClblastGemm& g = *l.gemm;
    const std::string c = mem(l.args.at(0)), a = l.args.at(1), b = l.args.at(2);
    const char* ta = g.a_trans ? "CLBlastTransposeYes" : "CLBlastTransposeNo";
    const char* tb = g.b_trans ? "CLBlastTransposeYes" : "CLBlastTransposeNo";
    s += "  {\n    cl_command_queue q = queue;\n";
    if (g.batch == 1) {
      s += fmt::format(
          "    const CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, {}, {}, {}, {}, {}, 1.0f, {}, 0, {}, "
          "{}, 0, {}, 0.0f,\n"
          "                                              {}, 0, {}, &q, nullptr);\n",
          ta, tb, g.m, g.n, g.k, a, g.lda, b, g.ldb, c, g.ldc);
      s += "    if (st != CLBlastSuccess) return mblast_cl::fail(\"CLBlastSgemm failed with status %d\", "
           "static_cast<int>(st));\n";
    } else {
      s += fmt::format(
          "    const CLBlastStatusCode st = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, {}, {}, {}, {}, {}, "
          "1.0f, {}, 0, {}, {},\n"
          "                                                            {}, 0, {}, {}, 0.0f, {}, 0, {}, {}, {}, &q, "
          "nullptr);\n",
          ta, tb, g.m, g.n, g.k, a, g.lda, g.stride_a, b, g.ldb, g.stride_b, c, g.ldc, g.stride_c, g.batch);
      s += "    if (st != CLBlastSuccess)\n      return mblast_cl::fail(\"CLBlastSgemmStridedBatched failed with "
           "status %d\", static_cast<int>(st));\n";
    }
    s += "  }\n";
  };
  auto emit_launch = [&](const Launch& l) {
    if (l.gemm) {
      emit_gemm(l);
      return;
    }
    const size_t ki = static_cast<size_t>(std::find(names.begin(), names.end(), l.kernel) - names.begin());
    s += "  {\n";
    s += fmt::format("    cl_kernel k = s->kernels[{}];\n", ki);
    s += "    const cl_mem args[] = {";
    for (size_t i = 0; i < l.args.size(); ++i) s += (i ? ", " : "") + mem(l.args[i]);
    s += "};\n";
    s += "    cl_int err = CL_SUCCESS;\n    cl_uint index = 0;\n";
    s += "    for (const cl_mem& m : args)\n      if (err == CL_SUCCESS) err = clSetKernelArg(k, index++, "
         "sizeof(cl_mem), &m);\n";
    s += fmt::format(
        "    if (err != CL_SUCCESS) return mblast_cl::fail(\"clSetKernelArg({}, %u) failed with cl_int %d\", index - "
        "1, err);\n",
        l.kernel);
    s += fmt::format("    size_t global[3] = {{{}, {}, {}}};\n", l.global[0], l.global[1], l.global[2]);
    const bool has_local = l.local_from_kernel_info || l.local[0] > 0;
    if (l.local_from_kernel_info)
      s += fmt::format("    const size_t local[3] = {{s->info_wg[{}], 1, 1}};\n", ki);
    else if (has_local)
      s += fmt::format("    const size_t local[3] = {{{}, {}, {}}};\n", l.local[0], std::max<int64_t>(l.local[1], 1),
                       std::max<int64_t>(l.local[2], 1));
    if (has_local)
      s += fmt::format(
          "    for (int d = 0; d < {}; ++d) global[d] = (global[d] + local[d] - 1) / local[d] * local[d];\n", l.dims);
    s += fmt::format("    err = clEnqueueNDRangeKernel(queue, k, {}, nullptr, global, {}, 0, nullptr, nullptr);\n",
                     l.dims, has_local ? "local" : "nullptr");
    s += fmt::format(
        "    if (err != CL_SUCCESS) return mblast_cl::fail(\"clEnqueueNDRangeKernel({}) failed with cl_int %d\", "
        "err);\n",
        l.kernel);
    s += "  }\n";
  };
  const bool prepares = !d.prepare_launches.empty();
  if (prepares) {
    open_function(d.prepare_launches, true);
    for (const auto& l : d.prepare_launches) emit_launch(l);
    s += "  const cl_int fin = clFinish(queue);\n";
    s += "  if (fin != CL_SUCCESS) return mblast_cl::fail(\"clFinish after the preparation failed with cl_int %d\", "
         "fin);\n";
    s += "  return 0;\n}\n\n";
  }
  open_function(d.launches, false);
  for (const auto& l : d.launches) emit_launch(l);
  s += "  return 0;\n}\n\n";

  if (prepares) {
    s +=
        R"CXX(extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor* par, int32_t n_par, void** state) {
  *state = nullptr;
  if (!par || n_par < 1) return mblast_cl::fail("mblast_prepare needs the parameters");
  mb_state* s = nullptr;
  if (mb_build(ctx, &s) != 0) return -1;
  if (mb_prepare_enqueue(ctx, s, par) != 0) return mb_free(s), -1;
  *state = s;
  return 0;
}
)CXX";
  } else {
    s += R"CXX(extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor*, int32_t, void** state) {
  mb_state* s = nullptr;
  const int rc = mb_build(ctx, &s);
  *state = s;
  return rc;
}
)CXX";
  }
  s += R"CXX(
extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
                          const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (mb_check_tensors(in, n_in, par, n_par, out, n_out) != 0) return -1;
  if (!ctx || ctx->backend != MBLAST_BACKEND_OPENCL || !ctx->cl_queue) return mblast_cl::fail("mblast_context has no OpenCL queue");
  mb_state* s = static_cast<mb_state*>(state);
  if (s) return mb_enqueue(ctx, s, in, par, out);
  // Called without mblast_prepare: a transient program (OpenCL keeps what the queue needs).
  if (mb_build(ctx, &s) != 0) return -1;
  const int rc = )CXX";
  s += prepares ? "mb_prepare_enqueue(ctx, s, par) != 0 ? -1 : mb_enqueue(ctx, s, in, par, out);"
                : "mb_enqueue(ctx, s, in, par, out);";
  s += R"CXX(
  mb_free(s);
  return rc;
}

extern "C" void mblast_release(const mblast_context*, void* state) { mb_free(static_cast<mb_state*>(state)); }

extern "C" const char* mblast_last_error(void) { return mblast_cl::error_text(); }
)CXX";
  return s;
}

}  // namespace

std::string index_type(const KernelPlan& plan, const Problem& problem) {
  return gpu::fits_int32(plan, problem) ? "int" : "long";
}

std::string kernel_params(const std::vector<gpu::TensorRef>& tensors) {
  std::string s = "__global float* restrict out";
  for (const auto& t : tensors) s += ", __global const float* restrict " + gpu::buffer_name(t);
  return s;
}

std::vector<std::string> launch_args(const std::vector<gpu::TensorRef>& tensors) {
  std::vector<std::string> a = {"out"};
  for (const auto& t : tensors) a.push_back(gpu::buffer_name(t));
  return a;
}

void add_inplace_epilogue(Design& d, const KernelPlan& p, const std::string& idx) {
  if (p.expr.empty() || p.expr.is_identity_epilogue()) return;
  const auto leaves = gpu::expr_tensors(p);
  std::string s;
  s += fmt::format("#define TOTAL {}\n\n", p.out_numel);
  s += "__kernel void mb_epilogue(" + kernel_params(leaves) + ") {\n";
  s += fmt::format("  const {0} i = ({0})get_global_id(0);\n", idx);
  s += "  if (i >= TOTAL) return;\n";
  s += "  const float acc = out[i];\n";
  s += "  out[i] = " + gpu::render_at(p, kOpenCL, "i", "acc") + ";\n}\n";
  d.kernels += s;
  Launch l;
  l.kernel = "mb_epilogue";
  l.global = {p.out_numel, 1, 1};
  l.args = launch_args(leaves);
  d.launches.push_back(l);
}

namespace {

std::vector<Design> designs_by_kind(const KernelPlan& plan, const Problem& problem) {
  if (!gpu::plan_supported(plan, problem)) return {};
  if (plan.kind == "elementwise") return elementwise_designs(plan, problem);
  if (is_row_kind(plan.kind) || plan.kind == "row_map")
    return reduction_designs(plan, problem);  // reduce, softmax, layernorm, row maps
  if (plan.kind == "matmul") return matmul_designs(plan, problem);
  if (plan.kind == "pool" || plan.kind == "gather") return window_designs(plan, problem);
  if (plan.kind == "cumsum") return scan_designs(plan, problem);
  if (plan.kind == "argmax") return argmax_designs(plan, problem);
  if (plan.kind == "conv_transpose") return conv_transpose_designs(plan, problem);
  if (plan.kind == "conv") {
    std::vector<Design> v = conv_gemm_designs(plan, problem);
    for (auto& d : window_designs(plan, problem)) v.push_back(std::move(d));
    for (auto& d : conv_rows_designs(plan, problem)) v.push_back(std::move(d));
    return v;
  }
  return {};
}

}  // namespace

std::vector<Design> designs_for(const KernelPlan& plan, const Problem& problem, bool cpu_device) {
  std::vector<Design> v = designs_by_kind(plan, problem);
  if (cpu_device) std::stable_partition(v.begin(), v.end(), [](const Design& d) { return d.cpu_first; });
  return v;
}

Variant finish(const Design& d, const KernelPlan& plan, const Problem& problem) {
  Variant v;
  v.family = d.family;
  v.actions = d.actions;
  v.params = d.params;
  v.description = d.description;
  v.extension = ".opencl.cpp";
  v.source = gpu::header_comment(d.family, d.params, plan, problem, "OpenCL candidate — " + d.description) +
             host_code(d, problem);
  return v;
}

}  // namespace opencl

std::vector<Variant> opencl_variants(const KernelPlan& plan, const Problem& problem, const Target& target) {
  const auto type =
      target.spec.is_object() ? target.spec.value("/device/type"_json_pointer, nlohmann::json()) : nlohmann::json();
  const bool cpu = type.is_string() && type.get<std::string>() == "cpu";
  std::vector<Variant> v;
  for (const auto& d :
       plan.kind == "chain" ? opencl::chain_designs(plan, problem, cpu) : opencl::designs_for(plan, problem, cpu))
    v.push_back(opencl::finish(d, plan, problem));
  return v;
}

}  // namespace mblast::policy
