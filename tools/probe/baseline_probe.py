"""Diagnostic: the bench's eager baseline of one imported problem, timed as
tools/kernelbench/baseline.py does (L2 flush and a device sync around each call) and again with
the flush turned off, to see what the method adds to PyTorch's own time.

    MBLAST_BENCH_SIZE=full python3 tools/mblast_kernelbench.py import FILE.py --out /tmp/p --device cuda
    python3 tools/probe/baseline_probe.py /tmp/p [conv1d|conv2d]   # a conv: also F.conv on its tensors
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kernelbench import baseline  # noqa: E402


def show(label, r):
    e = r["eager"]
    d = r.get("eager_default", {}).get("median_us")
    print(
        f"{label}: eager median {e['median_us']:.0f} us, min {e['min_us']:.0f}, p25-p75 "
        f"{e['p25_us']:.0f}-{e['p75_us']:.0f}, {e['samples']} samples, TF32 off {'tf32' in e}; "
        f"PyTorch's default precision {d}"
    )


def main():
    pdir = sys.argv[1]
    r = baseline.run_baseline(pdir, "cuda", False, 5, 50, 0.3)  # mblast bench's settings
    show("as the bench", r)
    print(json.dumps(r["timing"]))
    baseline._Timer.flush = lambda self: None
    r = baseline.run_baseline(pdir, "cuda", False, 5, 50, 0.3)  # mblast bench's settings
    show("no flush", r)
    if len(sys.argv) > 2:  # a conv: its call on the problem's own tensors vs on fresh ones
        direct(pdir, sys.argv[2])


def direct(pdir, what):
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
    from conv_probe import median_ms  # this script's folder is on sys.path

    with open(os.path.join(pdir, "problem.json")) as f:
        problem = json.load(f)
    params = load_file(os.path.join(pdir, "data", "params.init0.safetensors"))
    inputs = load_file(os.path.join(pdir, "data", f"inputs.seed{problem['seeds'][0]['seed']}.safetensors"))
    x = next(iter(inputs.values())).cuda()
    w = next(v for k, v in params.items() if k.endswith("weight")).cuda()
    b = next(v for k, v in params.items() if k.endswith("bias")).cuda()
    shape = [d.get("torch_shape") for d in problem["inputs"]][0]
    x = x.reshape(shape) if shape else x
    conv = F.conv1d if what == "conv1d" else F.conv2d
    pad = w.shape[-1] // 2
    with baseline.tf32_off():
        for label, xx, ww in [
            ("problem's tensors", x, w),
            ("fresh randn", torch.randn_like(x), torch.randn_like(w) * 0.05),
            ("problem's x, fresh w", x, torch.randn_like(w) * 0.05),
        ]:
            print(
                f"direct {label}: x {tuple(xx.shape)} {xx.stride()} w {tuple(ww.shape)} {ww.stride()}: "
                f"{median_ms(lambda: conv(xx, ww, b, 1, pad)):.3f} ms; "
                f"x subnormal {(xx.abs() < 1.2e-38).logical_and(xx != 0).sum().item()}, "
                f"w subnormal {(ww.abs() < 1.2e-38).logical_and(ww != 0).sum().item()}, w absmax {ww.abs().max().item():.3g}"
            )


if __name__ == "__main__":
    main()
