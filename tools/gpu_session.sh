#!/usr/bin/env bash
# A GPU session in calls of at most ten minutes: `start` copies this tree to /tmp/snap and runs
# the pipeline there detached (it survives the call while the machine stays held); `collect S`
# waits up to S seconds for it and copies the results to $OUT (at most 8 files: the main ones
# plus res.tgz with everything). Results live in /tmp/res on the GPU machine.
#
#   BENCH_FILES="benchmarks/suite/level2/07_rmsnorm_linear.py ..." tools/gpu_session.sh start
#   tools/gpu_session.sh collect 520            # again in the next call, until PIPELINE_DONE
#   tools/gpu_session.sh stop                   # ends the pipeline and what it started
#
# Pipeline: tools/gpu_check.sh builds mblast, mblast-runner and EXTRA_TARGETS and measures the peaks;
# then CTEST_ARGS (ctest's arguments, e.g. "-R cuda_ -j 8") run, then:
#   BENCH_FILES  KernelBench files: one `mblast bench --size full --optimize` over them (EVALS
#                evaluations each, default 3; FROM generated|candidate, default generated), which
#                imports each file as it reaches it (IMPORT_JOBS=N, N>0: all first, N at a time).
#                MODE: the benches to run, in order, each into bench_<mode>.json: "optimize" (the
#                default) and/or "candidates" (the suite's own naive candidates, without
#                --optimize); OPT_FILES: the optimize bench's files when they are fewer than
#                BENCH_FILES. opt.log stays in res.tgz.
#   OPT_DIRS     problem folders: `mblast optimize --target h200 --max-evals ${OPT_EVALS:-3}` each
#   MODEL_FILES  KernelBench model files: benchmarks/model_level.py on h200 for each (MODEL_MAX_BYTES,
#                default 1G; MODEL_EVALS, default 3; MODEL_TIMEOUT seconds each, default 300), before
#                the bench; model_<stem>.json and .log
#   PROBE        one shell command (a diagnostic, e.g. a tools/probe script), its output in probe.log
#                (PROBE_TIMEOUT seconds at most, default 300)
# A `collect` on a machine without /tmp/res (a fresh one: the last was released) says so at once.
set -u
R=/tmp/res
case ${1:-} in
start)
  rm -rf /tmp/snap "$R"
  mkdir -p /tmp/snap "$R"
  cp -a . /tmp/snap/
  setsid nohup bash /tmp/snap/tools/gpu_session.sh pipeline >"$R/pipeline.out" 2>&1 </dev/null &
  ;;
stop)
  # The pipeline and everything it started (patterns that cannot match this command's own line).
  pkill -f "[g]pu_session.sh pipeline"
  pkill -x mblast; pkill -x mblast-runner; pkill -f "[m]blast_kernelbench"
  sleep 2
  pkill -9 -x mblast; pkill -9 -x mblast-runner; pkill -9 -f "[m]blast_kernelbench"
  touch "$R/DONE" 2>/dev/null
  echo "stopped"
  ;;
collect)
  [[ -d $R ]] || { echo "NO_PIPELINE_HERE (a fresh machine: the last one was released)"; exit 3; }
  end=$(($(date +%s) + ${2:-500}))
  while [[ ! -f $R/DONE && $(date +%s) -lt $end ]]; do sleep 5; done
  for f in "$R"/bench_*.json "$R"/bench_*.log "$R"/progress.log "$R"/ctest.log "$R"/probe.log; do [[ -f $f ]] && cp "$f" "$OUT"/; done
  (cd "$R" && tar czf "$OUT/res.tgz" --exclude='*.tgz' . 2>/dev/null)
  cat "$R/progress.log"
  tail -n 30 "$R"/bench_*.log 2>/dev/null
  cat "$R/opt.log" 2>/dev/null
  [[ -f $R/DONE ]] && echo PIPELINE_DONE || echo PIPELINE_RUNNING
  ;;
pipeline)
  cd /tmp/snap || exit 1
  export MBLAST_HOME=$PWD PYTHONUNBUFFERED=1
  ROOT=$PWD
  # shellcheck source=tools/gpu_cmake_args.sh
  source tools/gpu_cmake_args.sh  # also LD_LIBRARY_PATH for libpq from .deps, for every step below
  B=/tmp/snap/build-gpu/bin
  echo "== build $(date -u +%T)" >>"$R/progress.log"
  python3 tools/mblast_data.py problems/*/ >"$R/data.log" 2>&1
  # An earlier tree in .before (for the eval-cost comparison of tools/gpu_before_after.sh) is
  # built beside this one, so that the PROBE that compares them finds both built.
  if [[ -d .before/src ]]; then
    (cmake -S .before -B .before/build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "${gpu_cmake_args[@]}" >"$R/before_build.log" 2>&1 &&
      cmake --build .before/build-gpu -j 6 --target mblast mblast-runner >>"$R/before_build.log" 2>&1) &
    before_build=$!
  fi
  # Build and measure the peaks alone on the GPU; the tests come after, beside the imports.
  OUT=$R/gc BUILD_TARGETS="mblast mblast-runner ${EXTRA_TARGETS:-}" CTEST_ARGS="-R zzzz_none" \
    bash tools/gpu_check.sh >"$R/gpu_check.log" 2>&1
  echo "== gpu_check rc $? $(date -u +%T)" >>"$R/progress.log"
  # NVIDIA's OpenCL beside the system's ICDs, as gpu_check.sh does, for the tests, probe and bench.
  mkdir -p /tmp/icd && cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null
  echo "libnvidia-opencl.so.1" >/tmp/icd/nvidia.icd
  export OCL_ICD_VENDORS=/tmp/icd
  # The tests first, alone: pocl-cpu's peak measured beside imports came out low, and a naive
  # kernel then ran at 1.59 of it (session 25).
  if [[ -n ${CTEST_ARGS:-} ]]; then
    echo "== ctest $(date -u +%T)" >>"$R/progress.log"
    # shellcheck disable=SC2086  # a list of words on purpose
    ctest --test-dir build-gpu --output-on-failure $CTEST_ARGS >"$R/ctest.log" 2>&1
    echo "== ctest rc $? $(date -u +%T)" >>"$R/progress.log"
    tail -5 "$R/ctest.log" >>"$R/progress.log"
  fi
  # Pre-imports are off by default: the bench's own imports run in its helper process, 3 s each
  # on the H100 (median), against 7 s each, 4 at a time, as processes of their own (session 26).
  if [[ -n ${BENCH_FILES:-} && ${IMPORT_JOBS:-0} -gt 0 ]]; then
    mkdir -p /tmp/none /tmp/pre
    echo "== pre-import $(date -u +%T)" >>"$R/progress.log"
    # One bench per file with no candidates and no baselines: it only imports (into /tmp/bw), in
    # the bench's order, while at least PREIMPORT_MIN_FREE_GIB (default 40) are free. A full-size
    # suite does not fit (single imports up to 4.8 GB; 64 GB free on the H100 machine): importing
    # past the disk made the cache evict the imports the bench needed first, and every row
    # imported again (session 25). The rest are imported by the bench, as it reaches them.
    # shellcheck disable=SC2086,SC2016  # a list of files; $1 and $2 are expanded by the inner shell
    printf '%s\n' $BENCH_FILES | xargs -P "$IMPORT_JOBS" -I{} sh -c '
      free=$(df --output=avail -B1G /tmp | tail -1 | tr -d " ")
      if [ "$free" -lt "$2" ]; then echo "pre-import skipped ($free GiB free): $1"; exit 0; fi
      "$0" bench "$1" --target h200 --size full --no-baseline \
      --candidates /tmp/none --work /tmp/bw --out "/tmp/pre/$(basename "$1").json"' "$B/mblast" {} "${PREIMPORT_MIN_FREE_GIB:-40}" \
      >"$R/preimport.log" 2>&1
  fi
  echo "== imports done $(date -u +%T)" >>"$R/progress.log"
  # Per pre-imported problem: its status and whether the import traced a graph (issue 5's figure).
  python3 -c 'import glob, json
for f in sorted(glob.glob("/tmp/pre/*.json")):
    for p in json.load(open(f)).get("problems", []):
        print(p.get("key"), p.get("status"), "graph" if p.get("graph") else "no graph", p.get("import", {}).get("seconds"))' \
    >"$R/preimport_graph.txt" 2>&1
  [[ -n ${before_build:-} ]] && wait "$before_build"
  if [[ -n ${PROBE:-} ]]; then
    echo "== probe $(date -u +%T)" >>"$R/progress.log"
    timeout "${PROBE_TIMEOUT:-300}" bash -c "$PROBE" >"$R/probe.log" 2>&1
    echo "== probe rc $? $(date -u +%T)" >>"$R/progress.log"
  fi
  for f in ${MODEL_FILES:-}; do
    echo "== model $f $(date -u +%T)" >>"$R/progress.log"
    stem=$(basename "$f" .py)
    timeout "${MODEL_TIMEOUT:-300}" python3 benchmarks/model_level.py --mblast "$B/mblast" --target h200 \
      --max-bytes "${MODEL_MAX_BYTES:-1G}" --evals "${MODEL_EVALS:-3}" --work /tmp/ml --out "$R/model_$stem.json" \
      "$f" >"$R/model_$stem.log" 2>&1
    echo "== model $stem rc $? $(date -u +%T)" >>"$R/progress.log"
    tail -3 "$R/model_$stem.log" >>"$R/progress.log"
  done
  if [[ -n ${BENCH_FILES:-} ]]; then
    for mode in ${MODE:-optimize}; do
      echo "== bench $mode $(date -u +%T)" >>"$R/progress.log"
      files=$BENCH_FILES
      opt=()  # candidates: the suite's own (naive) candidates, as they are
      if [[ $mode == optimize ]]; then
        opt=(--optimize --optimize-evals "${EVALS:-3}" --optimize-from "${FROM:-generated}" --kb /tmp/bench_kb.sqlite)
        files=${OPT_FILES:-$BENCH_FILES}
      fi
      # shellcheck disable=SC2086  # a list of files
      "$B/mblast" bench $files --target h200 --size full "${opt[@]}" --work /tmp/bw --out "$R/bench_$mode.json" \
        >"$R/bench_$mode.log" 2>&1
      echo "== bench $mode rc $? $(date -u +%T)" >>"$R/progress.log"
    done
  fi
  for d in ${OPT_DIRS:-}; do
    echo "== optimize $d $(date -u +%T)" >>"$R/progress.log"
    log=$R/opt_$(basename "$d").log
    timeout 300 "$B/mblast" optimize "$d" --target h200 --max-evals "${OPT_EVALS:-3}" --kb /tmp/opt_kb.sqlite >"$log" 2>&1
    { echo "== $d rc $?"; grep -E "result|not correct|error|vs start" "$log" | head -12; } >>"$R/opt.log"
  done
  touch "$R/DONE"
  ;;
*)
  echo "usage: tools/gpu_session.sh start | collect SECONDS | stop | pipeline" >&2
  exit 2
  ;;
esac
