// 03_mlp — naive CUDA candidate: the file's MLP, (Linear -> ReLU) x depth then a last Linear, with
//   the layers net.0, net.2, ..., net.<2 depth> (their count read from the parameters); one kernel
//   per layer, one thread per output element, the activations in two scratch buffers.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

static char g_err[512];

#define FAIL(...)                                    \
  do {                                               \
    std::snprintf(g_err, sizeof g_err, __VA_ARGS__); \
    return -1;                                       \
  } while (0)

// Checks the context and the tensor counts; false with g_err set on a mismatch.
[[maybe_unused]] static bool check_call(const mblast_context* ctx, int32_t n_in, int want_in, int32_t n_par,
                                        int want_par, int32_t n_out, int want_out) {
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) {
    std::snprintf(g_err, sizeof g_err, "mblast_context is not a CUDA context");
    return false;
  }
  if (n_in != want_in || n_par != want_par || n_out != want_out) {
    std::snprintf(g_err, sizeof g_err, "expected %d inputs, %d parameters, %d outputs; got %d, %d, %d", want_in,
                  want_par, want_out, static_cast<int>(n_in), static_cast<int>(n_par), static_cast<int>(n_out));
    return false;
  }
  return true;
}

// Checks a tensor's name, dtype (f32), rank and byte size; false with g_err set on a mismatch.
[[maybe_unused]] static bool check_f32(const mblast_tensor& t, const char* name, int ndim) {
  if (t.name && std::strcmp(t.name, name) != 0) {
    std::snprintf(g_err, sizeof g_err, "expected tensor '%s' in this position, got '%s'", name, t.name);
    return false;
  }
  size_t n = 1;
  for (int d = 0; d < t.ndim && d < MBLAST_MAX_DIMS; ++d) n *= t.shape[d] > 0 ? static_cast<size_t>(t.shape[d]) : 0;
  if (t.dtype != MBLAST_F32 || t.ndim != ndim || n == 0 || t.nbytes != n * sizeof(float) || !t.data) {
    std::snprintf(g_err, sizeof g_err, "%s: expected a non-empty f32 tensor of %d dims", name, ndim);
    return false;
  }
  return true;
}

// Checks that a tensor has the given name (for buffers the kernels do not read).
[[maybe_unused]] static bool check_name(const mblast_tensor& t, const char* name) {
  if (!t.name || std::strcmp(t.name, name) == 0) return true;
  std::snprintf(g_err, sizeof g_err, "expected tensor '%s' in this position, got '%s'", name, t.name);
  return false;
}

// True when a and b have the same rank and dims.
[[maybe_unused]] static bool same_shape(const mblast_tensor& a, const mblast_tensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim && d < MBLAST_MAX_DIMS; ++d)
    if (a.shape[d] != b.shape[d]) return false;
  return true;
}

[[maybe_unused]] static cudaStream_t stream_of(const mblast_context* ctx) {
  return static_cast<cudaStream_t>(ctx->cuda_stream);
}

// After a launch: a bad configuration or a broken context turns into a non-zero return.
[[maybe_unused]] static int launched(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) FAIL("launching %s failed: %s (%s)", kernel, cudaGetErrorString(e), cudaGetErrorName(e));
  return 0;
}

// Blocks of `block` threads covering n threads.
[[maybe_unused]] static unsigned blocks_for(long long n, int block) {
  return static_cast<unsigned>((n + block - 1) / block);
}

// The parameter called `name`, checked as an f32 tensor of `ndim` dims; nullptr with g_err set.
[[maybe_unused]] static const mblast_tensor* find_param(const mblast_tensor* params, int32_t n_params,
                                                        const char* name, int ndim) {
  for (int32_t i = 0; i < n_params; ++i)
    if (params[i].name && std::strcmp(params[i].name, name) == 0)
      return check_f32(params[i], name, ndim) ? &params[i] : nullptr;
  std::snprintf(g_err, sizeof g_err, "no parameter named '%s'", name);
  return nullptr;
}

[[maybe_unused]] static const float* f32(const mblast_tensor* t) { return static_cast<const float*>(t->data); }

// Scratch device memory for the intermediates, kept in the state that mblast_prepare makes. Its
// size depends on the input shapes, which mblast_prepare does not see, so mblast_run grows it on
// its first call (cudaMalloc; a later call with the same shapes allocates nothing). Nothing in it
// carries over between calls: every call writes what it reads.
struct Scratch {
  void* data = nullptr;
  size_t bytes = 0;
};

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params, int32_t n_params, void** state) {
  (void)ctx, (void)params, (void)n_params;
  *state = new Scratch();
  return 0;
}

extern "C" void mblast_release(const mblast_context* ctx, void* state) {
  (void)ctx;
  Scratch* s = static_cast<Scratch*>(state);
  if (!s) return;
  if (s->data) cudaFree(s->data);
  delete s;
}

// At least `bytes` of scratch, or nullptr with g_err set.
[[maybe_unused]] static float* scratch(void* state, size_t bytes) {
  Scratch* s = static_cast<Scratch*>(state);
  if (!s) {
    std::snprintf(g_err, sizeof g_err, "mblast_run called without the state of mblast_prepare");
    return nullptr;
  }
  if (s->bytes < bytes) {
    if (s->data) cudaFree(s->data);  // only when the shapes grow
    s->data = nullptr;
    s->bytes = 0;
    const cudaError_t e = cudaMalloc(&s->data, bytes);
    if (e != cudaSuccess) {
      std::snprintf(g_err, sizeof g_err, "cudaMalloc(%zu) for scratch failed: %s", bytes, cudaGetErrorString(e));
      s->data = nullptr;
      return nullptr;
    }
    s->bytes = bytes;
  }
  return static_cast<float*>(s->data);
}

// y[t, o] = act(b[o] + sum_k x[t, k] w[o, k]) for x [T, Din], w [Dout, Din]; act is ReLU when relu != 0.
__global__ void linear(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                       float* __restrict__ y, long long T, long long Din, long long Dout, int relu) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= T * Dout) return;
  const long long t = idx / Dout, o = idx % Dout;
  const float* xt = x + t * Din;
  const float* wo = w + o * Din;
  float acc = b[o];
  for (long long k = 0; k < Din; ++k) acc += xt[k] * wo[k];
  y[idx] = relu ? fmaxf(acc, 0.0f) : acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) FAIL("mblast_context is not a CUDA context");
  if (n_inputs != 1 || n_outputs != 1 || n_params < 2 || n_params % 2 != 0 || n_params > 64)
    FAIL("expected 1 input, an even number of parameters (weight and bias per layer), 1 output; got %d, %d, %d",
         static_cast<int>(n_inputs), static_cast<int>(n_params), static_cast<int>(n_outputs));
  if (!check_f32(inputs[0], "in0", 2) || !check_f32(outputs[0], "out0", 2)) return -1;
  const int layers = n_params / 2;
  const long long T = inputs[0].shape[0];
  const mblast_tensor* w[32];
  const mblast_tensor* b[32];
  long long width = inputs[0].shape[1], widest = 1;
  for (int l = 0; l < layers; ++l) {
    char name[64];
    std::snprintf(name, sizeof name, "net.%d.weight", 2 * l);
    if (!(w[l] = find_param(params, n_params, name, 2))) return -1;
    std::snprintf(name, sizeof name, "net.%d.bias", 2 * l);
    if (!(b[l] = find_param(params, n_params, name, 1))) return -1;
    if (w[l]->shape[1] != width || b[l]->shape[0] != w[l]->shape[0])
      FAIL("net.%d must be [Dout, %lld] with Dout biases", 2 * l, width);
    width = w[l]->shape[0];
    if (l + 1 < layers && width > widest) widest = width;
  }
  if (outputs[0].shape[0] != T || outputs[0].shape[1] != width) FAIL("out0 must be [%lld, %lld]", T, width);
  float* buf = scratch(state, 2 * static_cast<size_t>(T * widest) * sizeof(float));
  if (!buf) return -1;
  float* ping[2] = {buf, buf + T * widest};
  const float* x = static_cast<const float*>(inputs[0].data);
  for (int l = 0; l < layers; ++l) {
    const bool last = l + 1 == layers;
    const long long din = w[l]->shape[1], dout = w[l]->shape[0];
    float* y = last ? static_cast<float*>(outputs[0].data) : ping[l % 2];
    linear<<<blocks_for(T * dout, 256), 256, 0, stream_of(ctx)>>>(x, f32(w[l]), f32(b[l]), y, T, din, dout,
                                                                   last ? 0 : 1);
    if (launched("linear") != 0) return -1;
    x = y;
  }
  return 0;
}

extern "C" const char* mblast_last_error(void) { return g_err; }
