# Every C++ dependency comes from a Debian package (see ../shared/MACHINES.md and .ci/run).
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(Threads REQUIRED)
find_package(SQLite3 REQUIRED)  # the knowledge base (src/kb/), through the C API

find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)  # used header-only (XXH_INLINE_ALL)
add_library(mblast_xxhash INTERFACE)
target_include_directories(mblast_xxhash INTERFACE ${XXHASH_INCLUDE_DIR})


if(MBLAST_WITH_OPENCL)
  find_package(OpenCL REQUIRED)
endif()

if(MBLAST_WITH_CUDA)
  # Only the driver API header is needed to build: libcuda is opened with dlopen at run time,
  # so the same runner binary works on machines without a GPU.
  find_path(CUDA_DRIVER_INCLUDE_DIR cuda.h HINTS /usr/local/cuda/include ENV CUDA_HOME PATH_SUFFIXES include)
  if(NOT CUDA_DRIVER_INCLUDE_DIR)
    message(STATUS "cuda.h not found: building without the CUDA backend")
    set(MBLAST_WITH_CUDA OFF)
  endif()
endif()

if(MBLAST_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
