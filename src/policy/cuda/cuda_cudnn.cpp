// conv and conv_transpose plans through cuDNN, the vendor library eager PyTorch calls:
// cudnnConvolutionForward (a conv), or cudnnConvolutionBackwardData (a transposed convolution is
// the data gradient of the forward convolution whose input has the transposed one's output
// shape, with the same weight, padding, stride, dilation and groups), on the runner's stream,
// writes the plain convolution into out0; then the plan's epilogue (its bias, a batch norm,
// activations) runs in place as one elementwise kernel, where eager launches one kernel per op.
// Four designs, kept apart as with cuBLAS, for the verifier to judge against the problem's
// tolerance:
//   fp32           strict FP32 (CUDNN_FMA_MATH) and only the algorithms that sum the products
//                  directly (implicit GEMM, precomputed implicit GEMM, GEMM, direct; for the
//                  data gradient ALGO_1, and ALGO_0 when deterministic): another summation order,
//                  an error the size of the reference's own;
//   fp32-fft       strict FP32, FFT or tiled FFT: the transforms add rounding error, and for
//                  small kernels over large images they do far less arithmetic than a direct
//                  sum; PyTorch's strict-FP32 eager takes FFT for such shapes;
//   fp32-winograd  strict FP32, Winograd: less arithmetic still, and the least accurate (it can
//                  miss a strict tolerance, so the verifier judges it as a design of its own);
//                  figures: benchmarks/results/policy-design-figures.json, cuda-cudnn-fft-winograd;
//   tf32           TF32 tensor cores allowed (CUDNN_DEFAULT_MATH, what PyTorch's allow_tf32
//                  default gives its convolutions).
// Each design takes the fastest deterministic one of its algorithms that cuDNN's Find call
// measures in mblast_prepare (a transposed convolution also has a strict design that may take the
// non-deterministic ALGO_0: the verifier's second run judges it), with its workspace
// allocated there, so a timed run only enqueues; a design none of whose algorithms cuDNN
// supports for the shape fails there, with the reason (the FFT and Winograd designs are offered
// only for shapes those algorithms take).
#include <fmt/format.h>

#include <array>
#include <iterator>
#include <limits>

#include "cuda_gen.h"

namespace mblast::policy::cuda {

namespace {

bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

// `return mb_free(s), mb_fail(...)` when a cuDNN call in mb_init fails.
std::string checked_init(const std::string& call, const std::string& what) {
  return fmt::format(
      "  st = {};\n  if (st != CUDNN_STATUS_SUCCESS) return mb_free(s), mb_fail(\"{} failed: %s\", "
      "cudnnGetErrorString(st));\n",
      call, what);
}

enum class Mode { Fp32DirectSum, Fp32Fft, Fp32Winograd, Tf32 };

struct ModeInfo {
  const char* math;         // the design's "math" parameter
  const char* description;  // for the design's description and the failure reason
  // The C conditions, on `a`, under which a found algorithm is another design's ("": none), for
  // the forward convolution and for its data gradient (a transposed convolution).
  const char* excluded_fwd;
  const char* excluded_bwd_data;
};
constexpr ModeInfo kModes[] = {
    {"fp32", "strict FP32, direct-sum algorithms",
     "a != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM && a != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM &&\n"
     "          a != CUDNN_CONVOLUTION_FWD_ALGO_GEMM && a != CUDNN_CONVOLUTION_FWD_ALGO_DIRECT",
     "a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 && a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_1"},
    {"fp32-fft", "strict FP32, FFT algorithms",
     "a != CUDNN_CONVOLUTION_FWD_ALGO_FFT && a != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING",
     "a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT && a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING"},
    {"fp32-winograd", "strict FP32, Winograd algorithms",
     "a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD && a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED",
     "a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD && a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED"},
    {"tf32", "TF32 tensor cores allowed", "", ""},
};
static_assert(std::size(kModes) == static_cast<size_t>(Mode::Tf32) + 1, "one entry per Mode, in its order");

// `deterministic` false: cuDNN's non-deterministic algorithms too (the data gradient's ALGO_0 adds
// with atomics); the verifier's second run judges whether two runs agree within the tolerance.
Design design(const KernelPlan& plan, const Problem& problem, Mode mode, bool deterministic = true) {
  const ConvShape& c = plan.conv;
  const bool tf32 = mode == Mode::Tf32;
  const bool bwd = plan.kind == "conv_transpose";  // cuDNN's data gradient
  const ModeInfo& info = kModes[static_cast<int>(mode)];
  const char* excluded = bwd ? info.excluded_bwd_data : info.excluded_fwd;
  Design d;
  d.family = bwd ? "cuda.conv_transpose.cudnn" : "cuda.conv.cudnn";
  d.params = {{"math", info.math}};
  if (!deterministic) d.params["deterministic"] = false;
  d.description =
      fmt::format("cuDNN {} ({}{}, the fastest found in mblast_prepare){}",
                  bwd ? "transposed convolution as the data gradient of a convolution" : "forward convolution",
                  info.description, deterministic ? "" : ", non-deterministic ones too",
                  gpu::expr_has_ops(plan.expr) ? ", then the epilogue in place" : "");
  d.actions = {"cuda.implicit-gemm-convolution"};
  if (tf32) d.actions.push_back("cuda.tf32-tensor-cores");
  if (gpu::expr_has_ops(plan.expr)) d.actions.push_back("cuda.fuse-elementwise-epilogue");
  d.includes = "#include <cudnn.h>\n";
  // xd describes the plan's input, yd its output; the filter is [cout, cin / groups, kh, kw] for
  // a conv and [cin, cout / groups, kh, kw] (PyTorch's ConvTranspose weight) for a transposed one,
  // which is the forward convolution's filter from its output yd back to xd.
  const std::string algo = bwd ? "cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1"
                               : "cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM";
  d.state_fields = fmt::format(
      "  cudnnHandle_t dnn = nullptr;\n"
      "  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;\n"
      "  cudnnFilterDescriptor_t wd = nullptr;\n"
      "  cudnnConvolutionDescriptor_t cd = nullptr;\n"
      "  {};  // set in mblast_prepare\n"
      "  void* ws = nullptr;  // the algorithm's workspace\n"
      "  size_t ws_bytes = 0;\n",
      algo);
  d.free_code =
      "  if (s->ws) cudaFree(s->ws);\n"
      "  if (s->cd) cudnnDestroyConvolutionDescriptor(s->cd);\n"
      "  if (s->wd) cudnnDestroyFilterDescriptor(s->wd);\n"
      "  if (s->yd) cudnnDestroyTensorDescriptor(s->yd);\n"
      "  if (s->xd) cudnnDestroyTensorDescriptor(s->xd);\n"
      "  if (s->dnn) cudnnDestroy(s->dnn);\n";
  std::string init;
  init += "  cudnnStatus_t st = cudnnCreate(&s->dnn);\n";
  init += "  if (st != CUDNN_STATUS_SUCCESS) {\n    s->dnn = nullptr;\n";
  init += "    return mb_free(s), mb_fail(\"cudnnCreate failed: %s\", cudnnGetErrorString(st));\n  }\n";
  init += checked_init("cudnnCreateTensorDescriptor(&s->xd)", "cudnnCreateTensorDescriptor");
  init += checked_init("cudnnCreateTensorDescriptor(&s->yd)", "cudnnCreateTensorDescriptor");
  init += checked_init("cudnnCreateFilterDescriptor(&s->wd)", "cudnnCreateFilterDescriptor");
  init += checked_init("cudnnCreateConvolutionDescriptor(&s->cd)", "cudnnCreateConvolutionDescriptor");
  init +=
      checked_init(fmt::format("cudnnSetTensor4dDescriptor(s->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, {}, {}, {}, {})",
                               c.n, c.cin, c.h, c.w),
                   "cudnnSetTensor4dDescriptor (input)");
  const int64_t filter_k = bwd ? c.cin : c.cout, filter_c = bwd ? c.cout / c.groups : c.cin / c.groups;
  init +=
      checked_init(fmt::format("cudnnSetFilter4dDescriptor(s->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, {}, {}, {}, {})",
                               filter_k, filter_c, c.kh, c.kw),
                   "cudnnSetFilter4dDescriptor");
  init += checked_init(
      fmt::format(
          "cudnnSetConvolution2dDescriptor(s->cd, {}, {}, {}, {}, {}, {}, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)",
          c.ph, c.pw, c.sh, c.sw, c.dh, c.dw),
      "cudnnSetConvolution2dDescriptor");
  init +=
      checked_init(fmt::format("cudnnSetConvolutionGroupCount(s->cd, {})", c.groups), "cudnnSetConvolutionGroupCount");
  init += checked_init(
      std::string("cudnnSetConvolutionMathType(s->cd, ") + (tf32 ? "CUDNN_DEFAULT_MATH" : "CUDNN_FMA_MATH") + ")",
      "cudnnSetConvolutionMathType");
  init +=
      checked_init(fmt::format("cudnnSetTensor4dDescriptor(s->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, {}, {}, {}, {})",
                               c.n, c.cout, c.out_h, c.out_w),
                   "cudnnSetTensor4dDescriptor (output)");
  // cuDNN's own view of the shapes must be the problem's: a disagreement is refused, not run. The
  // forward convolution runs from xd to yd; for a transposed one, from yd back to xd.
  const auto fwd_out = bwd ? std::array{c.n, c.cin, c.h, c.w} : std::array{c.n, c.cout, c.out_h, c.out_w};
  init += "  {\n    int on = 0, oc = 0, oh = 0, ow = 0;\n";
  init += fmt::format("    st = cudnnGetConvolution2dForwardOutputDim(s->cd, s->{}, s->wd, &on, &oc, &oh, &ow);\n",
                      bwd ? "yd" : "xd");
  init +=
      "    if (st != CUDNN_STATUS_SUCCESS) return mb_free(s), mb_fail(\"cudnnGetConvolution2dForwardOutputDim failed: "
      "%s\", "
      "cudnnGetErrorString(st));\n";
  init += fmt::format("    if (on != {0} || oc != {1} || oh != {2} || ow != {3})\n", fwd_out[0], fwd_out[1], fwd_out[2],
                      fwd_out[3]);
  init += fmt::format(
      "      return mb_free(s), mb_fail(\"cuDNN's forward convolution gives a %dx%dx%dx%d tensor, the problem's "
      "{}x{}x{}x{}\", on, oc, oh, ow);\n  }}\n",
      fwd_out[0], fwd_out[1], fwd_out[2], fwd_out[3]);
  init += fmt::format("  {{\n    {} perf[8];\n    int found = 0;\n",
                      bwd ? "cudnnConvolutionBwdDataAlgoPerf_t" : "cudnnConvolutionFwdAlgoPerf_t");
  const std::string find = bwd ? "cudnnFindConvolutionBackwardDataAlgorithm" : "cudnnFindConvolutionForwardAlgorithm";
  init += fmt::format("    st = {}(s->dnn, {}, 8, &found, perf);\n", find,
                      bwd ? "s->wd, s->xd, s->cd, s->yd" : "s->xd, s->wd, s->cd, s->yd");
  init += fmt::format(
      "    if (st != CUDNN_STATUS_SUCCESS) return mb_free(s), mb_fail(\"{} failed: %s\", cudnnGetErrorString(st));\n",
      find);
  init += "    int pick = -1;\n";
  init += "    for (int i = 0; i < found && pick < 0; ++i) {  // sorted fastest first\n";
  init += "      const auto a = perf[i].algo;\n";
  if (*excluded)
    init += std::string("      if (") + excluded + ")\n        continue;  // another design's algorithm\n";
  else
    init += "      (void)a;\n";
  init += deterministic ? "      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == "
                          "CUDNN_DETERMINISTIC) pick = i;\n    }\n"
                        : "      if (perf[i].status == CUDNN_STATUS_SUCCESS) pick = i;\n    }\n";
  init += fmt::format(
      "    if (pick < 0) return mb_free(s), mb_fail(\"cuDNN supports no {}{} algorithm for this {} (%d tried)\", "
      "found);\n",
      deterministic ? "deterministic " : "", info.description, bwd ? "transposed convolution" : "convolution");
  init += "    s->algo = perf[pick].algo;\n    s->ws_bytes = perf[pick].memory;\n  }\n";
  init += "  if (s->ws_bytes > 0 && cudaMalloc(&s->ws, s->ws_bytes) != cudaSuccess) {\n    s->ws = nullptr;\n";
  init +=
      "    return mb_free(s), mb_fail(\"cudaMalloc of the cuDNN workspace (%zu bytes) failed\", s->ws_bytes);\n  }\n";
  d.init_code = init;

  const std::string x = gpu::buffer_name({false, plan.source});
  const std::string w = gpu::buffer_name({plan.conv_weight_is_param, plan.conv_weight});
  const std::string call = bwd ? fmt::format(
                                     "cudnnConvolutionBackwardData(s->dnn, &alpha, s->wd, {1}, s->xd, {0}, s->cd, "
                                     "s->algo, s->ws, s->ws_bytes, &beta, s->yd, out0)",
                                     x, w)
                               : fmt::format(
                                     "cudnnConvolutionForward(s->dnn, &alpha, s->xd, {0}, s->wd, {1}, s->cd, s->algo, "
                                     "s->ws, s->ws_bytes, &beta, s->yd, out0)",
                                     x, w);
  std::string launch;
  launch += "  {\n";
  launch += "    cudnnStatus_t st = cudnnSetStream(s->dnn, stream);\n";
  launch +=
      "    if (st != CUDNN_STATUS_SUCCESS) return mb_fail(\"cudnnSetStream failed: %s\", cudnnGetErrorString(st));\n";
  launch += "    const float alpha = 1.0f, beta = 0.0f;  // beta 0: out0 is not read (it holds poison)\n";
  launch += "    st = " + call + ";\n";
  launch +=
      fmt::format("    if (st != CUDNN_STATUS_SUCCESS) return mb_fail(\"{} failed: %s\", cudnnGetErrorString(st));\n",
                  call.substr(0, call.find('(')));
  launch += "  }\n";
  d.launch_code = launch;
  add_inplace_epilogue(d, plan, index_type(plan, problem));
  return d;
}

}  // namespace

std::vector<Design> cudnn_conv_designs(const KernelPlan& plan, const Problem& problem) {
  const ConvShape& c = plan.conv;
  if (!c.symmetric()) return {};  // cuDNN pads both sides alike
  // cuDNN's 4-d descriptors take int dimensions.
  for (int64_t v : {c.n, c.cin, c.cout, c.h, c.w, c.out_h, c.out_w, c.kh, c.kw, c.n * c.cin * c.h * c.w,
                    c.n * c.cout * c.out_h * c.out_w})
    if (!fits_int(v)) return {};
  // The likeliest to pass a strict tolerance first; the verifier judges each. cuDNN's FFT and
  // Winograd algorithms take only unit strides and dilations, one group, and Winograd only 3x3
  // and 5x5 kernels (cuDNN answers "not supported" for other shapes).
  std::vector<Design> v{design(plan, problem, Mode::Fp32DirectSum)};
  // The data gradient's ALGO_0 is non-deterministic (PyTorch's eager may take it): its own design.
  if (plan.kind == "conv_transpose") v.push_back(design(plan, problem, Mode::Fp32DirectSum, false));
  const bool dense_unit = c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1 && c.groups == 1;
  if (dense_unit) v.push_back(design(plan, problem, Mode::Fp32Fft));
  if (dense_unit && c.kh == c.kw && (c.kh == 3 || c.kh == 5)) v.push_back(design(plan, problem, Mode::Fp32Winograd));
  v.push_back(design(plan, problem, Mode::Tf32));
  return v;
}

}  // namespace mblast::policy::cuda
