#include "mblast/driver/user_kernel.h"

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/problem.h"
#include "mblast/safetensors.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mblast {

namespace {

constexpr int kFormat = 1;  // of the problem directories made here: a change makes new ones

const std::set<std::string> kSpecKeys = {"name",      "description", "op_class", "inputs", "parameters", "outputs",
                                         "tolerance", "flops",       "bytes",    "seeds",  "inits"};
const std::set<std::string> kDistributions = {"uniform01", "signed_uniform", "normal"};

std::string expected_backend(const fs::path& kernel) {
  const std::string ext = kernel.extension().string();
  if (ext == ".cu") return "cuda";
  if (ext == ".cpp" || ext == ".cc" || ext == ".cxx") return "opencl";
  if (ext == ".c") return "rvv";
  return "";
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // the sampler never makes these
  if (exp <= 0) {                                               // subnormal or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = mant >> shift;
    if ((mant >> (shift - 1)) & 1u) ++h;  // round half up
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // round to nearest even
  return static_cast<uint16_t>(sign | h);
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x += 0x7FFFu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

// One tensor of `spec` with values of `distribution`, from a generator seeded by (seed, name).
HostTensor sample(const TensorSpec& spec, const std::string& distribution, double scale, uint64_t seed) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(std::hash<std::string>{}(spec.name))};
  std::mt19937_64 rng(seq);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::normal_distribution<double> n01(0.0, 1.0);
  HostTensor t;
  t.spec = spec;
  t.data.resize(spec.nbytes());
  const bool is_float = dtype_is_float(spec.dtype);
  for (size_t i = 0; i < spec.numel(); ++i) {
    double v;
    if (distribution == "normal")
      v = is_float ? n01(rng) : std::clamp(std::round(4 * n01(rng)), -16.0, 15.0);
    else if (distribution == "signed_uniform")
      v = is_float ? 2 * u01(rng) - 1 : std::floor(32 * u01(rng)) - 16;
    else
      v = is_float ? u01(rng) : std::floor(16 * u01(rng));
    if (is_float) v *= scale;
    std::byte* at = t.data.data() + i * dtype_size(spec.dtype);
    auto put = [&](auto x) { std::memcpy(at, &x, sizeof x); };
    switch (spec.dtype) {
      case DType::f32:
        put(static_cast<float>(v));
        break;
      case DType::f64:
        put(v);
        break;
      case DType::f16:
        put(float_to_half(static_cast<float>(v)));
        break;
      case DType::bf16:
        put(float_to_bf16(static_cast<float>(v)));
        break;
      case DType::i32:
        put(static_cast<int32_t>(v));
        break;
      case DType::i64:
        put(static_cast<int64_t>(v));
        break;
      case DType::i8:
        put(static_cast<int8_t>(v));
        break;
      case DType::u8:
        put(static_cast<uint8_t>(std::abs(v)));
        break;
      case DType::boolean:
        put(static_cast<uint8_t>(static_cast<int64_t>(std::abs(v)) & 1));
        break;
    }
  }
  return t;
}

// A tensor's own distribution and scale, when the spec pins them ("distribution", "scale").
struct Draw {
  std::string distribution;  // empty: the seed's
  double scale = 1.0;
};

std::map<std::string, Draw> draws_of(const json& spec) {
  std::map<std::string, Draw> d;
  for (const char* key : {"inputs", "parameters"}) {
    if (!spec.contains(key) || !spec[key].is_array()) continue;
    for (const auto& t : spec[key]) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
      Draw w;
      if (t.contains("distribution")) {
        if (!t["distribution"].is_string() || !kDistributions.count(t["distribution"].get<std::string>()))
          throw UserError(fmt::format("tensor '{}': distribution must be uniform01, signed_uniform or normal",
                                      t["name"].get<std::string>()));
        w.distribution = t["distribution"];
      }
      if (t.contains("scale")) {
        if (!t["scale"].is_number() || !(t["scale"].get<double>() > 0))
          throw UserError(fmt::format("tensor '{}': scale must be a positive number", t["name"].get<std::string>()));
        w.scale = t["scale"];
      }
      d[t["name"]] = w;
    }
  }
  return d;
}

// problem.json from the spec, with mblast's defaults for what the spec leaves out.
json problem_json(const json& spec, const fs::path& kernel, const Target& target) {
  if (!spec.is_object()) throw UserError("the spec must be a JSON object");
  for (auto it = spec.begin(); it != spec.end(); ++it)
    if (!kSpecKeys.count(it.key()))
      throw UserError(
          fmt::format("unknown key '{}' (known: name, description, op_class, inputs, parameters, outputs, "
                      "tolerance, flops, bytes, seeds, inits)",
                      it.key()));
  for (const char* key : {"inputs", "outputs"})
    if (!spec.contains(key)) throw UserError(fmt::format("missing '{}' (a list of {{name, dtype, shape}})", key));
  std::string stem = kernel.filename().string();
  stem = stem.substr(0, stem.find('.'));
  json p = {{"format", 1},
            {"name", spec.value("name", stem)},
            {"description", spec.value("description", "a user's kernel: " + kernel.filename().string())},
            {"op_class", spec.value("op_class", "custom")},
            {"inputs", spec["inputs"]},
            {"parameters", spec.value("parameters", json::array())},
            {"outputs", spec["outputs"]},
            {"seeds", spec.value("seeds", json::array({{{"seed", 0}, {"distribution", "uniform01"}},
                                                       {{"seed", 1}, {"distribution", "signed_uniform"}},
                                                       {{"seed", 2}, {"distribution", "normal"}}}))},
            {"inits", spec.value("inits", json::array({0, 1}))},
            {"provenance",
             {{"kind", "user"},
              {"source", fs::absolute(kernel).string()},
              {"reference", fmt::format("the outputs of {} on {}", kernel.filename().string(), target.name)}}}};
  if (spec.contains("tolerance")) p["tolerance"] = spec["tolerance"];
  if (spec.contains("flops")) p["flops"] = spec["flops"];
  if (spec.contains("bytes")) {
    p["bytes"] = spec["bytes"];
  } else {  // every tensor read or written once
    double bytes = 0;
    for (const char* key : {"inputs", "parameters", "outputs"})
      for (const auto& t : p[key]) bytes += static_cast<double>(t.get<TensorSpec>().nbytes());
    p["bytes"] = bytes;
    p["counting"] = "bytes: every tensor once (the spec gave no count); flops: " +
                    std::string(spec.contains("flops") ? "from the spec" : "not given");
  }
  for (const auto& s : p["seeds"])
    if (!s.is_object() || !s.contains("distribution") || !s["distribution"].is_string() ||
        !kDistributions.count(s["distribution"].get<std::string>()))
      throw UserError("each seed needs a distribution: uniform01, signed_uniform or normal");
  return p;
}

}  // namespace

bool is_kernel_file(const fs::path& file) { return !expected_backend(file).empty(); }

fs::path default_spec_for(const fs::path& kernel) {
  const std::string name = kernel.filename().string();
  const fs::path dir = kernel.parent_path();
  const fs::path first = dir / (name.substr(0, name.find('.')) + ".spec.json");
  if (fs::exists(first)) return first;
  const fs::path last = dir / (kernel.stem().string() + ".spec.json");
  return fs::exists(last) ? last : first;
}

fs::path prepare_user_problem(const fs::path& kernel, const fs::path& spec_file, const Target& target,
                              const fs::path& root, const EvalOptions& options) {
  const std::string backend = expected_backend(kernel);
  if (backend.empty())
    throw UserError(kernel.string() + ": a kernel file must end in .cu (cuda), .cpp (opencl) or .c (rvv)");
  if (backend != target.backend)
    throw UserError(fmt::format("{} is a {} kernel, but target {} runs {} candidates", kernel.string(), backend,
                                target.name, target.backend));
  const std::string source = read_file(kernel);
  auto spec_text = try_read_file(spec_file);
  if (!spec_text)
    throw UserError(fmt::format("{}: no spec at {} (give --spec FILE; docs/optimize.md \"Your own kernel\")",
                                kernel.string(), spec_file.string()));
  json spec = json::parse(*spec_text, nullptr, false);
  if (spec.is_discarded()) throw UserError(spec_file.string() + ": not valid JSON");
  json pj;
  std::map<std::string, Draw> draws;
  try {
    pj = problem_json(spec, kernel, target);
    draws = draws_of(spec);
  } catch (const UserError& e) {
    throw UserError(spec_file.string() + ": " + e.what());
  } catch (const json::exception& e) {
    throw UserError(spec_file.string() + ": " + e.what());
  }

  const std::string key = content_hash_hex(std::string_view(
      fmt::format("mblast user kernel {}\n{}\n{}\n{}\n", kFormat, target.name,
                  content_hash_hex(std::string_view(source)), content_hash_hex(std::string_view(*spec_text)))));
  const fs::path dir = root / "user" / key.substr(0, 16) / pj["name"].get<std::string>();
  if (fs::exists(dir / "problem.json")) {
    Problem p = load_problem(dir);
    if (p.data_present()) return dir;  // made before, completely (the expected files come last)
  }
  fs::create_directories(dir / "data");
  write_file_atomically(dir / "problem.json", pj.dump(2) + "\n");
  Problem p;
  try {
    p = load_problem(dir);
  } catch (const UserError& e) {  // the spec's tensors, tolerance or counts are malformed
    std::string why = e.what();
    const std::string prefix = (dir / "problem.json").string() + ": ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    fs::remove_all(dir);
    throw UserError(spec_file.string() + ": " + why);
  }
  for (const auto* list : {&p.inputs, &p.parameters, &p.outputs})
    for (const auto& t : *list)
      if (t.numel() == 0) {
        fs::remove_all(dir);
        throw UserError(spec_file.string() + ": tensor '" + t.name + "' has no elements");
      }

  // Inputs per seed, parameters per init: the seed's distribution unless the tensor pins its own.
  for (const auto& s : p.seeds) {
    TensorSet set;
    for (const auto& t : p.inputs) {
      const Draw& d = draws[t.name];
      set.add(
          sample(t, d.distribution.empty() ? s.distribution : d.distribution, d.scale, static_cast<uint64_t>(s.seed)));
    }
    save_safetensors(p.inputs_file(s.seed), set);
  }
  for (int i : p.inits) {
    TensorSet set;
    for (const auto& t : p.parameters) {
      const Draw& d = draws[t.name];
      set.add(sample(t, d.distribution.empty() ? "signed_uniform" : d.distribution, d.scale,
                     1'000'003ull + static_cast<uint64_t>(i)));
    }
    save_safetensors(p.params_file(i), set);
  }

  // The reference: the kernel's own outputs on the target.
  std::map<std::pair<int, int>, TensorSet> outputs;
  json r = capture_outputs(p, target, kernel, options, outputs);
  if (!r.value("correct", false)) {
    std::string why = r.value("reason", json("")).is_string() ? r["reason"].get<std::string>() : "";
    std::string log = r.value("build", json::object()).value("log", "");
    if (!log.empty()) {
      const auto nl = log.find('\n');
      why += " | " + log.substr(0, nl == std::string::npos ? log.size() : nl);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);  // nothing half-made stays behind
    throw UserError(fmt::format(
        "{} cannot be the reference on {}: {}: {}", kernel.string(), target.name,
        r.value("failure_kind", json("failed")).is_string() ? r["failure_kind"].get<std::string>() : "failed", why));
  }
  json manifest = {{"generator", "mblast optimize (a user's kernel)"},
                   {"version", kFormat},
                   {"reference", fs::absolute(kernel).string()},
                   {"target", target.name},
                   {"kernel_hash", content_hash_hex(std::string_view(source))}};
  write_file_atomically(p.data_dir() / "MANIFEST.json", manifest.dump(2) + "\n");
  for (auto& [si, set] : outputs) save_safetensors(p.expected_file(si.first, si.second), set);
  return dir;
}

}  // namespace mblast
