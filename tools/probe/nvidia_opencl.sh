#!/usr/bin/env bash
# Diagnostic: why NVIDIA's OpenCL platform is (not) found on a GPU machine. Lists the ICD files,
# where libnvidia-opencl lives, what the ICD loader says when it tries it (OCL_ICD_DEBUG), and
# whether the library loads by itself and which platforms the loader lists outside mblast's
# sandbox. Then, if a platform 'NVIDIA' appears, runs issue 2's eval figures on nvidia-opencl and
# the OpenCL conformance and adversarial suites (NO_POCL=1: PoCL's ICD left out, so that they
# run on NVIDIA's OpenCL alone). If it does not, which sandbox layer is in the way.
#   [NO_POCL=1] [RES_DIR=D] bash tools/probe/nvidia_opencl.sh [BUILD_DIR]
# Answered (2026-12-05, H200, driver 580.159.04): the library is at /usr/local/nvidia/lib64 and
# loads, and yet mblast found no NVIDIA platform: see `git show cad366e:docs/STATUS.md`, that day.
set -u
B=${1:-build-gpu}/bin
echo "== /etc/OpenCL/vendors"; ls -la /etc/OpenCL/vendors 2>&1; cat /etc/OpenCL/vendors/*.icd 2>&1
echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
echo "== ldconfig"; ldconfig -p | grep -i -E "opencl|libcuda\.|nvidia" | head -30
echo "== files"; find /usr /lib /opt /etc -maxdepth 6 \( -name 'libnvidia-opencl*' -o -name 'libcuda.so*' -o -name '*.icd' \) 2>/dev/null | head -20
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1
lib=$(ldconfig -p | awk '/libnvidia-opencl\.so\.1/ {print $NF; exit}')
[[ -z $lib ]] && lib=$(find /usr /lib /opt -name 'libnvidia-opencl.so.1*' 2>/dev/null | head -1)
echo "== library: ${lib:-none}"
python3 - "$lib" <<'PY'
import ctypes, sys
for name in ("libnvidia-opencl.so.1", sys.argv[1]):
    if not name:
        continue
    try:
        ctypes.CDLL(name)
        print("dlopen ok:", name)
    except OSError as e:
        print("dlopen failed:", name, e)
PY
d=$(mktemp -d)
[[ -n ${NO_POCL:-} ]] || cp /etc/OpenCL/vendors/*.icd "$d"/ 2>/dev/null
echo "${lib:-libnvidia-opencl.so.1}" >"$d/nvidia.icd"
export OCL_ICD_VENDORS=$d
echo "== platforms the ICD loader lists outside the sandbox"
python3 - <<'PY'
import ctypes
cl = ctypes.CDLL("libOpenCL.so.1")
n = ctypes.c_uint(0)
rc = cl.clGetPlatformIDs(0, None, ctypes.byref(n))
print("clGetPlatformIDs:", rc, n.value, "platforms")
ids = (ctypes.c_void_p * max(n.value, 1))()
cl.clGetPlatformIDs(n.value, ids, None)
for p in ids[: n.value]:
    buf = ctypes.create_string_buffer(256)
    cl.clGetPlatformInfo(ctypes.c_void_p(p), 0x0902, 256, buf, None)  # CL_PLATFORM_NAME
    nd = ctypes.c_uint(0)
    rc = cl.clGetDeviceIDs(ctypes.c_void_p(p), ctypes.c_ulong(0xFFFFFFFF), 0, None, ctypes.byref(nd))
    print(" ", buf.value.decode(), "devices:", nd.value, "rc", rc)
PY
echo "== mblast targets with $d: $(cat "$d/nvidia.icd")"
OCL_ICD_DEBUG=7 "$B/mblast" targets 2>&1 | head -40
available() {
  "$B/mblast" targets --json | python3 -c 'import json, sys
sys.exit(0 if any(t["name"] == "nvidia-opencl" and t["available"] for t in json.load(sys.stdin)) else 1)'
}
if ! available; then
  for mode in no-memory-rlimits no-landlock; do
    if MBLAST_SANDBOX=$mode available; then
      echo "== SANDBOX DIAGNOSIS: nvidia-opencl is available with MBLAST_SANDBOX=$mode"
      break
    fi
  done
fi
if available; then
  echo "== nvidia-opencl available: issue 2's figures, then the OpenCL conformance and adversarial suites"
  python3 tools/mblast_data.py problems/softmax/ problems/matmul/ >/dev/null
  python3 benchmarks/eval_repeatability.py --target nvidia-opencl --problems softmax matmul --runs 5 \
    --mblast "$B/mblast" --out "${RES_DIR:-/tmp}/repeat_nvidia_opencl.json"
  ctest --test-dir "${1:-build-gpu}" --output-on-failure -j 4 \
    -R "AllBackends/(Conformance|Adversarial|Peaks|TimingLoop).*opencl" 2>&1 | tail -40
fi
