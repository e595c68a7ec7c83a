/*
 * mblast candidate ABI — the one C interface every candidate implements, on every backend.
 *
 * A candidate is one source file. The runner builds it for the target (a shared object for
 * CUDA and OpenCL, a static riscv64 program for RVV), then calls:
 *
 *   mblast_prepare  (optional)  once per parameter set; may depend on parameters only
 *                               (weight prepacking, program compilation); never on inputs.
 *                               The runner calls it before any input is in the process.
 *   mblast_run      (required)  computes every output from the inputs and parameters.
 *   mblast_release  (optional)  frees what mblast_prepare made.
 *
 * Rules the runner enforces (see docs/problem-format.md and DESIGN.md "Measurement"):
 *   - mblast_run must write every element of every output; outputs are poisoned before each
 *     call, so a stale or partial result is seen.
 *   - inputs and parameters must not be modified; they are hashed before and after.
 *   - the same inputs must give the same result on every call; buffers rotate between calls,
 *     so nothing may be cached by pointer or across calls.
 *   - all work must be finished or enqueued on the queue/stream given in the context by the
 *     time mblast_run returns; the runner synchronises the whole device before it stops the
 *     clock, so work moved elsewhere is still counted.
 *
 * Return 0 on success. Any other value is reported as failure_kind "launch_failed", with the
 * text of mblast_last_error() when the candidate defines it.
 */
#ifndef MBLAST_ABI_H
#define MBLAST_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MBLAST_ABI_VERSION 1
#define MBLAST_MAX_DIMS 8

typedef enum mblast_dtype {
  MBLAST_F32 = 0,
  MBLAST_F16 = 1,
  MBLAST_BF16 = 2,
  MBLAST_F64 = 3,
  MBLAST_I32 = 4,
  MBLAST_I64 = 5,
  MBLAST_I8 = 6,
  MBLAST_U8 = 7,
  /* One byte per element, 0 (false) or 1 (true), as torch.bool stores it; an output must hold
   * exactly 0 or 1 (any other byte is wrong). Added within ABI version 1: a candidate built
   * before it never receives it unless its problem has a bool tensor, and those were carried
   * as MBLAST_U8 (values 0/1) before. */
  MBLAST_BOOL = 8
} mblast_dtype;

typedef enum mblast_backend_kind {
  MBLAST_BACKEND_OPENCL = 1,
  MBLAST_BACKEND_CUDA = 2,
  MBLAST_BACKEND_RVV = 3
} mblast_backend_kind;

/* One tensor, dense and row-major (C order). What `data` is depends on the backend:
 *   opencl: a cl_mem holding exactly nbytes (use it as a kernel argument);
 *   cuda:   a device pointer (CUdeviceptr cast to void*), 256-byte aligned;
 *   rvv:    a host pointer, 64-byte aligned. */
typedef struct mblast_tensor {
  const char* name;
  mblast_dtype dtype;
  int32_t ndim;
  int64_t shape[MBLAST_MAX_DIMS];
  void* data;
  size_t nbytes;
} mblast_tensor;

/* The backend context. Only the members of the running backend are set; the rest are NULL. */
typedef struct mblast_context {
  int32_t abi_version; /* MBLAST_ABI_VERSION of the runner */
  int32_t backend;     /* mblast_backend_kind */
  /* opencl: cl_context, cl_device_id, cl_command_queue (in-order, profiling enabled) */
  void* cl_context;
  void* cl_device;
  void* cl_queue;
  /* cuda: cudaStream_t / CUstream of the runner's stream, and the device ordinal */
  void* cuda_stream;
  int32_t cuda_device;
  /* rvv: the vector length in bits the target declares (informational; use vsetvl) */
  int32_t rvv_vlen;
} mblast_context;

/* Required. Compute outputs from inputs and parameters. `state` is what mblast_prepare set
 * (NULL when the candidate has no mblast_prepare). */
int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs);

/* Optional. One-time preparation that may read parameters only. Untimed, reported apart. */
int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params, int32_t n_params, void** state);

/* Optional. Frees the state made by mblast_prepare. */
void mblast_release(const mblast_context* ctx, void* state);

/* Optional. A short description of the last failure, shown with "launch_failed". */
const char* mblast_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MBLAST_ABI_H */
