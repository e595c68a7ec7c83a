#!/usr/bin/env bash
# Sets up mblast on a Debian 12 machine: system packages, the Python helper's environment,
# and a build in ./build. Safe to run again. Needs root (or sudo) for apt-get.
#   tools/setup.sh            install, build
#   tools/setup.sh --no-apt   build only (packages already installed)
#   MBLAST_DEBUG_INFO=0 tools/setup.sh   build without debug info (CI does)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # build
  cmake ninja-build g++ pkg-config
  # C++ libraries of the design
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libxxhash-dev libgtest-dev libgmock-dev
  # the knowledge base: SQLite (the default), PostgreSQL through libpq (a team's KB on a server;
  # the server package only for its tests, which start a cluster of their own)
  libsqlite3-dev libpq-dev postgresql
  # the LLM client
  libcurl4-openssl-dev
  # the formatters tools/check_format.sh applies (ctest `format`): clang-format 14 and black
  clang-format black
  # OpenCL: ICD loader, headers, PoCL's CPU device
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  # CLBlast: the vendor GEMM the builtin policy lowers OpenCL matmuls to where it wins
  libclblast-dev
  # RISC-V vector: clang for riscv64, its sysroot, qemu-user
  clang-19 lld-19 llvm-19 libc6-dev-riscv64-cross libgcc-12-dev-riscv64-cross libstdc++-12-dev-riscv64-cross qemu-user
  # the Python helper (reference data); ssh for the remote-runner transport and its test
  python3 python3-numpy python3-venv python3-pip python3-torch libtorch-dev pybind11-dev openssh-client openssh-server
  # an optimised BLAS for PyTorch's CPU baselines: without it Debian's torch runs on the
  # reference (netlib) BLAS, and an eager linear is ~70x slower than it should be. The OpenMP
  # build: it shares PyTorch's OpenMP threads, where the pthread build's own threads contend
  # with them (eager products erratic, up to 10x slower; docs/kernelbench.md "BLAS")
  libopenblas0-openmp
  # a headless browser for the test of `mblast report`'s HTML page (ctest report_browser)
  chromium
)

if [[ "${1:-}" != "--no-apt" ]]; then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# The Python helper: Debian's numpy and torch, plus safetensors, onnx and onnxruntime (ONNX models
# for optimize-model) from PyPI, in a venv that mblast finds by itself (<repo>/.venv);
# MBLAST_PYTHON overrides it. numpy stays below 2: Debian's torch 1.13 is built against 1.x.
if [[ ! -x .venv/bin/python3 ]] || ! .venv/bin/python3 -c "import numpy, safetensors, onnx, onnxruntime" 2>/dev/null; then
  echo "setup: creating .venv (numpy and torch from Debian; safetensors, onnx, onnxruntime from PyPI)"
  [[ -x .venv/bin/python3 ]] || /usr/bin/python3 -m venv --system-site-packages .venv
  .venv/bin/pip install -q --disable-pip-version-check safetensors onnx==1.23.1 onnxruntime==1.30.0 "numpy<2"
fi

echo "setup: building in ./build"
# MBLAST_DEBUG_INFO=0 (CI): the same -O2 code without -g; a quarter to a third less compile time.
flags="-O2 -g -DNDEBUG"
[[ ${MBLAST_DEBUG_INFO:-1} == 0 ]] && flags="-O2 -DNDEBUG"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$flags" >/dev/null
ninja -C build
echo "setup: done. Try: build/bin/mblast targets"
