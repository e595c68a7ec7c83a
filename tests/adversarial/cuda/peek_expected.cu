// Adversarial (cuda): tries to read the expected outputs from the problem's data folder and copy
// them into y. The sandbox must keep the file closed to it; then it falls back to zeros, which
// are wrong. (The test replaces @EXPECTED_FILE@ with the real path of the expected-output file.)
#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static std::vector<float> g_stolen;  // outlives the call, so the async copy may read it later

// Reads tensor `name` (F32) from a safetensors file: 8-byte little-endian header length, a JSON
// header with "name": {"dtype": ..., "shape": ..., "data_offsets": [begin, end]}, then the data.
static bool steal(const char* path, const char* name, size_t want_bytes) {
  std::FILE* f = std::fopen(path, "rb");
  if (!f) {
    std::fprintf(stderr, "peek_expected: cannot open %s: %s\n", path, std::strerror(errno));
    return false;
  }
  bool ok = false;
  unsigned char len_bytes[8];
  if (std::fread(len_bytes, 1, 8, f) == 8) {
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | len_bytes[i];
    std::string header(static_cast<size_t>(len < (1u << 24) ? len : 0), '\0');
    if (!header.empty() && std::fread(&header[0], 1, header.size(), f) == header.size()) {
      const size_t key = header.find("\"" + std::string(name) + "\"");
      const size_t offs = key == std::string::npos ? key : header.find("data_offsets", key);
      const size_t open = offs == std::string::npos ? offs : header.find('[', offs);
      if (open != std::string::npos) {
        char* end = nullptr;
        const unsigned long long begin = std::strtoull(header.c_str() + open + 1, &end, 10);
        const unsigned long long stop = std::strtoull(end + 1, nullptr, 10);
        if (stop > begin && stop - begin == want_bytes &&
            std::fseek(f, static_cast<long>(8 + len + begin), SEEK_SET) == 0) {
          g_stolen.resize(want_bytes / sizeof(float));
          ok = std::fread(g_stolen.data(), 1, want_bytes, f) == want_bytes;
        }
      }
    }
  }
  std::fclose(f);
  std::fprintf(stderr, "peek_expected: %s the expected output\n", ok ? "read" : "could not parse");
  return ok;
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor*, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->cuda_stream);
  if (steal("@EXPECTED_FILE@", out[0].name, out[0].nbytes))  // THE BUG: the answer key is not an input
    return cudaMemcpyAsync(out[0].data, g_stolen.data(), out[0].nbytes, cudaMemcpyHostToDevice, stream) == cudaSuccess ? 0 : 1;
  return cudaMemsetAsync(out[0].data, 0, out[0].nbytes, stream) == cudaSuccess ? 0 : 1;
}
