"""The scripted engineer of benchmarks/learning.py --llm (tests/support/engineer_llm_server.py):
it chooses only from what the prompt shows. With the builtin policy's variants given directly
(no mblast needed), it takes the action the prompt ranks best, skips what the constraints
exclude and what the feedback says was tried, reuses an earlier kernel of the same problem that
stands nearer the peak, lets the memory of wins and the actions of the best earlier kernels
reorder the ranking, and gives different samples different ideas.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
import engineer_llm_server as eng  # noqa: E402


class FixedVariants:
    def __init__(self, rows):
        self.rows = rows

    def get(self, problem, target):
        return self.rows if (problem, target) == ("relu", "pocl-cpu") else []


VARIANTS = [
    {"actions": ["opencl.a"], "description": "a, width 4", "source": "kernel a width 4"},
    {"actions": ["opencl.a"], "description": "a, width 8", "source": "kernel a width 8 vload8"},
    {"actions": ["opencl.b"], "description": "b, unroll 2", "source": "kernel b unroll 2"},
    {"actions": ["opencl.c"], "description": "c", "source": "kernel c"},
]


def prompt(
    ranked="",
    constraints="(none)\n",
    memory="(no earlier state is near this one)\n",
    past="(none yet on this backend)\n",
    feedback="(none yet)\n",
    sample=1,
    state="10.0% of peak bandwidth",
):
    return f"""[task: propose step 2 sample {sample}]

## Problem
relu (op class elementwise): y = max(x, 0)

## Target
pocl-cpu (opencl backend): a CPU

## Current candidate (measured: relu on pocl-cpu: 10 us; {state})
```
kernel start
```

## What the knowledge base suggests for this state (ranked; expected speedup from evidence)
{ranked}
## Constraints that apply here
{constraints}
## Nearest earlier states: the action taken there and its measured outcome
{memory}
## Best earlier kernels for the nearest problems on opencl targets
{past}
## Feedback on the latest attempts
{feedback}
This is sample {sample} of 2 for this step.
"""


RANKED = (
    "- opencl.b (seed): B. b. Expected 1.50x from 0 tries (0 on this target, 0 transferred).\n"
    "- opencl.a (seed): A. a. Expected 1.20x from 0 tries (0 on this target, 0 transferred).\n"
    "- opencl.c (seed): C. c. Expected 1.10x from 0 tries (0 on this target, 0 transferred).\n"
)


def answer(text):
    lines = text.split("\n")
    return lines[0].removeprefix("ACTION: "), lines[1].removeprefix("PLAN: "), eng.fenced(text)


class Engineer(unittest.TestCase):
    def setUp(self):
        self.e = eng.Engineer(FixedVariants(VARIANTS))

    def test_takes_the_best_ranked_action_and_the_next_for_sample_two(self):
        self.assertEqual(answer(self.e.answer(prompt(RANKED)))[:2], ("opencl.b", "b, unroll 2"))
        self.assertEqual(answer(self.e.answer(prompt(RANKED, sample=2)))[:2], ("opencl.a", "a, width 4"))

    def test_skips_excluded_actions_and_tried_variants(self):
        cons = "- opencl.b is excluded here: no such unit\n"
        fb = "- a, width 4 [opencl.a]: 1.10x faster (10 us -> 9 us)\n"
        self.assertEqual(
            answer(self.e.answer(prompt(RANKED, constraints=cons, feedback=fb)))[:2], ("opencl.a", "a, width 8")
        )
        repeated = fb + (
            "- Your answer repeated a candidate this run has already evaluated (ACTION opencl.a, "
            "PLAN a, width 8). Propose a different rewrite: another action, or other parameters.\n"
        )
        self.assertEqual(answer(self.e.answer(prompt(RANKED, constraints=cons, feedback=repeated)))[0], "opencl.c")

    def test_memory_of_wins_and_past_kernels_reorder_the_ranking(self):
        memory = (
            "- from a state of gelu on this target (weight 0.80): memory-bound gelu\n"
            "    opencl.c -> correct, 3.00x its parent\n"
        )
        self.assertEqual(answer(self.e.answer(prompt(RANKED, memory=memory)))[0], "opencl.c")
        past = (
            "### gelu on pocl-cpu, 5 us (0.60 of peak bandwidth), made by opencl.a\n"
            "```\nkernel gelu width 8 vload8\n```\n"
        )
        # the action that made the nearest problem's best kernel, and its variant most like it
        ranked = RANKED.replace("1.50x", "1.21x")
        self.assertEqual(answer(self.e.answer(prompt(ranked, past=past)))[:2], ("opencl.a", "a, width 8"))

    def test_reuses_an_earlier_kernel_of_this_problem_nearer_the_peak(self):
        past = (
            "### relu (this problem, an earlier run) on pocl-cpu, 2 us (0.70 of peak bandwidth), made by opencl.a\n"
            "```\nkernel relu best\n```\n"
            "### gelu on pocl-cpu, 5 us (0.60 of peak bandwidth), made by opencl.c\n```\nkernel gelu\n```\n"
        )
        action, plan, code = answer(self.e.answer(prompt(RANKED, past=past)))
        self.assertEqual((action, code), ("opencl.a", "kernel relu best"))
        # not when the current candidate is already nearer the peak
        self.assertEqual(
            answer(self.e.answer(prompt(RANKED, past=past, state="80.0% of peak bandwidth")))[0], "opencl.b"
        )

    def test_other_tasks_get_no_knowledge_and_no_code(self):
        self.assertNotIn("```", self.e.answer("[task: repair step 1]\nsource"))
        self.assertEqual(self.e.answer("[task: update-knowledge]\n..."), "(no update)")
        self.assertIn("no further idea", eng.Engineer(FixedVariants([])).answer(prompt(RANKED)))


if __name__ == "__main__":
    unittest.main()
