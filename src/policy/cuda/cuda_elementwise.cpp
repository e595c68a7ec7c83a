// CUDA elementwise kernels: the whole expression in one kernel, a grid-stride loop over a grid
// of at most one wave of resident blocks or over one thread per unit of work, block sizes
// 128 / 256 / 512, scalar or float4 (16-byte loads and stores where a leaf's index map keeps
// four lanes contiguous; a broadcast leaf is loaded once, any other gathered; a scalar tail).
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

using gpu::LeafAccess;

int op_count(const Expr& e) {
  int n = 0;
  for (const auto& node : e.nodes) n += node.kind == ExprNode::Kind::Unary || node.kind == ExprNode::Kind::Binary;
  return n;
}

Design make(const KernelPlan& plan, const Problem& problem, int block, bool vec4, bool wave) {
  const std::string idx = index_type(plan, problem);
  const auto tensors = gpu::plan_tensors(plan);
  const int64_t n = plan.out_numel;
  std::string k;
  k += fmt::format("#define N {}\n\n", n);
  k += fmt::format("__global__ void __launch_bounds__({}) mb_elementwise({}) {{\n", block, kernel_params(tensors));
  k += fmt::format("  const {0} stride = static_cast<{0}>(gridDim.x) * {1};\n", idx, block);
  k += fmt::format("  const {0} first = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x;\n", idx, block);
  if (!vec4) {
    k += fmt::format("  for ({} i = first; i < N; i += stride) out[i] = {};\n", idx,
                     gpu::render_at(plan, kCuda, "i", "acc"));
  } else {
    k += fmt::format("  for ({} v = first; v < N / 4; v += stride) {{\n", idx);
    k += fmt::format("    const {} base = v * 4;\n", idx);
    struct Loaded {
      bool is_param;
      int tensor;
      IndexMap map;
      std::string var;
      LeafAccess access;
    };
    std::vector<Loaded> loads;
    auto find = [&](const ExprNode& node) -> const Loaded* {
      for (const auto& l : loads)
        if (l.is_param == (node.kind == ExprNode::Kind::Param) && l.tensor == node.tensor &&
            l.map.div == node.index.div && l.map.mod == node.index.mod)
          return &l;
      return nullptr;
    };
    for (const auto& node : plan.expr.nodes) {
      if (node.kind != ExprNode::Kind::Input && node.kind != ExprNode::Kind::Param) continue;
      if (find(node)) continue;
      Loaded l{node.kind == ExprNode::Kind::Param, node.tensor, node.index, "v" + std::to_string(loads.size()),
               gpu::leaf_access(node.index, n, 4)};
      const std::string buf = gpu::buffer_name({l.is_param, l.tensor});
      // Buffers are 256-byte aligned (the ABI) and the offset is a multiple of 4 floats.
      if (l.access == LeafAccess::Contiguous)
        k += fmt::format("    const float4 {} = *reinterpret_cast<const float4*>({} + {});\n", l.var, buf,
                         gpu::leaf_index(l.map, n, "base"));
      else if (l.access == LeafAccess::Broadcast)
        k += fmt::format("    const float {} = {}[{}];\n", l.var, buf, gpu::leaf_index(l.map, n, "base"));
      loads.push_back(l);
    }
    k += "    float4 r;\n";
    const char* comp = "xyzw";
    for (int lane = 0; lane < 4; ++lane) {
      const std::string lane_i = fmt::format("(base + {})", lane);
      const std::string e = render_expr(plan.expr, kCuda, [&](const ExprNode& node) -> std::string {
        const Loaded* l = find(node);
        if (!l) return "0.0f";  // no Acc leaf in an elementwise plan
        if (l->access == LeafAccess::Contiguous) return l->var + "." + comp[lane];
        if (l->access == LeafAccess::Broadcast) return l->var;
        return gpu::buffer_name({l->is_param, l->tensor}) + "[" + gpu::leaf_index(l->map, n, lane_i) + "]";
      });
      k += fmt::format("    r.{} = {};\n", comp[lane], e);
    }
    k += "    *reinterpret_cast<float4*>(out + base) = r;\n  }\n";
    if (n % 4 != 0)
      k += fmt::format("  for ({} i = N / 4 * 4 + first; i < N; i += stride) out[i] = {};\n", idx,
                       gpu::render_at(plan, kCuda, "i", "acc"));
  }
  k += "}\n";

  Design d;
  d.family = vec4 ? "cuda.elementwise.vec4" : "cuda.elementwise.grid-stride";
  d.params = {{"block", block}, {"grid", wave ? "wave" : "full"}};
  d.description = fmt::format("one fused kernel, {}-thread blocks, {}{}", block,
                              wave ? "grid-stride over one wave of resident blocks" : "one thread per unit of work",
                              vec4 ? ", float4 loads and stores" : "");
  if (vec4) d.actions.push_back("cuda.vectorized-global-access");
  if (wave) d.actions.push_back("cuda.grid-stride-loop");
  d.actions.push_back("cuda.block-size-tuning");
  if (op_count(plan.expr) >= 2) d.actions.push_back("cuda.merge-kernels");
  d.actions.push_back("cuda.read-only-data-path");
  d.device_code = k;
  d.launch_code =
      grid_stride_launch("mb_elementwise", block, vec4 ? n / 4 + (n % 4 != 0) : n, call_args(tensors), wave);
  return d;
}

}  // namespace

std::string grid_stride_launch(const std::string& kernel, int block, int64_t items, const std::string& args,
                               bool wave) {
  std::string s;
  s += "  {\n";
  if (wave)
    s += fmt::format(
        "    const long long need = {}, cap = static_cast<long long>(s->sms) * {};  // one wave of resident blocks\n",
        gpu::ceil_div(items, block), 2048 / block);
  else
    s += fmt::format("    const long long need = {}, cap = 0x7fffffffLL;  // one thread per unit\n",
                     gpu::ceil_div(items, block));
  s += "    const unsigned grid = static_cast<unsigned>(need < cap ? need : cap);\n";
  s += fmt::format("    {}<<<grid, {}, 0, stream>>>({});\n", kernel, block, args);
  s += fmt::format("    if (mb_launched(\"{}\") != 0) return -1;\n  }}\n", kernel);
  return s;
}

std::vector<Design> elementwise_designs(const KernelPlan& plan, const Problem& problem) {
  std::vector<Design> v;
  for (bool vec4 : {false, true})
    for (bool wave : {true, false})
      for (int block : {128, 256, 512}) v.push_back(make(plan, problem, block, vec4, wave));
  return v;
}

}  // namespace mblast::policy::cuda
