"""`export`: a candidate as a KernelBench submission -- model.py, then ModelNew(Model) calling
the candidate through torch.utils.cpp_extension.load_inline (docs/kernelbench.md "Export").
The C++ wrappers and the ModelNew code are the templates in templates/. No torch needed."""

from __future__ import annotations

import json
import os
import re

from .common import PROG, Failure, die, one_line, read_problem, sha256_bytes, write_bytes_atomic

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def _template(name: str) -> str:
    try:
        with open(os.path.join(TEMPLATES, name), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise Failure(f"cannot read the template {name}: {e.strerror}")


_ABI_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](?:mblast/)?abi\.h[>"][^\n]*$', re.M)


def _py_literal(text: str) -> str:
    """A Python string literal for text: a raw triple-quoted one when that is safe."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


# torch's headers (glog or c10's logging) define these short macros; a candidate may define or
# use its own, so they are dropped before the candidate's code (torch's headers are parsed).
_UNDEF_LOGGING = "".join(
    f"#undef {m}\n"
    for m in (
        "CHECK",
        "CHECK_EQ",
        "CHECK_NE",
        "CHECK_LT",
        "CHECK_LE",
        "CHECK_GT",
        "CHECK_GE",
        "CHECK_NOTNULL",
        "DCHECK",
        "DCHECK_EQ",
        "DCHECK_NE",
        "LOG",
        "VLOG",
        "LOG_IF",
    )
)


def _decl_text(lst) -> str:
    return ", ".join(f"{d['name']} {d['dtype']}{d['shape']}" for d in lst) or "(none)"


def run_export(pdir: str, candidate: str, backend: str, out: str, abi_header: str | None) -> None:
    problem = read_problem(pdir)
    if problem.get("provenance", {}).get("kind") != "kernelbench":
        raise Failure("is not a KernelBench import")
    try:
        with open(os.path.join(pdir, problem.get("model") or "model.py"), encoding="utf-8") as f:
            model_py = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise Failure(f"cannot read model.py: {one_line(e)}")
    try:
        with open(candidate, encoding="utf-8") as f:
            cand = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise Failure(f"cannot read the candidate {candidate}: {one_line(e)}")
    if not re.search(r"\bmblast_run\b|\bMBLAST_OPENCL_CANDIDATE\b", cand):
        raise Failure(f"{candidate} does not define mblast_run (include/mblast/abi.h)")
    if abi_header is None:
        abi_header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "mblast", "abi.h")
    try:
        with open(abi_header, encoding="utf-8") as f:
            abi = f.read()
    except OSError as e:
        raise Failure(f"cannot read the ABI header {abi_header}: {e.strerror}")
    # The optional candidate helper header is ours too: inline it where it is included.
    helper_re = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]mblast/opencl_candidate\.h[>"][^\n]*$', re.M)
    if helper_re.search(cand):
        helper_path = os.path.join(os.path.dirname(os.path.abspath(abi_header)), "opencl_candidate.h")
        try:
            with open(helper_path, encoding="utf-8") as f:
                helper = _ABI_INCLUDE.sub("/* mblast/abi.h: inlined above */", f.read())
        except OSError as e:
            raise Failure(f"cannot read {helper_path}: {e.strerror}")
        cand = helper_re.sub(
            lambda _m: "// ---- include/mblast/opencl_candidate.h (inlined) ----\n" + helper, cand, count=1
        )
    cand = _ABI_INCLUDE.sub("/* mblast/abi.h: inlined above */", cand)
    abi_block = "// ---- include/mblast/abi.h (inlined) ----\n" + abi + "\n// ---- end of abi.h ----\n" + _UNDEF_LOGGING
    cand_block = f"// ---- candidate {os.path.basename(candidate)} ----\n" + cand + "\n"
    wrapper = _template("wrapper_common.cpp.in") + _template(f"wrapper_{backend}.cpp.in")
    libs = []
    if re.search(r'#\s*include\s*[<"](cublas|cublas_v2|cublas_api|cublasLt)\.h[>"]', cand):
        libs += ["-lcublas", "-lcublasLt"]
    if re.search(r'#\s*include\s*[<"]cudnn\w*\.h[>"]', cand):
        libs.append("-lcudnn")
    digest = sha256_bytes((abi + cand + wrapper + backend).encode("utf-8"))[:12]
    ext_name = "mblast_" + re.sub(r"\W", "_", problem["name"])[:40] + "_" + backend + "_" + digest
    spec = {
        "problem": problem["name"],
        "backend": backend,
        "extension": ext_name,
        "candidate": os.path.basename(candidate),
        "extra_libs": libs,
        "inputs": problem["inputs"],
        "parameters": problem.get("parameters", []),
        "outputs": problem["outputs"],
        "constants": problem.get("constants", []),
        "arguments": problem.get("arguments") or [d["name"] for d in problem["inputs"]],
        "returns": problem.get("returns", "tensor"),
    }
    tail = _template("modelnew.py.in")
    for k, v in {
        "@@CANDIDATE_NAME@@": os.path.basename(candidate),
        "@@BACKEND@@": backend,
        "@@PROBLEM@@": problem["name"],
        "@@INPUTS@@": _decl_text(spec["inputs"]),
        "@@PARAMS@@": _decl_text(spec["parameters"]),
        "@@OUTPUTS@@": _decl_text(spec["outputs"]),
        "@@SPEC@@": _py_literal(json.dumps(spec, indent=1)),
        "@@ABI@@": _py_literal(abi_block),
        "@@CANDIDATE@@": _py_literal(cand_block),
        "@@WRAPPER@@": _py_literal(wrapper),
    }.items():
        tail = tail.replace(k, v)
    header = (
        f"# KernelBench submission written by `mblast export` from problem "
        f"{problem['name']} and candidate {os.path.basename(candidate)} ({backend}).\n"
        f"# The problem's model.py follows verbatim (Model, get_inputs, "
        f"get_init_inputs, constants); ModelNew is at the end.\n\n"
    )
    text = header + model_py.rstrip("\n") + "\n" + tail
    try:
        compile(text, out, "exec")
    except SyntaxError as e:
        raise Failure(f"the exported file would not compile ({one_line(e)})")
    try:
        write_bytes_atomic(out, text.encode("utf-8"))
    except OSError as e:
        raise Failure(f"cannot write {out}: {e.strerror}")


def cmd_export(a) -> int:
    try:
        run_export(a.problem, a.candidate, a.backend, a.out, a.abi_header)
    except Failure as e:
        die(f"{a.problem}: {e}")
    print(f"{PROG}: wrote {a.out}")
    return 0
