"""`mblast report` end to end, in a real browser (docs/report.md).

Makes real inputs here: a tiny `mblast bench` on pocl-cpu (the bench fixture suite's level1: relu with
a correct OpenCL candidate, clamp01 with a wrong one) and two `mblast optimize` runs of
problems/vec_add with --max-steps 1 on one fresh knowledge base (the first from it cold, the second
warm). Writes the report of all three with --kb, then opens it in Debian's headless chromium:

- the page loads without a console message (chromium --enable-logging=stderr --v=0 prints each one
  as a CONSOLE line; a page with a deliberate script error is opened first, to show that such a
  line is seen), and its script runs (the dumped DOM carries data-plots, the number of plots);
- a screenshot at 1400x2400 is taken; the PNG must exist and hold more than one colour.

Bad input is checked too: a missing input and a JSON of another kind give exit status 2, one line,
and no file. Exit 77 (skipped) with the reason without chromium, torch or the pocl-cpu target.

  .venv/bin/python3 tests/report/report_browser.py --mblast build/bin/mblast --work /tmp/report-browser
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE = os.path.join(ROOT, "tests", "bench", "fixtures", "suite")
SKIP = 77


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def run(cmd, env, timeout=600):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(browser, url, *extra, timeout=120):
    """chromium headless on url; returns (stdout, stderr)."""
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0", *extra, url]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, HOME=WORK))
    return r.returncode, r.stdout, r.stderr


def console_lines(stderr):
    return [l for l in stderr.splitlines() if "CONSOLE" in l]


def png_colours(path, limit=4):
    """The distinct colours of an 8-bit RGB(A) PNG, up to `limit` (stops counting there)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour_type = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour_type not in (2, 6):
                fail(f"{path}: PNG of depth {depth}, colour type {colour_type} (expected 8-bit RGB or RGBA)")
            bpp = 3 if colour_type == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    seen = set()
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):  # undo the row filter (PNG spec, section 9)
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        for x in range(0, stride, bpp * 7):  # every 7th pixel is plenty to tell a blank page
            seen.add(bytes(line[x : x + 3]))
        if len(seen) >= limit:
            break
        prev = line
    return seen


def main():
    global WORK
    ap = argparse.ArgumentParser()
    ap.add_argument("--mblast", default=os.path.join(ROOT, "build", "bin", "mblast"))
    ap.add_argument(
        "--work", default="/tmp/mblast-report-browser", help="emptied first; keeps the report and screenshot"
    )
    a = ap.parse_args()
    WORK = os.path.abspath(a.work)

    browser = chromium()
    if not browser:
        skip("chromium is not installed (apt-get install chromium; tools/setup.sh installs it)")
    if not os.access(a.mblast, os.X_OK):
        skip(f"{a.mblast} is not built")
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
    except Exception as e:
        skip(f"torch and safetensors are needed for {sys.executable} (mblast bench imports with them): {e}")

    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    kb = os.path.join(WORK, "kb.sqlite")
    env = dict(
        os.environ,
        MBLAST_HOME=ROOT,
        MBLAST_PYTHON=sys.executable,
        MBLAST_RUNS_DIR=os.path.join(WORK, "runs"),
        MBLAST_KB=kb,
    )
    env.pop("MBLAST_BENCH_SIZE", None)
    r = run([a.mblast, "targets", "--json"], env, 120)
    if r.returncode != 0 or not any(t["name"] == "pocl-cpu" and t.get("available") for t in json.loads(r.stdout)):
        skip("the pocl-cpu target is not available here")

    # ---- the inputs, made here
    bench = os.path.join(WORK, "bench.json")
    r = run(
        [a.mblast, "bench", SUITE, "--target", "pocl-cpu", "--filter", "level1/", "--min-time", "0.05"]
        + ["--work", os.path.join(WORK, "bench"), "--out", bench],
        env,
    )
    if not os.path.exists(bench):
        fail(f"mblast bench wrote no results (exit {r.returncode}): {r.stderr[-2000:]}")
    rows = {p["key"]: p for p in json.load(open(bench))["problems"]}
    if rows.get("level1/relu", {}).get("status") != "correct":
        fail(f"the bench fixture's relu is not correct: {rows.get('level1/relu')}")
    if not rows["level1/relu"].get("peak_bandwidth_bytes_per_s", 0) > 0:
        fail("the bench row does not keep the peak bandwidth its fraction is of (the roofline's roof)")
    run_dirs = []
    for n in range(2):  # the first from an empty KB, the second from what the first taught it
        r = run(
            [a.mblast, "optimize", os.path.join(ROOT, "problems", "vec_add"), "--target", "pocl-cpu"]
            + ["--max-steps", "1", "-k", "2", "--min-time", "0.05", "--kb", kb, "--json"],
            env,
        )
        if r.returncode != 0:
            fail(f"mblast optimize failed (exit {r.returncode}): {r.stderr[-2000:]}")
        run_dirs.append(os.path.join(WORK, "runs", json.loads(r.stdout)["run"]))
        if not os.path.exists(os.path.join(run_dirs[-1], "report.json")):
            fail(f"the run {run_dirs[-1]} has no report.json")

    # ---- bad input: exit 2, one line, nothing written
    out_bad = os.path.join(WORK, "bad.html")
    other = os.path.join(WORK, "other.json")
    with open(other, "w") as f:
        json.dump({"format": 1, "what": "not an mblast result"}, f)
    for bad in (os.path.join(WORK, "missing"), other):
        r = run([a.mblast, "report", bad, "--html", out_bad], env)
        if r.returncode != 2 or len(r.stderr.strip().splitlines()) != 1 or os.path.exists(out_bad):
            fail(f"bad input {bad}: exit {r.returncode}, stderr {r.stderr!r}, wrote {os.path.exists(out_bad)}")

    # ---- the report
    html = os.path.join(WORK, "report.html")
    r = run([a.mblast, "report", bench, *run_dirs, "--kb", kb, "--html", html, "--json"], env)
    if r.returncode != 0 or not os.path.exists(html):
        fail(f"mblast report failed (exit {r.returncode}): {r.stderr}")
    page = open(html, encoding="utf-8").read()
    for must in (
        "Roofline on pocl-cpu",
        "Speedup per problem",
        "fast_p against p",
        "Best cost against evaluations",
        "Experiences in the knowledge base over time",
        "level1/relu",
        "level1/clamp01",
        "cold KB",
    ):
        if must not in page:
            fail(f"the report lacks {must!r}")
    if "https://" in page or "src=" in page:
        fail("the report refers to something outside itself")

    # ---- the browser sees a console error when there is one (else the check below proves nothing)
    broken = os.path.join(WORK, "broken.html")
    with open(broken, "w") as f:
        f.write("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    _, _, err = browse(browser, "file://" + broken, "--dump-dom")
    if not console_lines(err):
        fail(
            "chromium printed no CONSOLE line for a page with a script error; cannot check the report's:\n"
            + err[-3000:]
        )

    # ---- the report in the browser: no console message, the script ran
    rc, dom, err = browse(browser, "file://" + html, "--dump-dom")
    if console_lines(err):
        fail("the report logs to the console:\n" + "\n".join(console_lines(err)))
    if rc != 0 or 'data-plots="' not in dom:
        fail(f"the report's script did not run in chromium (exit {rc}):\n{err[-3000:]}")
    plots = int(dom.split('data-plots="', 1)[1].split('"', 1)[0])
    if plots < 5:
        fail(f"chromium sees {plots} plots, expected at least 5")
    print(f"chromium: the report loads without console messages; {plots} plots")

    shot = os.path.join(WORK, "report.png")
    rc, _, err = browse(browser, "file://" + html, f"--screenshot={shot}", "--window-size=1400,2400")
    if not os.path.exists(shot) or os.path.getsize(shot) == 0:
        fail(f"no screenshot (exit {rc}):\n{err[-3000:]}")
    colours = png_colours(shot)
    if len(colours) < 2:
        fail(f"the screenshot is blank: one colour {colours}")
    print(f"screenshot {shot}: {os.path.getsize(shot)} bytes, more than one colour")
    print("OK")


if __name__ == "__main__":
    main()
