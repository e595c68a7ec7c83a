// A problem directory: problem.json plus reference data (docs/problem-format.md).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/safetensors.h"
#include "mblast/tensor.h"

namespace mblast {

struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-5;
  double min_match = 1.0;  // fraction of elements that must be within atol + rtol*|expected|
};

// The default for a dtype when problem.json does not give one.
Tolerance default_tolerance(DType t);

struct SeedSpec {
  int seed = 0;
  std::string distribution;  // uniform01 | signed_uniform | normal | (reference-defined)
};

struct Problem {
  std::filesystem::path dir;
  std::string name, description, op_class;
  std::vector<TensorSpec> inputs, parameters, outputs;
  std::map<DType, Tolerance> tolerance;
  double flops = 0, bytes = 0;
  std::vector<SeedSpec> seeds;
  std::vector<int> inits;
  nlohmann::json provenance;

  Tolerance tolerance_for(DType t) const;
  std::filesystem::path data_dir() const { return dir / "data"; }
  std::filesystem::path inputs_file(int seed) const;
  std::filesystem::path params_file(int init) const;
  std::filesystem::path expected_file(int seed, int init) const;
  bool data_present() const;
  // The inits a candidate is run on. Without parameters, an init whose expected outputs the
  // data's MANIFEST.json records as identical (same content hash, on every seed) to the first
  // init's is the same computation on the same inputs: it is run once, as the first init.
  // Without a manifest, or where any hash differs, every init.
  std::vector<int> inits_to_run() const;
};

// Reads and checks problem.json. Throws UserError with a one-line reason naming the file and,
// for a wrong-typed field, its path and the type it must have ("FILE: inputs[0].shape: expected
// an array (...), got the string \"512\"").
Problem load_problem(const std::filesystem::path& dir);

// The interpreter for tools/*.py: $MBLAST_PYTHON, else <data dir>/.venv (made by setup.sh),
// else python3 on PATH.
std::string python_for_tools();

// Makes sure data/ exists: generates it with tools/mblast_data.py when the problem has a
// reference.py and data is missing or stale. Throws UserError when it cannot.
void ensure_problem_data(const Problem& p, bool quiet);

// Loads one data file and checks each tensor against the specs (name, dtype, shape).
TensorSet load_checked(const std::filesystem::path& file, const std::vector<TensorSpec>& specs);
// The same check, on the file mapped rather than copied (for large reference data).
std::unique_ptr<MappedSafetensors> map_checked(const std::filesystem::path& file, const std::vector<TensorSpec>& specs);

}  // namespace mblast
