// The model level's plan and its per-group problems (include/mblast/driver/model_plan.h).
#include "mblast/driver/model_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/lower/dialects.h"

namespace mblast::model {

namespace fs = std::filesystem;
using lower::E;
using lower::Node;
using nlohmann::json;

namespace {

// "aten.convolution.default" -> "convolution"
std::string aten_key(const std::string& target) {
  if (target.rfind("aten.", 0) != 0) return target;
  const auto rest = target.substr(5);
  return rest.substr(0, rest.find('.'));
}

mblast::DType to_problem_dtype(lower::DType t) {
  switch (t) {
    case lower::DType::F32:
      return mblast::DType::f32;
    case lower::DType::F64:
      return mblast::DType::f64;
    case lower::DType::I64:
      return mblast::DType::i64;
    case lower::DType::I32:
      return mblast::DType::i32;
    case lower::DType::I8:
      return mblast::DType::i8;
    case lower::DType::U8:
      return mblast::DType::u8;
    case lower::DType::Bool:
      return mblast::DType::boolean;
  }
  return mblast::DType::f32;
}

void collect_loads(const E& e, std::set<int>& out) {
  if (e->kind == Node::Kind::Load) out.insert(e->tensor);
  for (const auto& a : e->args) collect_loads(a, out);
}

int arithmetic_nodes(const E& e) {
  int n = (e->kind == Node::Kind::Unary || e->kind == Node::Kind::Binary || e->kind == Node::Kind::Select) &&
                  lower::is_float(e->dtype)
              ? 1
              : 0;
  if (e->kind == Node::Kind::Load) return n;  // index arithmetic is not the group's work
  for (const auto& a : e->args) n += arithmetic_nodes(a);
  return n;
}

E remap_loads(const E& e, const std::map<int, int>& ids) {
  if (e->kind != Node::Kind::Load && e->args.empty()) return e;
  std::vector<E> args;
  for (const auto& a : e->args) args.push_back(remap_loads(a, ids));
  if (e->kind == Node::Kind::Load) {
    auto it = ids.find(e->tensor);
    return lower::load(it == ids.end() ? e->tensor : it->second, std::move(args), e->dtype);
  }
  return lower::rebuild(e, std::move(args));
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

size_t lower_dtype_size(lower::DType t) { return dtype_size(to_problem_dtype(t)); }

json problem_json(const Problem& p) {
  json tol = json::object();
  for (const auto& [t, v] : p.tolerance)
    tol[std::string(dtype_name(t))] = {{"atol", v.atol}, {"rtol", v.rtol}, {"min_match", v.min_match}};
  json seeds = json::array();
  for (const auto& s : p.seeds) seeds.push_back({{"seed", s.seed}, {"distribution", s.distribution}});
  return {{"format", 1},
          {"name", p.name},
          {"description", p.description},
          {"op_class", p.op_class},
          {"inputs", p.inputs},
          {"parameters", p.parameters},
          {"outputs", p.outputs},
          {"tolerance", tol},
          {"flops", p.flops},
          {"bytes", p.bytes},
          {"seeds", seeds},
          {"inits", p.inits},
          {"provenance", p.provenance}};
}

void link_or_copy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::remove(to, ec);
  fs::create_hard_link(from, to, ec);
  if (ec) fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// One tensor of a safetensors file under another name.
HostTensor renamed(const TensorSet& set, const std::string& name, const std::string& as, const fs::path& file) {
  const HostTensor* t = set.find(name);
  if (!t) throw Error(file.string() + " has no tensor " + name);
  HostTensor c = *t;
  c.spec.name = as;
  return c;
}

}  // namespace

std::string op_class_of(const std::string& op) {
  static const std::map<std::string, std::string> table = [] {
    std::map<std::string, std::string> m;
    auto put = [&](const std::string& cls, std::initializer_list<const char*> ops) {
      for (auto o : ops) m[o] = cls;
    };
    put("conv", {"convolution", "_convolution", "conv2d", "conv1d", "conv3d", "convolution_backward"});
    put("matmul", {"mm", "bmm", "addmm", "baddbmm", "matmul", "dot", "linear", "addmv", "mv"});
    put("pooling",
        {"max_pool2d_with_indices", "max_pool3d_with_indices", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
         "avg_pool3d", "_adaptive_avg_pool2d", "adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool2d"});
    put("norm", {"native_batch_norm", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit",
                 "native_layer_norm", "native_group_norm", "batch_norm", "layer_norm", "group_norm", "instance_norm"});
    put("softmax", {"_softmax", "_log_softmax", "softmax", "log_softmax"});
    put("reduction", {"sum", "mean", "amax", "amin", "max", "min", "var", "var_mean", "std", "prod", "argmax", "argmin",
                      "logsumexp", "cumsum", "cumprod", "norm", "linalg_vector_norm", "any", "all"});
    put("elementwise", {"add",
                        "sub",
                        "rsub",
                        "mul",
                        "div",
                        "relu",
                        "sigmoid",
                        "tanh",
                        "exp",
                        "expm1",
                        "log",
                        "log1p",
                        "log2",
                        "sqrt",
                        "rsqrt",
                        "pow",
                        "neg",
                        "abs",
                        "clamp",
                        "clamp_min",
                        "clamp_max",
                        "where",
                        "gelu",
                        "hardtanh",
                        "maximum",
                        "minimum",
                        "erf",
                        "sin",
                        "cos",
                        "reciprocal",
                        "threshold",
                        "leaky_relu",
                        "elu",
                        "silu",
                        "hardswish",
                        "hardsigmoid",
                        "mish",
                        "softplus",
                        "_to_copy",
                        "to",
                        "copy",
                        "copy_",
                        "ge",
                        "gt",
                        "lt",
                        "le",
                        "eq",
                        "ne",
                        "logical_and",
                        "logical_or",
                        "logical_not",
                        "sign",
                        "floor",
                        "ceil",
                        "round",
                        "trunc",
                        "fill",
                        "full",
                        "full_like",
                        "zeros",
                        "zeros_like",
                        "ones",
                        "ones_like",
                        "scalar_tensor",
                        "lift_fresh_copy",
                        "masked_fill",
                        "remainder",
                        "fmod",
                        "lerp",
                        "addcmul",
                        "addcdiv",
                        "square",
                        "frac",
                        "relu6",
                        "selu",
                        "celu",
                        "glu",
                        "softsign",
                        "tan",
                        "atan",
                        "asin",
                        "acos",
                        "sinh",
                        "cosh",
                        "asinh",
                        "acosh",
                        "atanh",
                        "exp2",
                        "isnan",
                        "isinf",
                        "bitwise_and",
                        "bitwise_or",
                        "bitwise_not",
                        "bitwise_xor",
                        "hardshrink",
                        "softshrink",
                        "tanhshrink",
                        "log_sigmoid_forward",
                        "native_dropout",
                        "dropout",
                        "clone",
                        "arange",
                        "iota",
                        "empty",
                        "empty_like",
                        "new_zeros",
                        "new_ones",
                        "new_full",
                        "new_empty",
                        "bernoulli"});
    put("data_movement", {"cat",
                          "stack",
                          "constant_pad_nd",
                          "pad",
                          "index",
                          "index_select",
                          "gather",
                          "flip",
                          "roll",
                          "repeat",
                          "embedding",
                          "upsample_nearest2d",
                          "upsample_bilinear2d",
                          "scatter",
                          "index_put",
                          "tril",
                          "triu",
                          "pixel_shuffle",
                          "col2im",
                          "im2col",
                          "reflection_pad2d",
                          "replication_pad2d",
                          "_unsafe_index"});
    put("", {"view",          "_unsafe_view",
             "reshape",       "permute",
             "transpose",     "t",
             "expand",        "squeeze",
             "unsqueeze",     "slice",
             "select",        "alias",
             "as_strided",    "narrow",
             "getitem",       "detach",
             "contiguous",    "flatten",
             "unfold",        "diagonal",
             "split",         "split_with_sizes",
             "unbind",        "output",
             "view_as",       "expand_as",
             "movedim",       "chunk",
             "_reshape_alias"});
    return m;
  }();
  auto it = table.find(op);
  return it == table.end() ? "?" : it->second;
}

json Group::to_json() const {
  return {{"index", index}, {"name", name},     {"kind", kind},   {"ops", ops},
          {"reads", reads}, {"writes", writes}, {"shape", shape}, {"dtype", lower::dtype_name(dtype)},
          {"flops", flops}, {"bytes", bytes}};
}

std::string dialect_extension(const std::string& backend) {
  if (backend == "opencl") return ".opencl.cpp";
  if (backend == "cuda") return ".cuda.cu";
  if (backend == "rvv") return ".rvv.c";
  throw UserError("the lowering pipeline has no dialect for backend " + backend);
}

std::string emit_for(const std::string& backend, const lower::Schedule& s, const Problem& p,
                     const lower::Stitches& stitches) {
  if (backend == "opencl") return lower::emit_opencl(s, p, stitches);
  if (backend == "cuda") return lower::emit_cuda(s, p, stitches);
  if (backend == "rvv") return lower::emit_rvv(s, p, stitches);
  throw UserError("the lowering pipeline has no dialect for backend " + backend);
}

ModelPlan plan_model(const Problem& problem) {
  const auto lowered = lower::lower_problem(problem);
  if (!lowered.program) throw UserError("cannot lower the model: " + lowered.error);
  ModelPlan mp;
  try {
    mp.schedule = lower::schedule(*lowered.program);
  } catch (const std::exception& e) {
    throw UserError(std::string("cannot schedule the model: ") + e.what());
  }
  const auto& s = mp.schedule;
  const auto& P = s.program;
  std::set<std::string> unknown;
  // Op classes in the order a group is named by: the heaviest kind of work it holds.
  static const std::vector<std::string> rank = {"conv",    "matmul",    "pooling",     "norm",
                                                "softmax", "reduction", "elementwise", "data_movement"};
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const auto& k = s.kernels[i];
    Group g;
    g.index = static_cast<int>(i);
    g.name = k.name;
    g.writes = s.buffer[static_cast<size_t>(k.tensor)];
    const auto& t = P.tensors[static_cast<size_t>(k.tensor)];
    g.shape = t.shape;
    g.dtype = t.dtype;
    // The group's members: its kernel's tensor and every producer inlined into it.
    std::set<int> members, seen;
    std::vector<int> stack = {k.tensor};
    while (!stack.empty()) {
      const int m = stack.back();
      stack.pop_back();
      if (!members.insert(m).second) continue;
      const auto& x = P.tensors[static_cast<size_t>(m)];
      if (!x.body) continue;
      std::set<int> loads;
      collect_loads(x.body, loads);
      for (int u : loads)
        if (P.tensors[static_cast<size_t>(u)].role == lower::Tensor::Role::Computed &&
            s.buffer[static_cast<size_t>(u)].empty())
          stack.push_back(u);
    }
    std::set<std::string> ops;
    std::set<std::string> classes;
    for (int m : members) {
      const auto& origin = P.tensors[static_cast<size_t>(m)].origin;
      if (origin.empty() || origin == "output") continue;
      const auto key = aten_key(origin);
      ops.insert(key);
      const auto cls = op_class_of(key);
      if (cls == "?")
        unknown.insert(key);
      else if (!cls.empty())
        classes.insert(cls);
    }
    g.ops.assign(ops.begin(), ops.end());
    // The kind is the work of the kernel's own tensor: only pointwise producers are inlined, so a
    // reduction kernel is its reduction's op class, and a pointwise kernel whose tensor comes from a
    // contraction's lowering (a bias added after a matmul or a convolution) is elementwise work.
    static const std::set<std::string> reducing = {"conv", "matmul", "pooling", "norm", "softmax", "reduction"};
    const std::string own = op_class_of(aten_key(t.origin));
    if (k.reduce != lower::ReduceOp::None) {
      g.kind = reducing.count(own) ? own : "reduction";
    } else if (own == "norm" || own == "softmax" || own == "elementwise" || own == "data_movement") {
      g.kind = own;
    } else {
      g.kind = "data_movement";
      for (const auto& c : rank)
        if (classes.count(c)) {
          g.kind = c == "conv" || c == "matmul" || c == "pooling" || c == "reduction" ? "elementwise" : c;
          break;
        }
    }
    // What it reads, by the loads left in its body after inlining.
    std::set<int> loads;
    collect_loads(k.body, loads);
    // Counted as lower bounds, since the runner refuses a time below what they imply at the peaks:
    // one operation per element and reduction step when the body has float arithmetic, and each
    // buffer read once, but no more of it than the element-steps could touch (a slice reads less).
    double steps = 1;
    for (auto e : k.reduce_extents) steps *= static_cast<double>(e);
    const double work = static_cast<double>(numel_of(g.shape)) * steps;
    double bytes = static_cast<double>(numel_of(g.shape)) * static_cast<double>(lower_dtype_size(g.dtype));
    std::set<std::string> reads;
    for (int u : loads) {
      const auto& b = s.buffer[static_cast<size_t>(u)];
      if (b.empty() || !reads.insert(b).second) continue;
      const auto& x = P.tensors[static_cast<size_t>(u)];
      bytes += std::min(static_cast<double>(numel_of(x.shape)), work) * static_cast<double>(lower_dtype_size(x.dtype));
    }
    g.reads.assign(reads.begin(), reads.end());
    g.flops = arithmetic_nodes(k.body) > 0 ? work : 0;
    g.bytes = bytes;
    mp.groups.push_back(std::move(g));
  }
  mp.unknown_ops.assign(unknown.begin(), unknown.end());
  return mp;
}

namespace {

// The tensor id of each buffer a group reads, from its kernel's loads.
std::vector<std::pair<std::string, int>> read_tensors(const lower::Schedule& s, const lower::Kernel& k) {
  std::set<int> loads;
  collect_loads(k.body, loads);
  std::map<std::string, int> by_name;
  for (int u : loads) {
    const auto& b = s.buffer[static_cast<size_t>(u)];
    if (!b.empty()) by_name.emplace(b, u);
  }
  return {by_name.begin(), by_name.end()};
}

void write_problem_dir(const Problem& p) {
  fs::create_directories(p.data_dir());
  write_file_atomically(p.dir / "problem.json", problem_json(p).dump(2) + "\n");
}

}  // namespace

Probe write_probe(const Problem& model, const ModelPlan& plan, const Target& target, const fs::path& dir) {
  const auto& s = plan.schedule;
  Problem p = model;
  p.dir = fs::absolute(dir);
  p.name = model.name + ".probe";
  p.description = "every buffer of " + model.name + "'s generic lowering, to give each fusion group its inputs";
  p.inits = {model.inits.empty() ? 0 : model.inits.front()};
  p.provenance = {{"kind", "model-probe"}, {"model", model.name}};
  lower::Program prog = s.program;
  for (int t : s.temps) {
    const auto& x = s.program.tensors[static_cast<size_t>(t)];
    p.outputs.push_back(TensorSpec{s.buffer[static_cast<size_t>(t)], to_problem_dtype(x.dtype), x.shape});
    lower::Tensor o;
    o.name = "probe_" + s.buffer[static_cast<size_t>(t)];
    o.dtype = x.dtype;
    o.shape = x.shape;
    o.origin = "output";
    std::vector<E> idx;
    for (size_t d = 0; d < x.shape.size(); ++d) idx.push_back(lower::var(static_cast<int>(d)));
    o.body = lower::load(t, idx, x.dtype);
    prog.outputs.push_back(prog.add(std::move(o)));
  }
  write_problem_dir(p);
  for (const auto& sd : model.seeds) link_or_copy(model.inputs_file(sd.seed), p.inputs_file(sd.seed));
  for (int i : p.inits) link_or_copy(model.params_file(i), p.params_file(i));
  Probe r{p, p.dir / ("probe" + dialect_extension(target.backend))};
  write_file_atomically(r.candidate, emit_for(target.backend, lower::schedule(prog), p));
  return r;
}

fs::path write_group_problem(const Problem& model, const ModelPlan& plan, const Group& g, const Target& target,
                             const std::map<std::pair<int, int>, TensorSet>& captured, const fs::path& dir) {
  const auto& s = plan.schedule;
  const auto& k = s.kernels[static_cast<size_t>(g.index)];
  const int init = model.inits.empty() ? 0 : model.inits.front();
  Problem p;
  p.dir = fs::absolute(dir);
  p.name = model.name + "." + g.name;
  p.description = fmt::format("fusion group {} of {} ({}: {})", g.name, model.name, g.kind, fmt::join(g.ops, ", "));
  p.op_class = g.kind;
  p.tolerance = model.tolerance;
  p.flops = g.flops;
  p.bytes = g.bytes;
  p.seeds = model.seeds;
  p.inits = {init};
  p.provenance = {{"kind", "model-group"},
                  {"model", model.name},
                  {"group", g.name},
                  {"reference",
                   "inputs: the model's inputs and parameters and the generic lowering's buffers (verified "
                   "against PyTorch as a whole); expected: PyTorch's output for a model output, else the "
                   "generic lowering's buffer"}};
  lower::Program q;
  std::map<int, int> ids;
  std::vector<std::pair<std::string, int>> inputs, params;
  for (const auto& [b, u] : read_tensors(s, k)) (b.rfind("par", 0) == 0 ? params : inputs).emplace_back(b, u);
  auto add = [&](const std::vector<std::pair<std::string, int>>& list, lower::Tensor::Role role,
                 std::vector<TensorSpec>& specs) {
    for (size_t i = 0; i < list.size(); ++i) {
      const auto& x = s.program.tensors[static_cast<size_t>(list[i].second)];
      lower::Tensor t;
      t.name = list[i].first;
      t.role = role;
      t.arg_index = static_cast<int>(i);
      t.dtype = x.dtype;
      t.shape = x.shape;
      ids[list[i].second] = q.add(std::move(t));
      specs.push_back(TensorSpec{list[i].first, to_problem_dtype(x.dtype), x.shape});
    }
  };
  add(inputs, lower::Tensor::Role::Input, p.inputs);
  add(params, lower::Tensor::Role::Param, p.parameters);
  const auto& kt = s.program.tensors[static_cast<size_t>(k.tensor)];
  lower::Tensor c;
  c.name = g.name;
  c.dtype = kt.dtype;
  c.shape = kt.shape;
  c.body = remap_loads(k.body, ids);
  c.reduce = k.reduce;
  c.reduce_extents = k.reduce_extents;
  c.origin = kt.origin;
  q.outputs.push_back(q.add(std::move(c)));
  p.outputs.push_back(TensorSpec{g.writes, to_problem_dtype(kt.dtype), kt.shape});
  write_problem_dir(p);

  // Where each buffer's values come from on seed `seed`.
  auto value_of = [&](const std::string& b, int seed, bool expected) -> HostTensor {
    if (b.rfind("in", 0) == 0) {
      const auto i = static_cast<size_t>(std::stoi(b.substr(2)));
      const auto f = model.inputs_file(seed);
      return renamed(load_safetensors(f), model.inputs[i].name, b, f);
    }
    if (b.rfind("par", 0) == 0) {
      const auto i = static_cast<size_t>(std::stoi(b.substr(3)));
      const auto f = model.params_file(init);
      return renamed(load_safetensors(f), model.parameters[i].name, b, f);
    }
    if (b.rfind("out", 0) == 0) {
      const auto i = static_cast<size_t>(std::stoi(b.substr(3)));
      if (expected) {
        const auto f = model.expected_file(seed, init);
        return renamed(load_safetensors(f), model.outputs[i].name, b, f);
      }
      auto it = captured.find({seed, init});
      if (it == captured.end()) throw Error("the probe captured nothing for seed " + std::to_string(seed));
      return renamed(it->second, model.outputs[i].name, b, "the probe's outputs");
    }
    auto it = captured.find({seed, init});
    if (it == captured.end()) throw Error("the probe captured nothing for seed " + std::to_string(seed));
    return renamed(it->second, b, b, "the probe's outputs");
  };
  for (const auto& sd : p.seeds) {
    TensorSet in;
    for (const auto& t : p.inputs) in.add(value_of(t.name, sd.seed, false));
    save_safetensors(p.inputs_file(sd.seed), in);
    TensorSet ex;
    ex.add(value_of(g.writes, sd.seed, true));
    save_safetensors(p.expected_file(sd.seed, init), ex);
  }
  TensorSet par;
  for (const auto& t : p.parameters) par.add(value_of(t.name, p.seeds.front().seed, false));
  save_safetensors(p.params_file(init), par);

  const fs::path cand = p.dir / ("generic" + dialect_extension(target.backend));
  write_file_atomically(cand, emit_for(target.backend, lower::schedule(q), p));
  return cand;
}

}  // namespace mblast::model
