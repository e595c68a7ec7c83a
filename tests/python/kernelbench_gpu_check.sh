#!/usr/bin/env bash
# The KernelBench path on a CUDA machine, in one command (GPU time is scarce): import the test
# fixtures on cuda and on the CPU, time PyTorch eager and torch.compile on the GPU, export the
# CUDA fixture candidate and run it against its Model on the GPU, export the OpenCL one and run
# it on the CPU, then the Python test module with that machine's torch. Needs python3 with torch
# (CUDA) and safetensors (PYTHONPATH may point at a carried copy); writes everything to OUT.
#   tests/python/kernelbench_gpu_check.sh OUT_DIR
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT_DIR}
mkdir -p "$OUT"
PY=${MBLAST_PYTHON:-python3}
T=tools/mblast_kernelbench.py
F=tests/python/fixtures
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$OUT/torch_extensions}
step() { echo "== $*"; }
step environment
$PY -c "import torch, safetensors; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
step "import (cuda, cpu)"
for dev in cuda cpu; do
  /usr/bin/time -f "import $dev: %e s" $PY $T import $F --out "$OUT/$dev" --device $dev --json-out "$OUT/import_$dev.json"
  echo "rc=$? (1 expected: two fixtures are broken on purpose)"
done
MBLAST_KB_TRACER=export $PY $T import $F/linear_gelu.py --out "$OUT/export_tracer"; echo "torch.export tracer rc=$?"
$PY - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
for d in ("cuda", "cpu", "export_tracer"):
    for n in ("relu", "linear_gelu", "tuple_out"):
        try:
            p = json.load(open(f"{out}/{d}/{n}/problem.json"))
        except OSError:
            continue
        print(d, n, p["op_class"], p["flops"], p["flops_method"], p.get("graph_method") or p.get("graph_note"),
              p["tolerance"], [s["distribution"] for s in p["seeds"]])
PYEOF
step "baselines (cuda, then cpu)"
$PY $T baseline "$OUT/cuda/linear_gelu" --device cuda --compile --repeats 30 --min-seconds 0.2 --json-out "$OUT/baseline_cuda.json" >/dev/null; echo rc=$?
$PY $T baseline "$OUT/cpu/linear_gelu" --device cpu --compile --repeats 30 --min-seconds 0.2 --json-out "$OUT/baseline_cpu.json" >/dev/null; echo rc=$?
$PY - "$OUT" <<'PYEOF'
import json, sys
for d in ("cuda", "cpu"):
    try:
        r = json.load(open(f"{sys.argv[1]}/baseline_{d}.json"))
    except OSError:
        continue
    for k in ("eager", "compile"):
        v = r[k]
        print(d, k, v.get("median_us"), v.get("spread_pct"), v.get("compile_seconds"), v.get("unavailable"), v.get("check"))
PYEOF
step "export cuda, run on the GPU"
$PY $T export --problem "$OUT/cuda/linear_gelu" --candidate $F/linear_gelu.cuda.cu --backend cuda --out "$OUT/linear_gelu_cuda_new.py"
/usr/bin/time -f "build+check: %e s" $PY tests/python/check_export.py "$OUT/linear_gelu_cuda_new.py" "$OUT/cuda/linear_gelu" cuda; echo rc=$?
step "export opencl, run on the CPU (first OpenCL platform, or MBLAST_OPENCL_PLATFORM)"
$PY $T export --problem "$OUT/cpu/linear_gelu" --candidate $F/linear_gelu.opencl.cpp --backend opencl --out "$OUT/linear_gelu_opencl_new.py"
/usr/bin/time -f "build+check: %e s" $PY tests/python/check_export.py "$OUT/linear_gelu_opencl_new.py" "$OUT/cpu/linear_gelu" cpu; echo rc=$?
step "test module"
$PY -m unittest tests/python/test_kernelbench.py 2>&1 | tail -25
