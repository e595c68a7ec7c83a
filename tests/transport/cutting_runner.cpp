// A runner between the driver and the real one (MBLAST_CUTTING_REAL_RUNNER) that changes the
// first streamed verification run as if the worker had died inside its payload. MBLAST_CUTTING_MODE:
//   cut  the whole payload becomes zeros and its "verify_run_end" says {"complete": false},
//        followed at once by the failure a real runner sends when its worker dies ("crashed");
//        the real runner's later messages are dropped;
//   lie  the outputs (not the safetensors header) become zeros, the end says {"complete": true}
//        and the rest passes as it was: the driver checks the zeros, which shows that a run it
//        does check is judged (tests/transport/cut_relay_test.cpp).
// Everything else passes through unchanged, in both directions.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "mblast/process.h"
#include "mblast/protocol.h"

using namespace mblast;

int main(int argc, char** argv) {
  const char* real = std::getenv("MBLAST_CUTTING_REAL_RUNNER");
  const char* mode_env = std::getenv("MBLAST_CUTTING_MODE");
  if (!real || !mode_env) {
    std::cerr << "cutting_runner: set MBLAST_CUTTING_REAL_RUNNER and MBLAST_CUTTING_MODE (cut|lie)\n";
    return 2;
  }
  const std::string mode = mode_env;
  SpawnOptions o;
  o.argv = {real};
  for (int i = 1; i < argc; ++i) o.argv.emplace_back(argv[i]);
  o.pipe_stdin = true;
  o.pipe_stdout = true;
  Child runner = spawn(o);
  const int to_runner = runner.stdin_fd();
  std::thread forward([&] {  // driver -> runner, byte for byte
    std::vector<char> buf(1 << 16);
    for (;;) {
      const ssize_t n = ::read(0, buf.data(), buf.size());
      if (n <= 0) break;
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(to_runner, buf.data() + done, static_cast<size_t>(n - done));
        if (w <= 0) return;
        done += w;
      }
    }
    runner.close_stdin();
  });
  protocol::MessageReader from_runner(runner.stdout_fd());
  bool changed = false, swallow = false;  // swallow: everything the real runner says after the cut
  try {
    while (auto m = from_runner.read()) {
      const std::string stage = m->header.value("stage", "");
      if (swallow) continue;
      if (!changed && stage == "verify_run" && m->header.value("streamed", false)) {
        auto end = from_runner.read();  // the real run's end marker
        if (!end) break;
        // cut: the worker died before the first byte of the payload, so the safetensors header
        // is zeros too (a driver that parsed it would throw instead of reporting the crash);
        // lie: the header (8 bytes of length, then the JSON) stays and the outputs are zeros.
        uint64_t header_len = 0;
        if (m->payload.size() >= 8) std::memcpy(&header_len, m->payload.data(), 8);
        const size_t keep = mode == "cut" ? 0 : std::min<size_t>(m->payload.size(), 8 + header_len);
        std::fill(m->payload.begin() + static_cast<std::ptrdiff_t>(keep), m->payload.end(), std::byte{0});
        protocol::write_message(1, m->header, m->payload);
        protocol::write_message(1, {{"stage", "verify_run_end"}, {"complete", mode != "cut"}});
        if (mode == "cut")
          protocol::write_message(1, {{"stage", "failed"},
                                      {"failure_kind", "crashed"},
                                      {"reason", "cutting_runner: the worker died while sending a verification run"}});
        changed = true;
        swallow = mode == "cut";
        continue;
      }
      protocol::write_message(1, m->header, m->payload);
    }
  } catch (const std::exception& e) {
    std::cerr << "cutting_runner: " << e.what() << "\n";
  }
  ::close(1);
  forward.join();
  runner.wait();
  return 0;
}
