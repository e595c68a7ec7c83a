// Lowering of an ATen-level graph node by node: placeholders become the problem's inputs and
// parameters, each call_function goes through the op table (one file per op family), the output
// node names the problem's outputs. Only what the outputs depend on is lowered (a batch norm's
// running-statistics update, a copy_ into a buffer, is not part of the result).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "lowering.h"
#include "mblast/lower/lower.h"

namespace mblast::lower {

using nlohmann::json;

DType from_problem(mblast::DType t) {
  switch (t) {
    case mblast::DType::f32:
      return DType::F32;
    case mblast::DType::f64:
      return DType::F64;
    case mblast::DType::i64:
      return DType::I64;
    case mblast::DType::i32:
      return DType::I32;
    case mblast::DType::i8:
      return DType::I8;
    case mblast::DType::u8:
      return DType::U8;
    case mblast::DType::boolean:  // one byte, 0 or 1, as torch stores it (the dialects' Bool storage)
      return DType::Bool;
    default:
      throw Unsupported("dtype " + std::string(mblast::dtype_name(t)) + " is not supported by the lowering");
  }
}

std::vector<E> out_vars(size_t rank) {
  std::vector<E> v;
  for (size_t i = 0; i < rank; ++i) v.push_back(var(static_cast<int>(i)));
  return v;
}

int norm_dim(int64_t d, int rank) {
  const int64_t r = std::max(rank, 1);
  if (d < 0) d += r;
  if (d < 0 || d >= r) throw Unsupported("dim " + std::to_string(d) + " out of range for rank " + std::to_string(rank));
  return static_cast<int>(d);
}

DType promote(const std::vector<DType>& ts) {
  DType best = DType::Bool;
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool:
        return 0;
      case DType::U8:
        return 1;
      case DType::I8:
        return 1;
      case DType::I32:
        return 2;
      case DType::I64:
        return 3;
      case DType::F32:
        return 4;
      case DType::F64:
        return 5;
    }
    return 0;
  };
  for (auto t : ts)
    if (rank(t) > rank(best)) best = t;
  return best;
}

namespace {

const json kNull = nullptr;

Val from_json(const json& a, const std::map<std::string, Val>& values) {
  if (a.is_null()) return {};
  if (a.is_object() && a.contains("node")) {
    auto it = values.find(a["node"].get<std::string>());
    if (it == values.end()) throw Unsupported("argument " + a["node"].get<std::string>() + " has no value");
    return it->second;
  }
  if (a.is_boolean()) return Val::scalar(iconst(a.get<bool>() ? 1 : 0, DType::Bool));
  if (a.is_number_integer()) return Val::scalar(iconst(a.get<int64_t>(), DType::I64));
  if (a.is_number_float()) return Val::scalar(fconst(a.get<double>(), DType::F32));
  if (a.is_string()) {
    const auto s = a.get<std::string>();
    if (s == "inf") return Val::scalar(fconst(HUGE_VAL, DType::F32));
    if (s == "-inf") return Val::scalar(fconst(-HUGE_VAL, DType::F32));
    if (s == "nan") return Val::scalar(fconst(NAN, DType::F32));
    return {};
  }
  if (a.is_array()) {
    std::vector<Val> items;
    for (const auto& x : a) items.push_back(from_json(x, values));
    return Val::list(std::move(items));
  }
  return {};
}

// A constant tensor inside the graph (torch.tensor(0.5) in forward), with its values (graph.py
// carries up to CONSTANT_VALUES_MAX): a 0-dim one is a scalar; another is a computed tensor that
// picks its value by the linear index.
Val constant_value(Program& p, const json& n, std::map<std::string, Val>& values) {
  Ctx c{p, n, values};
  const std::vector<int64_t> shape = c.shape();
  const DType t = c.dtype();
  const json& v = n["value"];
  auto lit = [&](const json& x) -> E {
    if (x.is_string()) return cast(from_json(x, values).s, t);  // "inf", "-inf", "nan"
    if (is_float(t)) return fconst(x.get<double>(), t);
    return iconst(x.is_boolean() ? (x.get<bool>() ? 1 : 0) : x.get<int64_t>(), t);
  };
  int64_t numel = 1;
  for (auto d : shape) numel *= d;
  if (!v.is_array() || v.empty() || static_cast<int64_t>(v.size()) != numel)
    throw Unsupported("a constant tensor whose values do not match its shape");
  if (shape.empty()) return Val::scalar(lit(v[0]));
  const auto idx = out_vars(shape.size());
  E lin = iconst(0);
  for (size_t d = 0; d < shape.size(); ++d) lin = add(mul(lin, iconst(shape[d])), idx[d]);
  E body = lit(v[static_cast<size_t>(numel - 1)]);
  for (int64_t k = numel - 2; k >= 0; --k)
    body = select(binary("eq", lin, iconst(k)), lit(v[static_cast<size_t>(k)]), body);
  return Val::tensor(c.compute(shape, t, body));
}

void collect_refs(const json& a, std::vector<std::string>& out) {
  if (a.is_object() && a.contains("node") && a["node"].is_string())
    out.push_back(a["node"].get<std::string>());
  else if (a.is_array() || a.is_object())
    for (const auto& x : a) collect_refs(x, out);
}

const Table& table() {
  static const Table t = [] {
    Table x;
    add_pointwise(x);
    add_shape(x);
    add_reduce(x);
    add_linalg(x);
    add_recurrent(x);
    return x;
  }();
  return t;
}

}  // namespace

// "aten.add.Tensor" -> "add"; "_operator.getitem" -> "getitem"; "prims.x.default" -> "prims.x".
std::string op_key(const std::string& target) {
  if (target.rfind("aten.", 0) == 0) {
    const auto rest = target.substr(5);
    return rest.substr(0, rest.find('.'));
  }
  if (target == "_operator.getitem" || target == "operator.getitem") return "getitem";
  // mblast's own ops (tools/kernelbench/recurrent.py): "mblast.rnn.default" -> "mblast.rnn".
  if (target.rfind("mblast.", 0) == 0) return target.substr(0, target.find('.', 7));
  return target;
}

bool is_view_op(const std::string& key) {
  static const std::set<std::string> views = {"slice",   "select",    "as_strided", "view",      "_unsafe_view",
                                              "permute", "expand",    "diagonal",   "unsqueeze", "squeeze",
                                              "t",       "transpose", "alias",      "narrow",    "unfold"};
  return views.count(key) > 0;
}

std::vector<std::string> lowered_ops() {
  std::vector<std::string> v;
  for (const auto& [k, _] : table()) v.push_back(k);
  return v;
}

const json& Ctx::raw(size_t i, const char* kw) const {
  const auto& args = node["args"];
  if (args.is_array() && i < args.size()) return args[i];
  if (kw && node.contains("kwargs") && node["kwargs"].is_object() && node["kwargs"].contains(kw))
    return node["kwargs"][kw];
  return kNull;
}

bool Ctx::has(size_t i, const char* kw) const { return !raw(i, kw).is_null(); }

Val Ctx::arg(size_t i, const char* kw) const { return from_json(raw(i, kw), values); }

int64_t Ctx::int_arg(size_t i, const char* kw, int64_t fallback) const {
  const auto& a = raw(i, kw);
  if (a.is_null()) return fallback;
  if (a.is_number_integer()) return a.get<int64_t>();
  if (a.is_boolean()) return a.get<bool>();
  if (a.is_number_float()) return static_cast<int64_t>(a.get<double>());
  if (a.is_array() && a.size() == 1 && a[0].is_number_integer()) return a[0].get<int64_t>();
  throw Unsupported("argument " + std::to_string(i) + " is not a constant integer");
}

double Ctx::num_arg(size_t i, const char* kw, double fallback) const {
  const auto& a = raw(i, kw);
  if (a.is_null()) return fallback;
  if (a.is_number()) return a.get<double>();
  if (a.is_boolean()) return a.get<bool>();
  if (a.is_string()) {
    const auto s = a.get<std::string>();
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
    if (s == "nan") return NAN;
  }
  throw Unsupported("argument " + std::to_string(i) + " is not a constant number");
}

bool Ctx::bool_arg(size_t i, const char* kw, bool fallback) const {
  const auto& a = raw(i, kw);
  if (a.is_null()) return fallback;
  if (a.is_boolean()) return a.get<bool>();
  if (a.is_number()) return a.get<double>() != 0;
  throw Unsupported("argument " + std::to_string(i) + " is not a constant bool");
}

std::vector<int64_t> Ctx::ints_arg(size_t i, const char* kw, std::vector<int64_t> fallback) const {
  const auto& a = raw(i, kw);
  if (a.is_null()) return fallback;
  if (a.is_number_integer()) return {a.get<int64_t>()};
  if (!a.is_array()) throw Unsupported("argument " + std::to_string(i) + " is not a list of integers");
  std::vector<int64_t> v;
  for (const auto& x : a) {
    if (!x.is_number_integer())
      throw Unsupported("argument " + std::to_string(i) + " is not a list of constant integers");
    v.push_back(x.get<int64_t>());
  }
  return v;
}

int Ctx::tensor_arg(size_t i, const char* kw) const {
  const Val v = arg(i, kw);
  if (v.kind != Val::Kind::Tensor) throw Unsupported("argument " + std::to_string(i) + " is not a tensor");
  return v.t;
}

std::vector<int64_t> Ctx::shape(int k) const {
  const json* m = &node;
  if (k >= 0) {
    if (!node.contains("outputs") || !node["outputs"].is_array() || static_cast<size_t>(k) >= node["outputs"].size())
      throw Unsupported("no traced shape for output " + std::to_string(k));
    m = &node["outputs"][static_cast<size_t>(k)];
  }
  if (!m->is_object() || !m->contains("shape") || !(*m)["shape"].is_array()) throw Unsupported("no traced shape");
  std::vector<int64_t> s;
  for (const auto& d : (*m)["shape"]) {
    if (!d.is_number_integer()) throw Unsupported("a symbolic shape");
    s.push_back(d.get<int64_t>());
  }
  return s;
}

DType Ctx::dtype(int k) const {
  const json* m = &node;
  if (k >= 0) {
    if (!node.contains("outputs") || static_cast<size_t>(k) >= node["outputs"].size())
      throw Unsupported("no traced dtype");
    m = &node["outputs"][static_cast<size_t>(k)];
  }
  if (!m->is_object() || !m->contains("dtype")) throw Unsupported("no traced dtype");
  return dtype_from_name((*m)["dtype"].get<std::string>());
}

std::string Ctx::name() const { return node.value("name", std::string("?")); }

int Ctx::compute(std::vector<int64_t> shape, DType t, E body, ReduceOp r, std::vector<int64_t> extents,
                 const std::string& suffix) const {
  Tensor x;
  x.name = name() + suffix;
  x.dtype = t;
  x.shape = std::move(shape);
  const DType bt =
      r == ReduceOp::ArgMax || r == ReduceOp::ArgMin ? body->dtype : t;  // an arg reduction compares values
  x.body = cast(std::move(body), bt);
  x.reduce = r;
  x.reduce_extents = std::move(extents);
  x.origin = node.value("target", std::string());
  return p.add(std::move(x));
}

E Ctx::at(const Val& v, const std::vector<E>& idx) const {
  if (v.kind == Val::Kind::Scalar) return v.s;
  if (v.kind != Val::Kind::Tensor) throw Unsupported("an operand is neither a tensor nor a scalar");
  const Tensor& t = T(v.t);
  const size_t r = t.shape.size();
  if (r > idx.size()) throw Unsupported("an operand has more dims than the result");
  std::vector<E> i;
  for (size_t d = 0; d < r; ++d) i.push_back(t.shape[d] == 1 ? iconst(0) : idx[idx.size() - r + d]);
  return load(v.t, std::move(i), t.dtype);
}

int reduce_dims(const Ctx& c, const std::vector<int64_t>& in_shape, std::vector<int64_t> dims, bool keepdim,
                ReduceOp op, DType out, const std::function<E(const std::vector<E>&)>& body_at,
                const std::string& suffix) {
  const int r = static_cast<int>(in_shape.size());
  if (dims.empty())
    for (int d = 0; d < r; ++d) dims.push_back(d);
  std::set<int> red;
  for (auto d : dims) red.insert(norm_dim(d, r));
  std::vector<int64_t> shape, extents;
  for (int d = 0; d < r; ++d) {
    if (!red.count(d))
      shape.push_back(in_shape[static_cast<size_t>(d)]);
    else if (keepdim)
      shape.push_back(1);
  }
  const int orank = static_cast<int>(shape.size());
  std::vector<E> idx;
  int o = 0, k = 0;
  for (int d = 0; d < r; ++d) {
    if (red.count(d)) {
      idx.push_back(var(orank + k++));
      extents.push_back(in_shape[static_cast<size_t>(d)]);
      if (keepdim) ++o;
    } else {
      idx.push_back(var(o++));
    }
  }
  if (extents.empty()) extents.push_back(1);
  return c.compute(shape, out, body_at(idx), op, extents, suffix);
}

Lowered lower_graph(const json& aten, const Problem& problem) {
  Lowered res;
  std::string where = "graph";
  try {
    if (!aten.is_object() || !aten.contains("nodes") || !aten["nodes"].is_array())
      return {std::nullopt, "graph.json has no ATen-level graph (\"aten\"): re-import the problem with this version"};
    // A multi-output node traced without metadata (make_fx leaves tuples bare) takes its
    // outputs' shapes and dtypes from the getitem nodes that read them.
    json nodes = aten["nodes"];
    {
      std::map<std::string, size_t> index;
      for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i].value("name", "")] = i;
      for (const auto& n : aten["nodes"]) {
        const auto t = n.value("target", "");
        if (op_key(t) != "getitem" || !n.contains("shape") || !n["args"].is_array() || n["args"].size() != 2) continue;
        const auto& src = n["args"][0];
        if (!src.is_object() || !src.contains("node") || !n["args"][1].is_number_integer()) continue;
        auto it = index.find(src["node"].get<std::string>());
        if (it == index.end()) continue;
        json& m = nodes[it->second];
        if (m.contains("shape")) continue;
        const auto k = n["args"][1].get<size_t>();
        if (!m.contains("outputs") || !m["outputs"].is_array()) m["outputs"] = json::array();
        while (m["outputs"].size() <= k) m["outputs"].push_back(nullptr);
        if (m["outputs"][k].is_null()) m["outputs"][k] = {{"shape", n["shape"]}, {"dtype", n.value("dtype", "f32")}};
      }
    }
    std::map<std::string, const json*> by_name;
    const json* output = nullptr;
    for (const auto& n : nodes) {
      by_name[n.value("name", "")] = &n;
      if (n.value("op", "") == "output") output = &n;
    }
    if (!output) return {std::nullopt, "the ATen graph has no output node"};
    // What the outputs depend on.
    std::set<std::string> live;
    std::vector<std::string> stack;
    collect_refs((*output)["args"], stack);
    while (!stack.empty()) {
      auto n = stack.back();
      stack.pop_back();
      if (!live.insert(n).second) continue;
      auto it = by_name.find(n);
      if (it == by_name.end()) continue;
      collect_refs((*it->second)["args"], stack);
      if (it->second->contains("kwargs")) collect_refs((*it->second)["kwargs"], stack);
    }
    // An in-place copy_ (nn.ReLU(inplace=True) traces as relu then copy_ into its input) changes
    // what later readers of its destination see: live whenever its destination is.
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& n : nodes) {
        const auto nm = n.value("name", "");
        const std::string k = op_key(n.value("target", ""));
        const bool writes_arg0 = k == "copy_" || (k.size() > 1 && k.back() == '_' && !table().count(k) &&
                                                  table().count(k.substr(0, k.size() - 1)));
        if (live.count(nm) || !writes_arg0 || !n["args"].is_array() || n["args"].empty()) continue;
        const auto& dst = n["args"][0];
        if (!dst.is_object() || !dst.contains("node") || !live.count(dst["node"].get<std::string>())) continue;
        std::vector<std::string> more = {nm};
        collect_refs(n["args"], more);
        while (!more.empty()) {
          auto m = more.back();
          more.pop_back();
          if (!live.insert(m).second) continue;
          auto it = by_name.find(m);
          if (it != by_name.end()) collect_refs((*it->second)["args"], more);
        }
        grew = true;
      }
    }
    Program p;
    std::map<std::string, Val> values;
    for (const auto& n : nodes) {
      const std::string name = n.value("name", "");
      const std::string op = n.value("op", "");
      where = name;
      if (op == "output" || !live.count(name)) continue;
      if ((op == "get_attr" || op == "placeholder") && n.contains("value") && !n.contains("tensor")) {
        values[name] = constant_value(p, n, values);
        continue;
      }
      // A placeholder, or a constant that is one of the problem's tensors (nn.LSTM's weights).
      if (op == "placeholder" || (op == "get_attr" && n.contains("tensor"))) {
        const std::string tn = n.value("tensor", "");
        Tensor t;
        t.name = tn;
        bool found = false;
        for (size_t i = 0; i < problem.inputs.size() && !found; ++i)
          if (problem.inputs[i].name == tn) {
            t.role = Tensor::Role::Input;
            t.arg_index = static_cast<int>(i);
            t.dtype = from_problem(problem.inputs[i].dtype);
            found = true;
          }
        for (size_t i = 0; i < problem.parameters.size() && !found; ++i)
          if (problem.parameters[i].name == tn) {
            t.role = Tensor::Role::Param;
            t.arg_index = static_cast<int>(i);
            t.dtype = from_problem(problem.parameters[i].dtype);
            found = true;
          }
        if (!found) throw Unsupported("placeholder is not one of the problem's inputs or parameters");
        Ctx c{p, n, values};
        t.shape = c.shape();    // the traced shape (a 0-dim tensor is stored as one element)
        t.traced_strides = {};  // the problem's tensors are dense whatever torch had
        values[name] = Val::tensor(p.add(std::move(t)));
        continue;
      }
      if (op == "get_attr")
        throw Unsupported("get_attr (a constant tensor inside the graph, larger than the graph carries the values of)");
      if (op != "call_function") throw Unsupported("node kind " + op);
      const std::string target = n.value("target", "");
      const auto key = op_key(target);
      auto it = table().find(key);
      // An in-place op (sigmoid_, add_, ...; what make_fx leaves of an RNN cell) whose out-of-place
      // form has a lowering: that form, and its first argument's value from here on is the result.
      const bool is_copy = key == "copy_" || key == "copy";  // copy is copy_'s functional form (torch.export)
      const bool in_place = it == table().end() && key.size() > 1 && key.back() == '_' && !is_copy &&
                            table().count(key.substr(0, key.size() - 1));
      if (in_place) it = table().find(key.substr(0, key.size() - 1));
      if (it == table().end() && !is_copy) throw Unsupported("op " + target + " has no lowering");
      Ctx c{p, n, values};
      try {
        if (in_place) {
          const auto& a0 = n["args"][0];
          const Val dst = c.arg(0);
          if (dst.kind != Val::Kind::Tensor) throw Unsupported("an in-place op on a non-tensor");
          const Tensor& d = p.tensors[static_cast<size_t>(dst.t)];
          if (is_view_op(op_key(d.origin)))
            throw Unsupported("an in-place op on a view (" + d.origin + ") would change its base");
          const Val v = it->second(c);
          if (v.kind != Val::Kind::Tensor || p.tensors[static_cast<size_t>(v.t)].shape != d.shape)
            throw Unsupported("an in-place op whose result is not its first argument's shape");
          values[name] = v;
          if (a0.is_object() && a0.contains("node")) values[a0["node"].get<std::string>()] = v;
          continue;
        }
        if (is_copy) {
          // copy_(dst, src): dst's value from here on is src broadcast to dst's shape and dtype;
          // copy(dst, src) is that value, and dst keeps its own.
          const auto& a0 = n["args"][0];
          const Val dst = c.arg(0), src = c.arg(1);
          if (dst.kind != Val::Kind::Tensor) throw Unsupported("copy_ into a non-tensor");
          const Tensor& d = p.tensors[static_cast<size_t>(dst.t)];
          if (key == "copy_" && is_view_op(op_key(d.origin)))
            throw Unsupported("copy_ into a view (" + d.origin + ") would change its base");
          const auto idx = out_vars(d.shape.size());
          const int t = c.compute(d.shape, d.dtype, cast(c.at(src, idx), d.dtype));
          values[name] = Val::tensor(t);
          if (key == "copy_" && a0.is_object() && a0.contains("node"))
            values[a0["node"].get<std::string>()] = Val::tensor(t);
          continue;
        }
        values[name] = it->second(c);
        const Val& v = values[name];
        if (v.kind == Val::Kind::Tensor && n.contains("strides") && n["strides"].is_array() &&
            p.tensors[static_cast<size_t>(v.t)].traced_strides.empty())
          p.tensors[static_cast<size_t>(v.t)].traced_strides = n["strides"].get<std::vector<int64_t>>();
      } catch (const Unsupported& e) {
        throw Unsupported(target + ": " + e.what());
      }
    }
    where = "output";
    std::vector<Val> outs;
    const auto& oa = (*output)["args"];
    Val o = from_json(oa.is_array() && oa.size() == 1 ? oa[0] : oa, values);
    std::function<void(const Val&)> flat = [&](const Val& v) {
      if (v.kind == Val::Kind::List) {
        for (const auto& x : v.items) flat(x);
      } else {
        outs.push_back(v);
      }
    };
    flat(o);
    if (outs.size() != problem.outputs.size())
      throw Unsupported("the graph returns " + std::to_string(outs.size()) + " values, the problem declares " +
                        std::to_string(problem.outputs.size()) + " outputs");
    for (size_t k = 0; k < outs.size(); ++k) {
      const auto& spec = problem.outputs[k];
      const DType want = from_problem(spec.dtype);
      std::vector<int64_t> shape(spec.shape.begin(), spec.shape.end());
      int64_t numel = 1;
      for (auto d : shape) numel *= d;
      // Every output gets a tensor of its own, the problem's shape and dtype, read from the value
      // by its linear index (a 0-dim result is declared as [1]; an output that is an input is a copy).
      Tensor t;
      t.name = "output" + std::to_string(k);
      t.dtype = want;
      t.shape = shape;
      t.origin = "output";
      if (outs[k].kind == Val::Kind::Scalar) {
        t.body = cast(outs[k].s, want);
      } else if (outs[k].kind == Val::Kind::Tensor) {
        const Tensor& src = p.tensors[static_cast<size_t>(outs[k].t)];
        if (src.numel() != numel)
          throw Unsupported("output " + std::to_string(k) + " has another number of elements than declared");
        E lin = iconst(0);
        for (size_t d = 0; d < shape.size(); ++d) lin = add(mul(lin, iconst(shape[d])), var(static_cast<int>(d)));
        std::vector<E> idx(src.shape.size());
        E rest = lin;
        for (size_t d = src.shape.size(); d-- > 0;) {
          idx[d] = src.shape[d] == 1 ? iconst(0) : (d == 0 ? rest : mod(rest, iconst(src.shape[d])));
          rest = floordiv(rest, iconst(src.shape[d]));
        }
        if (src.shape == shape) idx = out_vars(shape.size());
        t.body = cast(load(outs[k].t, idx, src.dtype), want);
      } else {
        throw Unsupported("output " + std::to_string(k) + " is not a tensor");
      }
      p.outputs.push_back(p.add(std::move(t)));
    }
    res.program = std::move(p);
  } catch (const Unsupported& e) {
    res.error = std::string(e.what()) + " (node " + where + ")";
  } catch (const std::exception& e) {
    res.error = std::string("lowering failed at node ") + where + ": " + e.what();
  }
  return res;
}

Lowered lower_problem(const Problem& problem) {
  const auto file = problem.dir / "graph.json";
  std::ifstream f(file);
  if (!f) return {std::nullopt, "the problem has no graph.json"};
  json g;
  try {
    g = json::parse(f);
  } catch (const std::exception& e) {
    return {std::nullopt, std::string("graph.json: ") + e.what()};
  }
  if (!g.contains("aten"))
    return {std::nullopt, "graph.json has no ATen-level graph (\"aten\"): re-import the problem"};
  return lower_graph(g["aten"], problem);
}

}  // namespace mblast::lower
