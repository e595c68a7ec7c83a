"""`--max-bytes`: a KernelBench file's size constants scaled down until one seed's inputs,
parameters and outputs fit (docs/kernelbench.md "Sizes that fit the target").

The rule, in short: the *size constants* are the module-level integer literals (>= 2) that
get_inputs() and get_init_inputs() read, directly or through other module-level constants
(`input_shape = (num_classes,)`) and helpers. While one seed does not fit, the largest of them
are halved (rounding up), all constants of that largest value together, so that equal sizes
stay equal and small structural numbers (kernel sizes, strides, heads, layers) are reached last.
A halving that makes the file fail (a head count that no longer divides the embedding, a kernel
larger than its input) or that does not make the problem smaller is undone and that constant
is kept as it is from then on. The file's text is rewritten with the new literals, so the
problem's model.py, its baselines and exports all see the same sizes.

Sizes are measured without allocating: the file runs under PyTorch's fake tensors (shapes and
dtypes only; ops without a shape function raise instead of running for real). The forward is
measured only once the inputs and parameters fit; where fake tensors cannot run it, it runs for
real at that size.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
import time
import types

import torch

from .common import Failure, one_line

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """'64M', '1G', '16MiB', '500k', '1048576' -> bytes (binary units). Raises ValueError."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", str(text))
    if not m:
        raise ValueError(f"'{text}' is not a size (a number of bytes, or with K, M, G, T: 64M, 1G)")
    n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n <= 0:
        raise ValueError(f"'{text}' is not a positive size")
    return n


def format_bytes(n: float) -> str:
    for unit, f in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= f:
            v = n / f
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.3g}{unit}"
    return f"{int(n)}"


def halve(v: int, times: int) -> int:
    for _ in range(times):
        v = (v + 1) // 2
    return v


def _int_value(node):
    """The value of an integer constant expression (123, 2 ** 10, 16 * 4), else None."""
    try:
        expr = ast.Expression(body=node)
        ast.fix_missing_locations(expr)
        for n in ast.walk(node):
            if not isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)):
                return None
        v = eval(compile(expr, "<size>", "eval"), {"__builtins__": {}})
    except Exception:
        return None
    return v if type(v) is int else None


def _module_statements(body):
    """Module-level statements, looking inside if/try/with blocks but not into functions or
    classes."""
    for st in body:
        yield st
        for field in ("body", "orelse", "finalbody"):
            if isinstance(st, (ast.If, ast.Try, ast.With)) and hasattr(st, field):
                yield from _module_statements(getattr(st, field))
        if isinstance(st, ast.Try):
            for h in st.handlers:
                yield from _module_statements(h.body)


class Slots:
    """The size constants of a file: key (name, index path) -> the literal nodes that assign it."""

    def __init__(self, text: bytes):
        self.text = text
        try:
            self.tree = ast.parse(text)
        except SyntaxError as e:
            raise Failure(f"loading failed: {one_line(e)}")
        self.nodes: dict = {}  # key -> [node]
        self.deps: dict = {}  # name -> names its module-level assignments read
        for st in _module_statements(self.tree.body):
            if isinstance(st, ast.Assign):
                targets, value = st.targets, st.value
            elif isinstance(st, ast.AnnAssign) and st.value is not None:
                targets, value = [st.target], st.value
            else:
                continue
            reads = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            for t in targets:
                if isinstance(t, ast.Name):
                    self._add(t.id, (), value)
                    self.deps.setdefault(t.id, set()).update(reads)
                elif (
                    isinstance(t, (ast.Tuple, ast.List))
                    and isinstance(value, (ast.Tuple, ast.List))
                    and len(t.elts) == len(value.elts)
                ):
                    for tt, vv in zip(t.elts, value.elts):
                        if isinstance(tt, ast.Name):
                            self._add(tt.id, (), vv)
                            self.deps.setdefault(tt.id, set()).update(
                                n.id for n in ast.walk(vv) if isinstance(n, ast.Name)
                            )

    def _add(self, name, path, node):
        if _int_value(node) is not None:
            self.nodes.setdefault((name, path), []).append(node)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for i, e in enumerate(node.elts):
                self._add(name, path + (i,), e)

    def used_by_inputs(self, mod) -> set:
        """Names get_inputs() and get_init_inputs() read, through module-level functions and
        the module-level assignments of the names they read."""
        seen_code, names = set(), set()

        def code_names(code):
            if id(code) in seen_code:
                return
            seen_code.add(id(code))
            for n in code.co_names:
                if n not in names:
                    names.add(n)
                    obj = getattr(mod, n, None)
                    if isinstance(obj, types.FunctionType):
                        code_names(obj.__code__)
            for c in code.co_consts:
                if isinstance(c, types.CodeType):
                    code_names(c)

        for fn in ("get_inputs", "get_init_inputs"):
            f = getattr(mod, fn, None)
            if isinstance(f, types.FunctionType):
                code_names(f.__code__)
        todo = list(names)
        while todo:
            for d in self.deps.get(todo.pop(), ()):
                if d not in names:
                    names.add(d)
                    todo.append(d)
        return names

    def rewrite(self, halvings: dict, note: str = "") -> bytes:
        """The file's text with every literal of key K halved halvings[K] times."""
        lines = self.text.splitlines(keepends=True)
        starts, pos = [], 0
        for ln in lines:
            starts.append(pos)
            pos += len(ln)
        edits = {}  # span -> halvings; `h = w = 128` gives two keys one literal
        for key, times in halvings.items():
            if not times:
                continue
            for node in self.nodes[key]:
                a = starts[node.lineno - 1] + node.col_offset
                b = starts[node.end_lineno - 1] + node.end_col_offset
                edits[(a, b, node)] = max(times, edits.get((a, b, node), 0))
        out = self.text
        for (a, b, node), times in sorted(edits.items(), key=lambda e: -e[0][0]):
            out = out[:a] + str(halve(_int_value(node), times)).encode() + out[b:]
        if note:
            out = out.rstrip(b"\n") + b"\n\n" + note.encode("utf-8") + b"\n"
        return out


def load_text(path: str, text: bytes):
    """TEXT executed as the module of file PATH; Failure when it does not load."""
    from .tensors import load_kernelbench_module

    return load_kernelbench_module(path, text, check=False)


def _tensor_bytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


def _outputs(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [o for o in out if isinstance(o, torch.Tensor)]
    return []


def _fake_limit(e: BaseException) -> bool:
    """Whether an error under fake tensors is theirs (an op without a shape function, a value
    read from data) rather than the file's (shapes that do not fit together)."""
    text = str(e)
    return (
        isinstance(e, NotImplementedError)
        or "Meta" in text
        or "meta" in text
        or "Fake" in text
        or type(e).__name__.startswith("DataDependent")
    )


# A normalisation whose statistics a halving leaves over fewer values than this is ill-posed:
# batch norm in training mode over a batch of 2x2 images normalises each channel over a handful of
# values, and its outputs swing with rounding (level3/10_ResNet101 at 64M: refused as wrong_output
# once imported). Such a halving counts as one that breaks the file.
MIN_NORM_VALUES = 16


class IllPosed(ValueError):
    """A halving left a normalisation's statistics over too few values."""


@contextlib.contextmanager
def _well_posed_norms():
    """Within: F.batch_norm in training mode and F.instance_norm raise where a statistic would be
    taken over fewer than MIN_NORM_VALUES values."""
    F = torch.nn.functional
    batch_norm, instance_norm = F.batch_norm, F.instance_norm

    def check(x, per_stat: int, what: str):
        if per_stat < MIN_NORM_VALUES:
            raise IllPosed(
                f"{what} over {per_stat} values per statistic (input {tuple(x.shape)}; "
                f"at least {MIN_NORM_VALUES} keep it well-posed)"
            )

    def guarded_batch_norm(x, *args, **kwargs):
        training = kwargs.get("training", args[4] if len(args) > 4 else False)
        if training and x.dim() >= 2:
            check(x, x.numel() // max(x.shape[1], 1), "batch norm in training mode")
        return batch_norm(x, *args, **kwargs)

    def guarded_instance_norm(x, *args, **kwargs):
        if x.dim() >= 3:
            check(x, x[0, 0].numel(), "instance norm")
        return instance_norm(x, *args, **kwargs)

    F.batch_norm, F.instance_norm = guarded_batch_norm, guarded_instance_norm
    try:
        yield
    finally:
        F.batch_norm, F.instance_norm = batch_norm, instance_norm


def _measure(path: str, text: bytes, budget: int, forward_big: bool = True, slow: bool = False, trial: bool = False):
    """('fits' | 'big', bytes, seconds of the fake forward or 0) or ('bad', reason, 0). 'big'
    counts inputs and parameters only; its forward runs under fake tensors only (FORWARD_BIG), to
    see shapes break early. Once they fit, a forward fake tensors cannot run runs for real, and so
    does a SLOW one (fake tensors cost about a millisecond per op: a bidirectional GRU's time
    steps took 340 s of fake forwards to scale, its real forward at that size well under one).
    A TRIAL (a halving, not the file's own sizes) whose normalisations become ill-posed is 'bad'."""
    from torch._subclasses import FakeTensorMode
    from .tensors import register_tensor_attributes, seed_all

    norms = _well_posed_norms if trial else contextlib.nullcontext
    try:
        mod = load_text(path, text)
    except Failure as e:
        return "bad", str(e), 0.0
    try:
        sink = io.StringIO()
        fake = FakeTensorMode(allow_fallback_kernels=False)
        with fake, contextlib.redirect_stdout(sink):
            seed_all(0)
            try:
                args = list(mod.get_inputs())
                model = mod.Model(*mod.get_init_inputs())
            except Exception as e:
                if not _fake_limit(e):
                    return "bad", one_line(e), 0.0
                model = None  # built with .item() and the like: for real, below
        if model is None:
            return _measure_real(mod, budget, sink, norms)
        with fake, contextlib.redirect_stdout(sink):
            register_tensor_attributes(model)  # as the import holds them: parameters
            held = _tensor_bytes(args) + _tensor_bytes(list(model.parameters()) + list(model.buffers()))
            # Recurrent layers run op by op per time step: slow under fake tensors from the start.
            if any(isinstance(m, torch.nn.RNNBase) for m in model.modules()):
                slow, forward_big = True, False
            if (held > budget and not forward_big) or (held <= budget and slow):
                if held > budget:
                    return "big", held, 0.0
                args = None  # the forward runs for real, below
            t0 = time.perf_counter()
            try:
                if args is None:
                    raise NotImplementedError("slow under fake tensors")
                with torch.no_grad(), norms():
                    out = _tensor_bytes(_outputs(model(*args)))
                took = time.perf_counter() - t0
                return ("big", held, took) if held > budget else ("fits", held + out, took)
            except Exception as e:
                if isinstance(e, IllPosed):
                    return "bad", one_line(e), 0.0
                if held > budget:
                    return ("big", held, 0.0) if _fake_limit(e) else ("bad", one_line(e), 0.0)
        seed_all(0)
        try:  # fake tensors cannot run it: for real, now that inputs and parameters fit
            with contextlib.redirect_stdout(sink), torch.no_grad():
                args = list(mod.get_inputs())
                model = mod.Model(*mod.get_init_inputs())
                with norms():
                    return "fits", held + _tensor_bytes(_outputs(model(*args))), 0.0
        except Exception as e:
            return "bad", one_line(e), 0.0
    finally:
        sys.modules.pop(getattr(mod, "__name__", ""), None)


def _measure_real(mod, budget: int, sink, norms=contextlib.nullcontext):
    """_measure for a file fake tensors cannot build (its Model reads values: Swin's relative
    position tables). The inputs and parameters are made for real, as an import without
    --max-bytes would; the forward only once they fit."""
    from .tensors import register_tensor_attributes, seed_all

    seed_all(0)
    try:
        with contextlib.redirect_stdout(sink), torch.no_grad():
            args = list(mod.get_inputs())
            model = mod.Model(*mod.get_init_inputs())
            register_tensor_attributes(model)  # as the import holds them: parameters
            held = _tensor_bytes(args) + _tensor_bytes(list(model.parameters()) + list(model.buffers()))
            if held > budget:
                return "big", held, 0.0
            with norms():
                return "fits", held + _tensor_bytes(_outputs(model(*args))), 0.0
    except Exception as e:
        return "bad", one_line(e), 0.0


def fit(path: str, text: bytes, max_bytes: int):
    """(text to import, the problem's "scale" record). Raises Failure with one line when no
    scaling by the rule fits."""
    slots = Slots(text)
    mod = load_text(path, text)
    used = slots.used_by_inputs(mod)
    sys.modules.pop(mod.__name__, None)
    values = {}
    for key in slots.nodes:
        name, where = key
        if name not in used:
            continue
        v = getattr(mod, name, None)
        for i in where:
            v = v[i] if isinstance(v, (tuple, list)) and i < len(v) else None
        if type(v) is int and v >= 2:
            values[key] = v
    # The file's own sizes: no forward unless they fit (a recurrent net's fake forward walks every
    # time step: 47 s for level3/41 at full size); a fake forward slower than 2 s (slow) runs
    # only once sizes fit.
    kind, got, took = _measure(path, text, max_bytes, forward_big=False)
    slow = took > 2.0
    if kind == "bad":
        raise Failure(f"--max-bytes: the file's sizes cannot be measured: {got}")
    record = {"max_bytes": max_bytes, "rule": "halve the largest size constants (docs/kernelbench.md)"}
    record["file_bytes" if kind == "fits" else "file_inputs_and_parameters_bytes"] = got
    halvings = {k: 0 for k in values}
    frozen, why_kept = set(), {}
    while kind != "fits" or got > max_bytes:
        live = [k for k in values if k not in frozen and halve(values[k], halvings[k]) >= 2]
        if not live:
            what = "inputs and parameters" if kind == "big" else "inputs, parameters and outputs"
            head = (
                f"--max-bytes {format_bytes(max_bytes)}: cannot fit (one seed's {what} take "
                f"{format_bytes(got)} at the smallest sizes the rule reaches)"
            )
            if not why_kept:
                raise Failure(head + ": no size constant of get_inputs()/get_init_inputs() left to halve")
            failures = {w.split(" fails: ", 1)[1] for w in why_kept.values() if " fails: " in w}
            if len(failures) == 1 and len(why_kept) == len(values):  # the same error whatever shrinks
                raise Failure(head + f": every halving tried fails, with {failures.pop()}")
            first = next(iter(why_kept))
            raise Failure(
                head
                + f": halving {_key_name(first)} {why_kept[first]}"
                + (f" (and {len(why_kept) - 1} more kept)" if len(why_kept) > 1 else "")
            )
        now = {k: halve(values[k], halvings[k]) for k in live}
        top = max(now.values())
        group = [k for k in live if now[k] == top]
        lower = [v for v in now.values() if v < top]
        # The largest first; where that alone breaks the file, together with the next largest
        # (sizes tied by a ratio: a LayerNorm over out_channels applied to a width 2W).
        tries = [group] + ([group + [k for k in live if now[k] == max(lower)]] if lower else [])
        for t in tries:
            trial = dict(halvings)
            for k in t:
                trial[k] += 1
            tkind, tgot, took = _measure(path, slots.rewrite(trial), max_bytes, not slow, slow, trial=True)
            slow = slow or took > 2.0
            if tkind != "bad" and not (tkind == kind and tgot >= got):
                break
        if tkind == "bad" or (tkind == kind and tgot >= got):
            for k in group:
                frozen.add(k)
                why_kept[k] = (
                    f"({top}) fails: {tgot}" if tkind == "bad" else f"({top}) does not make the problem smaller"
                )
            continue
        halvings, kind, got = trial, tkind, tgot
    changed = {_key_name(k): [values[k], halve(values[k], halvings[k])] for k in values if halvings[k]}
    record["constants"] = changed
    record["bytes_estimated"] = got
    if why_kept:
        record["kept"] = {_key_name(k): "halving it " + why for k, why in why_kept.items()}
    if not changed:
        return text, record
    note = "\n".join(
        [
            f"# mblast import --max-bytes {format_bytes(max_bytes)}: the file's size constants, "
            'scaled to fit (problem.json "scale"):'
        ]
        + [f"#   {n}: {a} -> {b}" for n, (a, b) in changed.items()]
    )
    return slots.rewrite(halvings, note), record


def _key_name(key) -> str:
    name, where = key
    return name + "".join(f"[{i}]" for i in where)
