// Diagnostic: what cudnnFindConvolutionForwardAlgorithm measures for one NCHW fp32 convolution,
// every algorithm with its time, workspace and status, under FMA math (strict FP32) and default
// math (TF32 allowed). Compare with tools/probe/conv_probe.py's PyTorch figures.
//   nvcc -O2 -o /tmp/cudnn_find tools/probe/cudnn_find.cpp -lcudnn
//   /tmp/cudnn_find N C K H W R PAD GROUPS
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                      \
  do {                                                                \
    cudnnStatus_t st_ = (x);                                          \
    if (st_ != CUDNN_STATUS_SUCCESS) {                                \
      std::fprintf(stderr, "%s: %s\n", #x, cudnnGetErrorString(st_)); \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

static const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "winograd_nonfused";
    default:
      return "?";
  }
}

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: %s N C K H W R PAD GROUPS\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), c = atoi(argv[2]), k = atoi(argv[3]), h = atoi(argv[4]), w = atoi(argv[5]);
  int r = atoi(argv[6]), pad = atoi(argv[7]), groups = atoi(argv[8]);
  cudnnHandle_t dnn;
  CHECK(cudnnCreate(&dnn));
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CHECK(cudnnCreateTensorDescriptor(&xd));
  CHECK(cudnnCreateTensorDescriptor(&yd));
  CHECK(cudnnCreateFilterDescriptor(&wd));
  CHECK(cudnnCreateConvolutionDescriptor(&cd));
  CHECK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  CHECK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c / groups, r, r));
  CHECK(cudnnSetConvolution2dDescriptor(cd, pad, pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK(cudnnSetConvolutionGroupCount(cd, groups));
  int on, oc, oh, ow;
  CHECK(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &on, &oc, &oh, &ow));
  CHECK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow));
  const double flops = 2.0 * on * oc * oh * ow * (double)(c / groups) * r * r;
  std::printf("conv N%d C%d K%d H%d W%d R%d pad%d groups%d -> %dx%dx%dx%d, %.1f GFLOP; cudnn %zu\n", n, c, k, h, w, r,
              pad, groups, on, oc, oh, ow, flops / 1e9, cudnnGetVersion());
  for (int math = 0; math < 2; ++math) {
    CHECK(cudnnSetConvolutionMathType(cd, math == 0 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int found = 0;
    CHECK(cudnnFindConvolutionForwardAlgorithm(dnn, xd, wd, cd, yd, 8, &found, perf));
    for (int i = 0; i < found; ++i)
      std::printf("  %-7s %-22s %9.3f ms  %7.1f TFLOP/s  ws %8.1f MB  math %d  %s\n", math == 0 ? "fma" : "default",
                  algo_name(perf[i].algo), perf[i].time,
                  perf[i].status == CUDNN_STATUS_SUCCESS ? flops / perf[i].time / 1e9 : 0.0, perf[i].memory / 1e6,
                  (int)perf[i].mathType, cudnnGetErrorString(perf[i].status));
  }
  return 0;
}
