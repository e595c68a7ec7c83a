#include "mblast/problem.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/json_fields.h"
#include "mblast/paths.h"
#include "mblast/process.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::f64:
      return {1e-9, 1e-9, 1.0};
    case DType::f32:
      return {1e-5, 1e-5, 1.0};
    case DType::f16:
      return {1e-2, 1e-2, 0.999};
    case DType::bf16:
      return {2e-2, 2e-2, 0.999};
    default:
      return {0, 0, 1.0};  // integers: exact
  }
}

Tolerance Problem::tolerance_for(DType t) const {
  auto it = tolerance.find(t);
  return it != tolerance.end() ? it->second : default_tolerance(t);
}

fs::path Problem::inputs_file(int seed) const {
  return data_dir() / ("inputs.seed" + std::to_string(seed) + ".safetensors");
}
fs::path Problem::params_file(int init) const {
  return data_dir() / ("params.init" + std::to_string(init) + ".safetensors");
}
fs::path Problem::expected_file(int seed, int init) const {
  return data_dir() / ("expected.seed" + std::to_string(seed) + ".init" + std::to_string(init) + ".safetensors");
}

bool Problem::data_present() const {
  for (const auto& s : seeds) {
    if (!fs::exists(inputs_file(s.seed))) return false;
    for (int i : inits)
      if (!fs::exists(expected_file(s.seed, i))) return false;
  }
  for (int i : inits)
    if (!fs::exists(params_file(i))) return false;
  return true;
}

std::vector<int> Problem::inits_to_run() const {
  if (!parameters.empty() || inits.size() < 2) return inits;
  std::ifstream in(data_dir() / "MANIFEST.json");
  if (!in) return inits;
  const json m = json::parse(in, nullptr, false);
  if (m.is_discarded() || !m.contains("files") || !m["files"].is_object()) return inits;
  const json& files = m["files"];
  auto hash_of = [&](const fs::path& f) {
    const auto it = files.find(f.filename().string());
    return it != files.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::vector<int> run = {inits.front()};
  for (size_t k = 1; k < inits.size(); ++k) {
    bool same = true;
    for (const auto& s : seeds) {
      const std::string first = hash_of(expected_file(s.seed, inits.front()));
      same = same && !first.empty() && first == hash_of(expected_file(s.seed, inits[k]));
    }
    if (!same) run.push_back(inits[k]);
  }
  return run;
}

namespace {
// Every field of problem.json whose type is fixed (docs/problem-format.md); parents first, so an
// "inputs" that is not an array is reported as such, not through its elements.
void check_problem_types(const json& j) {
  check_field_types(j, {
                           {"format", kInteger},
                           {"name", kString},
                           {"description", kString},
                           {"op_class", kString},
                           {"counting", kString},
                           {"inputs", kArray, "a list of {name, dtype, shape}"},
                           {"parameters", kArray, "a list of {name, dtype, shape}"},
                           {"outputs", kArray, "a list of {name, dtype, shape}"},
                           {"inputs[]", kObject, "{name, dtype, shape}"},
                           {"parameters[]", kObject, "{name, dtype, shape}"},
                           {"outputs[]", kObject, "{name, dtype, shape}"},
                           {"inputs[].name", kString},
                           {"parameters[].name", kString},
                           {"outputs[].name", kString},
                           {"inputs[].dtype", kString, "a dtype name such as f32"},
                           {"parameters[].dtype", kString, "a dtype name such as f32"},
                           {"outputs[].dtype", kString, "a dtype name such as f32"},
                           {"inputs[].shape", kArray, "of integers, such as [512, 1024]"},
                           {"parameters[].shape", kArray, "of integers, such as [512, 1024]"},
                           {"outputs[].shape", kArray, "of integers, such as [512, 1024]"},
                           {"inputs[].shape[]", kInteger},
                           {"parameters[].shape[]", kInteger},
                           {"outputs[].shape[]", kInteger},
                           {"tolerance", kObject, "mapping dtype names to {atol, rtol, min_match}"},
                           {"tolerance.*", kObject, "{atol, rtol, min_match}"},
                           {"tolerance.*.atol", kNumber},
                           {"tolerance.*.rtol", kNumber},
                           {"tolerance.*.min_match", kNumber},
                           {"flops", kNumber},
                           {"bytes", kNumber},
                           {"seeds", kArray, "a list of {seed, distribution}"},
                           {"seeds[]", kObject, "{seed, distribution}"},
                           {"seeds[].seed", kInteger},
                           {"seeds[].distribution", kString},
                           {"inits", kArray, "a list of integers"},
                           {"inits[]", kInteger},
                           {"provenance", kObject},
                       });
}

std::vector<TensorSpec> tensor_list(const json& j, const char* key, bool required) {
  if (!j.contains(key)) {
    if (required) throw UserError(std::string(key) + ": missing (expected a list of {name, dtype, shape})");
    return {};
  }
  std::vector<TensorSpec> v;
  for (size_t i = 0; i < j[key].size(); ++i) {
    // The types are checked already; what is left (a dtype name, a dimension's sign) is named
    // by TensorSpec's own reader, placed here by its path.
    try {
      v.push_back(j[key][i].get<TensorSpec>());
    } catch (const UserError& e) {
      throw UserError(json_path(key, i) + ": " + e.what());
    }
  }
  return v;
}
}  // namespace

Problem load_problem(const fs::path& dir_in) {
  const fs::path dir = fs::absolute(dir_in);
  const fs::path file = dir / "problem.json";
  if (!fs::is_directory(dir)) throw UserError(dir_in.string() + ": not a problem directory");
  const std::optional<std::string> text = try_read_file(file);
  if (!text) throw UserError(file.string() + ": cannot read problem.json");
  // Every reason below is one line: "FILE: FIELD: what is wrong" (no JSON library text).
  try {
    const json j = parse_json_text(*text);
    if (!j.is_object()) throw UserError("expected an object at the top level, got " + describe_json_value(j));
    check_problem_types(j);
    if (integer_field(j, "format", 0) != 1)
      throw UserError("unsupported format " + j.value("format", json(nullptr)).dump() +
                      " (this mblast reads format 1)");
    Problem p;
    p.dir = dir;
    if (!j.contains("name")) throw UserError("name: missing (expected a string)");
    p.name = j["name"].get<std::string>();
    p.description = string_field(j, "description", "");
    p.op_class = string_field(j, "op_class", "unknown");
    p.inputs = tensor_list(j, "inputs", true);
    p.parameters = tensor_list(j, "parameters", false);
    p.outputs = tensor_list(j, "outputs", true);
    if (p.outputs.empty()) throw UserError("outputs: a problem needs at least one output");
    std::set<std::string> names;
    for (const auto* list : {&p.inputs, &p.parameters, &p.outputs})
      for (const auto& t : *list)
        if (!names.insert(t.name).second) throw UserError("tensor name '" + t.name + "' is used twice");
    if (j.contains("tolerance")) {
      for (auto it = j["tolerance"].begin(); it != j["tolerance"].end(); ++it) {
        auto dt = parse_dtype(it.key());
        if (!dt) throw UserError("tolerance." + it.key() + ": tolerance for unknown dtype '" + it.key() + "'");
        const std::string at = json_path("tolerance", it.key());
        Tolerance t = default_tolerance(*dt);
        t.atol = number_field(*it, "atol", t.atol, at);
        t.rtol = number_field(*it, "rtol", t.rtol, at);
        t.min_match = number_field(*it, "min_match", t.min_match, at);
        if (t.atol < 0 || t.rtol < 0 || t.min_match <= 0 || t.min_match > 1)
          throw UserError(at + ": tolerance for " + it.key() + " out of range (atol, rtol >= 0; 0 < min_match <= 1)");
        p.tolerance[*dt] = t;
      }
    }
    p.flops = number_field(j, "flops", 0.0);
    p.bytes = number_field(j, "bytes", 0.0);
    if (p.flops < 0 || p.bytes < 0) throw UserError("'flops' and 'bytes' must be non-negative");
    if (!j.contains("seeds") || j["seeds"].empty())
      throw UserError("seeds: missing (expected a list of {seed, distribution})");
    for (size_t i = 0; i < j["seeds"].size(); ++i) {
      const json& s = j["seeds"][i];
      const std::string at = json_path("seeds", i);
      if (!s.contains("seed")) throw UserError(at + ".seed: missing (expected an integer)");
      p.seeds.push_back({static_cast<int>(integer_field(s, "seed", 0, at)), string_field(s, "distribution", "", at)});
    }
    if (!j.contains("inits") || j["inits"].empty()) throw UserError("inits: missing (expected a list of integers)");
    for (size_t i = 0; i < j["inits"].size(); ++i)
      p.inits.push_back(static_cast<int>(integer_value(j["inits"][i], json_path("inits", i))));
    p.provenance = j.value("provenance", json::object());
    return p;
  } catch (const UserError& e) {
    throw UserError(file.string() + ": " + e.what());
  } catch (const json::exception& e) {
    // A check above missed a case: still one line naming the file, and a bug to fix here.
    throw UserError(file.string() + ": unexpected content (" + e.what() + ")");
  }
}

std::string python_for_tools() {
  if (const char* py = std::getenv("MBLAST_PYTHON"); py && *py) return py;
  const fs::path venv = data_dir() / ".venv" / "bin" / "python3";
  if (fs::exists(venv)) return venv.string();
  return "python3";
}

void ensure_problem_data(const Problem& p, bool quiet) {
  const bool has_reference = fs::exists(p.dir / "reference.py");
  if (p.data_present() && !has_reference) return;
  // Fresh when the generator's manifest is newer than what the data is made from; the
  // generator itself checks content hashes when anything is newer.
  if (p.data_present() && has_reference) {
    const fs::path manifest = p.data_dir() / "MANIFEST.json";
    std::error_code ec;
    const auto made = fs::last_write_time(manifest, ec);
    if (!ec && made >= fs::last_write_time(p.dir / "problem.json") &&
        made >= fs::last_write_time(p.dir / "reference.py"))
      return;
  }
  if (!has_reference)
    throw UserError(p.dir.string() + ": reference data is missing (no data/ and no reference.py to make it)");
  const fs::path tool = data_dir() / "tools" / "mblast_data.py";
  if (!fs::exists(tool))
    throw UserError("cannot make reference data: " + tool.string() + " not found (set MBLAST_HOME)");
  std::vector<std::string> argv = {python_for_tools(), tool.string(), p.dir.string()};
  if (p.data_present()) argv.push_back("--quiet-if-fresh");
  auto r = run_command(argv, 600);
  if (!r.ok()) {
    std::string out = r.output;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    auto nl = out.rfind('\n');
    throw UserError("cannot make reference data for " + p.name + ": " +
                    (out.empty() ? "generator failed" : out.substr(nl == std::string::npos ? 0 : nl + 1)));
  }
  if (!quiet && !r.output.empty() && r.output.find("up to date") == std::string::npos)
    std::fprintf(stderr, "%s", r.output.c_str());
}

namespace {
// Each spec's tensor is in the file with that dtype and shape.
template <typename Set>
void check_specs(const fs::path& file, const Set& set, const std::vector<TensorSpec>& specs) {
  for (const auto& s : specs) {
    const auto* t = set.find(s.name);
    if (!t) throw UserError(file.string() + ": lacks tensor '" + s.name + "'");
    if (t->spec.dtype != s.dtype || t->spec.shape != s.shape)
      throw UserError(file.string() + ": tensor '" + s.name + "' is " + std::string(dtype_name(t->spec.dtype)) +
                      t->spec.shape_string() + " but problem.json says " + std::string(dtype_name(s.dtype)) +
                      s.shape_string());
  }
}
}  // namespace

TensorSet load_checked(const fs::path& file, const std::vector<TensorSpec>& specs) {
  TensorSet set = load_safetensors(file);
  check_specs(file, set, specs);
  return set;
}

std::unique_ptr<MappedSafetensors> map_checked(const fs::path& file, const std::vector<TensorSpec>& specs) {
  auto mapped = std::make_unique<MappedSafetensors>(file);
  check_specs(file, mapped->tensors(), specs);
  return mapped;
}

}  // namespace mblast
