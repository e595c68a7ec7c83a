// The one place that knows which backends exist. Adding a backend: a folder under backends/,
// one line in backends/CMakeLists.txt, one block here.
#include "mblast/runner/backend.h"

#ifdef MBLAST_HAVE_OPENCL
#include "opencl/opencl_backend.h"
#endif
#ifdef MBLAST_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif
#ifdef MBLAST_HAVE_RVV
#include "rvv/rvv_backend.h"
#endif

namespace mblast::runner {

std::vector<Backend*> all_backends() {
  static std::vector<Backend*> list = [] {
    std::vector<Backend*> v;
#ifdef MBLAST_HAVE_OPENCL
    static opencl::OpenclBackend opencl_backend;
    v.push_back(&opencl_backend);
#endif
#ifdef MBLAST_HAVE_CUDA
    static cuda::CudaBackend cuda_backend;
    v.push_back(&cuda_backend);
#endif
#ifdef MBLAST_HAVE_RVV
    static rvv::RvvBackend rvv_backend;
    v.push_back(&rvv_backend);
#endif
    return v;
  }();
  return list;
}

Backend* find_backend(std::string_view name) {
  for (Backend* b : all_backends())
    if (b->name() == name) return b;
  return nullptr;
}

std::vector<std::string> Backend::worker_command(const std::filesystem::path& self,
                                                 const std::filesystem::path& artifact, const nlohmann::json& target) {
  return {self.string(), "--worker", "--backend", std::string(name())};
}

}  // namespace mblast::runner
