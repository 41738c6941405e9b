#!/usr/bin/env python3
"""Median of several hostcall_bench runs, per target.

Usage: median_targets.py run1.json run2.json run3.json [--markdown]

Reads the JSON files hostcall_bench wrote and prints, for every target, the
value of each run, the median and whether the median meets the target.
Standard library only.
"""
import json
import statistics
import sys


def main(argv):
    markdown = "--markdown" in argv
    paths = [a for a in argv if not a.startswith("--")]
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            runs.append(json.load(f))
    names = []
    for run in runs:
        for target in run.get("targets", []):
            if target["name"] not in names:
                names.append(target["name"])
    if markdown:
        print("| target | goal | " + " | ".join(f"run {i + 1}" for i in range(len(runs)))
              + " | median | met |")
        print("|---|---|" + "---|" * len(runs) + "---|---|")
    all_met = True
    for name in names:
        values, goal, unit = [], "", ""
        for run in runs:
            match = [t for t in run.get("targets", []) if t["name"] == name]
            if match and match[0]["value"] is not None:
                values.append(match[0]["value"])
                goal, unit = match[0]["target"], match[0]["unit"]
            else:
                values.append(None)
        present = [v for v in values if v is not None]
        if not present:
            continue
        median = statistics.median(present)
        op, threshold = goal.split()
        met = median >= float(threshold) if op == ">=" else median <= float(threshold)
        all_met &= met
        cells = ["-" if v is None else f"{v:.3g}{unit}" for v in values]
        if markdown:
            print(f"| {name} | {goal}{unit} | " + " | ".join(cells)
                  + f" | **{median:.3g}{unit}** | {'yes' if met else 'no'} |")
        else:
            print(f"[{'MET ' if met else 'MISS'}] {name}: median {median:.3g}{unit} "
                  f"(goal {goal}{unit}; runs: {', '.join(cells)})")
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
