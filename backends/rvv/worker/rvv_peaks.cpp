// Peak kernels for boards (execution kind "native"). The only worker file built with V
// (-march=rv64gcv): RvvDevice calls these only after probe_hart() found V. A compiler without
// the RVV intrinsics (GCC before 13, building mblast-runner on a board) gets scalar loops.
#if defined(__riscv_v_intrinsic)
#include <riscv_vector.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "rvv_device.h"

namespace mblast::runner::rvv {

namespace {
double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

__attribute__((noinline)) void copy_f32(float* dst, const float* src, size_t n) {
#if defined(__riscv_v_intrinsic)
  for (size_t vl; n > 0; n -= vl, src += vl, dst += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    __riscv_vse32_v_f32m8(dst, __riscv_vle32_v_f32m8(src, vl), vl);
  }
#else
  std::memcpy(dst, src, n * sizeof(float));
#endif
}
}  // namespace

double rvv_copy_bandwidth() {
  const size_t n = (64u << 20) / sizeof(float);
  auto* a = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  auto* b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (!a || !b) {
    std::free(a);
    std::free(b);
    return 0;
  }
  std::memset(a, 1, n * sizeof(float));
  std::memset(b, 0, n * sizeof(float));
  copy_f32(b, a, n);  // warm-up: pages faulted in
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now_s();
    copy_f32(b, a, n);
    best = std::min(best, now_s() - t0);
  }
  std::free(a);
  std::free(b);
  return 2.0 * static_cast<double>(n * sizeof(float)) / best;
}

#if defined(__riscv_v_intrinsic)
double rvv_fma_flops() {
  // Eight independent accumulators of LMUL 1 hide the FMA latency on in-order and
  // out-of-order cores alike; each vfmacc is 2 FLOP per element.
  const size_t vl = __riscv_vsetvlmax_e32m1();
  const vfloat32m1_t x = __riscv_vfmv_v_f_f32m1(1.0001f, vl), y = __riscv_vfmv_v_f_f32m1(0.9999f, vl);
  vfloat32m1_t a0 = __riscv_vfmv_v_f_f32m1(0.0f, vl), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  const long iters = 1 << 22;
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const double t0 = now_s();
    for (long i = 0; i < iters; ++i) {
      a0 = __riscv_vfmacc_vv_f32m1(a0, x, y, vl);
      a1 = __riscv_vfmacc_vv_f32m1(a1, x, y, vl);
      a2 = __riscv_vfmacc_vv_f32m1(a2, x, y, vl);
      a3 = __riscv_vfmacc_vv_f32m1(a3, x, y, vl);
      a4 = __riscv_vfmacc_vv_f32m1(a4, x, y, vl);
      a5 = __riscv_vfmacc_vv_f32m1(a5, x, y, vl);
      a6 = __riscv_vfmacc_vv_f32m1(a6, x, y, vl);
      a7 = __riscv_vfmacc_vv_f32m1(a7, x, y, vl);
    }
    best = std::min(best, now_s() - t0);
  }
  vfloat32m1_t s = __riscv_vfadd_vv_f32m1(
      __riscv_vfadd_vv_f32m1(__riscv_vfadd_vv_f32m1(a0, a1, vl), __riscv_vfadd_vv_f32m1(a2, a3, vl), vl),
      __riscv_vfadd_vv_f32m1(__riscv_vfadd_vv_f32m1(a4, a5, vl), __riscv_vfadd_vv_f32m1(a6, a7, vl), vl), vl);
  volatile float keep = __riscv_vfmv_f_s_f32m1_f32(s);
  (void)keep;
  return 2.0 * 8.0 * static_cast<double>(vl) * static_cast<double>(iters) / best;
}
#else
double rvv_fma_flops() {
  // Scalar stand-in: eight independent fmadd.s chains (a floor, not the vector peak).
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float x = 1.0001f, y = 0.9999f;
  const long iters = 1 << 22;
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const double t0 = now_s();
    for (long i = 0; i < iters; ++i)
      for (float& v : a) v = __builtin_fmaf(x, y, v);
    best = std::min(best, now_s() - t0);
  }
  volatile float keep = a[0] + a[7];
  (void)keep;
  return 2.0 * 8.0 * static_cast<double>(iters) / best;
}
#endif

}  // namespace mblast::runner::rvv
