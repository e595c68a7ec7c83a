"""Diagnostic: how PyTorch runs the suite's convolutions on this GPU with TF32 off: median time
of F.conv2d/conv1d with cudnn.benchmark off and on, and the CUDA kernels it launches (names say
the algorithm). Compare with tools/probe/cudnn_find.cpp.

    python3 tools/probe/conv_probe.py            # TF32 off by the allow_tf32 flags
    python3 tools/probe/conv_probe.py ieee bias  # by fp32_precision = "ieee" (torch >= 2.9, what
                                                 # tools/kernelbench/baseline.py sets), with bias
    python3 tools/probe/conv_probe.py ieee bias after-default
        # the baseline's order: each shape first with PyTorch's default (TF32 allowed), then
        # switched to TF32 off in the same process

Answered (2026-12-04, H200, torch 2.11): level1/09's conv1d takes 7.8 ms as the bench's eager
baseline and in any fresh process with cudnn.benchmark off (cuDNN's heuristics pick
implicit_convolve_sgemm; tools/probe/baseline_probe.py), but 4.3 ms here, where the 2-D shapes
run first (each also with cudnn.benchmark on) and the conv1d then gets an xmma FFMA kernel even
with benchmark off (why that state carries over is not known). Neither TF32's way of being off,
nor the bias, nor the default precision first changes the fresh process's 7.8 ms.
"""
import sys

import torch
import torch.nn.functional as F

# (label, input shape, weight shape, padding, groups): the full sizes of benchmarks/suite.
SHAPES = [
    ("3x3 256->256 56x56 n32 (L1/06, L2/01,05,11)", (32, 256, 56, 56), (256, 256, 3, 3), 1, 1),
    ("1x1 256->512 56x56 n64 (L1/07)", (64, 256, 56, 56), (512, 256, 1, 1), 0, 1),
    ("dw3x3 512 56x56 n64 (L1/08)", (64, 512, 56, 56), (512, 1, 3, 3), 1, 512),
    ("conv1d k5 256->256 L4096 n64 (L1/09)", (64, 256, 4096), (256, 256, 5), 2, 1),
]


def median_ms(fn, reps=30):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def tf32_off(ieee):
    if ieee:
        torch.backends.cudnn.conv.fp32_precision = "ieee"
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def main():
    ieee, with_bias = "ieee" in sys.argv[1:], "bias" in sys.argv[1:]
    after_default = "after-default" in sys.argv[1:]
    b = torch.backends
    if ieee:
        knobs = [(b.cudnn.conv, "fp32_precision"), (b.cuda.matmul, "fp32_precision")]
    else:
        knobs = [(b.cudnn, "allow_tf32"), (b.cuda.matmul, "allow_tf32")]
    defaults = [(obj, name, getattr(obj, name)) for obj, name in knobs]
    if not after_default:
        tf32_off(ieee)
    print(
        "TF32 off by",
        "fp32_precision" if ieee else "allow_tf32",
        "; bias",
        with_bias,
        "; after the default" if after_default else "",
    )
    print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name())
    for label, xs, ws, pad, groups in SHAPES:
        x = torch.randn(*xs, device="cuda")
        w = torch.randn(*ws, device="cuda") * 0.05
        conv = F.conv1d if len(xs) == 3 else F.conv2d
        bias = torch.randn(ws[0], device="cuda") if with_bias else None
        fn = lambda: conv(x, w, bias, 1, pad, 1, groups)  # noqa: E731
        flops = 2.0 * x.shape[0] * ws[0] * (ws[1]) * torch.tensor(ws[2:]).prod().item()
        flops *= torch.tensor(conv(x, w, None, 1, pad, 1, groups).shape[2:]).prod().item()
        if after_default:
            torch.backends.cudnn.benchmark = False
            for obj, name, value in defaults:
                setattr(obj, name, value)
            print(f"{label}: PyTorch's default precision, median {median_ms(fn):.3f} ms")
            tf32_off(ieee)
        for bench in (False, True):
            torch.backends.cudnn.benchmark = bench
            ms = median_ms(fn)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            kernels = [(e.name, e.device_time) for e in prof.events() if e.device_time > 0]
            print(f"{label}: benchmark={bench} median {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s")
            for name, us in kernels:
                print(f"    {us:9.1f} us  {name[:150]}")


if __name__ == "__main__":
    main()
