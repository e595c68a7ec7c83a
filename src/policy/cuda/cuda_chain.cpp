// CUDA candidates for a chain plan: each stage's kernels made by the generator of its kind,
// launched in order on the runner's stream, the temporaries between them allocated once in
// mblast_prepare. Each stage's device code lives in its own namespace (kernel names repeat
// between stages) and its #defines are undone after it (they name sizes: M, N, R, ...).
//
// Which combinations of the stages' designs are offered: gpu::chain_combinations.
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

// A stage's own state (cuDNN's handle, descriptors, workspace) gets the suffix _s<i> on each
// member, in its declarations and wherever the stage's code reads `s-><member>`, so that two
// stages with the same kind of state keep theirs apart.
struct StageState {
  std::string fields, init, free, launch;
};
StageState own_state(const Design& p, size_t i) {
  StageState r{p.state_fields, p.init_code, p.free_code, p.launch_code};
  std::vector<std::string> names;
  static const std::regex decl(R"(([A-Za-z_][A-Za-z0-9_]*)\s*(=[^,;]*)?\s*[,;])");
  std::istringstream in(p.state_fields);
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find("//"));
    const size_t space = line.find_first_not_of(' ');
    if (space == std::string::npos) continue;
    // after the type (the first token, with any '*'), the declarators
    const size_t type_end = line.find_first_of(" *", space);
    std::string rest = line.substr(line.find_first_not_of(" *", type_end));
    for (std::sregex_iterator it(rest.begin(), rest.end(), decl), end; it != end; ++it) names.push_back((*it)[1].str());
  }
  const std::string suffix = fmt::format("_s{}", i);
  for (const auto& n : names) {
    const std::regex use("s->" + n + "\\b"), own("\\b" + n + "\\b(?=\\s*[=;,])");
    for (std::string* code : {&r.init, &r.free, &r.launch}) *code = std::regex_replace(*code, use, "s->" + n + suffix);
    r.fields = std::regex_replace(r.fields, own, n + suffix);
  }
  return r;
}

std::string indent(const std::string& code) {
  std::istringstream in(code);
  std::string line, out;
  while (std::getline(in, line)) out += (line.empty() ? "" : "  ") + line + "\n";
  return out;
}

Design compose(const KernelPlan& chain, const std::vector<const Design*>& parts) {
  Design d;
  gpu::describe_chain(parts, "cuda.chain", &d);
  for (const auto& t : chain.temps) d.temps.push_back(static_cast<int64_t>(t.numel()));
  for (size_t i = 0; i < parts.size(); ++i) {
    const Design& p = *parts[i];
    const KernelPlan& stage = chain.stages[i];
    d.cublas = d.cublas || p.cublas;
    const StageState st = own_state(p, i);
    if (!p.includes.empty() && d.includes.find(p.includes) == std::string::npos) d.includes += p.includes;
    d.state_fields += st.fields;
    if (!st.init.empty()) d.init_code += fmt::format("  {{  // stage {}: {}\n{}  }}\n", i, p.family, indent(st.init));
    if (!st.free.empty()) d.free_code += fmt::format("  {{  // stage {}\n{}  }}\n", i, indent(st.free));
    d.device_code += fmt::format("// stage {}: {}\nnamespace mb_s{} {{\n\n{}\n}}  // namespace mb_s{}\n{}\n", i,
                                 stage.summary(), i, p.device_code, i, gpu::undefs(p.device_code));
    std::string bind;
    if (i + 1 < parts.size()) bind += fmt::format("    float* out0 = s->tmp[{}];\n", i);
    for (const auto& t : gpu::plan_tensors(stage))
      if (!t.is_param && t.index >= chain.first_temp)
        bind += fmt::format("    const float* {} = s->tmp[{}];\n", gpu::buffer_name(t), t.index - chain.first_temp);
    d.launch_code += fmt::format("  {{  // stage {}: {}\n    using namespace mb_s{};\n{}{}  }}\n", i, p.family, i, bind,
                                 indent(st.launch));
  }
  return d;
}

}  // namespace

std::vector<Design> chain_designs(const KernelPlan& plan, const Problem& problem, const Arch& arch) {
  return gpu::compose_chain<Design>(
      plan, problem,
      [&](const KernelPlan& stage, const Problem& sp) {
        std::vector<Design> ds = designs_for(stage, sp, arch);
        // One cuBLAS handle serves every stage, in one math mode: FP32 (TF32 stays a single-kernel variant).
        std::erase_if(ds, [](const Design& d) { return d.tf32; });
        return ds;
      },
      [&](const std::vector<const Design*>& parts) { return compose(plan, parts); });
}

}  // namespace mblast::policy::cuda
