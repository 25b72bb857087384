#!/usr/bin/python3
"""False-alarm rate of plumb compare's parity verdict on real training runs.

Takes per-seed results of ONE setting (seeds.jsonl files, report/seeds.h
format: e.g. checks/parity/seeds.jsonl of `plumb accept --seeds 30`), draws
random disjoint K-vs-K splits of those seeds, runs `plumb compare --metrics`
on each, and counts the verdicts. Every split compares a setting with
itself, so each `different` is a false alarm; at alpha 0.05 the rate should
be at most about 5%.

usage: bench/parity_false_alarm.py PLUMB SEEDS.jsonl [MORE.jsonl ...]
       [--splits 200] [--k 5] [--rng-seed 1] [--metric auc]
"""
import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plumb")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--rng-seed", type=int, default=1)
    ap.add_argument("--metric", default="auc", help="the metric whose verdict is counted (all: the overall verdict)")
    a = ap.parse_args()
    recs = {}
    for f in a.files:
        for line in open(f):
            if line.strip():
                r = json.loads(line)
                r.pop("curve", None)  # the verdict does not use curves; smaller files
                recs[r["seed"]] = r
    seeds = sorted(recs)
    if len(seeds) < 2 * a.k:
        sys.exit(f"{len(seeds)} seeds: need at least {2 * a.k} for {a.k}-vs-{a.k} splits")
    rnd = random.Random(a.rng_seed)
    counts = collections.Counter()
    overall = collections.Counter()
    with tempfile.TemporaryDirectory() as td:
        pa, pb = os.path.join(td, "a.jsonl"), os.path.join(td, "b.jsonl")
        for _ in range(a.splits):
            pick = rnd.sample(seeds, 2 * a.k)
            for path, part in ((pa, pick[:a.k]), (pb, pick[a.k:])):
                with open(path, "w") as f:
                    for s in part:
                        f.write(json.dumps(recs[s]) + "\n")
            p = subprocess.run([a.plumb, "compare", "--metrics", pa, pb, "--json"], capture_output=True, text=True)
            if p.returncode not in (0, 1):
                sys.exit(f"plumb compare failed ({p.returncode}): {p.stderr}")
            doc = json.loads(p.stdout)
            overall[doc["verdict"]] += 1
            for m in doc["parity"][0]["metrics"]:
                if m["metric"] == a.metric:
                    counts[m["verdict"]] += 1
    n = a.splits
    print(f"{len(seeds)} seeds of one setting, {n} random {a.k}-vs-{a.k} splits, plumb compare --metrics each")
    for name, c in (("metric " + a.metric, counts), ("overall verdict (the primary metric's)", overall)):
        parts = ", ".join(f"{v} {c[v]} ({100.0 * c[v] / n:.1f}%)" for v in ("equivalent", "undecided", "different"))
        print(f"  {name}: {parts}")
    print(f"false-alarm rate ({a.metric}): {100.0 * counts['different'] / n:.1f}% (alpha 5%)")


if __name__ == "__main__":
    main()
