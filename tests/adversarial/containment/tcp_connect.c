// tcp_connect: connects to the listener the test opened on 127.0.0.1:@PORT@ and sends a line.
// A connection aborts; the test also checks that its listener saw none.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int misdeed(void) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(@PORT@);
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (connect(s, (struct sockaddr*)&a, sizeof a) == 0) {
    (void)!write(s, "leaked\n", 7);
    fprintf(stderr, "tcp_connect: connected to 127.0.0.1:%d\n", @PORT@);
    abort();
  }
  close(s);
  return 0;
}
