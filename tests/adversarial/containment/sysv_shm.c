// sysv_shm: creates a System V shared memory segment of @SHMSIZE@ bytes (a size the test looks
// for) and leaves it, as a channel to later evals or a way to keep memory past the worker. None
// may survive the eval: the test looks for a segment of that size in /proc/sysvipc/shm.
#include <sys/ipc.h>
#include <sys/shm.h>

static int misdeed(void) {
  (void)shmget(IPC_PRIVATE, @SHMSIZE@, IPC_CREAT | 0600);
  return 0;
}
