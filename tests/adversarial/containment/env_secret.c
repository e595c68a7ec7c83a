// env_secret: looks for the secrets the test put in the runner's environment (API keys and a
// made-up MBLAST_TEST_SECRET, all set to @SECRET@) in its own environment and in
// /proc/self/environ. Finding one aborts with its name.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int file_holds(const char* path, const char* needle) {
  static char buf[1 << 16];
  FILE* f = fopen(path, "rb");
  if (!f) return 0;
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  for (size_t i = 0; i + strlen(needle) <= n; ++i)
    if (memcmp(buf + i, needle, strlen(needle)) == 0) return 1;
  return 0;
}

static int misdeed(void) {
  const char* names[] = {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MBLAST_TEST_SECRET"};
  for (int i = 0; i < 3; ++i)
    if (getenv(names[i])) {
      fprintf(stderr, "env_secret: %s is in the worker's environment\n", names[i]);
      abort();
    }
  if (file_holds("/proc/self/environ", "@SECRET@")) {
    fprintf(stderr, "env_secret: the secret is in /proc/self/environ\n");
    abort();
  }
  return 0;
}
