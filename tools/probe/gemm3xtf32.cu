// 3xTF32 GEMM probe: C (M x N) = A (M x K, row-major) * B^T (B: N x K, row-major), FP32 accuracy
// from TF32 tensor cores (wgmma, sm_90a): x = big + small, C = Ab*Bb + Ab*Bs + As*Bb. Prints each
// kernel's time and rate beside cuBLAS's SGEMM, its worst error against a float64 product on 2000
// sampled outputs (absolute, and relative to sum |a b|), and its largest difference from cuBLAS.
// The design of src/policy/cuda/cuda_tf32x3.cpp ("promoted", BN 256 and 128) was chosen here.
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a gemm3xtf32.cu -lcublas -o probe
//   ./probe [M N K [iterations]]          (default 8192 4096 4096 10)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); std::exit(1);} } while (0)

__device__ __forceinline__ float tf32_rna(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// big/small split of a row-major R x C matrix, same layout.
__global__ void split_rows(const float* __restrict__ x, float* __restrict__ big, float* __restrict__ small, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
    float4 v = reinterpret_cast<const float4*>(x)[i], b, s;
    b.x = tf32_rna(v.x); s.x = tf32_rna(v.x - b.x);
    b.y = tf32_rna(v.y); s.y = tf32_rna(v.y - b.y);
    b.z = tf32_rna(v.z); s.z = tf32_rna(v.z - b.z);
    b.w = tf32_rna(v.w); s.w = tf32_rna(v.w - b.w);
    reinterpret_cast<float4*>(big)[i] = b;
    reinterpret_cast<float4*>(small)[i] = s;
  }
}

__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr) {
  uint64_t d = 0;
  d |= (uint64_t)((saddr & 0x3FFFF) >> 4);
  d |= (uint64_t)1 << 16;            // leading byte offset (unused for swizzled K-major)
  d |= (uint64_t)(1024 >> 4) << 32;  // stride byte offset: 8 rows x 128 B
  d |= (uint64_t)1 << 62;            // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void cp16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_n64(float* d, uint64_t da, uint64_t db, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(da), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_n128(float* d, uint64_t da, uint64_t db, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(da), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_n256(float* d, uint64_t da, uint64_t db, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "l"(da), "l"(db), "r"(accumulate));
}

template <int N> __device__ __forceinline__ void fence_regs(float* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int BN> __device__ __forceinline__ void wgmma(float* d, uint64_t da, uint64_t db, int acc = 1) {
  if constexpr (BN == 64) wgmma_n64(d, da, db, acc);
  else if constexpr (BN == 128) wgmma_n128(d, da, db, acc);
  else wgmma_n256(d, da, db, acc);
}

// TERMS 3: As*Bb + Ab*Bs + Ab*Bb; TERMS 1: Ab*Bb only (plain TF32, a layout check).
// TERMS 3: As*Bb + Ab*Bs + Ab*Bb; TERMS 1: Ab*Bb only (plain TF32, a check of the layouts).
// PROMOTE 1: each 32-deep slice of K sums into fresh accumulators, added to FP32 registers after
// it; PROMOTE 0: the tensor cores keep the running sum (their internal sums are short: about 15x
// the error of cuBLAS's SGEMM at K = 4096, against 0.2x promoted; H100 and H200 alike).
template <int BN, int STAGES, int PROMOTE, int TERMS>
__global__ void __launch_bounds__(256, 1) gemm3(const float* __restrict__ Ab, const float* __restrict__ As, const float* __restrict__ Bb,
                                                const float* __restrict__ Bs, float* __restrict__ C, int M, int N, int K) {
  constexpr int BM = 128, BK = 32;
  constexpr int A_BYTES = BM * BK * 4, B_BYTES = BN * BK * 4, STAGE_BYTES = 2 * A_BYTES + 2 * B_BYTES;
  constexpr int D = STAGES - 1;  // slices copied ahead
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int KT = (K + BK - 1) / BK;
  // One operand's halves, `rows` x 32 from row r0, into a stage (128-byte swizzled K-major rows).
  auto load_operand = [&](const float* big, const float* small, int r0, int rows, int limit, int k0, uint32_t dst, uint32_t dst_small) {
    for (int i = tid; i < rows * 8; i += 256) {
      const int r = i >> 3, c = i & 7, g = r0 + r, gk = k0 + c * 4;
      const int bytes = (g < limit && gk < K) ? min(16, (K - gk) * 4) : 0;
      const long long off = (long long)(g < limit ? g : 0) * K + (gk < K ? gk : 0);
      const uint32_t so = r * 128 + ((c ^ (r & 7)) << 4);
      cp16(dst + so, big + off, bytes);
      if (TERMS == 3) cp16(dst_small + so, small + off, bytes);
    }
  };
  auto load = [&](int kt) {
    if (kt < KT) {
      const uint32_t st = base + (kt % STAGES) * STAGE_BYTES;
      load_operand(Ab, As, m0, BM, M, kt * BK, st, st + A_BYTES);
      load_operand(Bb, Bs, n0, BN, N, kt * BK, st + 2 * A_BYTES, st + 2 * A_BYTES + B_BYTES);
    }
    cp_commit();
  };
  float acc[BN / 2], part[PROMOTE ? BN / 2 : 1];
  float* sum = PROMOTE ? part : acc;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
  for (int s = 0; s < D; ++s) load(s);
  for (int kt = 0; kt < KT; ++kt) {
    cp_wait<D - 1>();
    proxy_fence();
    __syncthreads();
    load(kt + D);
    const uint32_t st = base + (kt % STAGES) * STAGE_BYTES;
    const uint32_t a_b = st + wg * 64 * 128, a_s = a_b + A_BYTES, b_b = st + 2 * A_BYTES, b_s = b_b + B_BYTES;
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int keep = PROMOTE ? kk : 1;  // a promoted slice starts its partial sums from zero
      if (TERMS == 3) {
        wgmma<BN>(sum, sw128_desc(a_s + kk * 32), sw128_desc(b_b + kk * 32), keep);
        wgmma<BN>(sum, sw128_desc(a_b + kk * 32), sw128_desc(b_s + kk * 32));
        wgmma<BN>(sum, sw128_desc(a_b + kk * 32), sw128_desc(b_b + kk * 32));
      } else {
        wgmma<BN>(sum, sw128_desc(a_b + kk * 32), sw128_desc(b_b + kk * 32), keep);
      }
    }
    wg_commit();
    wg_wait<0>();
    if (PROMOTE) {
      fence_regs<BN / 2>(part);
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];
    }
  }
  fence_regs<BN / 2>(acc);
  const int row = m0 + wg * 64 + warp * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = n0 + j * 8 + (lane % 4) * 2;
    if (col < N) {
      if (row < M) { C[(long long)row * N + col] = acc[4 * j]; if (col + 1 < N) C[(long long)row * N + col + 1] = acc[4 * j + 1]; }
      if (row + 8 < M) { C[(long long)(row + 8) * N + col] = acc[4 * j + 2]; if (col + 1 < N) C[(long long)(row + 8) * N + col + 1] = acc[4 * j + 3]; }
    }
  }
}

struct Bufs { float *a, *b, *ab, *as, *bb, *bs, *c, *cref; };

template <int BN, int STAGES, int PROMOTE, int TERMS>
void launch(const Bufs& u, int M, int N, int K, cudaStream_t st) {
  constexpr int SMEM = STAGES * (2 * 128 * 32 * 4 + 2 * BN * 32 * 4) + 1024;
  static bool once = [] { CK(cudaFuncSetAttribute(gemm3<BN, STAGES, PROMOTE, TERMS>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM)); return true; }();
  (void)once;
  dim3 grid((N + BN - 1) / BN, (M + 127) / 128);
  gemm3<BN, STAGES, PROMOTE, TERMS><<<grid, 256, SMEM, st>>>(u.ab, u.as, u.bb, u.bs, u.c, M, N, K);
}

void split(const Bufs& u, int M, int N, int K, cudaStream_t st) {
  split_rows<<<132 * 8, 256, 0, st>>>(u.a, u.ab, u.as, (long long)M * K / 4);
  split_rows<<<132 * 8, 256, 0, st>>>(u.b, u.bb, u.bs, (long long)N * K / 4);
}

using Fn = void (*)(const Bufs&, int, int, int, cudaStream_t);
struct Cfg { const char* name; Fn fn; int terms; };

int main(int argc, char** argv) {
  const int M = argc > 3 ? atoi(argv[1]) : 8192, N = argc > 3 ? atoi(argv[2]) : 4096, K = argc > 3 ? atoi(argv[3]) : 4096;
  const int iters = argc > 4 ? atoi(argv[4]) : 10;
  std::printf("M %d N %d K %d\n", M, N, K);
  std::vector<float> ha((size_t)M * K), hb((size_t)N * K);
  uint64_t x = 12345;
  auto rnd = [&] { x = x * 6364136223846793005ULL + 1442695040888963407ULL; return ((x >> 40) / 16777216.0) * 2.0 - 1.0; };
  for (auto& v : ha) v = (float)rnd();
  for (auto& v : hb) v = (float)rnd();
  Bufs u;
  const size_t sa = (size_t)M * K * 4, sb = (size_t)N * K * 4, sc = (size_t)M * N * 4;
  CK(cudaMalloc(&u.a, sa)); CK(cudaMalloc(&u.ab, sa)); CK(cudaMalloc(&u.as, sa));
  CK(cudaMalloc(&u.b, sb)); CK(cudaMalloc(&u.bb, sb)); CK(cudaMalloc(&u.bs, sb));
  CK(cudaMalloc(&u.c, sc)); CK(cudaMalloc(&u.cref, sc));
  CK(cudaMemcpy(u.a, ha.data(), sa, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(u.b, hb.data(), sb, cudaMemcpyHostToDevice));
  cublasHandle_t h; cublasCreate(&h);
  cudaStream_t st; CK(cudaStreamCreate(&st)); cublasSetStream(h, st);
  const float one = 1.0f, zero = 0.0f;
  auto sgemm = [&] { cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, u.b, K, u.a, K, &zero, u.cref, N); };
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timeit = [&](auto&& f) {
    f(); CK(cudaStreamSynchronize(st));
    float best = 1e30f;
    for (int r = 0; r < 3; ++r) {
      cudaEventRecord(e0, st);
      for (int i = 0; i < iters; ++i) f();
      cudaEventRecord(e1, st); CK(cudaEventSynchronize(e1));
      float ms; cudaEventElapsedTime(&ms, e0, e1); ms /= iters; if (ms < best) best = ms;
    }
    CK(cudaGetLastError());
    return best;
  };
  const double flop = 2.0 * M * N * K;
  float t = timeit(sgemm);
  std::printf("cublasSgemm        %8.3f ms  %6.1f TFLOP/s\n", t, flop / t / 1e9);
  std::vector<float> hc(sc / 4), hr(sc / 4);
  CK(cudaMemcpy(hr.data(), u.cref, sc, cudaMemcpyDeviceToHost));
  // sampled double reference
  const int samples = 2000;
  std::vector<int> si(samples), sj(samples); std::vector<double> ex(samples), mag(samples);
  for (int s = 0; s < samples; ++s) {
    si[s] = (int)((rnd() + 1) / 2 * M) % M; sj[s] = (int)((rnd() + 1) / 2 * N) % N;
    if (s < 4) { si[s] = s ? M - 1 : 0; sj[s] = (s & 1) ? N - 1 : 0; }
    double e = 0, m = 0;
    for (int k = 0; k < K; ++k) { double p = (double)ha[(size_t)si[s] * K + k] * hb[(size_t)sj[s] * K + k]; e += p; m += std::fabs(p); }
    ex[s] = e; mag[s] = m;
  }
  auto err = [&](const std::vector<float>& c, double& maxabs, double& maxrel) {
    maxabs = 0; maxrel = 0;
    for (int s = 0; s < samples; ++s) {
      double d = std::fabs((double)c[(size_t)si[s] * N + sj[s]] - ex[s]);
      if (!(d == d)) d = 1e30;
      maxabs = std::max(maxabs, d); maxrel = std::max(maxrel, d / mag[s]);
    }
  };
  double ma, mr; err(hr, ma, mr);
  std::printf("  cublas err max abs %.3e  max abs/sum|ab| %.3e\n", ma, mr);
  float ts = timeit([&] { split(u, M, N, K, st); });
  std::printf("split (A and B)    %8.3f ms\n", ts);
  Cfg cfgs[] = {
      {"n128 s3 plain-tf32", launch<128, 3, 1, 1>, 1}, {"n256 s2 unpromoted", launch<256, 2, 0, 3>, 3},
      {"n256 s2 promoted", launch<256, 2, 1, 3>, 3},  {"n128 s3 promoted", launch<128, 3, 1, 3>, 3},
      {"n64 s4 promoted", launch<64, 4, 1, 3>, 3},
  };
  for (const Cfg& c : cfgs) {
    CK(cudaMemset(u.c, 0xff, sc));
    float tg = timeit([&] { c.fn(u, M, N, K, st); });
    CK(cudaMemcpy(hc.data(), u.c, sc, cudaMemcpyDeviceToHost));
    err(hc, ma, mr);
    double maxd = 0;  // vs cuBLAS over the whole matrix
    for (size_t i = 0; i < hc.size(); ++i) { double d = std::fabs((double)hc[i] - hr[i]); if (!(d == d)) d = 1e30; maxd = std::max(maxd, d); }
    std::printf("%-16s %8.3f ms  %6.1f TFLOP/s (with split %6.1f)  err max abs %.3e rel %.3e  |vs cublas| %.3e\n", c.name, tg,
                flop / tg / 1e9, flop / (tg + ts) / 1e9, ma, mr, maxd);
  }
  return 0;
}
