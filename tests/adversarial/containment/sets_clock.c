// sets_clock: tries to set the host's wall clock (to the time it reads, so a leak changes
// nothing) and its monotonic-adjusting state, which every timer of the runner and the driver
// reads. Succeeding aborts with what worked.
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static int misdeed(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (clock_settime(CLOCK_REALTIME, &now) == 0) {
    fprintf(stderr, "sets_clock: clock_settime(CLOCK_REALTIME) worked\n");
    abort();
  }
  struct timeval tv;
  gettimeofday(&tv, NULL);
  if (settimeofday(&tv, NULL) == 0) {
    fprintf(stderr, "sets_clock: settimeofday worked\n");
    abort();
  }
  return 0;
}
