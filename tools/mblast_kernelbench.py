#!/usr/bin/env python3
"""mblast_kernelbench -- KernelBench-format PyTorch files as mblast problems, PyTorch
baselines, and candidates exported back as KernelBench ModelNew files.

Usage:
    mblast_kernelbench.py import SRC --out DIR [--seeds 3] [--inits 2] [--device cpu|cuda]
                          [--max-bytes N] [--json-out FILE]
    mblast_kernelbench.py import-sol DIR --out DIR [--seeds 3] [--inits 1] [--device cpu|cuda]
                          [--sol-anchors FILE] [--json-out FILE]
    mblast_kernelbench.py baseline PROBLEM_DIR --device cpu|cuda [--compile] [--warmup 5]
                          [--repeats 50] [--min-seconds 0.5] [--json-out FILE]
    mblast_kernelbench.py export --problem PROBLEM_DIR --candidate FILE --backend cuda|opencl
                          --out FILE.py [--abi-header PATH]
    mblast_kernelbench.py serve     (started by `mblast bench`: import and baseline requests on fd 3)

import    SRC is a KernelBench-format .py file (class Model(nn.Module), get_inputs(),
          get_init_inputs(), module-level constants) or a directory of them; each file becomes
          DIR/<stem>/ holding problem.json, model.py (a copy of the file), graph.json (when
          torch.fx or torch.export can trace the module) and data/ (safetensors, MANIFEST.json).
          A file that cannot be imported gets "mblast_kernelbench: FILE: <reason>" on stderr;
          a directory import goes on with the rest and ends with "imported N, failed M".
import-sol  DIR is a SOL-ExecBench problem folder (definition.json and workload.jsonl; the
          definition's reference runs, reference.py is not read) or a folder of them; each workload becomes a KernelBench-format file
          OUT/<definition>/<definition>_w<k>.py, imported next to it (kernelbench/solexec.py).
baseline  times PyTorch eager (and torch.compile with --compile) on the problem's own
          model.py, parameters and inputs, by the runner's rules; prints one JSON object on
          stdout (and writes it to --json-out when given).
serve     runs `import` and `baseline` commands one after another in this one process, torch
          imported once: each line on fd 3 is {"argv": ["baseline", ...]}, each answer on fd 4
          is {"exit": N}; see serve() below.
export    writes a KernelBench submission: model.py, then ModelNew(Model) whose forward calls
          the candidate through torch.utils.cpp_extension.load_inline.

Exit status: 0 success; 1 some file failed to import (the rest were imported); 2 bad usage,
a missing package, or a problem/candidate that cannot be processed (one line on stderr).

The work is done by the package next to this file: kernelbench/importer.py, graph.py,
baseline.py, export.py (+ templates/), on top of common.py and tensors.py.
docs/kernelbench.md describes the mapping; docs/problem-format.md the directory layout.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

sys.dont_write_bytecode = True  # never leave __pycache__ in tools/ or next to model.py
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kernelbench.common import die, one_line  # noqa: E402


def _need_torch() -> None:
    """torch and safetensors for import and baseline, or one line saying what is missing."""
    import time
    from kernelbench import common

    t0 = time.perf_counter()
    try:
        import torch  # noqa: F401

        if common.TORCH_IMPORT_SECONDS is None:  # the first import in this process (serve: once)
            common.TORCH_IMPORT_SECONDS = time.perf_counter() - t0
    except Exception as e:  # ImportError, or a broken install
        die(
            f"torch is not importable for {sys.executable} ({one_line(e)}); install "
            "python3-torch (Debian) or pip install torch, or point --python / MBLAST_PYTHON "
            "at an interpreter that has it"
        )
    try:
        import safetensors.torch  # noqa: F401
    except Exception as e:
        die(
            f"the 'safetensors' package is not importable for {sys.executable} "
            f"({one_line(e)}); pip install safetensors"
        )
    warnings.filterwarnings("ignore")  # model files and old torch versions are chatty


def openmp_blas_env(environ, multiarch: str, exists=os.path.exists, realpath=os.path.realpath):
    """The environment to re-run this helper with so that PyTorch loads Debian's OpenMP build of
    OpenBLAS, or None to keep this one. Debian's torch runs its intra-op threads on OpenMP; the
    pthread build of OpenBLAS (the default libblas.so.3 alternative when both are installed)
    starts threads of its own beside them, and with as many of each as cores the two sets spin
    against each other: level1/29 small (2 cores) timed 868-8159 us eager with spreads of
    185-1335 %, 555-786 us with 6-26 % on the OpenMP build, which shares PyTorch's threads.
    MBLAST_TORCH_BLAS=system keeps whatever libblas.so.3 the system resolves."""
    if environ.get("MBLAST_TORCH_BLAS", "") == "system" or environ.get("MBLAST_BLAS_SET") or not multiarch:
        return None
    openmp = f"/usr/lib/{multiarch}/openblas-openmp"
    if not exists(f"{openmp}/libblas.so.3") or "openblas-openmp" in realpath(f"/usr/lib/{multiarch}/libblas.so.3"):
        return None  # not installed, or already the one the system resolves
    env = dict(environ, MBLAST_BLAS_SET="openblas-openmp")
    env["LD_LIBRARY_PATH"] = openmp + (":" + environ["LD_LIBRARY_PATH"] if environ.get("LD_LIBRARY_PATH") else "")
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="mblast_kernelbench.py",
        description="KernelBench-format files as mblast problems, " "PyTorch baselines, KernelBench export.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("import", help="import a KernelBench file or a directory of them")
    p.add_argument("src", metavar="SRC")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--inits", type=int, default=2)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument(
        "--max-bytes",
        metavar="N",
        help="scale the file's size constants down until one "
        "seed's inputs, parameters and outputs fit in N bytes (64M, 1G)",
    )
    p.add_argument("--json-out", metavar="FILE", help="also write a JSON summary here")
    p.add_argument("--progress-events", action="store_true", help="print 'progress:' lines for mblast's live line")
    p = sub.add_parser("import-sol", help="import SOL-ExecBench problems, one mblast problem per workload")
    p.add_argument("src", metavar="SRC")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--inits", type=int, default=1)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--sol-anchors", metavar="FILE", help="JSON {workload uuid: {sol_latency_ms: x}}")
    p.add_argument("--json-out", metavar="FILE", help="also write a JSON summary here")
    p.add_argument("--progress-events", action="store_true", help="print 'progress:' lines for mblast's live line")
    p = sub.add_parser("baseline", help="time PyTorch eager and torch.compile on a problem")
    p.add_argument("problem", metavar="PROBLEM_DIR")
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    p.add_argument("--compile", action="store_true", help="also time torch.compile")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--min-seconds", type=float, default=0.5)
    p.add_argument(
        "--cache-flush",
        choices=("auto", "evict", "sweep"),
        default="auto",
        help="how a CPU's caches are made cold before each timed call (the target's " "device.cache_flush)",
    )
    p.add_argument(
        "--evict-library", metavar="PATH", help="mblast's libmblast_evict.so (without " "it, caches are swept)"
    )
    p.add_argument("--json-out", metavar="FILE", help="also write the JSON here (atomically)")
    sub.add_parser(
        "serve",
        help="answer import and baseline requests, one JSON line each on fd 3, until it "
        "closes (one process, torch imported once, for a whole `mblast bench`)",
    )
    p = sub.add_parser("export", help="write a KernelBench ModelNew file for a candidate")
    p.add_argument("--problem", required=True, metavar="PROBLEM_DIR")
    p.add_argument("--candidate", required=True, metavar="FILE")
    p.add_argument("--backend", choices=("cuda", "opencl"), required=True)
    p.add_argument("--out", required=True, metavar="FILE.py")
    p.add_argument(
        "--abi-header", metavar="PATH", help="include/mblast/abi.h (default: next " "to this script's ../include)"
    )
    a = ap.parse_args(argv)
    if a.cmd == "export":  # needs no torch
        from kernelbench.export import cmd_export

        return cmd_export(a)
    if argv is None:  # the loader reads LD_LIBRARY_PATH at start: choose the BLAS, then run again
        import sysconfig

        env = openmp_blas_env(os.environ, sysconfig.get_config_var("MULTIARCH") or "")
        if env is not None:
            sys.stdout.flush()
            os.execve(sys.executable, [sys.executable] + sys.argv, env)
    _need_torch()
    if a.cmd == "serve":
        return serve(main)
    if a.cmd == "import":
        from kernelbench.importer import cmd_import

        return cmd_import(a)
    if a.cmd == "import-sol":
        from kernelbench.solexec import cmd_import_sol

        return cmd_import_sol(a)
    from kernelbench.baseline import cmd_baseline

    return cmd_baseline(a)


def serve(run) -> int:
    """The helper as a server for `mblast bench` (mblast/protocol.h's messages: one JSON line
    each, no payloads): each line on fd 3 is {"argv": [...]}, the arguments of one `import` or
    `baseline` command, run by `run` in this process; each answer, on fd 4, is {"exit": N}, that
    command's exit status (its messages go to stderr, its JSON to its
    --json-out file, as when it runs alone). Between requests the state one problem leaves
    behind is dropped: PyTorch's process-wide settings go back to what they were before it
    (baseline.settings_kept(): a model file that sets the default dtype, say, at module level),
    and torch.compile's caches and the device's cached memory are freed.
    Ends when fd 3 closes. fd 1 is pointed at stderr, so nothing a model prints can reach the answers."""
    import gc
    import json
    import torch
    from kernelbench import common
    from kernelbench.baseline import settings_kept

    def changed(what):
        print(f"mblast_kernelbench serve: the request changed PyTorch's {', '.join(what)}; set back", file=sys.stderr)

    os.dup2(2, 1)
    requests = os.fdopen(3, "r", encoding="utf-8")
    answers = os.fdopen(4, "w", encoding="utf-8")
    for line in requests:
        try:
            argv = json.loads(line)["argv"]
            if not isinstance(argv, list) or not argv or argv[0] not in ("baseline", "import"):
                raise ValueError("only baseline and import requests are served")
            with settings_kept(changed):
                code = run([str(x) for x in argv])
        except SystemExit as e:  # die(): its one line is on stderr already
            code = e.code if isinstance(e.code, int) else 1
        except Exception as e:  # a request that is not JSON, or an error outside the command's own handling
            print(f"mblast_kernelbench serve: {one_line(e)}", file=sys.stderr)
            code = 2
        sys.stderr.flush()
        common.TORCH_IMPORT_SECONDS = 0.0  # paid once: the next requests import nothing
        try:
            if hasattr(torch, "_dynamo"):
                torch._dynamo.reset()
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception as e:  # a device left broken: this answer stands, the next request will say
            print(f"mblast_kernelbench serve: cleaning up after a request: {one_line(e)}", file=sys.stderr)
        answers.write(json.dumps({"exit": code or 0}) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
