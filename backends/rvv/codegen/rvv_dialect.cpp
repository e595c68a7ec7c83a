// The lowering pipeline's RVV dialect: plain C loops, one per scheduled kernel, over its work
// items (elements, scan lines, reduction tiles). The RVV backend builds with clang -O3 for the target's
// -march, so vectorising is clang's: it does so where a loop's body is straight-line and its
// loads contiguous; index decompositions and data-dependent loads stay scalar. Hand-written
// intrinsics for the innermost contiguous loop are the next step (ARCHITECTURE: src/lower).
#include <stdexcept>

#include <fmt/format.h>

#include "mblast/lower/dialects.h"

namespace mblast::lower {

std::string emit_rvv(const Schedule& s, const Problem& problem, const Stitches& st) {
  const Dialect& d = c_dialect();
  std::string h = candidate_comment(s, problem, "RVV candidate (C, vectorised by clang where it can)");
  h += R"C(#include <mblast/abi.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

)C";
  if (!st.empty()) h += stitched_sources_c(st);
  h += error_reporting("vsnprintf");
  h += helper_functions(d, "static inline");
  for (const auto& kr : s.kernels) {
    h += fmt::format("\nstatic void {}({}{}) {{\n", kr.name,
                     kernel_params(s, kr,
                                   [&](const std::string& b, DType dt, bool w) {
                                     return fmt::format("{}{}* restrict {}", w ? "" : "const ", d.storage(dt), b);
                                   }),
                     kr.loop >= 0 ? ", const int64_t mb_step" : "");
    if (kr.loop >= 0) {
      h += fmt::format("  for (int64_t mb_local = 0; mb_local < {}; ++mb_local) {{\n", kr.items);
      h += loop_gid(kr, "int64_t", "mb_local", "    ");
    } else {
      h += fmt::format("  for (int64_t gid = 0; gid < {}; ++gid) {{\n", kr.items);
    }
    h += kernel_body(s, kr, d, "gid", "    ");
    h += "  }\n}\n";
  }
  h += "\n" + tensor_checks(problem, "mb_fail");
  h += fmt::format("\nenum {{ kTemps = {} }};\n", s.temps.size());
  h += fmt::format("enum {{ kGroups = {} }};\n", st.size());
  h += fmt::format(
      "typedef struct mb_state {{\n  void* tmp[{}];\n  void* group[{}];  // the stitched groups' states\n}} "
      "mb_state;\n",
      std::max<size_t>(s.temps.size(), 1), std::max<size_t>(st.size(), 1));
  h += "static const size_t kTempBytes[] = {";
  for (size_t i = 0; i < s.temps.size(); ++i) {
    const auto& t = s.program.tensors[static_cast<size_t>(s.temps[i])];
    h += fmt::format("{}{}u * sizeof({})", i ? ", " : "", std::max<int64_t>(t.numel(), 1), d.storage(t.dtype));
  }
  if (s.temps.empty()) h += "0";
  h += "};\n";
  // The buffers as void* expressions, for the stitched groups' tensor views.
  auto data_of = [](const std::string& b) {
    if (b.rfind("tmp", 0) == 0) return "s->tmp[" + b.substr(3) + "]";
    if (b.rfind("par", 0) == 0) return "par[" + b.substr(3) + "].data";
    if (b.rfind("out", 0) == 0) return "out[" + b.substr(3) + "].data";
    return "in[" + b.substr(2) + "].data";
  };
  h += R"C(
static void mb_free(const mblast_context* ctx, mb_state* s) {
  int i;
  (void)ctx;
  if (!s) return;
)C";
  h += stitch_release(st, "s->group", true);
  h += R"C(  for (i = 0; i < kTemps; ++i) free(s->tmp[i]);
  free(s);
}

int mblast_prepare(const mblast_context* ctx, const mblast_tensor* par, int32_t n_par, void** state) {
  int i;
  mb_state* s = (mb_state*)calloc(1, sizeof(mb_state));
  (void)ctx, (void)par, (void)n_par;
  *state = NULL;
  if (!s) return mb_fail("out of memory for the state");
  for (i = 0; i < kTemps; ++i) {
    s->tmp[i] = aligned_alloc(64, (kTempBytes[i] + 63) / 64 * 64);
    if (!s->tmp[i]) {
      mb_free(ctx, s);
      return mb_fail("out of memory for temporary %d (%zu bytes)", i, kTempBytes[i]);
    }
  }
)C";
  h += stitch_prepare(st, data_of, "s->group", "mb_free(ctx, s), mb_fail", true);
  h += R"C(  *state = s;
  return 0;
}

void mblast_release(const mblast_context* ctx, void* state) {
  mb_free(ctx, (mb_state*)state);
}

const char* mblast_last_error(void) { return g_err; }

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  mb_state* s = (mb_state*)state;
  (void)ctx;
  if (mb_check_tensors(in, n_in, par, n_par, out, n_out) != 0) return -1;
  if (!s && (kTemps > 0 || kGroups > 0))
    return mb_fail("mblast_prepare did not run: the temporaries and stitched groups are made there");
)C";
  auto ptr = [&](const std::string& b, DType t, bool w) {
    const std::string ty = d.storage(t);
    if (b.rfind("tmp", 0) == 0) return fmt::format("({}{}*)s->tmp[{}]", w ? "" : "const ", ty, b.substr(3));
    if (b.rfind("par", 0) == 0) return fmt::format("(const {}*)par[{}].data", ty, b.substr(3));
    if (b.rfind("out", 0) == 0) return fmt::format("({}{}*)out[{}].data", w ? "" : "const ", ty, b.substr(3));
    return fmt::format("(const {}*)in[{}].data", ty, b.substr(2));
  };
  for (size_t ki = 0; ki < s.kernels.size(); ++ki) {
    const auto& kr = s.kernels[ki];
    if (const int j = stitch_of(st, ki); j >= 0) {
      if (kr.loop >= 0) throw std::runtime_error("a stitched group inside a loop: " + kr.name);
      h += stitch_run(st, static_cast<size_t>(j), data_of, "s->group", "mb_fail", true);
      continue;
    }
    const auto args = kernel_args(s, kr);
    std::string a;
    for (size_t i = 0; i < args.size(); ++i) {
      const DType t = i == 0 ? s.program.tensors[static_cast<size_t>(kr.tensor)].dtype : buffer_dtype(s, args[i]);
      a += (i ? ", " : "") + ptr(args[i], t, i == 0);
    }
    if (kr.loop >= 0) a += ", mb_step";
    h += loop_open(s, ki, "int64_t");
    h += fmt::format("  {}({});\n", kr.name, a);
    h += loop_close(s, ki);
  }
  h += "  return 0;\n}\n";
  return h;
}

}  // namespace mblast::lower
