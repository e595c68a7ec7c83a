#!/usr/bin/env python3
"""A seeded random sample of KernelBench files, drawn per level, for a benchmark run on problems
nobody picked by hand. The same seed and counts give the same files on every machine.

    benchmarks/kernelbench_sample.py --seed 20261207 --count 8 8 4            # paths, one per line
    benchmarks/kernelbench_sample.py --seed 20261207 --count 8 8 4 --copy DIR  # copied as DIR/<level>/<file>

--copy keeps the level folders, which `mblast bench` reads as each file's level.
"""
import argparse
import os
import random
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def draw(kernelbench, seed, counts):
    rng = random.Random(seed)
    picked = []
    for level, count in zip(("level1", "level2", "level3"), counts):
        d = os.path.join(kernelbench, level)
        files = sorted(f for f in os.listdir(d) if f.endswith(".py"))
        if count > len(files):
            sys.exit(f"kernelbench_sample: {level} has {len(files)} files, {count} asked for")
        picked += [os.path.join(d, f) for f in sorted(rng.sample(files, count))]
    return picked


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", default=os.path.join(os.path.dirname(ROOT), "shared", "kernelbench"))
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, nargs=3, metavar=("L1", "L2", "L3"), required=True)
    ap.add_argument("--copy", help="copy the files here as <level>/<file> and print the copies' paths")
    a = ap.parse_args()
    for path in draw(a.kernelbench, a.seed, a.count):
        if a.copy:
            level = os.path.basename(os.path.dirname(path))
            os.makedirs(os.path.join(a.copy, level), exist_ok=True)
            path = shutil.copy(path, os.path.join(a.copy, level, os.path.basename(path)))
        print(path)


if __name__ == "__main__":
    main()
