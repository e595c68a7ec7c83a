// peek_expected — a probe of the sandbox: it tries to open the expected outputs of the problem
// (the test puts the real path of problems/vec_add/data/expected.seed1.init0.safetensors in
// place of @EXPECTED_FILE@). If the open succeeds, the candidate could copy the answers, so it
// aborts and the leak shows up as "crashed". Under mblast's sandbox the open fails, it writes
// zeros, and mblast must report "wrong_output".
#include <mblast/abi.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor*, int32_t,
                          const mblast_tensor*, int32_t, mblast_tensor* out, int32_t) {
  if (std::FILE* f = std::fopen("@EXPECTED_FILE@", "rb")) {
    std::fclose(f);
    std::fprintf(stderr, "peek_expected: the expected outputs were readable\n");
    std::abort();
  }
  std::vector<float> y(out[0].nbytes / sizeof(float), 0.0f);
  return clEnqueueWriteBuffer(static_cast<cl_command_queue>(ctx->cl_queue), static_cast<cl_mem>(out[0].data),
                              CL_TRUE, 0, out[0].nbytes, y.data(), 0, nullptr, nullptr) == CL_SUCCESS ? 0 : -1;
}
