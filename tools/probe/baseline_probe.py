"""Diagnostic: the bench's eager baseline of one imported problem, timed as
tools/kernelbench/baseline.py does (L2 flush and a device sync around each call) and again with
the flush turned off, to see what the method adds to PyTorch's own time.

    MBLAST_BENCH_SIZE=full python3 tools/mblast_kernelbench.py import FILE.py --out /tmp/p --device cuda
    python3 tools/probe/baseline_probe.py /tmp/p
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kernelbench import baseline  # noqa: E402


def show(label, r):
    e = r["eager"]
    d = r.get("eager_default", {}).get("median_us")
    print(f"{label}: eager median {e['median_us']:.0f} us, min {e['min_us']:.0f}, p25-p75 "
          f"{e['p25_us']:.0f}-{e['p75_us']:.0f}, {e['samples']} samples, TF32 off {'tf32' in e}; "
          f"PyTorch's default precision {d}")


def main():
    pdir = sys.argv[1]
    r = baseline.run_baseline(pdir, "cuda", False, 5, 50, 0.3)  # mblast bench's settings
    show("as the bench", r)
    print(json.dumps(r["timing"]))
    baseline._Timer.flush = lambda self: None
    r = baseline.run_baseline(pdir, "cuda", False, 5, 50, 0.3)  # mblast bench's settings
    show("no flush", r)


if __name__ == "__main__":
    main()
