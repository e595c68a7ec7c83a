#!/usr/bin/env bash
# One command for a GPU machine (Ubuntu 24.04, CUDA 13 at /usr/local/cuda): configure and build
# mblast in ./build-gpu, list the targets, and run every test suite. Logs go to ${OUT:-./gpu-out}.
#
#   tools/gpu_check.sh                 configure, build, test
#   BUILD_DIR=b tools/gpu_check.sh     another build folder
#   CTEST_ARGS="-R cuda" tools/gpu_check.sh   only the tests whose names match
#
# The reference data of the problems must exist already (python3 tools/mblast_data.py problems/*/).
# Exit status: ctest's (0 when every test passed or skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT_DIR=${OUT:-$ROOT/gpu-out}
BUILD=${BUILD_DIR:-build-gpu}
mkdir -p "$OUT_DIR"
export MBLAST_HOME=$ROOT
# On a GPU machine the variant tests evaluate every variant, not CI's covering subset.
export MBLAST_TEST_EVERY_VARIANT=${MBLAST_TEST_EVERY_VARIANT:-1}

echo "== gpu_check: repo $ROOT, build $BUILD, logs $OUT_DIR"

echo "== machine"
{
  uname -a
  command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi: not found"
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then /usr/local/cuda/bin/nvcc --version; else echo "nvcc: not at /usr/local/cuda/bin"; fi
  cmake --version | head -1
  c++ --version | head -1
} >"$OUT_DIR/machine.txt" 2>&1 || true
sed -n '1,25p' "$OUT_DIR/machine.txt"

generator=(-G Ninja)
if ! command -v ninja >/dev/null; then
  echo "== ninja not found: using Unix Makefiles"
  generator=(-G "Unix Makefiles")
fi
cmake_args=(-S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo)
# GPU servers often lack some -dev packages; Debian's, unpacked into .deps by tools/gpu_deps.sh, fill the gap.
# shellcheck source=tools/gpu_cmake_args.sh
source "$ROOT/tools/gpu_cmake_args.sh"
echo "== cmake arguments for .deps: ${gpu_cmake_args[*]}"
cmake_args+=("${gpu_cmake_args[@]}")

echo "== configure: cmake ${cmake_args[*]}"
cmake "${cmake_args[@]}" 2>&1 | tee "$OUT_DIR/configure.log"

echo "== build"
# BUILD_TARGETS: build only these (default: everything).
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} 2>&1 | tee "$OUT_DIR/build.log"

# NVIDIA's OpenCL: an ICD folder holding nvidia.icd (naming libnvidia-opencl.so.1) beside the
# system's own ICDs (PoCL, if installed), so both the nvidia-opencl and pocl-cpu targets work.
icd_dir=$(mktemp -d)
trap 'rm -rf "$icd_dir"' EXIT
cp /etc/OpenCL/vendors/*.icd "$icd_dir"/ 2>/dev/null || true
echo "libnvidia-opencl.so.1" >"$icd_dir/nvidia.icd"
export OCL_ICD_VENDORS=$icd_dir
echo "== OCL_ICD_VENDORS=$icd_dir: $(ls "$icd_dir" | tr '\n' ' ')"

echo "== mblast targets"
"$BUILD/bin/mblast" targets 2>&1 | tee "$OUT_DIR/targets.txt" || echo "mblast targets failed (see targets.txt)"
"$BUILD/bin/mblast" targets --json >"$OUT_DIR/targets.json" 2>&1 || true

# The sandbox must let the GPU driver initialise. If the first CUDA eval says the device is
# unavailable, find which sandbox layer is in the way, say so, and go on without that layer.
probe_cuda() {
  "$BUILD/bin/mblast" eval problems/vec_add problems/vec_add/candidates/naive.cuda.cu --target "${GPU_TARGET:-h200}" \
    --no-timing --json >"$OUT_DIR/sandbox_probe_${MBLAST_SANDBOX:-full}.json" 2>&1
  grep -q '"correct": true' "$OUT_DIR/sandbox_probe_${MBLAST_SANDBOX:-full}.json"
}
if ! probe_cuda; then
  echo "== CUDA eval failed under the full sandbox:"; grep -E '"(reason|sandbox)"' "$OUT_DIR/sandbox_probe_full.json" || true
  for mode in no-memory-rlimits no-landlock; do
    if MBLAST_SANDBOX=$mode probe_cuda; then
      echo "== SANDBOX DIAGNOSIS: CUDA works with MBLAST_SANDBOX=$mode; continuing with it"
      export MBLAST_SANDBOX=$mode
      break
    fi
  done
fi

# Peaks are measured once per target and device and cached: measure them now, alone on the GPU,
# before the test suites run in parallel.
for t in ${GPU_TARGET:-h200} nvidia-opencl; do
  case $t in nvidia-opencl) cand=problems/vec_add/candidates/naive.opencl.cpp ;; *) cand=problems/vec_add/candidates/naive.cuda.cu ;; esac
  echo "== first eval on $t (measures and caches the peaks)"
  "$BUILD/bin/mblast" eval problems/vec_add "$cand" --target "$t" --json >"$OUT_DIR/first_eval_$t.json" 2>&1 || true
  head -c 600 "$OUT_DIR/first_eval_$t.json"; echo
done

echo "== ctest ${CTEST_ARGS:-}"
set +e
# shellcheck disable=SC2086  # CTEST_ARGS is a list of words on purpose
ctest --test-dir "$BUILD" --output-on-failure --output-junit "$OUT_DIR/ctest.xml" ${CTEST_ARGS:-} 2>&1 | tee "$OUT_DIR/ctest.log"
rc=${PIPESTATUS[0]}
set -e

echo "== summary"
grep -E "tests passed|tests failed|Total Test time" "$OUT_DIR/ctest.log" || true
grep -E "^\s*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)" "$OUT_DIR/ctest.log" || true
echo "== gpu_check: ctest exit status $rc; logs in $OUT_DIR"
exit "$rc"
