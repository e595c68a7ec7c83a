// CUDA reductions, softmax, log_softmax and layernorm over [outer, reduce, inner], the epilogue
// fused.
//
//   row-per-warp    (inner 1) one warp per row, float4 loads, shuffle reductions; softmax keeps
//                   online (max, sum) pairs per lane merged by shuffles, or with `cache` holds
//                   the row in registers so it is read from memory once.
//   row-per-block   (inner 1) one block per row: serial per thread, shuffles per warp, shared
//                   memory across warps (two-level); the same softmax choices.
//   row maps        (row_map, inner 1: x / x.sum(-1, keepdim)) a warp or a block per row as above:
//                   the row's statistic, then every element through the expression, the row
//                   held in registers (read once) or read again.
//   column-split    (inner > 1, reductions, long axes) 32 columns per block, each column's axis
//                   split over 8 or 16 threads, the pieces combined in shared memory.
//   column-per-thread (inner > 1) one thread per (outer, inner) column: neighbouring threads
//                   read neighbouring addresses at every step.
//   Column sums are compensated (Kahan): one thread walks a long stretch of the axis.
//   split-row       (layernorm, few long rows, such as GroupNorm(1, C) over large images) a row
//                   over many blocks: each block's chunk gives its (mean, M2),
//                   then every block combines its row's chunks (Chan et al.'s parallel variance)
//                   and normalises its chunk. A row per block would leave most SMs idle.
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

struct Ctx {
  const KernelPlan& plan;
  const Problem& problem;
  std::string idx;
  std::string x;
  int64_t outer, r, inner;
  bool is_reduce, is_log;
  double eps = 0;       // layernorm
  bool is_map = false;  // row_map: the row's statistic, then the expression over every element
  bool vec4() const { return r % 4 == 0; }
};

const char* kFull = "0xffffffffu";

std::string combine(const std::string& op, const std::string& a, const std::string& b) {
  if (op == "max") return "fmaxf(" + a + ", " + b + ")";
  if (op == "min") return "fminf(" + a + ", " + b + ")";
  return "(" + a + " + " + b + ")";
}

std::string init(const std::string& op) {
  if (op == "max") return "(-INFINITY)";
  if (op == "min") return "INFINITY";
  return "0.0f";
}

// The op a plan reduces with, as the helpers name it.
std::string op_name(const std::string& reduce_op) { return reduce_op == "mean" ? "sum" : reduce_op; }

std::string final_value(const Ctx& c, const std::string& a) {
  return c.plan.reduce_op == "mean" ? fmt::format("({} / {}.0f)", a, c.r) : a;
}
std::string softmax_value(const Ctx& c, const std::string& x) {
  return c.is_log ? "((" + x + " - m) - norm)" : "(expf(" + x + " - m) * norm)";
}
std::string norm_of(const Ctx& c, const std::string& sum) {
  return c.is_log ? "logf(" + sum + ")" : "(1.0f / " + sum + ")";
}
std::string epilogue(const Ctx& c, const std::string& i, const std::string& acc) {
  return gpu::render_at(c.plan, kCuda, i, acc);
}

// __device__ helpers: warp and block reductions for `op` (sum, max, min) and the online
// softmax merges.
std::string helpers(const std::string& op) {
  std::string s;
  s += fmt::format(R"CU(__device__ __forceinline__ float mb_warp_{0}(float v) {{
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = {1};
  return v;
}}

// Two levels: shuffles within each warp, then the first warp over the warps' results (sh: 33 floats).
__device__ __forceinline__ float mb_block_{0}(float v, float* sh, int nw) {{
  v = mb_warp_{0}(v);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {{
    float u = static_cast<int>(threadIdx.x) < nw ? sh[threadIdx.x] : {2};
    u = mb_warp_{0}(u);
    if (threadIdx.x == 0) sh[32] = u;
  }}
  __syncthreads();
  const float r = sh[32];
  __syncthreads();  // sh may be reused by the caller's next reduction
  return r;
}}

)CU",
                   op, combine(op, "v", std::string("__shfl_xor_sync(") + kFull + ", v, o)"), init(op));
  return s;
}

const char* kSoftmaxHelpers =
    R"CU(// Online softmax statistics: the running max m and the sum s of exp(x - m), rescaled when m grows.
__device__ __forceinline__ void mb_online(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + 1.0f;
    m = x;
  } else if (x > -INFINITY) {  // -inf adds nothing (and exp(-inf - -inf) is NaN)
    s += expf(x - m);
  }
}

__device__ __forceinline__ void mb_merge(float& m, float& s, float m2, float s2) {
  const float nm = fmaxf(m, m2);
  if (nm == -INFINITY) return;  // both empty
  s = s * expf(m - nm) + s2 * expf(m2 - nm);
  m = nm;
}

__device__ __forceinline__ void mb_warp_merge(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    mb_merge(m, s, m2, s2);
  }
}

// sh_m, sh_s: 33 floats each.
__device__ __forceinline__ void mb_block_merge(float& m, float& s, float* sh_m, float* sh_s, int nw) {
  mb_warp_merge(m, s);
  if ((threadIdx.x & 31) == 0) {
    sh_m[threadIdx.x >> 5] = m;
    sh_s[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    float mm = static_cast<int>(threadIdx.x) < nw ? sh_m[threadIdx.x] : -INFINITY;
    float ss = static_cast<int>(threadIdx.x) < nw ? sh_s[threadIdx.x] : 0.0f;
    mb_warp_merge(mm, ss);
    if (threadIdx.x == 0) {
      sh_m[32] = mm;
      sh_s[32] = ss;
    }
  }
  __syncthreads();
  m = sh_m[32];
  s = sh_s[32];
  __syncthreads();
}

)CU";

// Statements that store output element `i` (its input element `xv`) to `dst`: softmax's value
// of xv through the epilogue, or a row map's expression (Acc: the row's `stat`; x: xv).
std::string element_store(const Ctx& c, const std::string& in, const std::string& dst, const std::string& i,
                          const std::string& xv) {
  if (c.is_map) return fmt::format("{}{} = {};\n", in, dst, gpu::render_at(c.plan, kCuda, i, "stat", xv));
  return fmt::format("{0}{{\n{0}  const float acc = {1};\n{0}  {2} = {3};\n{0}}}\n", in, softmax_value(c, xv), dst,
                     epilogue(c, i, "acc"));
}

// Statements that write one float4 chunk `q` (row-relative float4 index `v`) of softmax or row
// map output.
std::string write_chunk(const Ctx& c, const std::string& in) {
  const char* comp = "xyzw";
  std::string lanes;
  bool uses_b = false;
  for (int k = 0; k < 4; ++k) {
    const std::string e =
        element_store(c, in, std::string("y.") + comp[k], fmt::format("(b + {})", k), std::string("q.") + comp[k]);
    uses_b |= e.find("(b + ") != std::string::npos;
    lanes += e;
  }
  std::string s;
  if (uses_b) s += fmt::format("{}const {} b = o * R + static_cast<{}>(v) * 4;\n", in, c.idx, c.idx);
  s += in + "float4 y;\n" + lanes;
  s += in + "reinterpret_cast<float4*>(out + o * R)[v] = y;\n";
  return s;
}

std::string write_scalar(const Ctx& c, const std::string& in, const std::string& xv) {
  std::string s;
  s += fmt::format("{}const {} i = o * R + r;\n", in, c.idx);
  s += element_store(c, in, "out[i]", "i", xv);
  return s;
}

// The row designs' actions after the reduction's own: a row map merges the chain's two kernels,
// an online softmax reads the row twice.
std::vector<std::string> tail_actions(const Ctx& c, bool cached) {
  std::vector<std::string> a;
  if (c.is_map) a.push_back("cuda.merge-kernels");
  if (!c.is_reduce && !c.is_map && !cached) a.push_back("cuda.online-softmax");
  if (!c.is_reduce || gpu::expr_has_ops(c.plan.expr)) a.push_back("cuda.fuse-elementwise-epilogue");
  if (c.vec4()) a.push_back("cuda.vectorized-global-access");
  return a;
}

// The end of a row design's description: how softmax or a row map treats the row.
std::string row_note(const Ctx& c, bool cached, const std::string& online) {
  if (c.is_reduce) return "";
  const std::string read = cached     ? ", the row cached in registers (one read)"
                           : c.is_map ? ", the row read again to write it"
                                      : online;
  return c.is_map ? fmt::format(", the row's {} then every element{}", c.plan.reduce_op, read) : read;
}

// `threads` cooperate on one row (32: a warp, else the block); `lane` is the thread's index
// among them. Emits the body after `row`, `o`, `lane` are defined. `cached` holds the row in
// registers (chunks per thread known at compile time).
// `reduce(op, v)` is the call that reduces v over the cooperating threads (every one gets the
// result); `merge` the statement that merges the online (m, sum) pairs likewise.
using Reducer = std::function<std::string(const std::string& op, const std::string& v)>;

// The units a row is read in: float4s when the row is a multiple of 4 long, else floats.
int64_t row_units(const Ctx& c) { return c.vec4() ? c.r / 4 : c.r; }

// The thread's part of the row's `op` (sum, max, min) into `float a`, read from memory.
std::string accumulate(const Ctx& c, int threads, const std::string& op) {
  std::string k = "  float a = " + init(op) + ";\n";
  if (c.vec4()) {
    k += "  const float4* row4 = reinterpret_cast<const float4*>(row);\n";
    k += fmt::format("  for (int v = lane; v < R / 4; v += {}) {{\n", threads);
    k += "    const float4 q = row4[v];\n";
    k += "    a = " + combine(op, "a", combine(op, combine(op, "q.x", "q.y"), combine(op, "q.z", "q.w"))) + ";\n  }\n";
  } else {
    k += fmt::format("  for (int r = lane; r < R; r += {}) a = {};\n", threads, combine(op, "a", "row[r]"));
  }
  return k;
}

// The row read again from memory (row4 declared when vec4), every element written.
std::string write_again(const Ctx& c, int threads) {
  std::string k;
  if (c.vec4()) {
    k += fmt::format("  for (int v = lane; v < R / 4; v += {}) {{\n", threads);
    k += "    const float4 q = row4[v];\n";
    k += write_chunk(c, "    ");
  } else {
    k += fmt::format("  for (int r = lane; r < R; r += {}) {{\n", threads);
    k += write_scalar(c, "    ", "row[r]");
  }
  return k + "  }\n";
}

// The row loaded into `cache` (each thread's chunks; past the row's end `pad`), each chunk
// folded into a statistic by `fold` (statements reading `cache[ch]`).
std::string cache_row(const Ctx& c, int threads, const std::string& pad, const std::string& fold) {
  const bool v4 = c.vec4();
  const int64_t units = row_units(c);
  const bool guard = units % threads != 0;
  std::string k = fmt::format("  {} cache[{}];\n", v4 ? "float4" : "float", gpu::ceil_div(units, threads));
  if (v4) k += "  const float4* row4 = reinterpret_cast<const float4*>(row);\n";
  const std::string load = v4 ? "row4[v]" : "row[v]";
  const std::string padded = v4 ? fmt::format("make_float4({0}, {0}, {0}, {0})", pad) : pad;
  k += "#pragma unroll\n";
  k += fmt::format("  for (int ch = 0; ch < {}; ++ch) {{\n", gpu::ceil_div(units, threads));
  k += fmt::format("    const int v = ch * {} + lane;\n", threads);
  k += fmt::format("    cache[ch] = {};\n",
                   guard ? fmt::format("v < {} ? {} : {}", v4 ? "R / 4" : "R", load, padded) : load);
  return k + fold + "  }\n";
}

// Every element of the cached row written.
std::string write_cached(const Ctx& c, int threads) {
  const bool v4 = c.vec4();
  const int64_t units = row_units(c);
  const bool guard = units % threads != 0;
  std::string k = "#pragma unroll\n";
  k += fmt::format("  for (int ch = 0; ch < {}; ++ch) {{\n", gpu::ceil_div(units, threads));
  k += fmt::format("    const int v = ch * {} + lane;\n", threads);
  std::string in = "    ";
  if (guard) {
    k += fmt::format("    if (v < {}) {{\n", v4 ? "R / 4" : "R");
    in = "      ";
  }
  if (v4) {
    k += in + "const float4 q = cache[ch];\n";
    k += write_chunk(c, in);
  } else {
    k += in + "const int r = v;\n";
    k += write_scalar(c, in, "cache[ch]");
  }
  if (guard) k += "    }\n";
  return k + "  }\n";
}

std::string row_body(const Ctx& c, int threads, bool cached, const Reducer& reduce, const std::string& merge) {
  std::string k;
  const bool v4 = c.vec4();
  if (c.is_reduce) {
    const std::string op = op_name(c.plan.reduce_op);
    k += accumulate(c, threads, op);
    k += "  a = " + reduce(op, "a") + ";\n";
    k += "  if (lane == 0) {\n";
    k += "    const float acc = " + final_value(c, "a") + ";\n";
    k += "    out[o] = " + epilogue(c, "o", "acc") + ";\n  }\n";
    return k;
  }
  if (c.is_map) {  // the row's statistic, then every element through the expression
    const std::string op = op_name(c.plan.reduce_op);
    if (cached) {
      k += "  float a = " + init(op) + ";\n";
      k += cache_row(c, threads, init(op),
                     "    a = " +
                         (v4 ? combine(op, "a",
                                       combine(op, combine(op, "cache[ch].x", "cache[ch].y"),
                                               combine(op, "cache[ch].z", "cache[ch].w")))
                             : combine(op, "a", "cache[ch]")) +
                         ";\n");
    } else {
      k += accumulate(c, threads, op);
    }
    k += "  a = " + reduce(op, "a") + ";\n";
    k += "  const float stat = " + final_value(c, "a") + ";\n";
    return k + (cached ? write_cached(c, threads) : write_again(c, threads));
  }
  if (!cached) {
    k += "  float m = -INFINITY, sum = 0.0f;\n";
    if (v4) {
      k += "  const float4* row4 = reinterpret_cast<const float4*>(row);\n";
      k += fmt::format("  for (int v = lane; v < R / 4; v += {}) {{\n", threads);
      k += "    const float4 q = row4[v];\n";
      k += "    mb_online(m, sum, q.x);\n    mb_online(m, sum, q.y);\n    mb_online(m, sum, q.z);\n    mb_online(m, "
           "sum, q.w);\n  }\n";
    } else {
      k += fmt::format("  for (int r = lane; r < R; r += {}) mb_online(m, sum, row[r]);\n", threads);
    }
    k += "  " + merge + ";\n";
    k += "  const float norm = " + norm_of(c, "sum") + ";\n";
    return k + write_again(c, threads);
  }
  // Cached: the row in registers, max then sum of exp, then the write: one read of memory.
  k += "  float m = -INFINITY;\n";
  k += cache_row(c, threads, "-INFINITY",
                 v4 ? "    m = fmaxf(m, fmaxf(fmaxf(cache[ch].x, cache[ch].y), fmaxf(cache[ch].z, cache[ch].w)));\n"
                    : "    m = fmaxf(m, cache[ch]);\n");
  k += "  m = " + reduce("max", "m") + ";\n";
  k += "  float sum = 0.0f;\n";
  k += "#pragma unroll\n";
  k += fmt::format("  for (int ch = 0; ch < {}; ++ch) {{\n", gpu::ceil_div(row_units(c), threads));
  k += v4 ? "    sum += (expf(cache[ch].x - m) + expf(cache[ch].y - m)) + (expf(cache[ch].z - m) + expf(cache[ch].w - "
            "m));\n"
          : "    sum += expf(cache[ch] - m);\n";
  k += "  }\n";
  k += "  sum = " + reduce("sum", "sum") + ";\n";
  k += "  const float norm = " + norm_of(c, "sum") + ";\n";
  return k + write_cached(c, threads);
}

// Floats a thread would hold to cache the row; caching is offered up to 64.
int64_t cached_floats(const Ctx& c, int threads) { return gpu::ceil_div(row_units(c), threads) * (c.vec4() ? 4 : 1); }

Design row_per_warp(const Ctx& c, int warps, bool cached) {
  const auto tensors = gpu::plan_tensors(c.plan);
  std::string k;
  k += fmt::format("#define R {}\n#define OUTER {}\n#define WPB {}\n\n", c.r, c.outer, warps);
  if (c.is_reduce || c.is_map)
    k += helpers(op_name(c.plan.reduce_op));
  else {
    k += kSoftmaxHelpers;
    if (cached) k += helpers("max") + helpers("sum");
  }
  k += fmt::format("__global__ void __launch_bounds__({}) mb_rows({}) {{\n", warps * 32, kernel_params(tensors));
  k += "  const int lane = threadIdx.x & 31;\n";
  k += fmt::format("  const {0} o = static_cast<{0}>(blockIdx.x) * WPB + (threadIdx.x >> 5);\n", c.idx);
  k += "  if (o >= OUTER) return;  // the whole warp leaves together\n";
  k += "  const float* row = " + c.x + " + o * R;\n";
  k += row_body(
      c, 32, cached, [](const std::string& op, const std::string& v) { return "mb_warp_" + op + "(" + v + ")"; },
      "mb_warp_merge(m, sum)");
  k += "}\n";

  Design d;
  d.family = c.is_map ? "cuda.row-map.row-per-warp" : "cuda.reduce.row-per-warp";
  d.params = {{"warps_per_block", warps}};
  if (!c.is_reduce) d.params["cache"] = cached;
  d.description = fmt::format("one warp per row ({} rows per block), shuffle reductions{}", warps,
                              row_note(c, cached, ", online (max, sum) per lane"));
  d.actions = {"cuda.row-per-warp", "cuda.warp-shuffle-reduction"};
  for (auto& a : tail_actions(c, cached)) d.actions.push_back(a);
  d.device_code = k;
  d.launch_code =
      fmt::format("  mb_rows<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_rows\") != 0) return -1;\n",
                  gpu::ceil_div(c.outer, warps), warps * 32, call_args(tensors));
  return d;
}

Design row_per_block(const Ctx& c, int block, bool cached) {
  const auto tensors = gpu::plan_tensors(c.plan);
  std::string k;
  k += fmt::format("#define R {}\n#define BLOCK {}\n\n", c.r, block);
  if (c.is_reduce || c.is_map)
    k += helpers(op_name(c.plan.reduce_op));
  else {
    k += kSoftmaxHelpers;
    if (cached) k += helpers("max") + helpers("sum");
  }
  k += fmt::format("__global__ void __launch_bounds__(BLOCK) mb_rows({}) {{\n", kernel_params(tensors));
  if (c.is_reduce || c.is_map || cached)
    k += "  __shared__ float sh[33];\n";
  else
    k += "  __shared__ float sh_m[33], sh_s[33];\n";
  k += "  const int lane = threadIdx.x;\n";
  k += fmt::format("  const {0} o = static_cast<{0}>(blockIdx.x);\n", c.idx);
  k += "  const float* row = " + c.x + " + o * R;\n";
  k += row_body(
      c, block, cached,
      [](const std::string& op, const std::string& v) { return "mb_block_" + op + "(" + v + ", sh, BLOCK / 32)"; },
      "mb_block_merge(m, sum, sh_m, sh_s, BLOCK / 32)");
  k += "}\n";

  Design d;
  d.family = c.is_map ? "cuda.row-map.row-per-block" : "cuda.reduce.row-per-block";
  d.params = {{"block", block}};
  if (!c.is_reduce) d.params["cache"] = cached;
  d.description = fmt::format("one {}-thread block per row, shuffles then shared memory across warps{}", block,
                              row_note(c, cached, ", online (max, sum) pairs"));
  d.actions = {"cuda.two-level-block-reduction", "cuda.warp-shuffle-reduction", "cuda.block-size-tuning"};
  for (auto& a : tail_actions(c, cached)) d.actions.push_back(a);
  d.device_code = k;
  d.launch_code =
      fmt::format("  mb_rows<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_rows\") != 0) return -1;\n", c.outer,
                  block, call_args(tensors));
  return d;
}

// The loop over the reduced axis that one thread of a column design runs: `r` from `first` in
// steps of `step`, into `a`. Sums are compensated (Kahan): a thread walks R / step elements,
// and a plain running sum over thousands of them drifts from PyTorch's pairwise sum by more
// than a float64-calibrated tolerance allows (benchmarks/results/policy-design-figures.json,
// cuda-column-sum-compensated). nvcc keeps the compensation: without --use_fast_math it does
// not reassociate, and contraction only fuses a multiply into an add.
std::string column_loop(const Ctx& c, const std::string& op, const std::string& first, const std::string& step) {
  std::string k = "  float a = " + init(op) + ";\n";
  // Unrolled so that several loads are in flight while the adds wait for them.
  const std::string head = fmt::format("#pragma unroll 4\n  for ({} r = {}; r < R; r += {})", c.idx, first, step);
  if (op != "sum") return k + head + " a = " + combine(op, "a", "col[r * INNER]") + ";\n";
  k += "  float lost = 0.0f;  // what the running sum's last rounding dropped\n";
  k += head + " {\n    const float y = col[r * INNER] - lost, t = a + y;\n    lost = (t - a) - y;\n    a = t;\n  }\n";
  return k;
}

Design column_per_thread(const Ctx& c, int block) {
  const auto tensors = gpu::plan_tensors(c.plan);
  std::string k;
  k += fmt::format("#define R {}\n#define INNER {}\n#define COLUMNS {}\n\n", c.r, c.inner, c.outer * c.inner);
  if (!c.is_reduce) k += kSoftmaxHelpers;
  k += fmt::format("__global__ void __launch_bounds__({}) mb_columns({}) {{\n", block, kernel_params(tensors));
  k += fmt::format("  const {0} g = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x;\n", c.idx, block);
  k += "  if (g >= COLUMNS) return;\n";
  k += fmt::format("  const {} o = g / INNER, i = g - o * INNER;\n", c.idx);
  k += "  const float* col = " + c.x + " + o * R * INNER + i;\n";
  if (c.is_reduce) {
    k += column_loop(c, op_name(c.plan.reduce_op), "0", "1");
    k += "  const float acc = " + final_value(c, "a") + ";\n";
    k += "  out[g] = " + epilogue(c, "g", "acc") + ";\n";
  } else {
    k += "  float m = -INFINITY, sum = 0.0f;\n";
    k += fmt::format("  for ({} r = 0; r < R; ++r) mb_online(m, sum, col[r * INNER]);\n", c.idx);
    k += "  const float norm = " + norm_of(c, "sum") + ";\n";
    k += fmt::format("  for ({} r = 0; r < R; ++r) {{\n", c.idx);
    k += fmt::format("    const {} j = (o * R + r) * INNER + i;\n", c.idx);
    k += "    const float acc = " + softmax_value(c, "col[r * INNER]") + ";\n";
    k += "    out[j] = " + epilogue(c, "j", "acc") + ";\n  }\n";
  }
  k += "}\n";

  Design d;
  d.family = "cuda.reduce.column-per-thread";
  d.params = {{"block", block}};
  d.description =
      fmt::format("one thread per (outer, inner) column, coalesced across threads, {}-thread blocks", block);
  d.actions = {"cuda.coalesced-global-access"};
  if (!c.is_reduce) d.actions.push_back("cuda.online-softmax");
  if (!c.is_reduce || gpu::expr_has_ops(c.plan.expr)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.device_code = k;
  d.launch_code =
      fmt::format("  mb_columns<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_columns\") != 0) return -1;\n",
                  gpu::ceil_div(c.outer * c.inner, block), block, call_args(tensors));
  return d;
}

// Reductions only: a block of 32 neighbouring columns x `slices` threads, thread (x, y) reducing
// rows y, y + slices, ... of column x; the slices' results meet in shared memory. One thread per
// column leaves a GPU short of loads in flight where the columns are few (tens of thousands of
// threads against the hundreds of thousands a large GPU keeps in flight) and the axis long.
Design column_split(const Ctx& c, int slices) {
  const auto tensors = gpu::plan_tensors(c.plan);
  const std::string op = op_name(c.plan.reduce_op);
  std::string k;
  k += fmt::format("#define R {}\n#define INNER {}\n#define COLUMNS {}\n#define SLICES {}\n\n", c.r, c.inner,
                   c.outer * c.inner, slices);
  k += fmt::format("__global__ void __launch_bounds__({}) mb_columns({}) {{\n", 32 * slices, kernel_params(tensors));
  k += "  __shared__ float part[SLICES][33];\n";
  k += fmt::format("  const {0} g = static_cast<{0}>(blockIdx.x) * 32 + threadIdx.x;\n", c.idx);
  k += fmt::format(
      "  const {} gc = g < COLUMNS ? g : COLUMNS - 1;  // past the end: a real column, its result unused\n", c.idx);
  k += fmt::format("  const {} o = gc / INNER, i = gc - o * INNER;\n", c.idx);
  k += "  const float* col = " + c.x + " + o * R * INNER + i;\n";
  k += column_loop(c, op, "threadIdx.y", "SLICES");
  k += "  part[threadIdx.y][threadIdx.x] = a;\n  __syncthreads();\n";
  k += "  if (threadIdx.y != 0 || g >= COLUMNS) return;\n";
  k += "  float s = part[0][threadIdx.x];\n";
  k += "  for (int j = 1; j < SLICES; ++j) s = " + combine(op, "s", "part[j][threadIdx.x]") + ";\n";
  k += "  const float acc = " + final_value(c, "s") + ";\n";
  k += "  out[g] = " + epilogue(c, "g", "acc") + ";\n}\n";

  Design d;
  d.family = "cuda.reduce.column-split";
  d.params = {{"slices", slices}};
  d.description =
      fmt::format("32 columns per block, each column's axis split over {} threads, shared memory to combine", slices);
  d.actions = {"cuda.coalesced-global-access", "cuda.two-level-block-reduction", "cuda.block-size-tuning"};
  if (gpu::expr_has_ops(c.plan.expr)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.device_code = k;
  d.launch_code = fmt::format(
      "  mb_columns<<<{}, dim3(32, {}), 0, stream>>>({});\n  if (mb_launched(\"mb_columns\") != 0) return -1;\n",
      gpu::ceil_div(c.outer * c.inner, 32), slices, call_args(tensors));
  return d;
}

// LayerNorm (inner 1): `threads` per row sum x, then (x - mean)^2 from a second read (safe
// against cancellation), then write (x - mean) * rstd through the epilogue.
Design layernorm_rows(const Ctx& c, int threads_per_row, int rows_per_block) {
  const auto tensors = gpu::plan_tensors(c.plan);
  const bool warp = threads_per_row == 32;
  const int block = threads_per_row * rows_per_block;
  std::string k;
  k += fmt::format("#define R {}\n#define OUTER {}\n#define EPS {:.9g}f\n\n", c.r, c.outer, c.eps);
  k += helpers("sum");
  k += fmt::format("__global__ void __launch_bounds__({}) mb_rows({}) {{\n", block, kernel_params(tensors));
  if (warp) {
    k += "  const int lane = threadIdx.x & 31;\n";
    k += fmt::format("  const {0} o = static_cast<{0}>(blockIdx.x) * {1} + (threadIdx.x >> 5);\n", c.idx,
                     rows_per_block);
    k += "  if (o >= OUTER) return;  // the whole warp leaves together\n";
  } else {
    k += "  __shared__ float sh[33];\n  const int lane = threadIdx.x;\n";
    k += fmt::format("  const {0} o = static_cast<{0}>(blockIdx.x);\n", c.idx);
  }
  auto sum = [&](const std::string& v) {
    return warp ? "mb_warp_sum(" + v + ")" : fmt::format("mb_block_sum({}, sh, {})", v, block / 32);
  };
  k += "  const float* row = " + c.x + " + o * R;\n";
  if (c.plan.rms) {
    k += "  const float mean = 0.0f;  // RMSNorm: no mean subtracted\n";
  } else {
    k += fmt::format("  float s = 0.0f;\n  for (int r = lane; r < R; r += {}) s += row[r];\n", threads_per_row);
    k += "  const float mean = " + sum("s") + " / static_cast<float>(R);\n";
  }
  k += fmt::format(
      "  float d = 0.0f;\n  for (int r = lane; r < R; r += {}) {{\n    const float t = row[r] - mean;\n    d += t * "
      "t;\n  }}\n",
      threads_per_row);
  k += "  const float rstd = rsqrtf(" + sum("d") + " / static_cast<float>(R) + EPS);\n";
  k += fmt::format("  for (int r = lane; r < R; r += {}) {{\n", threads_per_row);
  k += fmt::format("    const {} i = o * R + r;\n", c.idx);
  k += "    const float acc = (row[r] - mean) * rstd;\n";
  k += "    out[i] = " + epilogue(c, "i", "acc") + ";\n  }\n}\n";

  Design d;
  d.family = warp ? "cuda.layernorm.row-per-warp" : "cuda.layernorm.row-per-block";
  d.params = warp ? nlohmann::json{{"warps_per_block", rows_per_block}} : nlohmann::json{{"block", block}};
  d.description = fmt::format("{}: {} per row, {} for the mean and then the variance",
                              c.plan.rms ? "rmsnorm (no mean)" : "layernorm",
                              warp ? "one warp" : fmt::format("one {}-thread block", block),
                              warp ? "shuffle reductions" : "shuffles then shared memory");
  d.actions = warp ? std::vector<std::string>{"cuda.row-per-warp", "cuda.warp-shuffle-reduction",
                                              "cuda.fuse-elementwise-epilogue"}
                   : std::vector<std::string>{"cuda.two-level-block-reduction", "cuda.warp-shuffle-reduction",
                                              "cuda.block-size-tuning", "cuda.fuse-elementwise-epilogue"};
  d.device_code = k;
  d.launch_code =
      fmt::format("  mb_rows<<<{}, {}, 0, stream>>>({});\n  if (mb_launched(\"mb_rows\") != 0) return -1;\n",
                  warp ? gpu::ceil_div(c.outer, rows_per_block) : c.outer, block, call_args(tensors));
  return d;
}

// LayerNorm split across blocks along each row (inner 1): mb_ln_part gives each CHUNK-long
// piece of a row its mean and sum of squared deviations (the piece is read twice, the second
// time from L2), mb_ln_apply combines a row's pieces into its mean and variance and writes its
// own piece through the epilogue. Three reads and one write of the data in all, over
// chunks x rows blocks. The pieces' (mean, M2) pairs live in a buffer made in mblast_prepare.
Design layernorm_split(const Ctx& c, int block, int64_t chunk) {
  const auto tensors = gpu::plan_tensors(c.plan);
  const int64_t chunks = gpu::ceil_div(c.r, chunk);
  const int warps = block / 32;
  std::string k;
  k += fmt::format("#define R {}\n#define CHUNK {}\n#define CHUNKS {}\n#define EPS {:.9g}f\n\n", c.r, chunk, chunks,
                   c.eps);
  k += helpers("sum");
  // the length of piece j of a row
  k += fmt::format(
      "__device__ __forceinline__ float mb_piece_n(int j) {{ return static_cast<float>(j + 1 < CHUNKS ? CHUNK : R - "
      "static_cast<{}>(j) * CHUNK); }}\n\n",
      c.idx);
  k += fmt::format(
      "__global__ void __launch_bounds__({}) mb_ln_part(const float* __restrict__ x, float* __restrict__ part) {{\n",
      block);
  k += "  __shared__ float sh[33];\n";
  k += fmt::format("  const int j = blockIdx.x;\n  const {0} o = static_cast<{0}>(blockIdx.y);\n", c.idx);
  k += fmt::format("  const float* row = x + o * R;\n  const {0} begin = static_cast<{0}>(j) * CHUNK;\n", c.idx);
  k += fmt::format("  const {0} end = begin + CHUNK < R ? begin + CHUNK : R;\n", c.idx);
  if (c.plan.rms) {  // the pieces' means are 0, and so is the row's that mb_ln_apply combines
    k += "  const float mean = 0.0f;  // RMSNorm: no mean subtracted\n";
  } else {
    k += fmt::format("  float s = 0.0f;\n  for ({} r = begin + threadIdx.x; r < end; r += {}) s += row[r];\n", c.idx,
                     block);
    k += fmt::format("  const float mean = mb_block_sum(s, sh, {}) / mb_piece_n(j);\n", warps);
  }
  k += fmt::format("  float d = 0.0f;\n  for ({} r = begin + threadIdx.x; r < end; r += {}) {{\n", c.idx, block);
  k += "    const float t = row[r] - mean;\n    d += t * t;\n  }\n";
  k += fmt::format("  const float m2 = mb_block_sum(d, sh, {});\n", warps);
  k += "  if (threadIdx.x == 0) {\n    part[(o * CHUNKS + j) * 2] = mean;\n    part[(o * CHUNKS + j) * 2 + 1] = m2;\n  "
       "}\n}\n\n";
  k += fmt::format("__global__ void __launch_bounds__({}) mb_ln_apply({}, const float* __restrict__ part) {{\n", block,
                   kernel_params(tensors));
  k += "  __shared__ float sh[33];\n";
  k += fmt::format("  const int j = blockIdx.x;\n  const {0} o = static_cast<{0}>(blockIdx.y);\n", c.idx);
  k += "  const float* pr = part + o * CHUNKS * 2;\n";
  k += fmt::format(
      "  float ws = 0.0f;\n  for (int q = threadIdx.x; q < CHUNKS; q += {}) ws += mb_piece_n(q) * pr[2 * q];\n", block);
  k += fmt::format("  const float mean = mb_block_sum(ws, sh, {}) / static_cast<float>(R);\n", warps);
  k += fmt::format("  float m2 = 0.0f;\n  for (int q = threadIdx.x; q < CHUNKS; q += {}) {{\n", block);
  k += "    const float dm = pr[2 * q] - mean;\n    m2 += pr[2 * q + 1] + mb_piece_n(q) * dm * dm;\n  }\n";
  k += fmt::format("  const float rstd = rsqrtf(mb_block_sum(m2, sh, {}) / static_cast<float>(R) + EPS);\n", warps);
  k += fmt::format("  const float* row = {} + o * R;\n  const {} begin = static_cast<{}>(j) * CHUNK;\n", c.x, c.idx,
                   c.idx);
  k += fmt::format("  const {0} end = begin + CHUNK < R ? begin + CHUNK : R;\n", c.idx);
  k += fmt::format("  for ({} r = begin + threadIdx.x; r < end; r += {}) {{\n", c.idx, block);
  k += fmt::format("    const {} i = o * R + r;\n", c.idx);
  k += "    const float acc = (row[r] - mean) * rstd;\n";
  k += "    out[i] = " + epilogue(c, "i", "acc") + ";\n  }\n}\n";

  Design d;
  d.family = "cuda.layernorm.split-row";
  d.params = {{"block", block}, {"chunk", chunk}};
  d.description =
      fmt::format("{}: each row in {}-element pieces over {}-thread blocks, the pieces' (mean, M2) combined",
                  c.plan.rms ? "rmsnorm (no mean)" : "layernorm", chunk, block);
  d.actions = {"cuda.two-level-block-reduction", "cuda.warp-shuffle-reduction", "cuda.block-size-tuning",
               "cuda.fuse-elementwise-epilogue"};
  d.state_fields = "  float* part = nullptr;  // each row piece's (mean, M2)\n";
  d.init_code = fmt::format(
      "  if (cudaMalloc(&s->part, {}ULL * sizeof(float)) != cudaSuccess) {{\n    s->part = nullptr;\n"
      "    return mb_free(s), mb_fail(\"cudaMalloc of the layernorm's row pieces ({} floats) failed\");\n  }}\n",
      c.outer * chunks * 2, c.outer * chunks * 2);
  d.free_code = "  if (s->part) cudaFree(s->part);\n";
  d.device_code = k;
  d.launch_code = fmt::format(
      "  {{\n    const dim3 grid({}, {});\n    mb_ln_part<<<grid, {}, 0, stream>>>({}, s->part);\n"
      "    if (mb_launched(\"mb_ln_part\") != 0) return -1;\n    mb_ln_apply<<<grid, {}, 0, stream>>>({}, s->part);\n"
      "    if (mb_launched(\"mb_ln_apply\") != 0) return -1;\n  }}\n",
      chunks, c.outer, block, c.x, block, call_args(tensors));
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
    // Few rows, each long enough for many blocks: split them (grid.y holds the rows), and first:
    // a long chain tries few of a cheap stage's designs (gpu::chain_combinations), and a warp or
    // a block per row leaves most of the GPU idle here.
    if (c.outer <= 1024 && c.r >= 32768)
      for (auto [block, chunk] : {std::pair<int, int64_t>{256, 8192}, {512, 32768}})
        v.push_back(layernorm_split(c, block, chunk));
    // Long rows: a block per row first (a warp cannot keep enough loads in flight for such a row;
    // seed action cuda.block-per-long-row has the figures); short rows: warps.
    const bool long_rows = c.r >= 4096;
    if (long_rows)
      for (int block : {512, 256, 128}) v.push_back(layernorm_rows(c, block, 1));
    for (int warps : {4, 8}) v.push_back(layernorm_rows(c, 32, warps));
    if (!long_rows)
      for (int block : {128, 256, 512}) v.push_back(layernorm_rows(c, block, 1));
    return v;
  }
  if (c.inner > 1) {
    // Long axes first split over a block's threads (more threads in flight, shorter sums).
    if (c.is_reduce && c.r >= 64)
      for (int slices : {8, 16}) v.push_back(column_split(c, slices));
    for (int block : {128, 256}) v.push_back(column_per_thread(c, block));
    return v;
  }
  // Softmax: the designs that hold the row in registers (one read) before the online ones (two
  // reads): softmax over long rows is memory-bound, so reading the row once wins. Over long rows
  // blocks before warps, the largest first, for the loads in flight (seed action
  // cuda.block-per-long-row; benchmarks/results/policy-design-figures.json, cuda-softmax-long-rows).
  const bool long_rows = !c.is_reduce && c.r >= 4096;
  auto warp_designs = [&](bool cached) {
    for (int warps : {4, 8})
      if (!cached || cached_floats(c, 32) <= 64) v.push_back(row_per_warp(c, warps, cached));
  };
  auto block_designs = [&](bool cached) {
    for (int block : long_rows ? std::vector<int>{1024, 512, 256, 128} : std::vector<int>{128, 256, 512, 1024})
      if (!cached || cached_floats(c, block) <= 64) v.push_back(row_per_block(c, block, cached));
  };
  for (bool cached : c.is_reduce ? std::vector<bool>{false} : std::vector<bool>{true, false}) {
    if (long_rows)
      block_designs(cached), warp_designs(cached);
    else
      warp_designs(cached), block_designs(cached);
  }
  return v;
}

}  // namespace mblast::policy::cuda
