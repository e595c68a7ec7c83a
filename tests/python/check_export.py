"""Checks an exported KernelBench file the way KernelBench does, in miniature: Model and
ModelNew built from get_init_inputs() under the same seed, then the same inputs to both --
the file's own get_inputs() and every seed's inputs from the problem's data (the signed one
included) -- and once more after the parameters change (a new mblast_prepare must see them).

    python3 tests/python/check_export.py EXPORTED.py PROBLEM_DIR cpu|cuda

Prints one JSON line; exit status 0 when every output matches (atol = rtol = 1e-4).
"""

import importlib.util
import json
import sys

import torch
from safetensors.torch import load_file


def as_tuple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def main():
    path, pdir, device = sys.argv[1], sys.argv[2], sys.argv[3]
    spec = importlib.util.spec_from_file_location("submission", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    torch.manual_seed(42)
    ref = m.Model(*m.get_init_inputs()).to(device)
    torch.manual_seed(42)
    new = m.ModelNew(*m.get_init_inputs()).to(device)
    with open(f"{pdir}/problem.json") as f:
        problem = json.load(f)
    consts = {c["name"]: c["value"] for c in problem.get("constants", [])}
    sets = [m.get_inputs()]
    for s in problem["seeds"]:
        data = load_file(f"{pdir}/data/inputs.seed{s['seed']}.safetensors")
        sets.append([consts[n] if n in consts else data[n] for n in problem["arguments"]])
    worst = 0.0

    def compare(args):
        nonlocal worst
        args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
        with torch.no_grad():
            a, b = as_tuple(ref(*args)), as_tuple(new(*args))
        assert len(a) == len(b), (len(a), len(b))
        for x, y in zip(a, b):
            assert x.shape == y.shape and x.dtype == y.dtype and x.device == y.device, (x, y)
            worst = max(worst, float((x.double() - y.double()).abs().max()))
            assert torch.allclose(x, y, atol=1e-4, rtol=1e-4), worst

    for args in sets:
        compare(args)
    with torch.no_grad():
        for p in list(new.parameters()) + list(ref.parameters()):
            p.mul_(0.5)
    compare(sets[-1])
    print(
        json.dumps({"ok": True, "device": device, "sets": len(sets), "max_abs_diff": worst, "torch": torch.__version__})
    )


if __name__ == "__main__":
    main()
