#include <dlfcn.h>

#include "mblast/runner/worker.h"

namespace mblast::runner {

CandidateEntry load_candidate_library(const std::filesystem::path& artifact) {
  void* h = ::dlopen(artifact.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw Error(std::string("cannot load the candidate: ") + ::dlerror());
  CandidateEntry e;
  e.run = reinterpret_cast<decltype(e.run)>(::dlsym(h, "mblast_run"));
  e.prepare = reinterpret_cast<decltype(e.prepare)>(::dlsym(h, "mblast_prepare"));
  e.release = reinterpret_cast<decltype(e.release)>(::dlsym(h, "mblast_release"));
  e.last_error = reinterpret_cast<decltype(e.last_error)>(::dlsym(h, "mblast_last_error"));
  // The handle stays open for the life of the worker process.
  return e;
}

}  // namespace mblast::runner
