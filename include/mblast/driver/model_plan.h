// The model level's plan (issue 40): a model's ATen graph, lowered and scheduled once by the
// lowering pipeline (src/lower), seen as fusion groups — one group per kernel of the schedule,
// each with its op class, the buffers it reads and writes, and its counted work — and each
// group as a problem of its own, so that it can be timed and optimised alone.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "mblast/lower/dialects.h"
#include "mblast/lower/lower.h"
#include "mblast/problem.h"
#include "mblast/safetensors.h"
#include "mblast/target.h"

namespace mblast::model {

struct Group {
  int index = 0;
  std::string name;  // the kernel's name ("k3_sum_7")
  std::string kind;  // op class, in the KB's words: conv, matmul, pooling, norm, softmax, reduction, elementwise
  std::vector<std::string> ops;    // the ATen ops fused into it ("convolution", "relu"), sorted
  std::vector<std::string> reads;  // buffers read: "in<i>", "par<i>", "tmp<j>", "out<k>"
  std::string writes;              // the buffer it writes
  std::vector<int64_t> shape;      // of what it writes
  lower::DType dtype = lower::DType::F32;
  double flops = 0, bytes = 0;  // counted lower bounds (model_plan.cpp says how): the runner refuses times below them
  nlohmann::json to_json() const;
};

struct ModelPlan {
  lower::Schedule schedule;
  std::vector<Group> groups;  // in execution order
  std::vector<std::string>
      unknown_ops;  // ATen ops the planner has no op class for (they run through the generic lowering)
};

// The plan of an imported model problem. Throws UserError naming the op (with its node) when the lowering pipeline
// cannot lower the graph.
ModelPlan plan_model(const Problem& problem);

// The op class the planner gives an ATen op ("convolution" -> "conv"), "" for a view or shape op
// (no work of its own), "?" for an op it does not know.
std::string op_class_of(const std::string& aten_op);

// A problem whose outputs are the model's outputs followed by every temporary of the schedule
// ("tmp<j>"), written to `dir` with the model's inputs and parameters (no expected outputs), and
// the generic candidate that computes them all. Running it (capture_outputs) gives every group's
// inputs and outputs on every seed.
struct Probe {
  Problem problem;
  std::filesystem::path candidate;
};
Probe write_probe(const Problem& model, const ModelPlan& plan, const Target& target, const std::filesystem::path& dir);

// Group g as a problem in `dir`: its buffers as inputs (parameters as parameters), what it
// writes as the output, reference data from the probe's captured values on every seed (init 0);
// and its generic candidate (the same kernel the whole model's candidate runs). Returns the
// candidate's path.
std::filesystem::path write_group_problem(const Problem& model, const ModelPlan& plan, const Group& g,
                                          const Target& target,
                                          const std::map<std::pair<int, int>, TensorSet>& captured,
                                          const std::filesystem::path& dir);

// ".opencl.cpp", ".cuda.cu", ".rvv.c"; UserError for a backend without a lowering dialect.
std::string dialect_extension(const std::string& backend);
// The model's candidate from the schedule; STITCHES: kernels replaced by the groups' own candidates
// (UserError on a backend whose dialect is C: they cannot be stitched there).
std::string emit_for(const std::string& backend, const lower::Schedule& s, const Problem& p,
                     const lower::Stitches& stitches = {});

}  // namespace mblast::model
