// OpenCL reductions, softmax, log_softmax and layernorm over [outer, reduce, inner], the
// epilogue fused.
//
//   row-per-group   (inner 1) one work-group per row: float4 loads strided over the group,
//                   a local-memory tree; softmax either as two trees (max, then sum of exp)
//                   or one tree of online (max, rescaled sum) pairs; a second read writes.
//   row-per-item    (inner 1) one work-item per row, floatN accumulators, no barriers: what a
//                   CPU device (PoCL) runs best when there are enough rows; softmax's statistics
//                   online, as a max pass and a sum pass, or with the sum pass storing exp so
//                   the write pass only scales (one exp per element instead of two).
//   column-per-item (inner > 1) one work-item per (outer, inner) column: neighbouring work-items
//                   read neighbouring addresses at every step of the reduction; sums are
//                   compensated (Kahan), as one work-item walks the whole axis.
//   columns-vec     (reductions, inner a multiple of VW) VW neighbouring columns per work-item
//                   as floatVW values, first on a CPU device.
//   row maps        (row_map, inner 1: x / x.sum(-1, keepdim)) a work-group or a work-item per
//                   row as above: the row's statistic, then every element through the
//                   expression in a second read of the row (from the cache), one kernel.
#include <functional>

#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

struct Ctx {
  const KernelPlan& plan;
  const Problem& problem;
  std::string idx;  // index type
  std::string x;    // source buffer name
  int64_t outer, r, inner;
  bool is_reduce, is_log;
  double eps = 0;       // layernorm
  bool is_map = false;  // row_map: the row's statistic, then the expression over every element
};

std::string combine(const std::string& op, const std::string& a, const std::string& b) {
  if (op == "max") return "fmax(" + a + ", " + b + ")";
  if (op == "min") return "fmin(" + a + ", " + b + ")";
  return "(" + a + " + " + b + ")";
}

std::string init(const std::string& op) {
  if (op == "max") return "(-INFINITY)";
  if (op == "min") return "INFINITY";
  return "0.0f";
}

// The reduced value as the epilogue sees it.
std::string final_value(const Ctx& c, const std::string& a) {
  return c.plan.reduce_op == "mean" ? fmt::format("({} / {}.0f)", a, c.r) : a;
}

// The softmax (or log_softmax) value of x given the row's max m and `norm` (1/sum or log(sum)).
std::string softmax_value(const Ctx& c, const std::string& x) {
  return c.is_log ? "((" + x + " - m) - norm)" : "(exp(" + x + " - m) * norm)";
}
std::string norm_of(const Ctx& c, const std::string& sum) {
  return c.is_log ? "log(" + sum + ")" : "(1.0f / " + sum + ")";
}

std::string epilogue(const Ctx& c, const std::string& i, const std::string& acc) {
  return gpu::render_at(c.plan, kOpenCL, i, acc);
}

// A row map's value of the element `xv` (output index `i`): the expression, Acc the row's `stat`.
std::string map_value(const Ctx& c, const std::string& i, const std::string& xv) {
  return gpu::render_at(c.plan, kOpenCL, i, "stat", xv);
}

std::vector<std::string> fusion_actions(const Ctx& c) {
  std::vector<std::string> a;
  if (!c.is_reduce || gpu::expr_has_ops(c.plan.expr)) a.push_back("opencl.kernel-fusion");
  if (gpu::fits_int32(c.plan, c.problem)) a.push_back("opencl.32bit-index-math");
  return a;
}

// ---------------------------------------------------------------------------------------------
// One work-group per row.

std::string tree(const std::string& step) {
  return "  barrier(CLK_LOCAL_MEM_FENCE);\n"
         "  for (int s = WG / 2; s > 0; s >>= 1) {\n"
         "    if (t < s) " +
         step +
         "\n"
         "    barrier(CLK_LOCAL_MEM_FENCE);\n"
         "  }\n";
}

// Strided accumulation of `op` over the row by the work-group into float `var`; `of_q` is a
// float4 chunk's contribution (q is the chunk), `of_x` a single element's (x is the element).
std::string group_accumulate(const std::string& op, const std::string& var, const std::string& of_q,
                             const std::string& of_x) {
  std::string s;
  s += "  float " + var + " = " + init(op) + ";\n";
  s += "  {\n    float4 a4 = (float4)(" + init(op) + ");\n";
  s += "    for (int v = t; v < R4; v += WG) {\n      const float4 q = vload4(v, row);\n";
  s += "      a4 = " + combine(op, "a4", of_q) + ";\n    }\n";
  s += "    " + var + " = " + combine(op, combine(op, "a4.s0", "a4.s1"), combine(op, "a4.s2", "a4.s3")) + ";\n  }\n";
  s += "  for (int r = R4 * 4 + t; r < R; r += WG) {\n    const float x = row[r];\n";
  s += "    " + var + " = " + combine(op, var, of_x) + ";\n  }\n";
  return s;
}

// The rest of a write loop's body over the float{vec} chunks v of row o, lane by lane:
// `lane_value(i)` gives the statements that compute `float y<i>` (output index `(b + i)`), then
// the chunk is stored. `b` is declared when a lane uses it.
std::string lane_write(const Ctx& c, int vec, const std::function<std::string(int)>& lane_value) {
  std::string lanes, ys;
  for (int i = 0; i < vec; ++i) {
    lanes += lane_value(i);
    ys += (i ? ", y" : "y") + std::to_string(i);
  }
  std::string k;
  if (lanes.find("(b + ") != std::string::npos)
    k += fmt::format("    const {} b = o * R + ({})v * {};\n", c.idx, c.idx, vec);
  return k + lanes + fmt::format("    vstore{0}((float{0})({1}), v, out + o * R);\n  }}\n", vec, ys);
}

// The write pass of softmax (each lane through the epilogue) or of a row map (each lane through
// the expression): float4 loads and stores.
std::string group_write(const Ctx& c) {
  std::string s = "  for (int v = t; v < R4; v += WG) {\n    const float4 q = vload4(v, row);\n";
  s += lane_write(c, 4, [&](int k) {
    const std::string b = fmt::format("(b + {})", k), q = std::string("q.s") + kLane[k];
    if (c.is_map) return fmt::format("    const float y{} = {};\n", k, map_value(c, b, q));
    return fmt::format("    const float acc{0} = {1};\n    const float y{0} = {2};\n", k, softmax_value(c, q),
                       epilogue(c, b, "acc" + std::to_string(k)));
  });
  s += "  for (int r = R4 * 4 + t; r < R; r += WG) {\n";
  s += fmt::format("    const {} i = o * R + r;\n", c.idx);
  if (c.is_map) return s + "    out[i] = " + map_value(c, "i", "row[r]") + ";\n  }\n";
  s += "    const float acc = " + softmax_value(c, "row[r]") + ";\n";
  s += "    out[i] = " + epilogue(c, "i", "acc") + ";\n  }\n";
  return s;
}

Design row_per_group(const Ctx& c, int wg, bool online) {
  const auto tensors = gpu::plan_tensors(c.plan);
  std::string k;
  k += fmt::format("#define R {}\n#define R4 (R / 4)\n#define WG {}\n\n", c.r, wg);
  k += "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n";
  k += "void mb_rows(" + kernel_params(tensors) + ") {\n";
  k += online ? "  __local float part[WG], part_s[WG];\n" : "  __local float part[WG];\n";
  k += "  const int t = (int)get_local_id(0);\n";
  k += fmt::format("  const {0} o = ({0})get_group_id(0);\n", c.idx);
  k += "  __global const float* row = " + c.x + " + o * R;\n";
  if (c.is_reduce) {
    const std::string& op = c.plan.reduce_op;
    k += group_accumulate(op, "a", "q", "x");
    k += "  part[t] = a;\n";
    k += tree("part[t] = " + combine(op, "part[t]", "part[t + s]") + ";");
    k += "  if (t == 0) {\n";
    k += "    const float acc = " + final_value(c, "part[0]") + ";\n";
    k += "    out[o] = " + epilogue(c, "o", "acc") + ";\n  }\n";
  } else if (c.is_map) {
    const std::string& op = c.plan.reduce_op;
    k += group_accumulate(op, "a", "q", "x");
    k += "  part[t] = a;\n";
    k += tree("part[t] = " + combine(op, "part[t]", "part[t + s]") + ";");
    k += "  const float stat = " + final_value(c, "part[0]") + ";\n";
    k += group_write(c);
  } else if (!online) {
    k += group_accumulate("max", "a", "q", "x");
    k += "  part[t] = a;\n";
    k += tree("part[t] = fmax(part[t], part[t + s]);");
    k += "  const float m = part[0];\n";
    k += "  barrier(CLK_LOCAL_MEM_FENCE);  // part is reused\n";
    k += group_accumulate("sum", "e", "exp(q - m)", "exp(x - m)");
    k += "  part[t] = e;\n";
    k += tree("part[t] += part[t + s];");
    k += "  const float norm = " + norm_of(c, "part[0]") + ";\n";
    k += group_write(c);
  } else {
    // One read for the statistics: a running max and the sum rescaled whenever it grows.
    k += "  float run_m = -INFINITY, run_s = 0.0f;\n";
    k += "  for (int v = t; v < R4; v += WG) {\n    const float4 q = vload4(v, row);\n";
    k += "    const float nm = fmax(run_m, fmax(fmax(q.s0, q.s1), fmax(q.s2, q.s3)));\n";
    k += "    if (nm > -INFINITY) {  // a chunk of only -inf adds nothing (and exp(-inf - -inf) is NaN)\n";
    k += "      const float4 e = exp(q - nm);\n";
    k += "      run_s = run_s * exp(run_m - nm) + ((e.s0 + e.s1) + (e.s2 + e.s3));\n      run_m = nm;\n    }\n  }\n";
    k += "  for (int r = R4 * 4 + t; r < R; r += WG) {\n    const float x = row[r];\n    const float nm = fmax(run_m, "
         "x);\n";
    k += "    if (nm > -INFINITY) {\n      run_s = run_s * exp(run_m - nm) + exp(x - nm);\n      run_m = nm;\n    }\n  "
         "}\n";
    k += "  part[t] = run_m;\n  part_s[t] = run_s;\n";
    k += tree(
        "{\n"
        "      const float m1 = part[t], m2 = part[t + s], nm = fmax(m1, m2);\n"
        "      if (nm > -INFINITY) {\n"
        "        part_s[t] = part_s[t] * exp(m1 - nm) + part_s[t + s] * exp(m2 - nm);\n"
        "        part[t] = nm;\n"
        "      }\n"
        "    }");
    k += "  const float m = part[0];\n";
    k += "  const float norm = " + norm_of(c, "part_s[0]") + ";\n";
    k += group_write(c);
  }
  k += "}\n";

  Design d;
  d.family = c.is_map ? "opencl.row-map.row-per-group" : "opencl.reduce.row-per-group";
  d.params = {{"wg", wg}};
  if (!c.is_reduce && !c.is_map) d.params["online"] = online;
  d.description =
      fmt::format("one work-group of {} per row, float4 loads, local-memory tree{}", wg,
                  c.is_reduce ? ""
                  : c.is_map ? fmt::format(" for the row's {}, then every element from a second read", c.plan.reduce_op)
                  : online   ? " of online (max, sum) pairs"
                             : "s for max and sum");
  d.actions = {"opencl.two-pass-reduction", "opencl.reqd-work-group-size", "opencl.vector-load-store-128bit"};
  if (online) d.actions.push_back("opencl.fewer-barriers");
  for (auto& a : fusion_actions(c)) d.actions.push_back(a);
  d.kernels = k;
  Launch l;
  l.kernel = "mb_rows";
  l.global = {c.outer * wg, 1, 1};
  l.local = {wg, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

// ---------------------------------------------------------------------------------------------
// One work-item per row.

// The body of a write loop over the float{vec} chunks v of row o (rows a multiple of vec):
// `acc`, a float{vec} expression, through the epilogue (its tensors loaded as vectors where they
// run along the row), stored.
std::string vector_write(const Ctx& c, int vec, const std::string& acc) {
  const LaneLeaves leaves(c.plan, vec);
  std::string k;
  if (leaves.reads_tensors()) k += fmt::format("    const {} b = o * R + ({})v * {};\n", c.idx, c.idx, vec);
  k += leaves.loads("b", "    ");
  k += fmt::format("    const float{} acc = {};\n", vec, acc);
  k += fmt::format("    vstore{}({}, v, out + o * R);\n", vec, leaves.vector_expr("b", "acc"));
  return k;
}

// How a work-item's softmax finds its row's max and sum, and what the write pass does.
enum class RowStats {
  two_pass,   // a max pass, a sum pass (exp), the write pass computes exp again
  online,     // one pass of (max, rescaled sum) per lane (an extra exp per chunk), then the write
  exp_stored  // a max pass, a sum pass that also stores exp in the output row, a scaling pass
};

// Softmax with one work-item per row: the statistics (RowStats), then the write pass. The row
// stays in the cache between passes, so on a CPU the exps are what costs: exp_stored computes
// one per element (benchmarks/results/policy-design-figures.json, opencl-softmax-exp-stored).
Design row_per_item(const Ctx& c, int vec, RowStats stats) {
  const bool online = stats == RowStats::online;
  // log_softmax needs no exp in its write pass: only softmax stores them.
  const bool stored = stats == RowStats::exp_stored && !c.is_reduce && !c.is_log;
  const auto tensors = gpu::plan_tensors(c.plan);
  const std::string vt = "float" + std::to_string(vec);
  auto lane = [&](const std::string& v, int i) { return v + ".s" + kLane[i]; };
  auto horizontal = [&](const std::string& op, const std::string& v) {
    std::string h = lane(v, 0);
    for (int i = 1; i < vec; ++i) h = combine(op, h, lane(v, i));
    return h;
  };
  std::string k;
  k += fmt::format("#define R {}\n#define OUTER {}\n#define RV (R / {})\n\n", c.r, c.outer, vec);
  k += "__kernel void mb_rows(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} o = ({0})get_global_id(0);\n", c.idx);
  k += "  if (o >= OUTER) return;\n";
  k += "  __global const float* row = " + c.x + " + o * R;\n";
  if (c.is_reduce || c.is_map) {
    const std::string& op = c.plan.reduce_op;
    k += fmt::format("  {} a = ({})({});\n", vt, vt, init(op));
    k += fmt::format("  for (int v = 0; v < RV; ++v) a = {};\n", combine(op, "a", fmt::format("vload{}(v, row)", vec)));
    k += "  float acc = " + horizontal(op, "a") + ";\n";
    k += fmt::format("  for (int r = RV * {}; r < R; ++r) acc = {};\n", vec, combine(op, "acc", "row[r]"));
    k += "  acc = " + final_value(c, "acc") + ";\n";
    if (c.is_reduce)
      k += "  out[o] = " + epilogue(c, "o", "acc") + ";\n";
    else
      k += "  const float stat = acc;\n";
  } else if (online) {
    k += fmt::format("  {0} mv = ({0})(-INFINITY), sv = ({0})(0.0f);\n", vt);
    k += "  for (int v = 0; v < RV; ++v) {\n";
    k += fmt::format("    const {} q = vload{}(v, row);\n", vt, vec);
    k += fmt::format("    const {} nm = fmax(mv, q);\n", vt);
    k += "    // Lanes that have seen only -inf keep a zero sum (exp(-inf - -inf) would be NaN).\n";
    k += fmt::format("    sv = select(sv * exp(mv - nm) + exp(q - nm), sv, nm == ({})(-INFINITY));\n", vt);
    k += "    mv = nm;\n  }\n";
    k += "  float m = " + horizontal("max", "mv") + ";\n  float sum = 0.0f;\n";
    for (int i = 0; i < vec; ++i)
      k += fmt::format("  if ({0} > -INFINITY) sum += {1} * exp({0} - m);\n", lane("mv", i), lane("sv", i));
    k += fmt::format("  for (int r = RV * {}; r < R; ++r) {{\n", vec);
    k += "    const float x = row[r], nm = fmax(m, x);\n";
    k += "    if (nm > -INFINITY) {\n      sum = sum * exp(m - nm) + exp(x - nm);\n      m = nm;\n    }\n  }\n";
  } else {
    k += fmt::format("  {0} mv = ({0})(-INFINITY);\n", vt);
    k += fmt::format("  for (int v = 0; v < RV; ++v) mv = fmax(mv, vload{}(v, row));\n", vec);
    k += "  float m = " + horizontal("max", "mv") + ";\n";
    k += fmt::format("  for (int r = RV * {}; r < R; ++r) m = fmax(m, row[r]);\n", vec);
    k += fmt::format("  {0} sv = ({0})(0.0f);\n", vt);
    if (stored) {
      k += "  __global float* orow = out + o * R;\n";
      k += fmt::format("  for (int v = 0; v < RV; ++v) {{\n    const {} e = exp(vload{}(v, row) - m);\n", vt, vec);
      k += fmt::format("    vstore{}(e, v, orow);\n    sv += e;\n  }}\n", vec);
    } else {
      k += fmt::format("  for (int v = 0; v < RV; ++v) sv += exp(vload{}(v, row) - m);\n", vec);
    }
    k += "  float sum = " + horizontal("sum", "sv") + ";\n";
    if (stored)
      k += fmt::format(
          "  for (int r = RV * {}; r < R; ++r) {{\n    const float e = exp(row[r] - m);\n    orow[r] = e;\n    sum += "
          "e;\n  }}\n",
          vec);
    else
      k += fmt::format("  for (int r = RV * {}; r < R; ++r) sum += exp(row[r] - m);\n", vec);
  }
  // The write pass's value of x: from the input row, or (stored) the exp already in the output.
  auto value = [&](const std::string& x) { return stored ? "(" + x + " * norm)" : softmax_value(c, x); };
  if (c.is_map) {  // the row read again (from the cache), each lane through the expression
    k += "  for (int v = 0; v < RV; ++v) {\n";
    k += fmt::format("    const {} q = vload{}(v, row);\n", vt, vec);
    k += lane_write(c, vec, [&](int i) {
      return fmt::format("    const float y{} = {};\n", i, map_value(c, fmt::format("(b + {})", i), lane("q", i)));
    });
    k += fmt::format("  for (int r = RV * {}; r < R; ++r) {{\n", vec);
    k += fmt::format("    const {} i = o * R + r;\n", c.idx);
    k += "    out[i] = " + map_value(c, "i", "row[r]") + ";\n  }\n";
  } else if (!c.is_reduce) {
    k += "  const float norm = " + norm_of(c, "sum") + ";\n";
    k += "  for (int v = 0; v < RV; ++v) {\n";
    k += fmt::format("    const {} q = vload{}(v, {});\n", vt, vec, stored ? "orow" : "row");
    if (c.r % vec == 0) {
      // Every chunk starts at a multiple of vec in the output: the epilogue on float{vec} values.
      k += vector_write(c, vec, value("q")) + "  }\n";
    } else {
      k += lane_write(c, vec, [&](int i) {
        return fmt::format("    const float acc{0} = {1};\n    const float y{0} = {2};\n", i, value(lane("q", i)),
                           epilogue(c, fmt::format("(b + {})", i), "acc" + std::to_string(i)));
      });
    }
    k += fmt::format("  for (int r = RV * {}; r < R; ++r) {{\n", vec);
    k += fmt::format("    const {} i = o * R + r;\n", c.idx);
    k += "    const float acc = " + value(stored ? "orow[r]" : "row[r]") + ";\n";
    k += "    out[i] = " + epilogue(c, "i", "acc") + ";\n  }\n";
  }
  k += "}\n";

  Design d;
  d.family = c.is_map ? "opencl.row-map.row-per-item" : "opencl.reduce.row-per-item";
  // On a CPU device with rows enough for its cores, first: no barriers, and the row stays in one
  // core's cache (seed action opencl.cpu-row-per-work-item has the figures).
  d.cpu_first = c.outer >= 64;
  d.params = {{"vec", vec}};
  if (!c.is_reduce && !c.is_map) d.params["online"] = online;
  if (stored) d.params["exp_stored"] = true;
  d.description =
      fmt::format("one work-item per row, float{} accumulators, no barriers{}", vec,
                  c.is_reduce ? ""
                  : c.is_map  ? fmt::format(", the row's {} then every element from a second read", c.plan.reduce_op)
                  : online    ? ", online (max, sum) per lane"
                  : stored    ? ", max pass, then a sum pass storing exp, then a scaling pass"
                              : ", max pass then sum pass");
  d.actions = {"opencl.pocl-cpu-friendly-kernels", "opencl.vector-load-store-128bit", "opencl.thread-coarsening"};
  for (auto& a : fusion_actions(c)) d.actions.push_back(a);
  d.kernels = k;
  Launch l;
  l.kernel = "mb_rows";
  l.global = {c.outer, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

// ---------------------------------------------------------------------------------------------
// One work-item per column (inner > 1).

Design column_per_item(const Ctx& c, int wg) {
  const auto tensors = gpu::plan_tensors(c.plan);
  std::string k;
  k += fmt::format("#define R {}\n#define INNER {}\n#define COLUMNS {}\n\n", c.r, c.inner, c.outer * c.inner);
  k += "__kernel void mb_columns(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} g = ({0})get_global_id(0);\n", c.idx);
  k += "  if (g >= COLUMNS) return;\n";
  k += fmt::format("  const {} o = g / INNER, i = g - o * INNER;\n", c.idx);
  k += "  __global const float* col = " + c.x + " + o * R * INNER + i;\n";
  if (c.is_reduce) {
    const std::string& op = c.plan.reduce_op;
    k += "  float a = " + init(op) + ";\n";
    if (op == "max" || op == "min") {
      k += fmt::format("  for ({} r = 0; r < R; ++r) a = {};\n", c.idx, combine(op, "a", "col[r * INNER]"));
    } else {
      // One work-item adds up the whole axis: compensated (Kahan) so the error does not grow
      // with R (a plain running sum of 4096 normals misses PyTorch's pairwise sum by 2e-4).
      k += "  float lost = 0.0f;  // what the running sum's last rounding dropped\n";
      k += fmt::format("  for ({} r = 0; r < R; ++r) {{\n", c.idx);
      k += "    const float y = col[r * INNER] - lost, t = a + y;\n    lost = (t - a) - y;\n    a = t;\n  }\n";
    }
    k += "  const float acc = " + final_value(c, "a") + ";\n";
    k += "  out[g] = " + epilogue(c, "g", "acc") + ";\n";
  } else {
    k += "  float m = -INFINITY, sum = 0.0f;\n";
    k += fmt::format("  for ({} r = 0; r < R; ++r) {{\n", c.idx);
    k += "    const float x = col[r * INNER], nm = fmax(m, x);\n";
    k += "    if (nm > -INFINITY) {\n      sum = sum * exp(m - nm) + exp(x - nm);\n      m = nm;\n    }\n  }\n";
    k += "  const float norm = " + norm_of(c, "sum") + ";\n";
    k += fmt::format("  for ({} r = 0; r < R; ++r) {{\n", c.idx);
    k += fmt::format("    const {} j = (o * R + r) * INNER + i;\n", c.idx);
    k += "    const float acc = " + softmax_value(c, "col[r * INNER]") + ";\n";
    k += "    out[j] = " + epilogue(c, "j", "acc") + ";\n  }\n";
  }
  k += "}\n";

  Design d;
  d.family = "opencl.reduce.column-per-item";
  d.params = {{"wg", wg == 0 ? nlohmann::json("auto") : nlohmann::json(wg)}};
  d.description = fmt::format("one work-item per (outer, inner) column, coalesced across work-items, work-group {}",
                              wg == 0 ? std::string("auto") : std::to_string(wg));
  d.actions = {"opencl.coalesced-access"};
  for (auto& a : fusion_actions(c)) d.actions.push_back(a);
  d.kernels = k;
  Launch l;
  l.kernel = "mb_columns";
  l.global = {c.outer * c.inner, 1, 1};
  if (wg > 0) l.local[0] = wg;
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

// VW neighbouring columns per work-item (reductions, inner a multiple of VW), for CPU devices:
// one vloadVW per step of the axis and floatVW accumulators (compensated for sums, lane by
// lane), the epilogue on the vector. One column per work-item leaves the vectorising to PoCL,
// which does not do it here (benchmarks/results/policy-design-figures.json, opencl-columns-vectorised).
Design columns_vec(const Ctx& c, int vw) {
  const auto tensors = gpu::plan_tensors(c.plan);
  const std::string& op = c.plan.reduce_op;
  const std::string fv = fmt::format("float{}", vw);
  const int64_t items = c.outer * (c.inner / vw);
  const LaneLeaves leaves(c.plan, vw);
  std::string k;
  k += fmt::format("#define R {}\n#define INNER {}\n#define ITEMS {}\n\n", c.r, c.inner, items);
  k += "__kernel void mb_columns(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} g = ({0})get_global_id(0);\n", c.idx);
  k += "  if (g >= ITEMS) return;\n";
  k += fmt::format("  const {0} o = g / {1}, i0 = (g - o * {1}) * {2};\n", c.idx, c.inner / vw, vw);
  k += "  __global const float* col = " + c.x + " + o * R * INNER + i0;\n";
  k += fmt::format("  {0} a = ({0}){1};\n", fv, init(op));
  if (op == "max" || op == "min") {
    k += fmt::format("  for ({} r = 0; r < R; ++r) a = {};\n", c.idx,
                     combine(op, "a", fmt::format("vload{}(0, col + r * INNER)", vw)));
  } else {
    k += fmt::format("  {0} lost = ({0})(0.0f);  // per lane, what the running sum's last rounding dropped\n", fv);
    k += fmt::format("  for ({} r = 0; r < R; ++r) {{\n", c.idx);
    k += fmt::format(
        "    const {0} y = vload{1}(0, col + r * INNER) - lost, t = a + y;\n    lost = (t - a) - y;\n    a = t;\n  "
        "}}\n",
        fv, vw);
  }
  k += fmt::format("  const {} b = o * INNER + i0;\n", c.idx);
  k += fmt::format("  const {} acc = {};\n", fv, final_value(c, "a"));
  k += leaves.store("b", "acc", "  ") + "}\n";

  Design d;
  d.family = "opencl.reduce.columns-vec";
  d.params = {{"vec", vw}};
  d.description = fmt::format("{} neighbouring columns per work-item, float{} loads and accumulators{}", vw, vw,
                              op == "sum" || op == "mean" ? " (compensated sums)" : "");
  d.actions = {"opencl.vector-load-store-128bit", "opencl.thread-coarsening", "opencl.pocl-cpu-friendly-kernels"};
  for (auto& a : fusion_actions(c)) d.actions.push_back(a);
  d.cpu_first = true;
  d.kernels = k;
  Launch l;
  l.kernel = "mb_columns";
  l.global = {items, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

// ---------------------------------------------------------------------------------------------
// LayerNorm (inner 1): the mean, then the variance from a second read of (x - mean)^2 (safe
// against cancellation), then (x - mean) * rstd through the epilogue (the affine and the rest).

std::string norm_write(const Ctx& c, const std::string& first, const std::string& step) {
  std::string s;
  s += fmt::format("  for (int r = {}; r < R; r += {}) {{\n", first, step);
  s += fmt::format("    const {} i = o * R + r;\n", c.idx);
  s += "    const float acc = (row[r] - mean) * rstd;\n";
  s += "    out[i] = " + epilogue(c, "i", "acc") + ";\n  }\n";
  return s;
}

Design norm_per_group(const Ctx& c, int wg) {
  const auto tensors = gpu::plan_tensors(c.plan);
  std::string k;
  k += fmt::format("#define R {}\n#define R4 (R / 4)\n#define WG {}\n#define EPS {:.9g}f\n\n", c.r, wg, c.eps);
  k += "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n";
  k += "void mb_rows(" + kernel_params(tensors) + ") {\n";
  k += "  __local float part[WG];\n";
  k += "  const int t = (int)get_local_id(0);\n";
  k += fmt::format("  const {0} o = ({0})get_group_id(0);\n", c.idx);
  k += "  __global const float* row = " + c.x + " + o * R;\n";
  if (c.plan.rms) {
    k += "  const float mean = 0.0f;  // RMSNorm: no mean subtracted\n";
  } else {
    k += group_accumulate("sum", "a", "q", "x");
    k += "  part[t] = a;\n";
    k += tree("part[t] += part[t + s];");
    k += "  const float mean = part[0] / (float)R;\n";
    k += "  barrier(CLK_LOCAL_MEM_FENCE);  // part is reused\n";
  }
  k += group_accumulate("sum", "d", "(q - mean) * (q - mean)", "(x - mean) * (x - mean)");
  k += "  part[t] = d;\n";
  k += tree("part[t] += part[t + s];");
  k += "  const float rstd = rsqrt(part[0] / (float)R + EPS);\n";
  k += norm_write(c, "t", "WG");
  k += "}\n";
  Design d;
  d.family = "opencl.layernorm.row-per-group";
  d.params = {{"wg", wg}};
  d.description =
      fmt::format("{}: one work-group of {} per row, float4 loads, local-memory trees for the mean and the variance",
                  c.plan.rms ? "rmsnorm (no mean)" : "layernorm", wg);
  d.actions = {"opencl.two-pass-reduction", "opencl.reqd-work-group-size", "opencl.vector-load-store-128bit"};
  for (auto& a : fusion_actions(c)) d.actions.push_back(a);
  d.kernels = k;
  Launch l;
  l.kernel = "mb_rows";
  l.global = {c.outer * wg, 1, 1};
  l.local = {wg, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

Design norm_per_item(const Ctx& c, int vec) {
  const auto tensors = gpu::plan_tensors(c.plan);
  const std::string vt = "float" + std::to_string(vec);
  auto horizontal = [&](const std::string& v) {
    std::string h = v + ".s0";
    for (int i = 1; i < vec; ++i) h = "(" + h + " + " + v + ".s" + kLane[i] + ")";
    return h;
  };
  std::string k;
  k += fmt::format("#define R {}\n#define OUTER {}\n#define RV (R / {})\n#define EPS {:.9g}f\n\n", c.r, c.outer, vec,
                   c.eps);
  k += "__kernel void mb_rows(" + kernel_params(tensors) + ") {\n";
  k += fmt::format("  const {0} o = ({0})get_global_id(0);\n", c.idx);
  k += "  if (o >= OUTER) return;\n";
  k += "  __global const float* row = " + c.x + " + o * R;\n";
  if (c.plan.rms) {
    k += "  const float mean = 0.0f;  // RMSNorm: no mean subtracted\n";
  } else {
    k += fmt::format("  {0} sv = ({0})(0.0f);\n", vt);
    k += fmt::format("  for (int v = 0; v < RV; ++v) sv += vload{}(v, row);\n", vec);
    k += "  float sum = " + horizontal("sv") + ";\n";
    k += fmt::format("  for (int r = RV * {}; r < R; ++r) sum += row[r];\n", vec);
    k += "  const float mean = sum / (float)R;\n";
  }
  k += fmt::format("  {0} dv = ({0})(0.0f);\n", vt);
  k += fmt::format(
      "  for (int v = 0; v < RV; ++v) {{\n    const {} q = vload{}(v, row) - mean;\n    dv += q * q;\n  }}\n", vt, vec);
  k += "  float var = " + horizontal("dv") + ";\n";
  k += fmt::format("  for (int r = RV * {}; r < R; ++r) var += (row[r] - mean) * (row[r] - mean);\n", vec);
  k += "  const float rstd = rsqrt(var / (float)R + EPS);\n";
  if (c.r % vec == 0) {
    // The write pass on float{vec} values too, the epilogue's weight and bias loaded as vectors
    // where they run along the row: a scalar pass with an index modulo per element is as costly
    // as the rest of the kernel (benchmarks/results/policy-design-figures.json, opencl-layernorm-vector-write).
    k += "  for (int v = 0; v < RV; ++v) {\n";
    k += vector_write(c, vec, fmt::format("(vload{}(v, row) - mean) * rstd", vec)) + "  }\n";
  } else {
    k += norm_write(c, "0", "1");
  }
  k += "}\n";
  Design d;
  d.family = "opencl.layernorm.row-per-item";
  d.cpu_first = c.outer >= 64;  // as row_per_item's
  d.params = {{"vec", vec}};
  d.description =
      fmt::format("{}: one work-item per row, float{} accumulators for the mean and the variance, no barriers",
                  c.plan.rms ? "rmsnorm (no mean)" : "layernorm", vec);
  d.actions = {"opencl.pocl-cpu-friendly-kernels", "opencl.vector-load-store-128bit", "opencl.thread-coarsening"};
  for (auto& a : fusion_actions(c)) d.actions.push_back(a);
  d.kernels = k;
  Launch l;
  l.kernel = "mb_rows";
  l.global = {c.outer, 1, 1};
  l.args = launch_args(tensors);
  d.launches.push_back(l);
  return d;
}

}  // namespace

std::vector<Design> reduction_designs(const KernelPlan& plan, const Problem& problem) {
  Ctx c{plan,
        problem,
        index_type(plan, problem),
        gpu::buffer_name({false, plan.source}),
        plan.rshape.outer,
        plan.rshape.reduce,
        plan.rshape.inner,
        plan.kind == "reduce",
        plan.kind == "log_softmax",
        plan.eps,
        plan.kind == "row_map"};
  std::vector<Design> v;
  if (plan.kind == "layernorm") {
    if (c.inner != 1) return v;
    for (int wg : {64, 128, 256}) v.push_back(norm_per_group(c, wg));
    // Widest vectors first: fewer loads and instructions per element on a CPU's SIMD units
    // (benchmarks/results/policy-design-figures.json, opencl-layernorm-widest-vectors).
    for (int vec : {16, 8, 4}) v.push_back(norm_per_item(c, vec));
    return v;
  }
  if (c.is_map) {  // inner 1 (plan_supported)
    for (int wg : {32, 64, 128, 256}) v.push_back(row_per_group(c, wg, false));
    for (int vec : {4, 8, 16}) v.push_back(row_per_item(c, vec, RowStats::two_pass));
    return v;
  }
  if (c.inner == 1) {
    for (int wg : {32, 64, 128, 256}) {
      if (c.is_reduce) {
        v.push_back(row_per_group(c, wg, false));
      } else {
        v.push_back(row_per_group(c, wg, false));
        v.push_back(row_per_group(c, wg, true));
      }
    }
    // Softmax stores its exps first (the fewest exps for the same reads of a cached row), the
    // widest vectors first (benchmarks/results/policy-design-figures.json, opencl-softmax-exp-stored).
    if (!c.is_reduce && !c.is_log)
      for (int vec : {16, 8, 4}) v.push_back(row_per_item(c, vec, RowStats::exp_stored));
    for (int vec : {4, 8, 16}) {
      v.push_back(row_per_item(c, vec, RowStats::two_pass));
      if (!c.is_reduce) v.push_back(row_per_item(c, vec, RowStats::online));
    }
  } else {
    for (int wg : {0, 64, 256}) v.push_back(column_per_item(c, wg));
    if (c.is_reduce)
      for (int vw : {16, 8, 4})
        if (c.inner % vw == 0) v.push_back(columns_vec(c, vw));
  }
  return v;
}

}  // namespace mblast::policy::opencl
