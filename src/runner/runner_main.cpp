// mblast-runner: the target-side process. `mblast-runner` (or --stdio) serves the protocol on
// stdin/stdout; `mblast-runner --worker --backend NAME` is the sandboxed worker it starts.
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <string>

#include "mblast/paths.h"
#include "mblast/process.h"
#include "mblast/runner/backend.h"
#include "mblast/runner/sandbox.h"
#include "mblast/runner/worker.h"
#include "mblast/version.h"
#include "runner_service.h"

int main(int argc, char** argv) {
  std::string backend;
  bool worker = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--worker")
      worker = true;
    else if (a == "--backend" && i + 1 < argc)
      backend = argv[++i];
    else if (a == "--version") {
      std::printf("mblast-runner %s\n", mblast::kMblastVersion);
      return 0;
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "mblast-runner: runs candidates for mblast (driver <-> runner protocol on stdin/stdout).\n"
          "  mblast-runner [--stdio]    serve requests (started by mblast, locally or over ssh)\n"
          "  mblast-runner --version\n"
          "Environment: MBLAST_CACHE_DIR (builds, peaks), MBLAST_HOME (data folder with include/).\n");
      return 0;
    } else if (a != "--stdio") {
      std::fprintf(stderr, "mblast-runner: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    if (worker) {
      mblast::runner::Backend* b = mblast::runner::find_backend(backend);
      if (!b) {
        std::fprintf(stderr, "mblast-runner: no backend '%s'\n", backend.c_str());
        return 2;
      }
      mblast::runner::set_after_open_hook([](const nlohmann::json& j) {
        return mblast::runner::apply_landlock(mblast::runner::landlock_from_json(j));
      });
      return mblast::runner::worker_main(3, 4, *b, nullptr);
    }
    mblast::restart_with_huge_pages(argv);  // for the workers and this relay (started over ssh too)
    // Keep the protocol stream clean: anything else this process prints goes to stderr.
    int proto_out = ::dup(1);
    ::dup2(2, 1);
    mblast::runner::RunnerService svc(mblast::self_executable(), mblast::cache_dir(), mblast::data_dir() / "include");
    return svc.serve(0, proto_out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mblast-runner: %s\n", e.what());
    return 1;
  }
}
