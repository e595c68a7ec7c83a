// CUDA matrix products out[b, m, n] = epilogue(sum_k A[b, m, k] * B[b, k, n]).
//
//   tiled   BM x BN output tile per block, BK-deep slices of A and B in shared memory (padded
//           where the fill would conflict on banks), TM x TN outputs per thread in registers,
//           strided over the tile so a warp's shared reads broadcast or are consecutive and its
//           stores coalesce; the epilogue fused before the one store.
//   cublas  cuBLAS SGEMM on the runner's stream (row-major C = A B computed as the column-major
//           C^T = B^T A^T), FP32 by default or TF32 tensor-op math as its own variant (the
//           verifier judges whether the problem's tolerance allows it), then the epilogue in
//           place when there is one.
//   tf32x3  on sm_90a targets, FP32-accurate products on TF32 tensor cores (cuda_tf32x3.cpp).
// A pointwise convolution (1x1 kernel, stride 1, no padding, one group) is the same product per
// image, out[n] (cout x hw) = W (cout x cin) * x[n] (cin x hw), so it gets the cuBLAS designs too
// (family cuda.conv.cublas): cuDNN's legacy algorithms are slower than a plain product there
// (benchmarks/results/policy-design-figures.json, cuda-pointwise-conv-cublas).
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

struct Mm {
  const KernelPlan& plan;
  const Problem& problem;
  std::string idx;
  std::string a, b;
  int64_t batch, m, n, k;
};

std::string epilogue(const Mm& c, const std::string& i, const std::string& acc) {
  return gpu::render_at(c.plan, kCuda, i, acc);
}

std::string cond_and(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts)
    if (!p.empty()) s += (s.empty() ? "" : " && ") + p;
  return s;
}

struct Tile {
  int bm, bn, bk, tm, tn;
};

Design tiled(const Mm& c, const Tile& t) {
  const int tx = t.bn / t.tn, ty = t.bm / t.tm, threads = tx * ty;
  const auto tensors = gpu::plan_tensors(c.plan);
  const bool m_even = c.m % t.bm == 0, n_even = c.n % t.bn == 0, k_even = c.k % t.bk == 0;
  // The fill writes As[kk][mm] with kk fastest when A is row-major (and Bs[kk][nn] with kk
  // fastest when B is stored [n][k]): one padding column keeps those writes off one bank.
  const int pad_a = c.plan.a_transposed ? 0 : 1, pad_b = c.plan.b_transposed ? 1 : 0;
  std::string s;
  s += fmt::format("#define M {}\n#define N {}\n#define K {}\n", c.m, c.n, c.k);
  s += fmt::format(
      "#define BM {}\n#define BN {}\n#define BK {}\n#define TM {}\n#define TN {}\n#define TX {}\n#define TY "
      "{}\n#define THREADS {}\n\n",
      t.bm, t.bn, t.bk, t.tm, t.tn, tx, ty, threads);
  s += "__global__ void __launch_bounds__(THREADS) mb_matmul(" + kernel_params(tensors) + ") {\n";
  s += fmt::format("  __shared__ float As[BK][BM + {}];\n  __shared__ float Bs[BK][BN + {}];\n", pad_a, pad_b);
  s += "  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;\n";
  s += "  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;\n";
  s += fmt::format("  const {0} bt = static_cast<{0}>(blockIdx.z);\n", c.idx);
  if (c.plan.a_batched && c.batch > 1)
    s += fmt::format("  const float* a = {} + bt * {}LL;\n", c.a, c.m * c.k);
  else
    s += "  const float* a = " + c.a + ";\n";
  if (c.plan.b_batched && c.batch > 1)
    s += fmt::format("  const float* b = {} + bt * {}LL;\n", c.b, c.k * c.n);
  else
    s += "  const float* b = " + c.b + ";\n";
  s += "  float acc[TM][TN];\n";
  s += "#pragma unroll\n  for (int i = 0; i < TM; ++i)\n#pragma unroll\n    for (int j = 0; j < TN; ++j) acc[i][j] = "
       "0.0f;\n";
  s += "  for (int k0 = 0; k0 < K; k0 += BK) {\n";
  s += "#pragma unroll\n    for (int e = tid; e < BM * BK; e += THREADS) {\n";
  if (!c.plan.a_transposed)
    s += "      const int mm = e / BK, kk = e % BK;\n";
  else
    s += "      const int kk = e / BM, mm = e % BM;  // A stored [k][m]: consecutive threads read consecutive m\n";
  s += "      const int gm = m0 + mm, gk = k0 + kk;\n";
  {
    const std::string load = c.plan.a_transposed ? "a[static_cast<" + c.idx + ">(gk) * M + gm]"
                                                 : "a[static_cast<" + c.idx + ">(gm) * K + gk]";
    const std::string cond = cond_and({m_even ? "" : "gm < M", k_even ? "" : "gk < K"});
    s += "      As[kk][mm] = " + (cond.empty() ? load : "(" + cond + ") ? " + load + " : 0.0f") + ";\n    }\n";
  }
  s += "#pragma unroll\n    for (int e = tid; e < BK * BN; e += THREADS) {\n";
  if (!c.plan.b_transposed)
    s += "      const int kk = e / BN, nn = e % BN;\n";
  else
    s += "      const int nn = e / BK, kk = e % BK;  // B stored [n][k]\n";
  s += "      const int gn = n0 + nn, gk = k0 + kk;\n";
  {
    const std::string load = c.plan.b_transposed ? "b[static_cast<" + c.idx + ">(gn) * K + gk]"
                                                 : "b[static_cast<" + c.idx + ">(gk) * N + gn]";
    const std::string cond = cond_and({n_even ? "" : "gn < N", k_even ? "" : "gk < K"});
    s += "      Bs[kk][nn] = " + (cond.empty() ? load : "(" + cond + ") ? " + load + " : 0.0f") + ";\n    }\n";
  }
  s += "    __syncthreads();\n";
  s += "#pragma unroll\n    for (int kk = 0; kk < BK; ++kk) {\n";
  s += "      float ra[TM], rb[TN];\n";
  s += "#pragma unroll\n      for (int i = 0; i < TM; ++i) ra[i] = As[kk][ty + i * TY];\n";
  s += "#pragma unroll\n      for (int j = 0; j < TN; ++j) rb[j] = Bs[kk][tx + j * TX];\n";
  s += "#pragma unroll\n      for (int i = 0; i < TM; ++i)\n#pragma unroll\n        for (int j = 0; j < TN; ++j) "
       "acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);\n";
  s += "    }\n    __syncthreads();\n  }\n";
  s += "#pragma unroll\n  for (int i = 0; i < TM; ++i) {\n";
  s += "    const int gm = m0 + ty + i * TY;\n";
  s += "#pragma unroll\n    for (int j = 0; j < TN; ++j) {\n";
  s += "      const int gn = n0 + tx + j * TX;\n";
  const std::string cond = cond_and({m_even ? "" : "gm < M", n_even ? "" : "gn < N"});
  s += "      " + (cond.empty() ? std::string() : "if (" + cond + ") ") + "{\n";
  s += fmt::format("        const {} o = (bt * M + gm) * N + gn;\n", c.idx);
  s += "        out[o] = " + epilogue(c, "o", "acc[i][j]") + ";\n      }\n";
  s += "    }\n  }\n}\n";

  Design d;
  d.family = "cuda.matmul.tiled";
  d.params = {{"bm", t.bm}, {"bn", t.bn}, {"bk", t.bk}, {"tm", t.tm}, {"tn", t.tn}};
  d.description = fmt::format("{}x{} tile per {}-thread block, BK {} in shared memory, {}x{} outputs per thread{}",
                              t.bm, t.bn, threads, t.bk, t.tm, t.tn, has_epilogue(c.plan) ? ", epilogue fused" : "");
  d.actions = {"cuda.shared-memory-tiling", "cuda.register-tiling"};
  if (pad_a || pad_b) d.actions.push_back("cuda.shared-memory-padding");
  if (has_epilogue(c.plan)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.actions.push_back("cuda.loop-unrolling");
  d.device_code = s;
  d.launch_code = fmt::format(
      "  {{\n    const dim3 grid({}, {}, {});\n    mb_matmul<<<grid, {}, 0, stream>>>({});\n"
      "    if (mb_launched(\"mb_matmul\") != 0) return -1;\n  }}\n",
      gpu::ceil_div(c.n, t.bn), gpu::ceil_div(c.m, t.bm), c.batch, threads, call_args(tensors));
  return d;
}

Design cublas(const Mm& c, bool tf32) {
  const KernelPlan& p = c.plan;
  // Column-major view: C^T (n x m, ld n) = op(B) (n x k) * op(A) (k x m).
  const char* op_b = p.b_transposed ? "CUBLAS_OP_T" : "CUBLAS_OP_N";
  const char* op_a = p.a_transposed ? "CUBLAS_OP_T" : "CUBLAS_OP_N";
  const int64_t ldb = p.b_transposed ? c.k : c.n, lda = p.a_transposed ? c.m : c.k;
  int64_t m = c.m;
  bool batched = c.batch > 1;
  std::string how = "one SGEMM";
  if (batched && p.a_batched && !p.b_batched && !p.a_transposed) {
    m = c.batch * c.m;  // the batches of A stacked: one taller product
    batched = false;
    how = "one SGEMM over the stacked batches";
  } else if (batched) {
    how = "a strided-batched SGEMM";
  }
  if (m > 0x7fffffff || c.n > 0x7fffffff || c.k > 0x7fffffff) return {};
  std::string launch;
  launch += "  {\n";
  launch += "    cublasStatus_t st = cublasSetStream(s->handle, stream);\n";
  launch +=
      "    if (st != CUBLAS_STATUS_SUCCESS) return mb_fail(\"cublasSetStream failed with status %d\", "
      "static_cast<int>(st));\n";
  launch += "    const float alpha = 1.0f, beta = 0.0f;  // beta 0: C is not read (it holds poison)\n";
  if (!batched) {
    launch +=
        fmt::format("    st = cublasSgemm(s->handle, {}, {}, {}, {}, {}, &alpha, {}, {}, {}, {}, &beta, out0, {});\n",
                    op_b, op_a, c.n, m, c.k, c.b, ldb, c.a, lda, c.n);
    launch +=
        "    if (st != CUBLAS_STATUS_SUCCESS) return mb_fail(\"cublasSgemm failed with status %d\", "
        "static_cast<int>(st));\n";
  } else {
    launch += fmt::format(
        "    st = cublasSgemmStridedBatched(s->handle, {}, {}, {}, {}, {}, &alpha, {}, {}, {}LL, {}, {}, {}LL, &beta, "
        "out0, {}, {}LL, {});\n",
        op_b, op_a, c.n, m, c.k, c.b, ldb, p.b_batched ? c.k * c.n : 0, c.a, lda, p.a_batched ? c.m * c.k : 0, c.n,
        c.m * c.n, c.batch);
    launch +=
        "    if (st != CUBLAS_STATUS_SUCCESS) return mb_fail(\"cublasSgemmStridedBatched failed with status %d\", "
        "static_cast<int>(st));\n";
  }
  launch += "  }\n";

  Design d;
  d.family = "cuda.matmul.cublas";
  d.params = {{"math", tf32 ? "tf32" : "fp32"}};
  d.cublas = true;
  d.tf32 = tf32;
  d.description = std::string("cuBLAS ") + (tf32 ? "TF32 tensor-op" : "FP32") + " (" + how + ")" +
                  (has_epilogue(p) ? ", then the epilogue in place" : "");
  // No seed action names a vendor library yet; cuBLAS's FP32 SGEMM is shared-memory and
  // register tiled, which is what these describe.
  if (tf32)
    d.actions = {"cuda.tf32-tensor-cores"};
  else
    d.actions = {"cuda.shared-memory-tiling", "cuda.register-tiling"};
  d.launch_code = launch;
  add_inplace_epilogue(d, p, c.idx);
  return d;
}

}  // namespace

std::vector<Design> pointwise_conv_designs(const KernelPlan& plan, const Problem& problem) {
  const ConvShape& cv = plan.conv;
  if (cv.kh != 1 || cv.kw != 1 || cv.sh != 1 || cv.sw != 1 || cv.ph != 0 || cv.pw != 0 || cv.pw_end() != 0 ||
      cv.groups != 1)
    return {};  // (so the output plane is the input's: h x w)
  // The conv as a matmul plan: A the weight (one matrix for every image), B the image.
  KernelPlan mm = plan;
  mm.kind = "matmul";
  mm.a = plan.conv_weight;
  mm.a_is_param = plan.conv_weight_is_param;
  mm.b = plan.source;
  mm.b_is_param = false;
  mm.a_transposed = mm.b_transposed = false;
  mm.a_batched = false;
  mm.b_batched = true;
  mm.batch = cv.n;
  mm.m = cv.cout;
  mm.n = cv.h * cv.w;
  mm.k = cv.cin;
  Mm c{mm,
       problem,
       index_type(mm, problem),
       gpu::buffer_name({mm.a_is_param, mm.a}),
       gpu::buffer_name({false, mm.b}),
       mm.batch,
       mm.m,
       mm.n,
       mm.k};
  std::vector<Design> v;
  for (bool tf32 : {false, true}) {
    Design d = cublas(c, tf32);
    if (d.family.empty()) continue;
    d.family = "cuda.conv.cublas";
    d.description = "pointwise convolution as " + d.description;
    v.push_back(std::move(d));
  }
  return v;
}

std::vector<Design> matmul_designs(const KernelPlan& plan, const Problem& problem, const Arch& arch) {
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
  for (bool tf32 : {false, true}) {
    Design cb = cublas(c, tf32);
    if (!cb.family.empty()) v.push_back(std::move(cb));
  }
  if (arch.wgmma) {
    // First where the split products are expected to beat cuBLAS's SGEMM clearly; after the
    // SGEMM elsewhere, so a short search still measures them.
    std::vector<Design> x3 = tf32x3_matmul_designs(plan, c.idx, c.a, c.b);
    const auto at = tf32x3_leads(plan) ? v.begin() : v.begin() + std::min<size_t>(v.size(), 1);
    v.insert(at, std::make_move_iterator(x3.begin()), std::make_move_iterator(x3.end()));
  }
  if (c.batch <= 65535 && gpu::ceil_div(c.m, 32) <= 65535) {
    for (const Tile& t :
         {Tile{32, 32, 8, 4, 4}, Tile{32, 32, 16, 4, 4}, Tile{64, 64, 8, 4, 4}, Tile{64, 64, 16, 4, 4},
          Tile{64, 64, 8, 8, 8}, Tile{64, 64, 16, 8, 8}, Tile{128, 128, 8, 8, 8}, Tile{128, 128, 16, 8, 8}})
      v.push_back(tiled(c, t));
  }
  return v;
}

}  // namespace mblast::policy::cuda
