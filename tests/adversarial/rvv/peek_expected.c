// peek_expected — tries to read the expected outputs (the test substitutes @EXPECTED_FILE@ with
// the reference file of seed 1, init 0) and copy y from it. The worker runs sandboxed (under
// qemu-user, which passes the guest's open() to the host), so the open must fail and the
// candidate falls back to zeros: failure_kind "wrong_output". Were the sandbox open, seed 1
// would pass and the others fail, still "wrong_output", but with a different count.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mblast/abi.h>

// Copies the data of tensor "y" of a safetensors file (8-byte little-endian header length,
// JSON header, data) into out; returns 0 when that worked.
static int copy_expected(const char* path, void* out, size_t nbytes) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  unsigned char len8[8];
  int rc = -1;
  if (fread(len8, 1, 8, f) == 8) {
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | len8[i];
    char* header = hlen < (1u << 20) ? calloc(1, hlen + 1) : NULL;
    if (header && fread(header, 1, hlen, f) == hlen) {
      const char* y = strstr(header, "\"y\"");
      const char* offs = y ? strstr(y, "data_offsets") : NULL;
      unsigned long long begin = 0, end = 0;
      if (offs && sscanf(strchr(offs, '[') ? strchr(offs, '[') : offs, "[%llu ,%llu ]", &begin, &end) == 2 &&
          end - begin == nbytes && fseek(f, (long)(8 + hlen + begin), SEEK_SET) == 0 &&
          fread(out, 1, nbytes, f) == nbytes)
        rc = 0;
    }
    free(header);
  }
  fclose(f);
  return rc;
}

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)inputs, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  if (copy_expected("@EXPECTED_FILE@", outputs[0].data, outputs[0].nbytes) != 0) {
    fprintf(stderr, "peek_expected: could not read the expected outputs; writing zeros\n");
    memset(outputs[0].data, 0, outputs[0].nbytes);
  }
  return 0;
}
