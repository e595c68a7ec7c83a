#!/usr/bin/env bash
# One GPU-machine call for a change to the measurement: builds this tree in build-gpu and, when
# .before/ holds an earlier tree (git archive of another commit, carried with the call), that
# tree in .before/build-gpu, both at once; runs the CUDA tests that CTEST_ARGS names on this
# tree; then evaluates the same candidates with both builds, alternating, for the eval's wall
# time and phases (benchmarks/eval_repeatability.py). The ctest log and the cost JSON go to $OUT.
#
#   CTEST_ARGS='-R cuda_ -j4' PROBLEMS='vec_add softmax' tools/gpu_before_after.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
export MBLAST_HOME=$ROOT
targets="mblast mblast-runner mblast_adversarial_tests mblast_adversarial_timed_tests mblast_containment_tests mblast_conformance_tests mblast_cuda_device_tests"
# shellcheck source=tools/gpu_cmake_args.sh
source "$ROOT/tools/gpu_cmake_args.sh"
build() {  # build SRC_DIR TARGETS...
  local src=$1
  shift
  local log=$ROOT/build-gpu-$(basename "$src").log  # kept off $OUT: at most 8 files come back
  cmake -S "$src" -B "$src/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${gpu_cmake_args[@]}" >"$log" 2>&1 &&
    cmake --build "$src/build-gpu" -j 8 --target "$@" >>"$log" 2>&1
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
build "$ROOT" $targets &
now=$!
if [[ -d .before/src ]]; then
  build "$ROOT/.before" mblast mblast-runner &
  before=$!
fi
wait $now || { echo "build failed"; tail -30 "$ROOT/build-gpu-$(basename "$ROOT").log"; exit 1; }
echo "== built in $((SECONDS - t0)) s"
python3 tools/mblast_data.py problems/*/ >/dev/null 2>&1

echo "== first eval (peaks)"
build-gpu/bin/mblast eval problems/vec_add problems/vec_add/candidates/naive.cuda.cu --target "${GPU_TARGET:-h200}" --json \
  2>&1 | head -c 400; echo
echo "== device tests"
build-gpu/backends/cuda/mblast_cuda_device_tests 2>&1 | tail -8
if [[ ${CTEST_ARGS:-} != none ]]; then
  echo "== ctest ${CTEST_ARGS:-}"
  # shellcheck disable=SC2086
  ctest --test-dir build-gpu --output-on-failure ${CTEST_ARGS:--R cuda_} >"$OUT/ctest.log" 2>&1
  grep -E "tests passed|tests failed|\((Failed|Timeout|SEGFAULT)" "$OUT/ctest.log"
fi
if [[ ${COST:-1} == 0 ]]; then  # the earlier tree's build is left for the next call
  [[ -n ${before:-} ]] && wait "$before"
  echo "== done in $((SECONDS - t0)) s (no cost run)"
  exit 0
fi

# SUITE_PROBLEMS: files of benchmarks/suite/level1 (stems) imported at full size on the GPU, then
# evaluated with their naive candidates like the hand-made problems.
if [[ -n ${SUITE_PROBLEMS:-} ]]; then
  echo "== importing ${SUITE_PROBLEMS} (full size)"
  mkdir -p /tmp/suite-src
  for p in $SUITE_PROBLEMS; do cp benchmarks/suite/level1/$p.py /tmp/suite-src/; done
  build-gpu/bin/mblast import kernelbench /tmp/suite-src --out /tmp/suite-imported --device cuda --python python3 2>&1 | tail -3
fi

if [[ -n ${before:-} ]] && wait "$before"; then
  echo "== eval cost, before (.before) and after, alternating"
  for round in ${ROUNDS:-1}; do
    for side in before after; do
      bin=build-gpu/bin/mblast
      [[ $side == before ]] && bin=.before/build-gpu/bin/mblast
      python3 benchmarks/eval_repeatability.py --mblast "$bin" --target "${GPU_TARGET:-h200}" --backend cuda \
        --problems ${PROBLEMS:-vec_add relu softmax matmul row_sum} --runs 3 --out "$OUT/cost_${side}_$round.json" \
        2>&1 | grep -v "verification runs by step" | cut -c1-200 | sed "s/^/$side $round: /"
      if [[ -n ${SUITE_PROBLEMS:-} ]]; then
        python3 benchmarks/eval_repeatability.py --mblast "$bin" --target "${GPU_TARGET:-h200}" --backend cuda \
          --problems-root /tmp/suite-imported --candidates-dir benchmarks/suite/candidates/level1 \
          --problems $SUITE_PROBLEMS --runs 3 --out "$OUT/suite_cost_${side}_$round.json" \
          2>&1 | grep -v "verification runs by step" | cut -c1-200 | sed "s/^/$side $round suite: /"
      fi
    done
  done
fi
echo "== done in $((SECONDS - t0)) s"
