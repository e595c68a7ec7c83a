#!/usr/bin/env bash
# Runs this machine's CUDA-enabled build on the GPU machine without building there (a build
# there takes minutes of device time; the binaries take seconds to copy).
#
#   tools/gpu_prebuilt.sh bundle DEST   here: copies the binaries the CUDA tests need, and every
#                                        shared library they load that is not glibc's or the
#                                        driver's, into DEST (git-ignored; pass it in carry)
#   tools/gpu_prebuilt.sh run DEST      on the GPU machine, from the copy of the repo: puts the
#                                        binaries back under build/, links the build's absolute
#                                        source path to this copy, makes the problems' data and
#                                        runs the CUDA tests (8 processes at once); logs go to $OUT
#
# The binaries hold the absolute path of the tree they were built in (the source folder, the
# runner, the test cache): `bundle` records it and `run` links it to the copy it runs in.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?bundle or run}
dest=${2:?destination folder}
bins=(bin/mblast bin/mblast-runner tests/mblast_adversarial_tests tests/mblast_adversarial_timed_tests
  tests/mblast_conformance_tests
  tests/mblast_containment_tests backends/cuda/mblast_cuda_device_tests tests/policy/mblast_policy_tests)

if [[ $mode == bundle ]]; then
  build=${BUILD_DIR:-build}
  rm -rf "$dest" && mkdir -p "$dest/build" "$dest/lib"
  for b in "${bins[@]}"; do
    mkdir -p "$dest/build/$(dirname "$b")"
    cp "$build/$b" "$dest/build/$b"
    # glibc, libstdc++/libgcc (newer there) and the driver stay; the rest travels.
    ldd "$build/$b" | awk '$3 ~ /^\// {print $3}' |
      grep -Ev '/(libc|libm|libdl|librt|libresolv|libpthread|libstdc\+\+|libgcc_s|libcuda|ld-linux-x86-64)\.so' |
      xargs -r cp -L -t "$dest/lib"
  done
  # Without debug information: a RelWithDebInfo build is 519 MB, over the 64 MiB a call carries.
  find "$dest/build" -type f -perm -u+x -exec strip --strip-debug {} +
  realpath . >"$dest/source_dir"
  du -sh "$dest"
  exit 0
fi

[[ $mode == run ]] || { echo "mode must be bundle or run" >&2; exit 2; }
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
src=$(cat "$dest/source_dir")
if [[ $src != "$PWD" ]]; then
  mkdir -p "$(dirname "$src")"
  ln -sfn "$PWD" "$src"
fi
mkdir -p build
cp -r "$dest/build/." build/
export LD_LIBRARY_PATH=$PWD/$dest/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MBLAST_HOME=$src
{ nvidia-smi -L; nvcc --version | tail -2; } >"$out/machine.txt" 2>&1 || true
"${PYTHON:-python3}" tools/mblast_data.py problems/*/ >"$out/data.log" 2>&1
limit=${LIMIT_S:-120}
run_shards() {  # binary filter shards name
  local i
  for ((i = 0; i < $3; ++i)); do
    GTEST_TOTAL_SHARDS=$3 GTEST_SHARD_INDEX=$i timeout "$limit" "build/$1" --gtest_filter="$2" >"$out/$4.$i.log" 2>&1 &
  done
}
timeout "$limit" build/backends/cuda/mblast_cuda_device_tests >"$out/cuda_device.log" 2>&1 &
run_shards tests/mblast_adversarial_tests '*cuda*' 4 adversarial
run_shards tests/mblast_conformance_tests '*cuda*' 1 conformance
run_shards tests/mblast_adversarial_timed_tests '*cuda*' 1 adversarial_timed
run_shards tests/mblast_containment_tests '*cuda*' 1 containment
run_shards tests/policy/mblast_policy_tests '*CudaVariantsOnTarget*' 2 variants
wait
{
  echo "tests per verdict:"
  grep -h -oE '^\[ +(OK|FAILED|SKIPPED) +\] [^ ]+' "$out"/*.log | sort -u | awk '{print $2}' | sort | uniq -c
  echo "failed:"
  grep -h -E '^\[  FAILED  \] [^ ]+' "$out"/*.log | awk '{print $4}' | sort -u
} >"$out/summary.txt" 2>&1 || true
cat "$out/summary.txt"
