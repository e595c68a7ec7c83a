#!/usr/bin/env bash
# Checks the benchmark suite's candidates (benchmarks/suite/candidates/<level>/<stem>.<backend>.<ext>):
# imports the suite into a work folder, evaluates every OpenCL and RVV candidate with `mblast eval`,
# and every CUDA candidate too when a GPU is present (else compiles it with nvcc, with the flags of the
# CUDA backend). Prints one table row per candidate; exits 1 when any candidate fails, 2 on bad usage.
#
#   tools/check_suite_candidates.sh                      # small size; OpenCL, RVV, CUDA (eval or compile)
#   tools/check_suite_candidates.sh --only 'level1/1[5-9]' --cuda skip
#   tools/check_suite_candidates.sh --size full --device cuda --cuda eval --opencl-target skip --rvv-target skip
set -u

usage() {
  cat <<'EOF'
Usage: tools/check_suite_candidates.sh [options]

Imports benchmarks/suite (KernelBench format) and checks every candidate under
benchmarks/suite/candidates/: OpenCL and RVV ones with `mblast eval`, CUDA ones with `mblast eval`
when nvidia-smi sees a GPU, else compiled with nvcc only. Prints a table; exit status 1 when any
candidate fails, 0 otherwise (skipped ones do not fail).

Options:
  --work DIR           work folder (default: ${TMPDIR:-/tmp}/mblast-suite-check); problems go to DIR/<size>/<level>,
                       logs to DIR/logs
  --size small|full    MBLAST_BENCH_SIZE for the import (default: small)
  --device cpu|cuda    where the import computes the reference outputs (default: cpu)
  --reuse              do not import again when DIR/<size>/<level> already holds problems
  --opencl-target T    target for .opencl.cpp candidates (default: pocl-cpu; "skip" skips them)
  --rvv-target T       target for .rvv.c candidates (default: rvv-qemu-256; "skip" skips them)
  --cuda-target T      target for .cuda.cu candidates (default: h200; its arch.gencode is used to compile)
  --cuda MODE          auto (default: eval with a GPU, compile without), eval, compile or skip
  --only REGEX         only candidates whose "<level>/<file>" matches the extended regex
  --timing             also time the correct candidates (default: verify only, --no-timing)
  --mblast PATH        the mblast binary (default: build/bin/mblast)
  -h, --help           this text

Example:
  tools/check_suite_candidates.sh --only 'softmax|layernorm'
EOF
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${TMPDIR:-/tmp}/mblast-suite-check
size=small
device=cpu
reuse=0
opencl_target=pocl-cpu
rvv_target=rvv-qemu-256
cuda_target=h200
cuda_mode=auto
only=
timing=--no-timing
mblast=$root/build/bin/mblast

while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --reuse) reuse=1; shift ;;
    --opencl-target) opencl_target=$2; shift 2 ;;
    --rvv-target) rvv_target=$2; shift 2 ;;
    --cuda-target) cuda_target=$2; shift 2 ;;
    --cuda) cuda_mode=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --timing) timing=; shift ;;
    --mblast) mblast=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "check_suite_candidates: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$size" in small | full) ;; *) echo "check_suite_candidates: --size must be small or full" >&2; exit 2 ;; esac
case "$cuda_mode" in auto | eval | compile | skip) ;; *) echo "check_suite_candidates: bad --cuda '$cuda_mode'" >&2; exit 2 ;; esac
if [ ! -x "$mblast" ]; then echo "check_suite_candidates: $mblast is not built (see --mblast)" >&2; exit 2; fi

cd "$root" || exit 2
start=$(date +%s)
mkdir -p "$work/logs" "$work/nvcc" || exit 2

if [ "$cuda_mode" = auto ]; then
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then cuda_mode="eval"; else cuda_mode="compile"; fi
fi

# The candidates to check, as "<level>/<file>".
candidates=()
for f in benchmarks/suite/candidates/level*/*.opencl.cpp benchmarks/suite/candidates/level*/*.rvv.c \
  benchmarks/suite/candidates/level*/*.cuda.cu; do
  [ -f "$f" ] || continue
  rel=${f#benchmarks/suite/candidates/}
  if [ -n "$only" ] && ! [[ $rel =~ $only ]]; then continue; fi
  candidates+=("$rel")
done
if [ ${#candidates[@]} -eq 0 ]; then echo "check_suite_candidates: no candidates selected" >&2; exit 2; fi

# Import the levels that have selected candidates.
for level in $(printf '%s\n' "${candidates[@]}" | cut -d/ -f1 | sort -u); do
  out=$work/$size/$level
  if [ $reuse -eq 1 ] && ls "$out"/*/problem.json > /dev/null 2>&1; then continue; fi
  echo "importing benchmarks/suite/$level ($size) into $out"
  MBLAST_BENCH_SIZE=$size "$mblast" import kernelbench "benchmarks/suite/$level" --out "$out" --device "$device" \
    > "$work/logs/import-$size-$level.log" 2>&1 ||
    echo "  some files failed to import (see $work/logs/import-$size-$level.log)"
done

# nvcc flags of the CUDA backend (backends/cuda/cuda_backend.cpp) for the target's architecture.
gencode=$(sed -n 's/.*"gencode": *"\([^"]*\)".*/\1/p' "targets/$cuda_target.json" 2>/dev/null | head -1)
if [ -z "$gencode" ]; then
  sm=$(sed -n 's/.*"sm": *"\([^"]*\)".*/\1/p' "targets/$cuda_target.json" 2>/dev/null | head -1)
  [ -n "$sm" ] && gencode=sm_$sm
fi
nvcc=${MBLAST_NVCC:-}
[ -z "$nvcc" ] && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] && nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
[ -z "$nvcc" ] && nvcc=$(command -v nvcc || true)

rows=()
failed=0
passed=0
skipped=0
elapsed() {  # seconds since $1 (date +%s%N), one decimal
  local tenths=$((($(date +%s%N) - $1) / 100000000))
  echo "$((tenths / 10)).$((tenths % 10))"
}
record() {  # status name backend target seconds detail
  rows+=("$(printf '%-6s %-40s %-7s %-14s %6s  %s' "$1" "$2" "$3" "$4" "$5" "$6")")
  case "$1" in ok) passed=$((passed + 1)) ;; FAIL) failed=$((failed + 1)) ;; *) skipped=$((skipped + 1)) ;; esac
}

for rel in "${candidates[@]}"; do
  level=${rel%%/*}
  file=${rel#*/}
  stem=${file%%.*}
  backend=${file#*.}
  backend=${backend%%.*}
  src=benchmarks/suite/candidates/$rel
  problem=$work/$size/$level/$stem
  log=$work/logs/$level-$stem.$backend.log
  case "$backend" in
    opencl) target=$opencl_target ;;
    rvv) target=$rvv_target ;;
    cuda) target=$cuda_target ;;
    *) record skip "$level/$stem" "$backend" - - "unknown backend"; continue ;;
  esac
  t0=$(date +%s%N)
  if [ "$target" = skip ] || { [ "$backend" = cuda ] && [ "$cuda_mode" = skip ]; }; then
    record skip "$level/$stem" "$backend" - - "skipped by option"
    continue
  fi
  if [ "$backend" = cuda ] && [ "$cuda_mode" = compile ]; then
    if [ -z "$nvcc" ] || [ -z "$gencode" ]; then
      record skip "$level/$stem" cuda nvcc - "no nvcc or no gencode for target $cuda_target"
      continue
    fi
    v=${gencode#sm_}
    v=${v#compute_}
    libs=()
    grep -qE '#include *<(cublas|cublas_v2|cublasLt)' "$src" && libs=(-lcublas -lcublasLt)
    "$nvcc" -std=c++17 -O3 -shared -Xcompiler -fPIC -cudart shared -lineinfo \
      -gencode "arch=compute_$v,code=sm_$v" -I include "$src" -o "$work/nvcc/$level-$stem.so" \
      -Xlinker --no-undefined "${libs[@]}" > "$log" 2>&1
    rc=$?
    secs=$(elapsed "$t0")
    warnings=$(grep -ci 'warning' "$log")
    if [ $rc -eq 0 ]; then
      record ok "$level/$stem" cuda "nvcc sm_$v" "$secs" "compiled only (no GPU), $warnings warnings"
    else
      record FAIL "$level/$stem" cuda "nvcc sm_$v" "$secs" "nvcc failed: $(grep -m1 -i 'error' "$log") (log: $log)"
    fi
    continue
  fi
  if [ ! -f "$problem/problem.json" ]; then
    record FAIL "$level/$stem" "$backend" "$target" - "problem not imported (see $work/logs/import-$size-$level.log)"
    continue
  fi
  "$mblast" eval "$problem" "$src" --target "$target" $timing > "$log" 2>&1
  rc=$?
  secs=$(elapsed "$t0")
  result=$(grep -m1 '^result' "$log" | sed 's/^result *//')
  if [ $rc -eq 0 ]; then
    median=$(grep -m1 '^time' "$log" | sed 's/^time *//; s/ *(.*//')
    record ok "$level/$stem" "$backend" "$target" "$secs" "${median:-$result}"
  else
    why=$(grep -A1 -m1 '^result' "$log" | tail -n +2 | grep '^ ' | sed 's/^ *//')
    [ -z "$result" ] && result="mblast eval exited $rc: $(tail -n 1 "$log")"
    record FAIL "$level/$stem" "$backend" "$target" "$secs" "$result${why:+: $why} (log: $log)"
  fi
done

printf '%-6s %-40s %-7s %-14s %6s  %s\n' status problem backend target sec detail
printf '%s\n' "${rows[@]}"
echo "$passed ok, $failed failed, $skipped skipped in $(($(date +%s) - start)) s (size $size, CUDA: $cuda_mode)"
[ $failed -eq 0 ]
