// scratch_files: writes a file named @MARKER@ into /dev/shm, /tmp and its working folder. None
// may survive the eval: the test looks for them on the host afterwards.
#include <stdio.h>

static int misdeed(void) {
  const char* paths[] = {"/dev/shm/@MARKER@", "/tmp/@MARKER@", "@MARKER@"};
  for (int i = 0; i < 3; ++i) {
    FILE* f = fopen(paths[i], "w");
    if (f) {
      fputs("left behind by a candidate\n", f);
      fclose(f);
    }
  }
  return 0;
}
