// setsid_children: 20 processes in sessions of their own (fork, setsid, fork again; the middle
// one exits, so each is an orphan outside the worker's process group), named @MARKER@, sleeping
// for ever. They must end with the worker: the test looks for them after the eval.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int misdeed(void) {
  for (int i = 0; i < 20; ++i) {
    const pid_t p = fork();
    if (p == 0) {
      setsid();
      if (fork() == 0) {
        prctl(PR_SET_NAME, "@MARKER@", 0, 0, 0);
        for (;;) pause();
      }
      _exit(0);
    }
    if (p > 0) waitpid(p, 0, 0);
  }
  return 0;
}
