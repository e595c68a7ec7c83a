#!/usr/bin/env python3
"""A scripted model that behaves like a careful engineer with no memory of its own (issue 41).

    python3 tests/support/engineer_llm_server.py --mblast build/bin/mblast --problems problems \
        [--log REQUESTS.jsonl] [--port 0] [--watch-stdin]

It serves the OpenAI and Anthropic formats on the same terms as fake_llm_server.py (whose
HTTP side it reuses: "PORT <n>" on the first line of stdout, every request logged), but each
answer is worked out from the prompt alone. It keeps nothing between requests and never opens
the knowledge base: what a run learned can only reach it through the prompt, which is what
benchmarks/learning.py --llm measures.

How it answers an actor prompt ("[task: propose step S sample K]"):
  1. It reads the sections: the problem and target, the current candidate, the KB's ranked
     actions with their expected speedups, the learned rules, the constraints, the nearest
     earlier states with the action taken there and its outcome, the best earlier kernels
     (with the action that made each), and the feedback on this run's latest attempts.
  2. It lists ideas, best first: an earlier kernel of this same problem on this backend (used
     as it is) when it stands nearer the peak than the current candidate; then the builtin
     policy's variants of each action, the actions ordered by what the prompt says of them:
     the expected speedup, raised by wins the nearest states recall and by the actions that
     made the best earlier kernels, lowered by failures recalled and by demoting constraints;
     excluded actions are left out. Variants this run already tried (named in the feedback or
     in a "repeated" note) and the current candidate are skipped.
  3. Sample K takes the K-th idea, so the samples of a step differ, as the prompt asks.
The variants come from `mblast plan DIR --target T --json --write-variants` (the builtin
policy's generators, the same for every run: a pure function of problem and target, looked up
once per pair). Repair requests get no code; critique, analysis and knowledge-update requests
get short plain answers that carry no knowledge of their own.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_llm_server  # noqa: E402  (the HTTP side)


def sections(prompt):
    """{heading: body} of the '## ' sections of a prompt's user text."""
    out, name, lines = {}, None, []
    for line in prompt.split("\n"):
        if line.startswith("## "):
            if name is not None:
                out[name] = "\n".join(lines)
            name, lines = line[3:].strip(), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        out[name] = "\n".join(lines)
    return out


def section(secs, prefix):
    for k, v in secs.items():
        if k.startswith(prefix):
            return k, v
    return "", ""


def fenced(text):
    """The body of the first fenced block in text."""
    m = re.search(r"```[^\n]*\n(.*?)\n```", text, re.S)
    return m.group(1) if m else ""


class Variants:
    """The builtin policy's variants of a problem on a target, by `mblast plan` (cached: the
    generators are deterministic, so this is a lookup table, not memory of runs)."""

    def __init__(self, mblast, problems_root):
        self.mblast, self.root = mblast, problems_root
        self.lock = threading.Lock()
        self.cache = {}
        self.tmp = tempfile.mkdtemp(prefix="mblast-engineer-")

    def get(self, problem, target):
        key = (problem, target)
        with self.lock:
            if key not in self.cache:
                self.cache[key] = self._load(problem, target)
            return self.cache[key]

    def _load(self, problem, target):
        pdir = os.path.join(self.root, problem)
        if not os.path.isdir(pdir):
            return []
        out = os.path.join(self.tmp, target)
        p = subprocess.run(
            [self.mblast, "plan", pdir, "--target", target, "--json", "--write-variants", out],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if p.returncode != 0:
            return []
        doc = json.loads(p.stdout)
        rows = doc[0].get("variant_list", []) if doc else []
        for v in rows:
            with open(v["file"]) as f:
                v["source"] = f.read()
        return rows


def parse_ranked(body):
    """[(action id, expected speedup)] in the KB's order."""
    out = []
    for line in body.split("\n"):
        m = re.match(r"- (\S+) \(.*?Expected ([0-9.]+)x from", line)
        if m:
            out.append((m.group(1), float(m.group(2))))
    return out


def parse_constraints(body):
    excluded, demoted = set(), {}
    for line in body.split("\n"):
        m = re.match(r"- (\S+) is excluded here", line)
        if m:
            excluded.add(m.group(1))
            continue
        m = re.match(r"- (\S+) \((demote|forbid|exclude)\w*", line)
        if m:
            if m.group(2) == "demote":
                demoted[m.group(1)] = demoted.get(m.group(1), 0) + 1
            else:
                excluded.add(m.group(1))
    return excluded, demoted


def parse_memory(body):
    """{action: (best weighted log gain, weighted failures)} from the nearest states."""
    gains, fails = {}, {}
    weight = 0.0
    for line in body.split("\n"):
        m = re.match(r"- from a state.*\(weight ([0-9.]+)\)", line)
        if m:
            weight = float(m.group(1))
            continue
        m = re.match(r"\s+(\S+) -> correct, ([0-9.]+)x its parent", line)
        if m:
            g = weight * math.log(max(float(m.group(2)), 1e-3))
            gains[m.group(1)] = max(gains.get(m.group(1), -1e9), g)
            continue
        m = re.match(r"\s+(\S+) -> failed", line)
        if m:
            fails[m.group(1)] = fails.get(m.group(1), 0) + weight
    return gains, fails


def parse_past_kernels(body):
    """[{problem, same_problem, target, fraction, action, source, complete}]."""
    out = []
    for m in re.finditer(r"^### ([^\n]*)\n```\n(.*?)\n```$", body, re.S | re.M):
        head, src = m.group(1), m.group(2)
        fr = [float(x) for x in re.findall(r"([0-9.]+) of peak (?:bandwidth|compute)", head)]
        act = re.search(r", made by (\S+)$", head)
        tgt = re.search(r" on (\S+?)(?:,|$| \()", head)
        out.append(
            {
                "problem": head.split(" ", 1)[0],
                "same_problem": "(this problem" in head,
                "target": tgt.group(1) if tgt else "",
                "fraction": max(fr) if fr else None,
                "action": act.group(1) if act else "",
                "source": src,
                "complete": "more characters not shown]" not in src,
            }
        )
    return out


def parse_tried(body):
    """Descriptions (PLAN lines) this run already evaluated, from the feedback section."""
    tried = set()
    for line in body.split("\n"):
        m = re.match(r"- (?:the LLM repeated itself; builtin policy: )?(.*?) \[[^\]]*\]", line)
        if m:
            tried.add(m.group(1).strip())
        for r in re.findall(r"PLAN (.*?)(?:;|\)\. Propose)", line):
            tried.add(r.strip())
    return tried


def similarity(a, b):
    """Jaccard similarity of two sources' identifier and number tokens."""
    ta, tb = set(re.findall(r"[A-Za-z_]\w*|\d+", a)), set(re.findall(r"[A-Za-z_]\w*|\d+", b))
    return len(ta & tb) / max(1, len(ta | tb))


def current_fraction(state_heading):
    """The current candidate's nearest fraction of a peak ("5.2% of peak bandwidth")."""
    fr = [float(x) / (100 if pct else 1) for x, pct in re.findall(r"([0-9]*\.?[0-9]+)(%?) of peak", state_heading)]
    return max(fr) if fr else None


class Engineer:
    def __init__(self, variants):
        self.variants = variants

    def answer(self, prompt):
        task = re.search(r"\[task: (\w[\w-]*)([^\]]*)\]", prompt)
        kind = task.group(1) if task else ""
        if kind == "propose":
            return self.propose(prompt)
        if kind == "repair":
            return "I cannot see the fix from the log alone; I leave this one."
        if kind == "critique":
            return "Judged by the measurements above; the next rewrite should follow the best-ranked untried action."
        if kind == "analyse":
            return "The measured state above says where the time goes; I follow the knowledge base's ranking."
        if kind == "update-knowledge":
            return "(no update)"
        return "I do not know this task."

    def ideas(self, prompt):
        secs = sections(prompt)
        m = re.match(r"\s*(\S+) \(op class", secs.get("Problem", ""))
        problem = m.group(1) if m else ""
        m = re.match(r"\s*(\S+) \((\w+) backend\)", secs.get("Target", ""))
        target, backend = (m.group(1), m.group(2)) if m else ("", "")
        cur_head, cur_body = section(secs, "Current candidate")
        current = fenced(cur_body)
        cur_fraction = current_fraction(cur_head)
        ranked = parse_ranked(section(secs, "What the knowledge base suggests")[1])
        excluded, demoted = parse_constraints(section(secs, "Constraints that apply")[1])
        gains, fails = parse_memory(section(secs, "Nearest earlier states")[1])
        past = parse_past_kernels(section(secs, "Best earlier kernels")[1])
        tried = parse_tried(section(secs, "Feedback on the latest attempts")[1])

        ideas = []  # (action, plan, source)
        # An earlier kernel of this very problem on this backend, nearer the peak than the current one.
        for k in past:
            if not (k["same_problem"] and k["complete"]) or k["source"].strip() == current.strip():
                continue
            if cur_fraction is not None and k["fraction"] is not None and k["fraction"] <= cur_fraction:
                continue
            plan = f"reuse the best earlier kernel of {problem} from {k['target']}"
            if plan not in tried:
                ideas.append((k["action"] or f"{backend}.reuse-earlier-kernel", plan, k["source"]))
        # The actions, scored by what the prompt says of them.
        scores = {}
        for i, (a, expected) in enumerate(ranked):
            scores[a] = math.log(max(expected, 1e-3)) - 1e-3 * i
        for a, g in gains.items():
            scores[a] = scores.get(a, -0.2) + max(g, 0.0)
        for k in past:  # what made the nearest problems' best kernels
            if k["action"] and not k["same_problem"]:
                scores[k["action"]] = scores.get(k["action"], -0.2) + 0.1
        for a, f in fails.items():
            scores[a] = scores.get(a, -0.2) - 0.5 * f
        for a, n in demoted.items():
            scores[a] = scores.get(a, -0.2) - 0.5 * n
        variants = self.variants.get(problem, target)
        order = sorted((a for a in scores if a not in excluded), key=lambda a: -scores[a])
        used = set()
        for a in order:
            # Within an action, the variant most like the best earlier kernel that action made
            # (its vector width, tiling, unrolling), else like any best earlier kernel, first;
            # with none shown, the generators' own order.
            models = [k["source"] for k in past if k["action"] == a] or [k["source"] for k in past]
            ranked_variants = sorted(
                enumerate(variants), key=lambda iv: -max([similarity(iv[1]["source"], m) for m in models] or [0.0])
            )
            for i, v in ranked_variants:
                if i in used or not v["actions"] or v["actions"][0] != a:
                    continue
                if v["description"] in tried or v["source"].strip() == current.strip():
                    continue
                used.add(i)
                ideas.append((a, v["description"], v["source"]))
        # Last, what the prompt says nothing about (actions beyond its list), in the generators' order.
        for i, v in enumerate(variants):
            if i in used or not v["actions"] or v["actions"][0] in excluded:
                continue
            if v["description"] in tried or v["source"].strip() == current.strip():
                continue
            ideas.append((v["actions"][0], v["description"], v["source"]))
        return ideas

    def propose(self, prompt):
        m = re.search(r"\[task: propose step (\d+) sample (\d+)\]", prompt)
        sample = int(m.group(2)) if m else 1
        ideas = self.ideas(prompt)
        if not ideas:
            return "I have no further idea for this kernel."
        action, plan, source = ideas[min(sample, len(ideas)) - 1]
        return f"ACTION: {action}\nPLAN: {plan}\n```\n{source}\n```\n"


class EngineerScript:
    """Answers every request through the Engineer (the interface of fake_llm_server.Script)."""

    mode = "match"

    def __init__(self, engineer):
        self.engineer = engineer

    def pick(self, last_user):
        text = self.engineer.answer(last_user)
        return 0, {"text": text, "usage": {"input": len(last_user) // 4, "output": len(text) // 4}}


def main():
    ap = argparse.ArgumentParser(description="A scripted careful engineer as an LLM server (prompt only).")
    ap.add_argument("--mblast", required=True, help="the mblast binary (for the builtin policy's variants)")
    ap.add_argument("--problems", required=True, help="the folder of problem directories, by name")
    ap.add_argument("--log", default="", help="append every request here (JSON Lines)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches end of file")
    args = ap.parse_args()
    script = EngineerScript(Engineer(Variants(args.mblast, args.problems)))
    fake_llm_server.serve(fake_llm_server.Server((args.host, args.port), script, args.log, None), args.watch_stdin)


if __name__ == "__main__":
    main()
