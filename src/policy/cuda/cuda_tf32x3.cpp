// CUDA matrix products in FP32 accuracy on Hopper's TF32 tensor cores (sm_90a's wgmma):
// each operand is split into two TF32 numbers, x = big + small (big = x rounded to TF32, small =
// the rest rounded to TF32), and A B = Ab Bb + Ab Bs + As Bb; the dropped As Bs is about 2^-22 of
// each product. The tensor cores' own running sums are short, so each 32-deep slice of K sums
// into fresh accumulators that are then added to FP32 registers: the result is then closer to
// the float64 product than cuBLAS's FP32 SGEMM, and faster (tools/probe/gemm3xtf32.cu measures
// both; benchmarks/results/policy-design-figures.json, cuda-tf32x3-accuracy-rate).
//
// Per product: two split kernels write Ab, As ([batch][m][k]) and Bb, Bs ([batch][n][k]) to
// buffers made in mblast_prepare (transposing A stored [k][m] or B stored [k][n] on the way),
// then one kernel: 128 x BN output tile per 256-thread block (two warpgroups of 64 rows), K in
// slices of 32 copied with cp.async into shared memory in wgmma's 128-byte swizzled K-major
// layout (STAGES slices in flight), 12 wgmma per slice (three products x four k8 steps), the
// plan's epilogue applied before the one store.
#include <fmt/format.h>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

constexpr int kBm = 128, kBk = 32, kThreads = 256;

// The m64nBNk8 TF32 wgmma on BN/2 accumulator registers per thread; `accumulate` 0 overwrites them.
std::string wgmma_wrapper(int bn) {
  const int regs = bn / 2;
  std::string list, outs;
  for (int i = 0; i < regs; ++i) {
    list += fmt::format("{}%{}", i ? ", " : "", i);
    outs += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
  }
  std::string s;
  s += "__device__ __forceinline__ void mb_wgmma(float* d, unsigned long long da, unsigned long long db, int "
       "accumulate) {\n";
  s += fmt::format("  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"\n", regs + 2);
  s += fmt::format(
      "               \"wgmma.mma_async.sync.aligned.m64n{}k8.f32.tf32.tf32 {{{}}}, %{}, %{}, p, 1, 1;\\n}}\\n\"\n", bn,
      list, regs, regs + 1);
  s += "               : " + outs + "\n";
  s += "               : \"l\"(da), \"l\"(db), \"r\"(accumulate));\n}\n\n";
  return s;
}

// Helpers shared by the kernels of one design: TF32 rounding, the shared-memory descriptor, the
// asynchronous copy and wgmma's ordering instructions.
const char* kHelpers = R"CU(__device__ __forceinline__ float mb_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// A K-major operand tile in shared memory: rows of 128 bytes (32 TF32), 16-byte chunks swizzled
// by the row's index mod 8, 8-row groups 1024 bytes apart; the tile starts 1024-byte aligned.
__device__ __forceinline__ unsigned long long mb_desc(unsigned saddr) {
  unsigned long long d = (saddr & 0x3FFFFu) >> 4;
  d |= 1ull << 16;                 // leading byte offset: unused by swizzled K-major layouts
  d |= (1024ull >> 4) << 32;       // stride byte offset: one 8-row group
  d |= 1ull << 62;                 // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void mb_cp16(unsigned dst, const float* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

template <int N>
__device__ __forceinline__ void mb_regs_ready(float* r) {  // orders reads of r after wgmma.wait_group
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Row-major [rows][cols] (each of `mats` matrices) to big and small halves in the same layout.
__global__ void __launch_bounds__(256) mb_split(const float* __restrict__ x, float* __restrict__ big, float* __restrict__ small,
                                                long long n) {
  for (long long i = static_cast<long long>(blockIdx.x) * 256 + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * 256) {
    const float v = x[i], b = mb_tf32(v);
    big[i] = b;
    small[i] = mb_tf32(v - b);
  }
}

// [mats][rows][cols] to big and small halves stored [mats][cols][rows], through a 32 x 33 tile.
__global__ void __launch_bounds__(256) mb_split_t(const float* __restrict__ x, float* __restrict__ big, float* __restrict__ small,
                                                  int rows, int cols) {
  __shared__ float t[32][33];
  const long long mat = static_cast<long long>(blockIdx.z) * rows * cols;
  const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int gr = r0 + r, gc = c0 + threadIdx.x;
    t[r][threadIdx.x] = (gr < rows && gc < cols) ? x[mat + static_cast<long long>(gr) * cols + gc] : 0.0f;
  }
  __syncthreads();
  for (int c = threadIdx.y; c < 32; c += 8) {
    const int gc = c0 + c, gr = r0 + threadIdx.x;
    if (gc < cols && gr < rows) {
      const float v = t[threadIdx.x][c], b = mb_tf32(v);
      const long long o = mat + static_cast<long long>(gc) * rows + gr;
      big[o] = b;
      small[o] = mb_tf32(v - b);
    }
  }
}

)CU";

struct Shape {
  int64_t batch, m, n, k;
  bool a_batched, b_batched;
};

// Replaces each "@NAME@" in `text`.
std::string fill(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [name, value] : values) text = gpu::replace_all(std::move(text), "@" + name + "@", value);
  return text;
}

// The product kernel, reading the split operands; the plan's epilogue maps (o, v) to the stored value.
std::string product_kernel(const KernelPlan& plan, const Shape& sh, const std::string& idx, int bn, int stages) {
  const auto tensors = gpu::plan_tensors(plan);
  std::string k =
      R"CU(__global__ void __launch_bounds__(256, 1) mb_tf32x3(@PARAMS@, const float* __restrict__ ab, const float* __restrict__ as,
                                                    const float* __restrict__ bb, const float* __restrict__ bs) {
  constexpr int M = @M@, N = @N@, K = @K@, BN = @BN@, STAGES = @STAGES@;
  constexpr int A_BYTES = 128 * 32 * 4, B_BYTES = BN * 32 * 4, STAGE_BYTES = 2 * A_BYTES + 2 * B_BYTES, KT = (K + 31) / 32;
  extern __shared__ unsigned char mb_smem[];
  const unsigned base = (static_cast<unsigned>(__cvta_generic_to_shared(mb_smem)) + 1023u) & ~1023u;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int m0 = blockIdx.y * 128, n0 = blockIdx.x * BN;
  const long long bt = blockIdx.z;
  ab += @A_STRIDE@ * bt;
  as += @A_STRIDE@ * bt;
  bb += @B_STRIDE@ * bt;
  bs += @B_STRIDE@ * bt;
  // Slice kt of A's and B's halves into stage kt % STAGES: rows past M or N and columns past K
  // are filled with zeros (K is a multiple of 4, so a 16-byte chunk is all in or all out).
  auto load = [&](int kt) {
    if (kt < KT) {
      const unsigned st = base + (kt % STAGES) * STAGE_BYTES;
      const int k0 = kt * 32;
#pragma unroll
      for (int i = tid; i < 128 * 8; i += 256) {
        const int r = i >> 3, c = i & 7, gm = m0 + r, gk = k0 + c * 4;
        const bool in = gm < M && gk < K;
        const long long off = in ? static_cast<long long>(gm) * K + gk : 0;
        const unsigned so = r * 128 + ((c ^ (r & 7)) << 4);
        mb_cp16(st + so, ab + off, in ? 16 : 0);
        mb_cp16(st + A_BYTES + so, as + off, in ? 16 : 0);
      }
#pragma unroll
      for (int i = tid; i < BN * 8; i += 256) {
        const int r = i >> 3, c = i & 7, gn = n0 + r, gk = k0 + c * 4;
        const bool in = gn < N && gk < K;
        const long long off = in ? static_cast<long long>(gn) * K + gk : 0;
        const unsigned so = r * 128 + ((c ^ (r & 7)) << 4);
        mb_cp16(st + 2 * A_BYTES + so, bb + off, in ? 16 : 0);
        mb_cp16(st + 2 * A_BYTES + B_BYTES + so, bs + off, in ? 16 : 0);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  float acc[BN / 2], part[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
  for (int s = 0; s < STAGES - 1; ++s) load(s);
  for (int kt = 0; kt < KT; ++kt) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));  // slice kt has landed (this thread's copies)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // visible to wgmma's reads
    __syncthreads();                                                // everyone's copies; slice kt-1's MMAs done
    load(kt + STAGES - 1);                                          // into the stage slice kt-1 used
    const unsigned st = base + (kt % STAGES) * STAGE_BYTES;
    const unsigned a_big = st + wg * 64 * 128, a_small = a_big + A_BYTES, b_big = st + 2 * A_BYTES, b_small = b_big + B_BYTES;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {  // small terms first, into a fresh partial sum
      mb_wgmma(part, mb_desc(a_small + kk * 32), mb_desc(b_big + kk * 32), kk);
      mb_wgmma(part, mb_desc(a_big + kk * 32), mb_desc(b_small + kk * 32), 1);
      mb_wgmma(part, mb_desc(a_big + kk * 32), mb_desc(b_big + kk * 32), 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    mb_regs_ready<BN / 2>(part);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];
  }
  // Accumulator fragment: warp w of warpgroup g holds rows 64g + 16w + lane/4 (+8), columns
  // 8j + 2 (lane % 4) (+1) for j < BN/8.
  const int row = m0 + wg * 64 + warp * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const int gm = row + (h / 2) * 8, gn = n0 + j * 8 + (lane % 4) * 2 + (h % 2);
      if (gm < M && gn < N) {
        const @IDX@ o = (static_cast<@IDX@>(bt) * M + gm) * N + gn;
        const float v = acc[4 * j + h];
        out[o] = @EPILOGUE@;
      }
    }
  }
}
)CU";
  return fill(k, {{"PARAMS", kernel_params(tensors)},
                  {"M", std::to_string(sh.m)},
                  {"N", std::to_string(sh.n)},
                  {"K", std::to_string(sh.k)},
                  {"BN", std::to_string(bn)},
                  {"STAGES", std::to_string(stages)},
                  {"A_STRIDE", sh.a_batched ? fmt::format("{}LL", sh.m * sh.k) : "0LL"},
                  {"B_STRIDE", sh.b_batched ? fmt::format("{}LL", sh.n * sh.k) : "0LL"},
                  {"IDX", idx},
                  {"EPILOGUE", gpu::render_at(plan, kCuda, "o", "v")}});
}

// Launch code that splits one operand into (big, small), transposing when it is stored [.][k][rows].
std::string split_launch(const std::string& src, const std::string& big, const std::string& small, int64_t mats,
                         int64_t rows, int64_t k, bool transposed) {
  const std::string args = fmt::format("{}, {}, {}", src, big, small);
  if (!transposed)
    return grid_stride_launch("mb_split", 256, mats * rows * k, fmt::format("{}, {}LL", args, mats * rows * k), true);
  // stored [mats][k][rows]: the tile kernel reads k rows of `rows` columns
  std::string s = "  {\n";
  s += fmt::format("    const dim3 grid({}, {}, {});\n", gpu::ceil_div(rows, 32), gpu::ceil_div(k, 32), mats);
  s += fmt::format("    mb_split_t<<<grid, dim3(32, 8), 0, stream>>>({}, {}, {});\n", args, k, rows);
  s += "    if (mb_launched(\"mb_split_t\") != 0) return -1;\n";
  return s + "  }\n";
}

Design design(const KernelPlan& p, const Shape& sh, const std::string& idx, const std::string& a, const std::string& b,
              int bn, int stages) {
  const int64_t a_mats = sh.a_batched ? sh.batch : 1, b_mats = sh.b_batched ? sh.batch : 1;
  const int64_t a_floats = a_mats * sh.m * sh.k, b_floats = b_mats * sh.n * sh.k;
  const int smem = stages * (2 * kBm * kBk * 4 + 2 * bn * kBk * 4) + 1024;
  Design d;
  d.family = "cuda.matmul.tf32x3";
  d.params = {{"bn", bn}, {"stages", stages}};
  d.description = fmt::format(
      "3xTF32 (split-precision TF32 wgmma, FP32 partial sums per 32-deep slice), 128x{} tile per {}-thread block, "
      "{} stages of cp.async{}",
      bn, kThreads, stages, has_epilogue(p) ? ", epilogue fused" : "");
  d.actions = {"cuda.hopper-wgmma",        "cuda.split-tf32-fp32-products", "cuda.shared-memory-tiling",
               "cuda.async-copy-cp-async", "cuda.multistage-pipeline",      "cuda.dynamic-shared-memory-opt-in"};
  if (has_epilogue(p)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.state_fields =
      "  float* x3_ab = nullptr;  // A's TF32 halves, [batch][m][k]\n  float* x3_as = nullptr;\n"
      "  float* x3_bb = nullptr;  // B's, [batch][n][k]\n  float* x3_bs = nullptr;\n";
  for (const auto& [field, floats] : std::vector<std::pair<std::string, int64_t>>{
           {"x3_ab", a_floats}, {"x3_as", a_floats}, {"x3_bb", b_floats}, {"x3_bs", b_floats}}) {
    d.init_code += fmt::format(
        "  if (cudaMalloc(&s->{0}, {1}ULL * sizeof(float)) != cudaSuccess) {{\n    s->{0} = nullptr;\n", field, floats);
    d.init_code += fmt::format(
        "    return mb_free(s), mb_fail(\"cudaMalloc of the split operand {} ({} floats) failed\");\n  }}\n", field,
        floats);
    d.free_code += fmt::format("  if (s->{0}) cudaFree(s->{0});\n", field);
  }
  d.device_code = kHelpers + wgmma_wrapper(bn) + product_kernel(p, sh, idx, bn, stages);
  d.launch_code += split_launch(a, "s->x3_ab", "s->x3_as", a_mats, sh.m, sh.k, p.a_transposed);
  d.launch_code += split_launch(b, "s->x3_bb", "s->x3_bs", b_mats, sh.n, sh.k, !p.b_transposed);
  d.launch_code += "  {\n";
  d.launch_code += fmt::format(
      "    const cudaError_t e = cudaFuncSetAttribute(mb_tf32x3, cudaFuncAttributeMaxDynamicSharedMemorySize, {});\n",
      smem);
  d.launch_code +=
      "    if (e != cudaSuccess) return mb_fail(\"cudaFuncSetAttribute(mb_tf32x3, %d bytes of shared memory) failed: "
      "%s\", " +
      std::to_string(smem) + ", cudaGetErrorString(e));\n";
  d.launch_code +=
      fmt::format("    const dim3 grid({}, {}, {});\n", gpu::ceil_div(sh.n, bn), gpu::ceil_div(sh.m, kBm), sh.batch);
  d.launch_code += fmt::format("    mb_tf32x3<<<grid, {}, {}, stream>>>({}, s->x3_ab, s->x3_as, s->x3_bb, s->x3_bs);\n",
                               kThreads, smem, call_args(gpu::plan_tensors(p)));
  d.launch_code += "    if (mb_launched(\"mb_tf32x3\") != 0) return -1;\n  }\n";
  return d;
}

}  // namespace

std::vector<Design> tf32x3_matmul_designs(const KernelPlan& plan, const std::string& idx, const std::string& a,
                                          const std::string& b) {
  Shape sh{plan.batch, plan.m, plan.n, plan.k, plan.a_batched, plan.b_batched};
  if (sh.batch > 1 && sh.a_batched && !sh.b_batched && !plan.a_transposed) {
    sh.m *= sh.batch;  // the batches of A stacked: one taller product
    sh.batch = 1;
  }
  // cp.async copies 16-byte chunks of rows of K floats; the grid's y and z are 16-bit.
  if (sh.k % 4 != 0 || sh.batch > 65535 || gpu::ceil_div(sh.m, kBm) > 65535 || sh.m > 0x7fffffff || sh.n > 0x7fffffff ||
      sh.k > 0x7fffffff)
    return {};
  std::vector<Design> v;
  v.push_back(design(plan, sh, idx, a, b, 256, 2));
  v.push_back(design(plan, sh, idx, a, b, 128, 3));
  if (sh.n <= 128) std::swap(v[0], v[1]);  // a 256-wide tile would be half empty
  return v;
}

bool tf32x3_leads(const KernelPlan& plan) {
  // An estimate, not a search: the product at the 3xTF32 kernel's rate plus the split passes (12
  // bytes per operand element) at bandwidth, against SGEMM's rate. Where the split passes cost
  // about as much as the product (narrow N or K), 3xTF32 loses. The rates are Hopper's, from
  // tools/probe/gemm3xtf32.cu (benchmarks/results/policy-design-figures.json, cuda-tf32x3-leads).
  const double m = static_cast<double>(plan.m), n = static_cast<double>(plan.n), k = static_cast<double>(plan.k);
  const double batch = static_cast<double>(plan.batch), flops = 2 * batch * m * n * k;
  const double split_bytes = 12.0 * k * ((plan.a_batched ? batch : 1) * m + (plan.b_batched ? batch : 1) * n);
  const double x3_s = flops / 90e12 + split_bytes / 3e12, sgemm_s = flops / 50e12;
  // At least 90 % of one wave of 128 x 256 tiles on 132 SMs: a partial wave pays the whole prologue.
  const int64_t tiles = gpu::ceil_div(plan.m, kBm) * gpu::ceil_div(plan.n, 256) * plan.batch;
  return tiles >= 118 && plan.k >= 512 && x3_s < 0.8 * sgemm_s;
}

}  // namespace mblast::policy::cuda
