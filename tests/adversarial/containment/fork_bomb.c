// fork_bomb: starts sleeping children named @MARKER@ until fork fails. 4096 of them means no
// process limit held: it aborts. Either way they must end with the worker.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

static int misdeed(void) {
  int n = 0;
  for (; n < 4096; ++n) {
    const pid_t p = fork();
    if (p < 0) break;
    if (p == 0) {
      prctl(PR_SET_NAME, "@MARKER@", 0, 0, 0);
      for (;;) pause();
    }
  }
  if (n >= 4096) {
    fprintf(stderr, "fork_bomb: 4096 processes started, no process limit held\n");
    abort();
  }
  fprintf(stderr, "fork_bomb: fork failed after %d processes\n", n);
  return 0;
}
