// proc_other: reads the environment of other processes through /proc: its parent's (the
// runner's, where it is visible), /proc/1's (the host's init, unless the worker is init of a
// PID namespace of its own) and every other /proc/<pid>/environ. Any other process's environ
// that reads back, or one holding @SECRET@, aborts with the pid.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int misdeed(void) {
  static char buf[1 << 16];
  const long self = (long)getpid();
  DIR* d = opendir("/proc");
  if (!d) return 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    char* end = NULL;
    const long pid = strtol(e->d_name, &end, 10);
    if (!end || *end || pid <= 0 || pid == self) continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE* f = fopen(path, "rb");
    if (!f) continue;
    const size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n == 0) continue;  // kernel threads have an empty environ
    int secret = 0;
    for (size_t i = 0; i + strlen("@SECRET@") <= n; ++i) secret = secret || memcmp(buf + i, "@SECRET@", strlen("@SECRET@")) == 0;
    fprintf(stderr, "proc_other: read %zu bytes of %s (parent %ld)%s\n", n, path, (long)getppid(),
            secret ? ", holding the secret" : "");
    abort();
  }
  closedir(d);
  return 0;
}
