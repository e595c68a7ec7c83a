"""`mblast optimize` with an LLM, end to end, against scripted local servers (issue 7).

The whole loop runs on pocl-cpu (OpenAI-compatible server) and rvv-qemu-128 (Anthropic-
compatible server): the scripted actor answers with a faster candidate, one that does not
compile (and a repair that still does not), one that is wrong, one with no code, and one
request fails with HTTP 500. The test then checks the result, the KB (experiences, statistics,
the constraint from the failed compile, the knowledge update), the requests' formats, and that
a replay from the cache gives the same result with no request and zero spend (on the timed
pocl-cpu target too), and that report.md, report.json and --json agree.

Issue 41 adds: runs CI can trust (a failed actor, a replay miss, a wrong start, an unavailable
target and a killed process all end as failed runs, with a non-zero exit where there is one, and
leave in the KB only what was measured); an LLM that repeats itself is asked again and then
replaced by the builtin policy; `runs cost`; `--show-prompt`; `bench --optimize --llm`.

Run by CTest with MBLAST_BIN and MBLAST_HOME set.
"""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import shutil
import socket
import tempfile
import time
import unittest

BIN = os.environ.get("MBLAST_BIN", "build/bin/mblast")
HOME = os.environ.get("MBLAST_HOME", os.getcwd())
SERVER = os.path.join(HOME, "tests", "support", "fake_llm_server.py")

WRONG_RVV = r"""#include <mblast/abi.h>
#include <riscv_vector.h>
int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)ctx, (void)state, (void)par, (void)n_par, (void)n_in, (void)n_out;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  for (size_t n = out[0].nbytes / sizeof(float), vl; n > 0; n -= vl, x += vl, y += vl) {
    vl = __riscv_vsetvl_e32m8(n);
    __riscv_vse32_v_f32m8(y, __riscv_vfmax_vf_f32m8(__riscv_vle32_v_f32m8(x, vl), 1.0f, vl), vl);
  }
  return 0;
}
"""

SCALAR_RVV = r"""#include <mblast/abi.h>
int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)ctx, (void)state, (void)par, (void)n_par;
  if (n_in != 1 || n_out != 1) return 1;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  size_t n = out[0].nbytes / sizeof(float);
#pragma clang loop vectorize(disable) interleave(disable)
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}
"""

BROKEN_BODY = r"""int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  undeclared_helper_xyz(out);
  return 0;
}
"""


def broken(backend):
    """A candidate with the right entry point that does not compile."""
    linkage = 'extern "C" ' if backend == "opencl" else ""
    return "#include <mblast/abi.h>\n" + linkage + BROKEN_BODY


def read(path):
    with open(path) as f:
        return f.read()


def fenced(code, tag="c"):
    return f"```{tag}\n{code}```\n"


def script(backend, fast, wrong):
    """Match-mode answers keyed by the task line at the top of every prompt."""
    ext_tag = {"opencl": "cpp", "rvv": "c"}[backend]
    return {
        "mode": "match",
        "responses": [
            {"match": "[task: analyse", "text": "Memory-bound elementwise kernel; per-element overhead dominates."},
            {
                "match": "[task: propose step 1 sample 1]",
                "text": f"ACTION: {backend}.thread-coarsening\nPLAN: more work per item\n" + fenced(fast, ext_tag)
                if backend == "opencl"
                else "ACTION: rvv.lmul-large-for-streaming\nPLAN: vectorise at LMUL 8\n" + fenced(fast, ext_tag),
            },
            {
                "match": "[task: propose step 1 sample 2]",
                "text": f"ACTION: {backend}.loop-unroll\nPLAN: unroll by 4\n" + fenced(broken(backend), ext_tag),
            },
            {
                "match": "[task: repair",
                "text": "Here is the fix:\n" + fenced(broken(backend).replace("xyz", "xyw"), ext_tag),
            },
            {
                "match": "[task: propose step 1 sample 3]",
                "text": f"ACTION: {backend}.wrong-idea\nPLAN: clamp differently\n" + fenced(wrong, ext_tag),
            },
            {
                "match": "[task: propose step 2 sample 1]",
                "text": "I would vectorise further, but I have no code today.",
            },
            {"match": "[task: propose step 2", "status": 500},
            {"match": "[task: critique", "text": "The rewrite changed the per-element overhead; keep the coarsening."},
            {
                "match": "[task: update-knowledge]",
                "text": json.dumps(
                    {
                        "action": "opencl.thread-coarsening" if backend == "opencl" else "rvv.lmul-large-for-streaming",
                        "field": "when_helps",
                        "text": "Elementwise kernels on CPU-like devices gain when each item does thousands of elements.",
                    }
                ),
            },
        ],
    }


def report_figures(test, r):
    """Reads report.md's figures, checks them against report.json and the printed result."""
    md = read(os.path.join(r["run_dir"], "report.md"))
    with open(os.path.join(r["run_dir"], "report.json")) as f:
        js = json.load(f)["result"]
    figures = {}
    m = re.search(r"^- (\d+) evaluations in (\d+) steps, [0-9.]+ s; stopped: (.*)$", md, re.M)
    test.assertTrue(m, md)
    figures.update(evaluations=int(m[1]), steps=int(m[2]), stop_reason=m[3])
    m = re.search(r"^- result: \*\*(.*)\*\*, ([0-9.]+)x the start", md, re.M)
    test.assertTrue(m, md)
    figures.update(improved=m[1] == "faster candidate found", speedup=float(m[2]))
    m = re.search(
        r"^- LLM spend: \$([0-9.]+), (\d+) calls \((\d+) from the cache\), (\d+) input / (\d+) output tokens", md, re.M
    )
    test.assertTrue(m, md)
    figures.update(usd=float(m[1]), calls=int(m[2]), cached=int(m[3]), input_tokens=int(m[4]), output_tokens=int(m[5]))
    m = re.search(r"^Learned: (\d+) experiences, (\d+) constraints and (\d+) text versions", md, re.M)
    test.assertTrue(m, md)
    figures.update(experiences=int(m[1]), constraints=int(m[2]), text_versions=int(m[3]))
    figures["failed"] = "**FAILED**" in md
    rows = re.findall(r"^\| (\d+) \| \d+ \| ", md.split("## Candidates", 1)[1], re.M)
    for res in (r, js):
        test.assertEqual(figures["evaluations"], res["evaluations"])
        test.assertEqual(figures["steps"], res["steps"])
        test.assertEqual(figures["stop_reason"], res["stop_reason"])
        test.assertEqual(figures["improved"], res["improved"])
        test.assertAlmostEqual(figures["speedup"], res["speedup"], places=3)
        for k in ("calls", "cached", "input_tokens", "output_tokens"):
            test.assertEqual(figures[k], res["spend"][k], k)
        test.assertAlmostEqual(figures["usd"], res["spend"]["usd"], places=4)
        test.assertEqual(figures["experiences"], res["knowledge"]["experiences_written"])
        test.assertEqual(figures["constraints"], res["knowledge"]["constraints_written"])
        test.assertEqual(figures["text_versions"], res["knowledge"]["text_versions_written"])
        test.assertEqual(figures["failed"], res["failed"])
    with open(os.path.join(r["run_dir"], "events.jsonl")) as f:
        shown = [json.loads(line) for line in f if json.loads(line).get("type") in ("start", "candidate")]
    test.assertEqual(len(rows), len(shown))
    return figures


def isolated_env(tmp, key, max_retries):
    """The environment of one mblast run against a fake server: its own KB, runs, cache and config
    (with `max_retries`) under `tmp`, and the API key."""
    env = dict(
        os.environ,
        MBLAST_HOME=HOME,
        MBLAST_KB=os.path.join(tmp, "kb.sqlite"),
        MBLAST_RUNS_DIR=os.path.join(tmp, "runs"),
        MBLAST_CACHE_DIR=os.path.join(tmp, "cache"),
        MBLAST_LLM_API_KEY=key,
        MBLAST_CONFIG=os.path.join(tmp, "config.json"),
    )
    with open(env["MBLAST_CONFIG"], "w") as f:
        json.dump({"max_retries": max_retries}, f)
    return env


class FakeServer:
    def __init__(self, tmp, script_obj, key):
        self.script = os.path.join(tmp, "script.json")
        self.log = os.path.join(tmp, "requests.jsonl")
        with open(self.script, "w") as f:
            json.dump(script_obj, f)
        self.proc = subprocess.Popen(
            [sys.executable, SERVER, "--script", self.script, "--log", self.log, "--expect-key", key, "--watch-stdin"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(l) for l in f if l.strip()]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


class LlmLoop(unittest.TestCase):
    def run_case(self, backend, target, api, start, fast, wrong):
        tmp = tempfile.mkdtemp(prefix="mblast-llm-loop-")
        self.addCleanup(shutil.rmtree, tmp, True)
        if True:
            key = "sk-test-" + "x" * 24
            server = FakeServer(tmp, script(backend, fast, wrong), key)
            try:
                env = isolated_env(tmp, key, 1)
                spec = ("anthropic+" if api == "anthropic" else "") + f"http://127.0.0.1:{server.port}/v1:fake-model"
                start_file = os.path.join(tmp, "start" + {"opencl": ".opencl.cpp", "rvv": ".rvv.c"}[backend])
                with open(start_file, "w") as f:
                    f.write(start)
                args = [
                    BIN,
                    "optimize",
                    os.path.join(HOME, "problems", "relu"),
                    "--target",
                    target,
                    "--llm",
                    spec,
                    "--start",
                    start_file,
                    "--samples",
                    "3",
                    "--max-steps",
                    "2",
                    "--sol",
                    "5",
                    "--json",
                    "--out",
                    os.path.join(tmp, "out"),
                    "--repeats",
                    "5",
                    "--min-time",
                    "0.05",
                ]
                p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
                self.assertEqual(p.returncode, 0, p.stderr[-3000:])
                self.assertTrue(p.stdout.startswith("{"), p.stdout[:500])
                r = json.loads(p.stdout)
                self.assertTrue(r["correct"])
                self.assertTrue(r["improved"], json.dumps(r, indent=1)[:3000])
                self.assertGreater(r["speedup"], 1.0)
                self.assertEqual(read(r["candidate"]), fast)
                self.assertGreater(r["spend"]["calls"], 0)
                self.assertIn("500", p.stderr)  # the failed request is reported, the run goes on
                # Each step says where its time went; the LLM's share is measured apart from the
                # loop's own (retrieval, prompt building, critic, KB writes).
                with open(os.path.join(r["run_dir"], "events.jsonl")) as f:
                    events = [json.loads(line) for line in f]
                steps = [e for e in events if e.get("type") == "step"]
                self.assertEqual(len(steps), r["steps"])
                for e in steps:
                    t = e["timing"]
                    self.assertGreater(t["llm_s"], 0)
                    self.assertGreaterEqual(t["loop_s"], 0)
                    # The runner's share is the evaluations of this step's candidates: at least
                    # the wall time each evaluation measured itself, and not much more.
                    evals = [
                        c["measured"]["phases"]["total_s"]
                        for c in events
                        if c.get("type") == "candidate"
                        and c.get("step") == e["step"]
                        and "phases" in c.get("measured", {})
                    ]
                    print(
                        f"{target} step {e['step']}: step {t['step_s']:.3f} s = evaluate {t['evaluate_s']:.3f} + "
                        f"llm {t['llm_s']:.3f} + loop {t['loop_s']:.3f}; the evaluations' own wall times sum to "
                        f"{sum(evals):.3f} s over {len(evals)}",
                        file=sys.stderr,
                    )
                    self.assertGreaterEqual(t["evaluate_s"] + 1e-3, sum(evals))
                    self.assertLessEqual(t["evaluate_s"], sum(evals) + 0.25 * len(evals) + 1e-3)
                self.assertFalse(key in p.stderr or key in p.stdout, "the API key leaked into the output")

                db = sqlite3.connect(env["MBLAST_KB"])
                q = lambda sql: db.execute(sql).fetchone()[0]
                # start -> fast, broken, repair (broken), wrong: four experiences; the answer with no
                # code is its own outcome (no_kernel), in the run's events and not in the KB
                self.assertEqual(q("SELECT count(*) FROM experiences"), 4, p.stderr[-4000:])
                no_kernel = [
                    e
                    for e in events
                    if e.get("type") == "candidate" and e["measured"].get("failure_kind") == "no_kernel"
                ]
                self.assertEqual(len(no_kernel), 1)
                self.assertEqual(q("SELECT count(*) FROM experiences WHERE correct = 1 AND speedup > 1"), 1)
                self.assertEqual(q("SELECT count(*) FROM experiences WHERE failure_kind = 'build_failed'"), 2)
                self.assertEqual(q("SELECT count(*) FROM experiences WHERE failure_kind = 'wrong_output'"), 1)
                self.assertEqual(
                    q("SELECT count(*) FROM experiences " "WHERE failure_kind IN ('abi_error', 'no_kernel')"), 0
                )
                self.assertEqual(q(f"SELECT count(*) FROM constraints WHERE action_id = '{backend}.loop-unroll'"), 1)
                self.assertGreaterEqual(q("SELECT count(*) FROM policy_stats"), 3)
                # an action the LLM named that the KB did not know became a learned action
                self.assertEqual(
                    q(
                        f"SELECT count(*) FROM actions WHERE id = '{backend}.llm-{backend}.wrong-idea' "
                        f"OR id = '{backend}.wrong-idea'"
                    ),
                    1,
                )
                self.assertEqual(
                    q("SELECT count(*) FROM experiences " "WHERE critic_text LIKE '%Critic: The rewrite%'"), 4
                )
                self.assertEqual(
                    q("SELECT count(*) FROM text_versions WHERE field = 'when_helps' AND author LIKE '%fake-model%'"), 1
                )
                # The reports and the printed result agree with each other and with the KB.
                agree = report_figures(self, r)
                self.assertEqual(agree["experiences"], q("SELECT count(*) FROM experiences"))
                self.assertEqual(
                    agree["constraints"], q("SELECT count(DISTINCT constraint_id) FROM constraint_evidence")
                )
                self.assertGreaterEqual(agree["constraints"], 1)
                self.assertEqual(agree["text_versions"], 1)

                reqs = server.requests()
                self.assertTrue(reqs)
                for rq in reqs:
                    self.assertEqual(rq["api"], api)
                    self.assertTrue(rq["auth_matches_expected_key"])
                    body = rq["body"]
                    self.assertEqual(body["model"], "fake-model")
                    if api == "openai":
                        self.assertTrue(rq["path"].endswith("/chat/completions"))
                        self.assertEqual(body["messages"][0]["role"], "system")
                        self.assertEqual(rq["headers"]["authorization"][:10], "<redacted:")
                    else:
                        self.assertTrue(rq["path"].endswith("/messages"))
                        self.assertIn("system", body)
                        self.assertTrue(all(m["role"] in ("user", "assistant") for m in body["messages"]))
                        self.assertEqual(rq["headers"]["anthropic-version"], "2023-06-01")
                        self.assertIn("max_tokens", body)
                return r, env, args, server
            except BaseException:
                server.close()
                raise

    def test_opencl_pocl_openai(self):
        if subprocess.run([BIN, "targets"], capture_output=True, text=True).stdout.find("pocl-cpu") < 0:
            self.skipTest("pocl-cpu is not a target here")
        naive = read(os.path.join(HOME, "problems", "relu", "candidates", "naive.opencl.cpp"))
        # The start is slow by construction: the naive kernel on one work-item, walking the
        # elements in a scattered order (4099 is prime, so j -> j * 4099 mod n visits each element
        # once for the problem's n). With the naive kernel itself as the start, whether the
        # coarsened one is faster beyond noise depends on the host.
        body = "  const long i = (long)get_global_id(0);\n  if (i >= n) return;\n  y[i] = fmax(x[i], 0.0f);\n"
        launch = "const size_t global = static_cast<size_t>(n);"
        self.assertIn(body, naive)
        self.assertIn(launch, naive)
        slow = naive.replace(
            body,
            "  if (get_global_id(0) != 0) return;\n  for (long j = 0; j < n; ++j) {\n"
            "    const long i = (j * 4099) % n;\n    y[i] = fmax(x[i], 0.0f);\n  }\n",
        )
        slow = slow.replace(launch, "const size_t global = 1;")
        fast = read(os.path.join(HOME, "tests", "loop", "fixtures", "coarsened_relu.opencl.cpp"))
        wrong = naive.replace("fmax(x[i], 0.0f)", "fmax(x[i], 1.0f)")
        r, env, args, server = self.run_case("opencl", "pocl-cpu", "openai", slow, fast, wrong)
        n_before = len(server.requests())
        server.close()
        # A replay on a timed target: the prompts carry times that differ from the recorded
        # run's; the cache's replay key masks them, so every request is answered from it.
        env = dict(env, MBLAST_KB=env["MBLAST_KB"] + ".replay")
        p = subprocess.run(args + ["--replay"], env=env, capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        replay = json.loads(p.stdout)
        self.assertFalse(replay["failed"])
        self.assertEqual(replay["spend"]["calls"], 0)
        self.assertGreater(replay["spend"]["cached"], 0)
        self.assertEqual(replay["evaluations"], r["evaluations"], p.stderr[-5000:])
        self.assertEqual(len(server.requests()), n_before)

    def test_rvv_qemu_anthropic_and_replay(self):
        fast = read(os.path.join(HOME, "problems", "relu", "candidates", "naive.rvv.c"))
        r, env, args, server = self.run_case("rvv", "rvv-qemu-128", "anthropic", SCALAR_RVV, fast, WRONG_RVV)
        n_before = len(server.requests())
        server.close()  # the replay must not need the server at all
        # a fresh KB, as the recorded run had: the prompts (which carry what the KB retrieves) repeat
        env = dict(env, MBLAST_KB=env["MBLAST_KB"] + ".replay")
        p = subprocess.run(args + ["--replay"], env=env, capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        replay = json.loads(p.stdout)
        self.assertEqual(replay["speedup"], r["speedup"])  # instruction counts: exactly the same result
        self.assertEqual(replay["evaluations"], r["evaluations"], p.stderr[-5000:])
        self.assertEqual(replay["spend"]["calls"], 0)
        self.assertEqual(replay["spend"]["usd"], 0)
        self.assertGreater(replay["spend"]["cached"], 0)
        self.assertEqual(len(server.requests()), n_before)


class TrustedRuns(unittest.TestCase):
    """Runs CI can trust (issue 41): a run that failed says so in its exit status, in `runs list`
    and in its report; no run stays "running" once its process is gone; a failed run leaves in
    the KB nothing but what it measured."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mblast-trusted-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.key = "sk-test-" + "y" * 24
        self.env = isolated_env(self.tmp, self.key, 0)
        self.relu = os.path.join(HOME, "problems", "relu")

    def server(self, script_obj):
        s = FakeServer(self.tmp, script_obj, self.key)
        self.addCleanup(s.close)
        return s

    def mblast(self, *args, timeout=600):
        return subprocess.run([BIN, *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def runs(self):
        p = self.mblast("runs", "list", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def kb_count(self, sql):
        if not os.path.exists(self.env["MBLAST_KB"]):
            return 0
        db = sqlite3.connect(self.env["MBLAST_KB"])
        try:
            return db.execute(sql).fetchone()[0]
        finally:
            db.close()

    def optimize_llm(self, port, *extra):
        return self.mblast(
            "optimize",
            self.relu,
            "--target",
            "pocl-cpu",
            "--llm",
            f"http://127.0.0.1:{port}/v1:fake-model",
            "--max-steps",
            "2",
            "--samples",
            "2",
            "--sol",
            "5",
            "--json",
            "--repeats",
            "3",
            "--min-time",
            "0.02",
            "--no-confirm",
            *extra,
        )

    def test_an_actor_that_always_fails_fails_the_run(self):
        server = self.server({"mode": "match", "responses": [{"status": 500}]})
        p = self.optimize_llm(server.port)
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        r = json.loads(p.stdout)
        self.assertTrue(r["failed"])
        self.assertIn("the actor failed", r["failure"])
        (run,) = self.runs()
        self.assertEqual(run["status"], "failed")
        self.assertIn("the actor failed", run["failure"])
        listed = self.mblast("runs", "list").stdout
        self.assertIn("FAILED", listed)
        self.assertNotIn("1.00x", listed)
        report_figures(self, r)
        # Only what was measured: the start's run and state; no experience, no text version.
        self.assertEqual(self.kb_count("SELECT count(*) FROM runs"), 1)
        self.assertEqual(self.kb_count("SELECT count(*) FROM experiences"), 0)
        self.assertEqual(self.kb_count("SELECT count(*) FROM text_versions WHERE author LIKE '%fake-model%'"), 0)

    def test_a_replay_miss_fails_the_run(self):
        server = self.server({"mode": "match", "responses": [{"text": "unused"}]})
        p = self.optimize_llm(server.port, "--replay")
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertTrue(json.loads(p.stdout)["failed"])
        self.assertEqual(server.requests(), [])
        self.assertEqual(self.runs()[0]["status"], "failed")

    def test_a_wrong_start_fails_the_run(self):
        naive = read(os.path.join(self.relu, "candidates", "naive.opencl.cpp"))
        wrong = os.path.join(self.tmp, "wrong.opencl.cpp")
        with open(wrong, "w") as f:
            f.write(naive.replace("fmax(x[i], 0.0f)", "fmax(x[i], 1.0f)"))
        p = self.mblast(
            "optimize",
            self.relu,
            "--target",
            "pocl-cpu",
            "--policy",
            "builtin",
            "--start",
            wrong,
            "--repeats",
            "3",
            "--min-time",
            "0.02",
        )
        self.assertEqual(p.returncode, 2, p.stderr[-3000:])
        self.assertIn("not correct", p.stderr)
        (run,) = self.runs()
        self.assertEqual(run["status"], "failed")
        self.assertIn("not correct", run["failure"])
        self.assertEqual(self.kb_count("SELECT count(*) FROM experiences"), 0)

    def test_an_unavailable_target_fails_the_run_and_leaves_no_trace_in_the_kb(self):
        targets = self.mblast("targets").stdout
        if "b200" not in targets:
            self.skipTest("no b200 target here")
        p = self.mblast("optimize", self.relu, "--target", "b200", "--policy", "builtin", "--repeats", "3")
        if p.returncode == 0:
            self.skipTest("b200 is available here")
        self.assertEqual(p.returncode, 2, p.stderr[-3000:])
        self.assertIn("unavailable", p.stderr)
        for run in self.runs():
            self.assertEqual(run["status"], "failed")
        self.assertEqual(self.kb_count("SELECT count(*) FROM runs"), 0)
        self.assertEqual(self.kb_count("SELECT count(*) FROM experiences"), 0)
        self.assertEqual(self.kb_count("SELECT count(*) FROM targets WHERE name = 'b200'"), 0)

    def test_a_killed_run_is_shown_failed(self):
        # The actor's answer never comes in time: the run waits on the LLM when it is killed.
        server = self.server({"mode": "match", "responses": [{"delay_s": 120, "text": "late"}]})
        args = [
            BIN,
            "optimize",
            self.relu,
            "--target",
            "pocl-cpu",
            "--llm",
            f"http://127.0.0.1:{server.port}/v1:fake-model",
            "--repeats",
            "3",
            "--min-time",
            "0.02",
            "--sol",
            "5",
        ]
        proc = subprocess.Popen(args, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 300
            while time.time() < deadline and not server.requests():
                time.sleep(0.2)
            self.assertTrue(server.requests(), "the run never asked the LLM")
            (run,) = self.runs()
            self.assertEqual(run["status"], "running")  # alive: shown running
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        (run,) = self.runs()
        self.assertEqual(run["status"], "failed")
        self.assertIn("killed", run["failure"])
        with open(os.path.join(self.env["MBLAST_RUNS_DIR"], run["id"], "run.json")) as f:
            self.assertEqual(json.load(f)["status"], "failed")  # on disk too
        shown = self.mblast("runs", "show", run["id"])
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn("FAILED", shown.stdout)


class RepeatsAndCost(unittest.TestCase):
    def test_repeats_are_asked_again_then_the_builtin_policy_steps_in_and_runs_cost_sums(self):
        if subprocess.run([BIN, "targets"], capture_output=True, text=True).stdout.find("pocl-cpu") < 0:
            self.skipTest("pocl-cpu is not a target here")
        tmp = tempfile.mkdtemp(prefix="mblast-repeats-")
        self.addCleanup(shutil.rmtree, tmp, True)
        key = "sk-test-" + "z" * 24
        fast = read(os.path.join(HOME, "tests", "loop", "fixtures", "coarsened_relu.opencl.cpp"))
        # The model always gives the same kernel: new at step 1, a repeat from then on.
        server = FakeServer(
            tmp,
            {
                "mode": "match",
                "responses": [
                    {"match": "[task: analyse", "text": "Elementwise and memory-bound."},
                    {
                        "match": "[task: propose",
                        "text": "ACTION: opencl.thread-coarsening\nPLAN: coarsen\n" + fenced(fast, "cpp"),
                    },
                    # Verbose critiques fill the feedback section past its token budget: the note
                    # naming the repeats must survive the trimming.
                    {"match": "[task: critique", "text": "Fine. " + "The coarsened loop reads memory once. " * 200},
                    {"match": "[task: update-knowledge]", "text": ""},
                ],
            },
            key,
        )
        self.addCleanup(server.close)
        env = isolated_env(tmp, key, 0)
        p = subprocess.run(
            [
                BIN,
                "optimize",
                os.path.join(HOME, "problems", "relu"),
                "--target",
                "pocl-cpu",
                "--llm",
                f"http://127.0.0.1:{server.port}/v1:fake-model",
                "--samples",
                "1",
                "--max-steps",
                "3",
                "--patience",
                "9",
                "--sol",
                "5",
                "--json",
                "--repeats",
                "3",
                "--min-time",
                "0.02",
                "--no-confirm",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        r = json.loads(p.stdout)
        self.assertTrue(r["stop_reason"].startswith("step budget spent"), r["stop_reason"])
        with open(os.path.join(r["run_dir"], "events.jsonl")) as f:
            events = [json.loads(line) for line in f]
        stepped_in = [
            e
            for e in events
            if e.get("type") == "candidate"
            and e.get("description", "").startswith("the LLM repeated itself; builtin policy")
        ]
        self.assertGreaterEqual(len(stepped_in), 1, p.stderr[-3000:])
        asked_again = [q for q in server.requests() if "repeated a candidate" in json.dumps(q["body"])]
        self.assertGreaterEqual(len(asked_again), 1)
        report_figures(self, r)

        c = subprocess.run([BIN, "runs", "cost", "--json"], env=env, capture_output=True, text=True)
        self.assertEqual(c.returncode, 0, c.stderr)
        cost = json.loads(c.stdout)
        self.assertEqual(cost["total"]["calls"], r["spend"]["calls"])
        self.assertEqual(sum(v["calls"] for v in cost["by_role"].values()), r["spend"]["calls"])
        for role in ("actor", "critic", "analysis"):
            self.assertGreater(cost["by_role"][role]["calls"], 0, role)
        self.assertEqual(list(cost["by_model"]), [r["spend"]["model"]])
        self.assertEqual(cost["runs"][0]["run"], r["run"])
        text = subprocess.run([BIN, "runs", "cost"], env=env, capture_output=True, text=True).stdout
        self.assertIn("by role:", text)
        self.assertIn("actor", text)

        # What the next run's first prompt would carry, from this KB: printed, nothing asked, and
        # nothing written (the KB and the runs list stay as they were).
        n = len(server.requests())

        def kb_rows():
            with sqlite3.connect(env["MBLAST_KB"]) as db:
                return [
                    db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("experiences", "states", "runs")
                ]

        rows_before, runs_before = kb_rows(), sorted(os.listdir(env["MBLAST_RUNS_DIR"]))
        sp = subprocess.run(
            [
                BIN,
                "optimize",
                os.path.join(HOME, "problems", "relu"),
                "--target",
                "pocl-cpu",
                "--show-prompt",
                "--repeats",
                "3",
                "--min-time",
                "0.02",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        self.assertEqual(sp.returncode, 0, sp.stderr[-3000:])
        self.assertEqual(len(server.requests()), n)
        self.assertEqual(kb_rows(), rows_before)
        self.assertEqual(sorted(os.listdir(env["MBLAST_RUNS_DIR"])), runs_before)
        for needle in (
            "### system",
            "[task: propose step 1 sample 1]",
            "## Nearest earlier states",
            "opencl.thread-coarsening -> correct",
            "(this problem, an earlier run)",
            "compute units:",
            "## Learned rules",
            "## Constraints that apply here",
        ):
            self.assertIn(needle, sp.stdout)


class BenchWithAnLlm(unittest.TestCase):
    def test_bench_optimize_takes_an_llm(self):
        if subprocess.run([BIN, "targets"], capture_output=True, text=True).stdout.find("pocl-cpu") < 0:
            self.skipTest("pocl-cpu is not a target here")
        tmp = tempfile.mkdtemp(prefix="mblast-bench-llm-")
        self.addCleanup(shutil.rmtree, tmp, True)
        key = "sk-test-" + "b" * 24
        server = FakeServer(
            tmp,
            {
                "mode": "match",
                "responses": [
                    {"match": "[task: analyse", "text": "memory-bound"},
                    {"match": "[task: propose", "text": "ACTION: opencl.nothing\nPLAN: nothing\nno code today"},
                    {"match": "[task: critique", "text": "ok"},
                    {"match": "[task: update-knowledge]", "text": ""},
                ],
            },
            key,
        )
        self.addCleanup(server.close)
        env = isolated_env(tmp, key, 0)
        spec = f"http://127.0.0.1:{server.port}/v1:fake-model"
        p = subprocess.run(
            [
                BIN,
                "bench",
                os.path.join(HOME, "benchmarks", "suite"),
                "--target",
                "pocl-cpu",
                "--optimize",
                "--llm",
                spec,
                "--filter",
                "level1/23_relu",
                "--optimize-evals",
                "2",
                "--no-compile",
                "--min-time",
                "0.05",
                "--json",
                "--work",
                os.path.join(tmp, "work"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if p.returncode != 0 and "torch" in p.stderr:
            self.skipTest("no PyTorch for the baseline: " + p.stderr[-300:])
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        (row,) = json.loads(p.stdout)["problems"]
        self.assertTrue(row["correct"])
        self.assertIn(spec, row["candidate"]["origin"])
        self.assertGreater(row["candidate"]["details"]["spend"]["calls"], 0)
        self.assertTrue(server.requests())
        # An LLM nobody answers: the optimize run fails, so its row is an error (never the start's
        # figures passed off as the run's result) and the bench exits 1.
        dead = socket.socket()
        dead.bind(("127.0.0.1", 0))
        dead_port = dead.getsockname()[1]
        dead.close()
        args = p.args[:]
        args[args.index(spec)] = f"http://127.0.0.1:{dead_port}/v1:fake-model"
        f = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
        self.assertEqual(f.returncode, 1, f.stderr[-3000:])
        (row,) = json.loads(f.stdout)["problems"]
        self.assertFalse(row["correct"], row)
        self.assertEqual((row["status"], row["failure_kind"]), ("error", "optimize_failed"), row)
        self.assertIn("failed", row["reason"])
        self.assertIn("optimize run(s) failed", f.stderr)
        # --llm without --optimize is refused with a reason
        bad = subprocess.run(
            [BIN, "bench", os.path.join(HOME, "benchmarks", "suite"), "--target", "pocl-cpu", "--llm", spec],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--llm goes with --optimize", bad.stderr)


if __name__ == "__main__":
    unittest.main()
