#!/usr/bin/env bash
# On a CUDA machine: the 3xTF32 matmul candidates of level2/02 (linear + GELU) pass, and the same
# candidate with the correction terms dropped (the small halves written as zeros: plain TF32
# products) is refused by the verifier. Run from the repository root with a built mblast:
#   B=build-gpu/bin tools/probe/tf32x3_mutation.sh        (MBLAST_BENCH_SIZE=full for the full size)
set -u
B=${B:-build/bin}
W=$(mktemp -d)
export MBLAST_HOME=${MBLAST_HOME:-$PWD}
"$B/mblast" import kernelbench benchmarks/suite/level2/02_linear_gelu.py --out "$W/p" >"$W/import.log" 2>&1 ||
  { echo "import failed:"; tail -5 "$W/import.log"; exit 1; }
P=$W/p/02_linear_gelu
"$B/mblast" plan "$P" --target h200 --write-variants "$W/v" || exit 1
summary() {  # the verdict, the checks and the time of an eval's JSON
  python3 -c 'import json, sys
j = json.load(sys.stdin)
print("correct:", j.get("correct"), "| failure:", j.get("failure_kind"), "|", str(j.get("reason", ""))[:300])
for c in j.get("checks", [])[:3]: print("  check:", json.dumps(c)[:300])
for k in ("timing", "median_us", "time"):
    if k in j: print("  " + k + ":", json.dumps(j[k])[:300])'
}
for f in "$W"/v/*/*tf32x3*.cu; do
  echo "== $(basename "$f")"
  "$B/mblast" eval "$P" "$f" --target h200 --json 2>&1 | summary
  m=$W/$(basename "$f" .cuda.cu)_small_halves_zero.cuda.cu
  sed -e 's/small\[\([io]\)\] = mb_tf32(v - b);/small[\1] = 0.0f;/' "$f" >"$m"
  echo "   mutated lines: $(grep -c "small\[[io]\] = 0.0f;" "$m")"
  echo "== $(basename "$m") (must be refused)"
  "$B/mblast" eval "$P" "$m" --target h200 --json 2>&1 | summary
done
