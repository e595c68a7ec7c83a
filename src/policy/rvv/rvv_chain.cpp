// rvv candidates for a chain plan: each stage's candidate made by the generator of its kind (a
// whole C file for the stage's problem), its file-scope names made stage-unique (mb_ -> mb_s<i>_,
// MB_ -> MB_S<i>_, its mblast_run/prepare/release static functions mb_s<i>_run/...), its macros
// undone after it, then one mblast_run that calls the stages in order. The temporaries between
// them are allocated in mblast_prepare (64-byte aligned, as the runner aligns tensors) and
// passed to every stage as the inputs after the problem's, which is how a stage's plan reads
// them (input index first_temp + j).
#include <regex>

#include <fmt/format.h>

#include "../gpu_common.h"
#include "rvv/rvv_codegen.h"

namespace mblast::policy::rvv {

namespace {

// The part of a generated file after its common header (file_header()'s comment, includes,
// g_error and mblast_last_error, which the chain's own header provides once).
std::string body_of(const std::string& source) {
  const std::string end = "const char* mblast_last_error(void) { return g_error; }\n";
  const size_t at = source.find(end);
  return at == std::string::npos ? source : source.substr(at + end.size());
}

std::string stage_code(const std::string& source, size_t i) {
  std::string s = body_of(source);
  s = std::regex_replace(s, std::regex(R"(\bmb_)"), fmt::format("mb_s{}_", i));
  s = std::regex_replace(s, std::regex(R"(\bMB_)"), fmt::format("MB_S{}_", i));
  s = std::regex_replace(s,
                         std::regex(R"(^(?:static )?(int|void) mblast_(run|prepare|release)\()", std::regex::multiline),
                         fmt::format("static $1 mb_s{}_$2(", i));
  return s + gpu::undefs(s);
}

std::string tensor_literal(const TensorSpec& t, const std::string& data) {
  std::string dims;
  for (size_t d = 0; d < t.shape.size(); ++d) dims += (d ? ", " : "") + std::to_string(t.shape[d]);
  return fmt::format("{{\"{}\", MBLAST_F32, {}, {{{}}}, {}, {}u * sizeof(float)}}", t.name, t.shape.size(),
                     dims.empty() ? "0" : dims, data, t.numel());
}

Variant compose(const KernelPlan& chain, const Problem& problem, const std::vector<const Variant*>& parts) {
  Variant v;
  gpu::describe_chain(parts, "rvv.chain", &v);
  v.extension = ".rvv.c";
  std::vector<bool> prepares;
  std::string stages;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Variant& p = *parts[i];
    prepares.push_back(p.source.find("\nint mblast_prepare(") != std::string::npos);
    stages +=
        fmt::format("// ---- stage {}: {} ({})\n{}\n", i, chain.stages[i].summary(), p.family, stage_code(p.source, i));
  }
  const size_t n_stages = parts.size(), n_temps = chain.temps.size(), n_in = problem.inputs.size();

  std::string s = file_header(v.family, v.params, chain, v.description) + shape_check(problem) + stages;
  s += fmt::format("typedef struct mb_chain {{\n  void* stage[{}];\n  float* tmp[{}];\n}} mb_chain;\n\n", n_stages,
                   n_temps);
  s += "void mblast_release(const mblast_context* ctx, void* state) {\n  mb_chain* c = (mb_chain*)state;\n  if (!c) "
       "return;\n";
  for (size_t i = 0; i < n_stages; ++i)
    if (prepares[i]) s += fmt::format("  if (c->stage[{0}]) mb_s{0}_release(ctx, c->stage[{0}]);\n", i);
  s += fmt::format("  for (int t = 0; t < {}; ++t) free(c->tmp[t]);\n  free(c);\n}}\n\n", n_temps);
  s += "int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params, int32_t n_params, void** state) {\n";
  s += "  mb_chain* c = (mb_chain*)calloc(1, sizeof(mb_chain));\n  *state = c;\n";
  s += "  if (!c) {\n    g_error = \"out of memory for the chain's state\";\n    return 1;\n  }\n";
  s += "  static const size_t bytes[] = {";
  for (size_t t = 0; t < n_temps; ++t)
    s += (t ? ", " : "") + fmt::format("{}u * sizeof(float)", chain.temps[t].numel());
  s += "};\n";
  s += fmt::format("  for (int t = 0; t < {}; ++t) {{\n", n_temps);
  s += "    c->tmp[t] = (float*)aligned_alloc(64, (bytes[t] + 63) / 64 * 64);\n";
  s += "    if (!c->tmp[t]) {\n      g_error = \"out of memory for a temporary\";\n      return 1;\n    }\n  }\n";
  for (size_t i = 0; i < n_stages; ++i)
    if (prepares[i])
      s += fmt::format("  if (mb_s{0}_prepare(ctx, params, n_params, &c->stage[{0}]) != 0) return 1;\n", i);
  s += "  return 0;\n}\n\n";

  s += "int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,\n"
       "               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {\n";
  s += "  if (!mb_check_tensors(inputs, n_inputs, params, n_params, outputs, n_outputs)) return 1;\n";
  s += "  mb_chain* c = (mb_chain*)state;\n";
  s += "  if (!c) {\n    g_error = \"mblast_prepare did not run (the chain's temporaries are made there)\";\n    "
       "return 1;\n  }\n";
  // Every stage sees the problem's inputs, then every temporary.
  s += fmt::format("  mblast_tensor in[{}];\n", n_in + n_temps);
  s += fmt::format("  for (int k = 0; k < {}; ++k) in[k] = inputs[k];\n", n_in);
  for (size_t t = 0; t < n_temps; ++t) {
    s += fmt::format("  {{\n    const mblast_tensor t = {};\n    in[{}] = t;\n  }}\n",
                     tensor_literal(chain.temps[t], fmt::format("c->tmp[{}]", t)), n_in + t);
  }
  for (size_t i = 0; i < n_stages; ++i) {
    const std::string out = i + 1 < n_stages ? fmt::format("&in[{}]", n_in + i) : std::string("outputs");
    s += fmt::format("  if (mb_s{0}_run(ctx, c->stage[{0}], in, {1}, params, n_params, {2}, 1) != 0) return 1;\n", i,
                     n_in + n_temps, out);
  }
  s += "  return 0;\n}\n";
  v.source = std::move(s);
  return v;
}

}  // namespace

std::vector<Variant> chain_variants(const KernelPlan& plan, const Problem& problem) {
  return gpu::compose_chain<Variant>(plan, problem, variants_for, [&](const std::vector<const Variant*>& parts) {
    return compose(plan, problem, parts);
  });
}

}  // namespace mblast::policy::rvv
