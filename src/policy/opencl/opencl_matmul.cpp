// OpenCL matrix products out[b, m, n] = epilogue(sum_k A[b, m, k] * B[b, k, n]).
//
//   tiled       BM x BN output tile per work-group, BK-deep slices of A and B staged in local
//               memory, RM x RN outputs per work-item in registers (strided over the tile so
//               neighbouring work-items read neighbouring local words and write neighbouring
//               output elements), the epilogue applied before the one store.
//   row-vector  no local memory: each work-item keeps RM rows x VEC columns in floatN
//               accumulators and streams B's rows with vloadN (row-major B only; a weight
//               parameter stored [n, k] is transposed once at preparation: packed-row-vector).
//   dot-rows    no local memory, B stored [n, k] (nn.Linear's weight) or a vector [k, 1]: each
//               work-item takes RM rows of A and RN rows of B, both contiguous along k, and
//               keeps RM x RN floatN partial dot products, summed across lanes at the end.
//   clblast     CLBlast's tuned SGEMM on the runner's queue, then an in-place epilogue kernel
//               when there is one.
#include <fmt/format.h>

#include "opencl_gen.h"

namespace mblast::policy::opencl {

namespace {

struct Mm {
  const KernelPlan& plan;
  const Problem& problem;
  std::string idx;
  std::string a, b;  // buffer names
  int64_t batch, m, n, k;
};

std::string epilogue(const Mm& c, const std::string& i, const std::string& acc) {
  return gpu::render_at(c.plan, kOpenCL, i, acc);
}

std::vector<std::string> tail_actions(const Mm& c) {
  std::vector<std::string> a;
  if (gpu::expr_has_ops(c.plan.expr)) a.push_back("opencl.kernel-fusion");
  if (gpu::fits_int32(c.plan, c.problem)) a.push_back("opencl.32bit-index-math");
  return a;
}

// The batch's matrices: "a + bt * (M * K)" when A has one per batch.
std::string batch_bases(const Mm& c) {
  std::string s;
  // The products are written out: M * K in int arithmetic could overflow where bt is a long.
  if (c.plan.a_batched && c.batch > 1)
    s += fmt::format("  __global const float* a = {} + bt * {};\n", c.a, c.m * c.k);
  else
    s += "  __global const float* a = " + c.a + ";\n";
  if (c.plan.b_batched && c.batch > 1)
    s += fmt::format("  __global const float* b = {} + bt * {};\n", c.b, c.k * c.n);
  else
    s += "  __global const float* b = " + c.b + ";\n";
  return s;
}

std::string cond_and(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts)
    if (!p.empty()) s += (s.empty() ? "" : " && ") + p;
  return s;
}

// The one launch of mb_matmul over a (gx, gy, batch) grid of work-items, and the design's
// kernels and tail actions.
void finish(Design& d, const Mm& c, std::string kernels, int64_t gx, int64_t gy,
            std::array<int64_t, 3> local = {0, 0, 0}) {
  for (auto& a : tail_actions(c)) d.actions.push_back(a);
  d.kernels = std::move(kernels);
  Launch l;
  l.kernel = "mb_matmul";
  l.dims = 3;
  l.global = {gx, gy, c.batch};
  l.local = local;
  l.args = launch_args(gpu::plan_tensors(c.plan));
  d.launches.push_back(l);
}

// Register-blocked kernels without local memory: first on a CPU device.
const std::vector<std::string> kCpuRegisterActions = {"opencl.register-blocking", "opencl.vector-load-store-128bit",
                                                      "opencl.pocl-cpu-friendly-kernels"};

struct Tile {
  int bm, bn, bk, rm, rn;
};

Design tiled(const Mm& c, const Tile& t) {
  const int wgx = t.bn / t.rn, wgy = t.bm / t.rm, wg = wgx * wgy;
  const auto tensors = gpu::plan_tensors(c.plan);
  const bool m_even = c.m % t.bm == 0, n_even = c.n % t.bn == 0, k_even = c.k % t.bk == 0;
  std::string s;
  s += fmt::format("#define M {}\n#define N {}\n#define K {}\n", c.m, c.n, c.k);
  s += fmt::format("#define BM {}\n#define BN {}\n#define BK {}\n#define WGX {}\n#define WGY {}\n#define WG {}\n\n",
                   t.bm, t.bn, t.bk, wgx, wgy, wg);
  s += "__kernel __attribute__((reqd_work_group_size(WGX, WGY, 1)))\n";
  s += "void mb_matmul(" + kernel_params(tensors) + ") {\n";
  s += "  __local float As[BK][BM];  // A's slice, k-major: a work-item's rows are one stride apart\n";
  s += "  __local float Bs[BK][BN];\n";
  s += "  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1), tid = ty * WGX + tx;\n";
  s += "  const int n0 = (int)get_group_id(0) * BN, m0 = (int)get_group_id(1) * BM;\n";
  s += fmt::format("  const {0} bt = ({0})get_group_id(2);\n", c.idx);
  s += batch_bases(c);
  for (int i = 0; i < t.rm; ++i) {
    s += "  float";
    for (int j = 0; j < t.rn; ++j) s += fmt::format("{} c{}_{} = 0.0f", j ? "," : "", i, j);
    s += ";\n";
  }
  s += "  for (int k0 = 0; k0 < K; k0 += BK) {\n";
  // A's slice.
  s += "    for (int e = tid; e < BM * BK; e += WG) {\n";
  if (!c.plan.a_transposed)
    s += "      const int mm = e / BK, kk = e % BK;  // consecutive work-items read consecutive k\n";
  else
    s += "      const int kk = e / BM, mm = e % BM;  // A stored [k][m]: consecutive work-items read consecutive m\n";
  s += "      const int gm = m0 + mm, gk = k0 + kk;\n";
  {
    const std::string load = c.plan.a_transposed ? "a[(" + c.idx + ")gk * M + gm]" : "a[(" + c.idx + ")gm * K + gk]";
    const std::string cond = cond_and({m_even ? "" : "gm < M", k_even ? "" : "gk < K"});
    s += "      As[kk][mm] = " + (cond.empty() ? load : "(" + cond + ") ? " + load + " : 0.0f") + ";\n    }\n";
  }
  s += "    for (int e = tid; e < BK * BN; e += WG) {\n";
  if (!c.plan.b_transposed)
    s += "      const int kk = e / BN, nn = e % BN;\n";
  else
    s += "      const int nn = e / BK, kk = e % BK;  // B stored [n][k]\n";
  s += "      const int gn = n0 + nn, gk = k0 + kk;\n";
  {
    const std::string load = c.plan.b_transposed ? "b[(" + c.idx + ")gn * K + gk]" : "b[(" + c.idx + ")gk * N + gn]";
    const std::string cond = cond_and({n_even ? "" : "gn < N", k_even ? "" : "gk < K"});
    s += "      Bs[kk][nn] = " + (cond.empty() ? load : "(" + cond + ") ? " + load + " : 0.0f") + ";\n    }\n";
  }
  s += "    barrier(CLK_LOCAL_MEM_FENCE);\n";
  s += "    for (int kk = 0; kk < BK; ++kk) {\n";
  for (int i = 0; i < t.rm; ++i) s += fmt::format("      const float a{} = As[kk][ty + {}];\n", i, i * wgy);
  for (int j = 0; j < t.rn; ++j) s += fmt::format("      const float b{} = Bs[kk][tx + {}];\n", j, j * wgx);
  for (int i = 0; i < t.rm; ++i)
    for (int j = 0; j < t.rn; ++j) s += fmt::format("      c{0}_{1} += a{0} * b{1};\n", i, j);
  s += "    }\n";
  s += "    barrier(CLK_LOCAL_MEM_FENCE);\n";
  s += "  }\n";
  for (int i = 0; i < t.rm; ++i) {
    s += "  {\n";
    s += fmt::format("    const int gm = m0 + ty + {};\n", i * wgy);
    for (int j = 0; j < t.rn; ++j) {
      const std::string cond =
          cond_and({m_even ? "" : "gm < M", n_even ? "" : fmt::format("n0 + tx + {} < N", j * wgx)});
      s += "    " + (cond.empty() ? std::string() : "if (" + cond + ") ") + "{\n";
      s += fmt::format("      const {} o = (bt * M + gm) * N + n0 + tx + {};\n", c.idx, j * wgx);
      s += "      out[o] = " + epilogue(c, "o", fmt::format("c{}_{}", i, j)) + ";\n    }\n";
    }
    s += "  }\n";
  }
  s += "}\n";

  Design d;
  d.family = "opencl.matmul.tiled";
  d.params = {{"bm", t.bm}, {"bn", t.bn}, {"bk", t.bk}, {"rm", t.rm}, {"rn", t.rn}};
  d.description = fmt::format("{}x{} tile per work-group of {}x{}, BK {} in local memory, {}x{} outputs per work-item",
                              t.bm, t.bn, wgx, wgy, t.bk, t.rm, t.rn);
  d.actions = {"opencl.local-memory-tiling"};
  if (t.rm * t.rn > 1) d.actions.push_back("opencl.register-blocking");
  d.actions.push_back("opencl.reqd-work-group-size");
  finish(d, c, std::move(s), gpu::ceil_div(c.n, t.bn) * wgx, gpu::ceil_div(c.m, t.bm) * wgy, {wgx, wgy, 1});
  return d;
}

// `packed`: B is stored [n, k] (nn.Linear's weight, or an input used as B^T), transposed into
// temporary 0 ([k, n], row-major), which the kernel reads as its B (argument `bpk`): once at
// preparation when B is a parameter, by a kernel before the product on each call when it is an
// input. `poly_erf`: the epilogue's erf (GELU) by poly_erf_source's polynomial.
// `slabs` > 0: work-groups of every row group and N / vec / slabs column vectors, so that each
// work-group streams one slab of B's columns (K x N / slabs) while A stays in its core's cache;
// 0 leaves the work-group to the implementation.
Design row_vector(const Mm& mm, int vec, int rm, bool packed = false, bool poly_erf = false, int slabs = 0) {
  Mm c = mm;
  const bool each_call = packed && !mm.plan.b_is_param;
  if (packed) c.b = "bpk";
  const auto tensors = gpu::plan_tensors(c.plan);
  const std::string vt = "float" + std::to_string(vec);
  std::string s;
  s += fmt::format("#define M {}\n#define N {}\n#define K {}\n#define NV (N / {})\n#define MG (M / {})\n\n", c.m, c.n,
                   c.k, vec, rm);
  // On each call the transpose is timed: 8x8 blocks through registers where they tile B (a work-item
  // per element reads K apart and can cost more than the product: benchmarks/results/policy-design-figures.json,
  // opencl-transpose-blocked).
  const bool blocked = each_call && c.n % 8 == 0 && c.k % 8 == 0;
  if (blocked) {
    s += "// B [N][K] -> bpk [K][N] before the product on each call: an 8x8 block per work-item, eight rows of B\n";
    s += "// loaded as float8 and stored as eight float8 columns\n";
    s += "__kernel void mb_pack_b(__global float* restrict bpk, __global const float* restrict b) {\n";
    s += "  const int nb = (int)get_global_id(0), kb = (int)get_global_id(1);\n";
    s += "  if (nb >= N / 8 || kb >= K / 8) return;\n";
    for (int i = 0; i < 8; ++i)
      s += fmt::format("  const float8 r{0} = vload8(kb, b + ({1})(nb * 8 + {0}) * K);\n", i, c.idx);
    for (int j = 0; j < 8; ++j)
      s += fmt::format(
          "  vstore8((float8)(r0.s{0}, r1.s{0}, r2.s{0}, r3.s{0}, r4.s{0}, r5.s{0}, r6.s{0}, r7.s{0}), nb, bpk + "
          "({1})(kb * 8 + {0}) * N);\n",
          j, c.idx);
    s += "}\n\n";
  } else if (packed) {
    s += std::string("// B [N][K] -> bpk [K][N], ") +
         (each_call ? "before the product on each call" : "once at preparation") +
         ": consecutive work-items write consecutive n\n";
    s += "__kernel void mb_pack_b(__global float* restrict bpk, __global const float* restrict b) {\n";
    s += "  const int n = (int)get_global_id(0), k = (int)get_global_id(1);\n";
    s += fmt::format("  if (n < N && k < K) bpk[({0})k * N + n] = b[({0})n * K + k];\n}}\n\n", c.idx);
  }
  if (poly_erf) s += poly_erf_source(vec) + "\n";
  s += "__kernel void mb_matmul(" + kernel_params(tensors) + (packed ? ", __global const float* restrict bpk" : "") +
       ") {\n";
  s += "  const int nv = (int)get_global_id(0), mg = (int)get_global_id(1);\n";
  s += fmt::format("  const {0} bt = ({0})get_global_id(2);\n", c.idx);
  s += "  if (nv >= NV || mg >= MG) return;\n";
  s += batch_bases(c);
  for (int i = 0; i < rm; ++i) s += fmt::format("  {0} c{1} = ({0})(0.0f);\n", vt, i);
  s += "  for (int k = 0; k < K; ++k) {\n";
  s += fmt::format("    const {} bv = vload{}(nv, b + ({})k * N);\n", vt, vec, c.idx);
  for (int i = 0; i < rm; ++i) {
    const std::string row = fmt::format("(mg * {} + {})", rm, i);
    s += fmt::format(
        "    c{} += {} * bv;\n", i,
        c.plan.a_transposed ? "a[(" + c.idx + ")k * M + " + row + "]" : "a[(" + c.idx + ")" + row + " * K + k]");
  }
  s += "  }\n";
  // The epilogue on the float{vec} accumulators (o is a multiple of vec): its leaves load as
  // vectors and its math runs per component, one vectorised call where a GELU's erf was a
  // scalar call per element on PoCL.
  const LaneLeaves leaves(c.plan, vec, poly_erf ? poly_erf_name(vec) : "");
  for (int i = 0; i < rm; ++i) {
    s += "  {\n";
    s += fmt::format("    const {} o = (bt * M + mg * {} + {}) * N + nv * {};\n", c.idx, rm, i, vec);
    s += leaves.store("o", fmt::format("c{}", i), "    ") + "  }\n";
  }
  s += "}\n";

  Design d;
  d.family = each_call ? "opencl.matmul.transposed-row-vector"
             : packed  ? "opencl.matmul.packed-row-vector"
                       : "opencl.matmul.row-vector";
  // First on a CPU device: the tiled start's local memory and barriers cost a CPU without buying
  // anything, and vector rows are what its SIMD units want (benchmarks/results/policy-design-figures.json,
  // opencl-matmul-row-vector-cpu-first).
  d.cpu_first = true;
  d.params = {{"vec", vec}, {"rm", rm}};
  if (poly_erf) d.params["erf"] = "polynomial";
  if (slabs > 0) d.params["slabs"] = slabs;
  d.description = fmt::format(
      "no local memory: {} row(s) x {} columns per work-item in float{} accumulators, B rows through vload{}{}{}", rm,
      vec, vec, vec,
      each_call ? " (B, a [n, k] input, transposed by a kernel of its own on each call)"
      : packed  ? " (B, a [n, k] weight, transposed once at preparation)"
                : "",
      poly_erf ? ", the epilogue's erf by a polynomial (Abramowitz & Stegun 7.1.26)" : "");
  if (slabs > 0)
    d.description +=
        fmt::format("; {} work-groups, each all {} row groups x one slab of {} columns", slabs, c.m / rm, c.n / slabs);
  d.actions = kCpuRegisterActions;
  if (packed) d.actions.insert(d.actions.begin(), each_call ? "opencl.transpose-operand" : "opencl.prepack-weights");
  if (poly_erf) d.actions.push_back("opencl.polynomial-erf");
  finish(d, c, std::move(s), c.n / vec, c.m / rm,
         slabs > 0 ? std::array<int64_t, 3>{c.n / vec / slabs, c.m / rm, 1} : std::array<int64_t, 3>{0, 0, 0});
  if (packed) {
    d.launches.back().args.push_back("tmp0");
    d.temps.push_back(c.k * c.n);
    Launch pack;
    pack.kernel = "mb_pack_b";
    pack.dims = 2;
    pack.global = blocked ? std::array<int64_t, 3>{c.n / 8, c.k / 8, 1} : std::array<int64_t, 3>{c.n, c.k, 1};
    pack.args = {"tmp0", mm.b};
    if (each_call)
      d.launches.insert(d.launches.begin(), pack);
    else
      d.prepare_launches.push_back(pack);
  }
  return d;
}

Design dot_rows(const Mm& c, int vec, int rm, int rn) {
  const auto tensors = gpu::plan_tensors(c.plan);
  const std::string vt = "float" + std::to_string(vec);
  std::string s;
  // MG x NG work-items; the last ones may cover rows past M or N: they read the last row again
  // (a valid address) and store nothing for it.
  s += fmt::format("#define M {}\n#define N {}\n#define K {}\n#define KV (K / {})\n#define MG {}\n#define NG {}\n\n",
                   c.m, c.n, c.k, vec, gpu::ceil_div(c.m, rm), gpu::ceil_div(c.n, rn));
  s += "__kernel void mb_matmul(" + kernel_params(tensors) + ") {\n";
  s += "  const int ng = (int)get_global_id(0), mg = (int)get_global_id(1);\n";
  s += fmt::format("  const {0} bt = ({0})get_global_id(2);\n", c.idx);
  s += "  if (ng >= NG || mg >= MG) return;\n";
  s += batch_bases(c);
  for (int i = 0; i < rm; ++i)
    s += fmt::format("  __global const float* ar{} = a + ({})min(mg * {} + {}, M - 1) * K;\n", i, c.idx, rm, i);
  for (int j = 0; j < rn; ++j)
    s += fmt::format("  __global const float* br{} = b + ({})min(ng * {} + {}, N - 1) * K;\n", j, c.idx, rn, j);
  for (int i = 0; i < rm; ++i)
    for (int j = 0; j < rn; ++j) s += fmt::format("  {0} c{1}{2} = ({0})(0.0f);\n", vt, i, j);
  s += "  for (int kv = 0; kv < KV; ++kv) {\n";
  for (int i = 0; i < rm; ++i) s += fmt::format("    const {} av{} = vload{}(kv, ar{});\n", vt, i, vec, i);
  for (int j = 0; j < rn; ++j) s += fmt::format("    const {} bv{} = vload{}(kv, br{});\n", vt, j, vec, j);
  for (int i = 0; i < rm; ++i)
    for (int j = 0; j < rn; ++j) s += fmt::format("    c{0}{1} += av{0} * bv{1};\n", i, j);
  s += "  }\n";
  // Each output's dot product: the float{vec} partials added up, then the k tail.
  auto dot = [&](int i, int j, const std::string& var) {
    std::string sum = fmt::format("c{}{}.s0", i, j);
    for (int l = 1; l < vec; ++l) sum = fmt::format("({} + c{}{}.s{})", sum, i, j, kLane[l]);
    return fmt::format("    float {} = {};\n    for (int k = KV * {}; k < K; ++k) {} += ar{}[k] * br{}[k];\n", var, sum,
                       vec, var, i, j);
  };
  // With whole blocks of RN (a vector width) a row, a row's RN outputs start at a multiple of
  // RN: the epilogue on a float{RN} (its math per component, one vectorised call instead of RN
  // scalar ones: seed action opencl.cpu-vector-math).
  const bool vector_epilogue = rn > 1 && c.n % rn == 0;
  for (int i = 0; i < rm; ++i) {
    const std::string row_in = c.m % rm != 0 ? fmt::format("mg * {} + {} < M", rm, i) : "";
    if (vector_epilogue) {
      const LaneLeaves leaves(c.plan, rn);
      s += row_in.empty() ? "  {\n" : "  if (" + row_in + ") {\n";
      std::string lanes;
      for (int j = 0; j < rn; ++j) {
        s += dot(i, j, fmt::format("d{}", j));
        lanes += (j ? ", d" : "d") + std::to_string(j);
      }
      s += fmt::format("    const {} o = (bt * M + mg * {} + {}) * N + ng * {};\n", c.idx, rm, i, rn);
      s += fmt::format("    const float{} acc = (float{})({});\n", rn, rn, lanes);
      s += leaves.store("o", "acc", "    ") + "  }\n";
      continue;
    }
    for (int j = 0; j < rn; ++j) {
      std::string in_range = row_in;
      if (c.n % rn != 0) in_range += fmt::format("{}ng * {} + {} < N", in_range.empty() ? "" : " && ", rn, j);
      s += in_range.empty() ? "  {\n" : "  if (" + in_range + ") {\n";
      s += dot(i, j, "acc");
      s += fmt::format("    const {} o = (bt * M + mg * {} + {}) * N + ng * {} + {};\n", c.idx, rm, i, rn, j);
      s += "    out[o] = " + epilogue(c, "o", "acc") + ";\n  }\n";
    }
  }
  s += "}\n";

  Design d;
  d.family = "opencl.matmul.dot-rows";
  // First on a CPU device, as row-vector is for a row-major B: no local memory or barriers, and
  // every load a contiguous vector.
  d.cpu_first = true;
  d.params = {{"vec", vec}, {"rm", rm}, {"rn", rn}};
  d.description = fmt::format(
      "no local memory, B read along k: {} row(s) of A x {} column(s) of B per work-item, float{} partial dot products",
      rm, rn, vec);
  d.actions = kCpuRegisterActions;
  finish(d, c, std::move(s), gpu::ceil_div(c.n, rn), gpu::ceil_div(c.m, rm));
  return d;
}

Design clblast(const Mm& c) {
  const KernelPlan& p = c.plan;
  ClblastGemm g;
  g.a_trans = p.a_transposed;
  g.b_trans = p.b_transposed;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.lda = p.a_transposed ? c.m : c.k;
  g.ldb = p.b_transposed ? c.k : c.n;
  g.ldc = c.n;
  std::string how = "one SGEMM";
  if (c.batch > 1 && p.a_batched && !p.b_batched && !p.a_transposed) {
    g.m = c.batch * c.m;  // the batches of A stacked: one taller product
    how = "one SGEMM over the stacked batches";
  } else if (c.batch > 1) {
    g.batch = c.batch;
    g.stride_a = p.a_batched ? c.m * c.k : 0;
    g.stride_b = p.b_batched ? c.k * c.n : 0;
    g.stride_c = c.m * c.n;
    how = "a strided-batched SGEMM";
  }
  Design d;
  d.family = "opencl.matmul.clblast";
  d.params = nlohmann::json::object();
  d.description = "CLBlast's tuned SGEMM (" + how + ")" +
                  (p.expr.empty() || p.expr.is_identity_epilogue() ? std::string() : ", then the epilogue in place");
  // No seed action names a vendor library yet; CLBlast's kernel is local-memory tiled and
  // register blocked, which is what these describe.
  d.actions = {"opencl.local-memory-tiling", "opencl.register-blocking"};
  Launch gemm;
  gemm.gemm = g;
  gemm.args = {"out", c.a, c.b};
  d.launches.push_back(gemm);
  add_inplace_epilogue(d, p, c.idx);
  return d;
}

}  // namespace

std::vector<Design> matmul_designs(const KernelPlan& plan, const Problem& problem) {
  Mm c{plan,
       problem,
       index_type(plan, problem),
       gpu::buffer_name({plan.a_is_param, plan.a}),
       gpu::buffer_name({plan.b_is_param, plan.b}),
       plan.batch,
       plan.m,
       plan.n,
       plan.k};
  std::vector<Design> v;
  if (c.batch <= 65535) {
    for (const Tile& t : {Tile{16, 16, 16, 1, 1}, Tile{32, 32, 16, 2, 2}, Tile{32, 32, 8, 4, 4}, Tile{64, 64, 8, 4, 4},
                          Tile{64, 64, 16, 4, 4}, Tile{64, 64, 16, 8, 8}, Tile{128, 128, 8, 8, 8}})
      v.push_back(tiled(c, t));
  }
  // Column slabs (work-groups of every row group) where B is at least as wide as A is tall (B
  // the larger operand to stream) and such a work-group is small enough for any device (1024
  // work-items): each work-group then streams a slab of B once for every row of A. Not for a tall
  // A, where the implementation's work-groups already split the rows
  // (benchmarks/results/policy-design-figures.json, opencl-matmul-column-slabs).
  // A row-vector design with the implementation's work-groups, after its slab variants (float16).
  auto row_vectors = [&](int vec, int rm, bool packed) {
    if (vec == 16 && c.n >= c.m)
      for (int slabs : {2, 4})
        if ((c.n / vec) % slabs == 0 && (c.n / vec / slabs) * (c.m / rm) <= 1024)
          v.push_back(row_vector(c, vec, rm, packed, false, slabs));
    v.push_back(row_vector(c, vec, rm, packed));
  };
  if (!plan.b_transposed)
    // The widest blocks first (they go first on a CPU, whose SIMD units and caches want long
    // vectors and several rows per load of B: benchmarks/results/policy-design-figures.json,
    // opencl-matmul-widest-blocks).
    for (int vec : {16, 8, 4})
      for (int rm : {8, 4, 1})
        if (c.n % vec == 0 && c.m % rm == 0) row_vectors(vec, rm, false);
  // nn.Linear's weight ([n, k], a parameter): transposed once at preparation (untimed), then the
  // row-vector kernels, first on a CPU, where they beat dot-rows over the untransposed weight
  // (benchmarks/results/policy-design-figures.json, opencl-matmul-packed-weight).
  // With a GELU epilogue, the widest of them also with the polynomial erf, first.
  // An input B^T (A @ B.t() of two inputs) the same way, transposed on each call: a
  // read and a write of B against a product that reads it M / rm times.
  if (plan.b_transposed && !plan.b_batched) {
    if (uses_erf(plan.expr) && c.n % 16 == 0 && c.m % 8 == 0) v.push_back(row_vector(c, 16, 8, true, true));
    for (int vec : {16, 8})
      for (int rm : {8, 4})
        if (c.n % vec == 0 && c.m % rm == 0) row_vectors(vec, rm, true);
  }
  // A matrix-vector product's B ([k, 1]) is also a row along k: dot-rows, one column.
  const bool matvec = c.n == 1 && !plan.b_transposed;
  if ((plan.b_transposed || matvec) && !plan.a_transposed && c.batch <= 65535)
    // Most rows per work-item first: each load of a row of B then feeds more rows of A
    // (benchmarks/results/policy-design-figures.json, opencl-matmul-dot-rows-order).
    for (auto [rm, rn] : {std::pair{4, 4}, std::pair{2, 4}, std::pair{1, 4}})
      for (int vec : {8, 16}) v.push_back(dot_rows(c, vec, rm, matvec ? 1 : rn));
  v.push_back(clblast(c));
  return v;
}

}  // namespace mblast::policy::opencl
