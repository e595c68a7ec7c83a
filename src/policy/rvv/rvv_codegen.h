// Internal to the rvv generators (src/policy/rvv/): the pieces every generated candidate is
// assembled from. A candidate is one C file with RVV 1.0 intrinsics for one LMUL; the problem's
// shapes are baked in as constants, the vector length is always taken from vsetvl (VLEN-agnostic).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mblast/policy/variants.h"

namespace mblast::policy::rvv {

// One register-group size; spells the intrinsic types and names for e32 at that LMUL.
struct Lmul {
  int m = 1;  // 1, 2, 4, 8

  std::string name() const { return "m" + std::to_string(m); }    // "m4"
  std::string f32() const { return "vfloat32" + name() + "_t"; }  // vfloat32m4_t
  std::string i32() const { return "vint32" + name() + "_t"; }
  std::string u32() const { return "vuint32" + name() + "_t"; }
  std::string mask() const { return "vbool" + std::to_string(32 / m) + "_t"; }  // vbool8_t for m4
  std::string mask_suffix() const { return "b" + std::to_string(32 / m); }
  // "__riscv_<op>_f32m4" (vfadd_vv, vle32_v, vfmv_v_f ...)
  std::string f(const std::string& op) const { return "__riscv_" + op + "_f32" + name(); }
  std::string i(const std::string& op) const { return "__riscv_" + op + "_i32" + name(); }
  std::string u(const std::string& op) const { return "__riscv_" + op + "_u32" + name(); }
  std::string vsetvl() const { return "__riscv_vsetvl_e32" + name(); }
  std::string vsetvlmax() const { return "__riscv_vsetvlmax_e32" + name() + "()"; }
};

// Replaces the tokens $F (float vector type), $I, $U, $B (mask type), $L ("m4") and $b ("b8")
// in a C template written once for every LMUL.
std::string at_lmul(std::string text, Lmul lm);

// A float literal in C: "0.5f", "-3.40282347e+38f", "INFINITY".
std::string c_float(double v);

// ---- vector math (rvv_math.cpp) ---------------------------------------------------------

// The static inline helpers `names` need (and what they depend on), in definition order, at
// one LMUL. Names: exp, exp_nonpos, expm1, tanh, sigmoid, silu, log, softplus, gelu,
// gelu_tanh. Polynomials are fitted by src/policy/rvv/fit_polynomials.py.
std::string math_helpers(const std::set<std::string>& names, Lmul lm, int exp_degree = 6);

// ---- vector expressions (rvv_expr.cpp) --------------------------------------------------

// How a leaf is read in one block of `block` consecutive output elements (block start a
// multiple of `block`): a contiguous run, one value for the whole block, or an indexed load.
enum class LeafMode { Contiguous, Uniform, Gather };

LeafMode leaf_mode(const IndexMap& m, int64_t block);

// The block length an expression over `total` output elements is best evaluated in: every
// leaf contiguous or uniform within a block where possible, else the fewest gathered leaves.
int64_t choose_block(const Expr& e, int64_t total);

// Renders an expression as RVV intrinsics over one strip [j, j + vl) of a block whose first
// output element is `base`. Leaves read `in<k>` / `pr<k>` (const float* of input / parameter
// k), Kind::Acc is a vector the caller provides. Nodes whose every leaf is uniform are
// computed once per block in scalar C; `add(mul(..), ..)` becomes one fused multiply-add; leaves
// shared by several nodes are loaded once (again after a math helper at LMUL 8, see strip).
class VectorExpr {
 public:
  VectorExpr(const Expr& e, Lmul lm, int64_t block);

  // Every op has a vector form here (false: use scalar_loop()).
  bool vectorised() const { return unknown_ops_.empty(); }
  const std::set<std::string>& unknown_ops() const { return unknown_ops_; }
  // Math helpers the strips call (for math_helpers()).
  const std::set<std::string>& helpers() const { return helpers_; }
  bool uses_fma() const { return uses_fma_; }
  bool uses_mask() const { return uses_mask_; }
  bool uses_scalar_operands() const { return uses_scalar_operands_; }
  int gathered_leaves() const;

  // Scalar declarations once per block; `base` is an int64_t expression in scope.
  std::string block_setup(const std::string& base, const std::string& indent) const;
  // Vector statements for one strip; the result is declared as `<lm.f32()> <result>`.
  // `j` and `vl` are size_t expressions, `acc` the vector holding Kind::Acc ("" when unused).
  std::string strip(const std::string& base, const std::string& j, const std::string& vl, const std::string& acc,
                    const std::string& result, const std::string& indent) const;

 private:
  const Expr& e_;
  Lmul lm_;
  int64_t block_;
  std::vector<bool> reach_, uniform_, fused_;
  std::vector<int> uses_, rep_;  // rep_: the node a leaf shares its load with
  std::set<std::string> helpers_, unknown_ops_;
  bool uses_fma_ = false, uses_mask_ = false, uses_scalar_operands_ = false;

  std::string operand(int node, const std::string& acc, const std::map<int, std::string>& leaves) const;
  std::string vector_op(int node, const std::string& acc, const std::map<int, std::string>& leaves,
                        std::string* pre) const;
};

// Whether render_expr (the scalar fallback) knows every op of the expression, and whether the
// vector renderer does.
bool renderable(const Expr& e);
bool has_vector_form(const Expr& e);

// Plain C for out[i] = expr over i in [begin, end): the fallback when an op has no vector form.
// Acc reads `acc_array[i]` (the output itself, already holding the producer's values).
std::string scalar_loop(const Expr& e, const std::string& begin, const std::string& end, const std::string& acc_array,
                        const std::string& indent);

// ---- candidate file pieces (rvv_variants.cpp) -------------------------------------------

// The comment, includes and mblast_last_error every candidate starts with.
std::string file_header(const std::string& family, const nlohmann::json& params, const KernelPlan& plan,
                        const std::string& description);
// `static int mb_check_tensors(...)`: the counts, dtypes and shapes must be the problem's
// exactly; `mb_check_params(...)` too when `with_params_check` (for mblast_prepare).
std::string shape_check(const Problem& problem, bool with_params_check = false);
// Declarations of in<k>, pr<k> and out inside mblast_run.
std::string tensor_pointers(const Problem& problem, const std::string& indent);
// The opening of mblast_run: the ABI signature, the tensor check and tensor_pointers().
std::string run_begin(const Problem& problem);

// The generators, one per plan kind (rvv_elementwise.cpp, rvv_reduce.cpp, rvv_softmax.cpp,
// rvv_matmul.cpp). `problem` gives the tensor specs and tolerance.
std::vector<Variant> elementwise_variants(const KernelPlan& plan, const Problem& problem);
std::vector<Variant> reduce_variants(const KernelPlan& plan, const Problem& problem);
std::vector<Variant> row_map_variants(const KernelPlan& plan, const Problem& problem);  // rvv_reduce.cpp
std::vector<Variant> softmax_variants(const KernelPlan& plan, const Problem& problem);
std::vector<Variant> layernorm_variants(const KernelPlan& plan, const Problem& problem);
std::vector<Variant> matmul_variants(const KernelPlan& plan, const Problem& problem);
std::vector<Variant> pool_variants(const KernelPlan& plan, const Problem& problem);    // rvv_window.cpp
std::vector<Variant> conv_variants(const KernelPlan& plan, const Problem& problem);    // rvv_window.cpp
std::vector<Variant> gather_variants(const KernelPlan& plan, const Problem& problem);  // rvv_window.cpp
std::vector<Variant> scan_variants(const KernelPlan& plan, const Problem& problem);    // rvv_scan.cpp
std::vector<Variant> argmax_variants(const KernelPlan& plan, const Problem& problem);  // rvv_argmax.cpp
// The variants of a single-kernel plan (not a chain), by its kind; none for a kind not generated.
std::vector<Variant> variants_for(const KernelPlan& plan, const Problem& problem);
// A chain plan's variants: its stages' candidates composed into one file (rvv_chain.cpp).
std::vector<Variant> chain_variants(const KernelPlan& plan, const Problem& problem);

// An epilogue applied in a separate pass over the whole output (Acc = the output's value):
// vectorised when it can be, scalar otherwise. Empty for an identity epilogue.
std::string epilogue_pass(const Expr& e, int64_t total, Lmul lm, const std::string& indent);
// The vector math helpers (silu, exp, ...) that epilogue_pass(e, total, lm) calls, to be defined
// before mblast_run; empty when it calls none.
std::string epilogue_helpers(const Expr& e, int64_t total, Lmul lm);

// Streams `len` floats from `ptr` (a const float* in scope, as is `vlmax`) into `u` vector
// accumulators with `op` ("vfadd", "vfmax", "vfmin"): U strips of VLMAX per iteration, the first
// iteration initialising the accumulators from its loads (no splat held across rows), a
// tail-undisturbed strip-mined tail; leaves the result, folded into one vector, in a0.
std::string accumulate_row(Lmul lm, int u, const std::string& op, const std::string& init, const std::string& ptr,
                           int64_t len, const std::string& indent);

// Appends the actions an expression's rendering applies (fma, .vf forms, masks, exp).
void add_expr_actions(const VectorExpr& ve, std::vector<std::string>* actions);

}  // namespace mblast::policy::rvv
