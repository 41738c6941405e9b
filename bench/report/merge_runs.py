#!/usr/bin/env python3
"""Joins the section files of hostcall_bench runs and takes medians of runs.

Usage:
  merge_runs.py --out RUN.json PART.json [PART.json ...]
      one run from the files its sections wrote (--sections), in order;
  merge_runs.py --median --out RUN.json RUN1.json RUN2.json [...]
      per-figure medians of full runs of one host (lost-ring waits: the
      worst of the runs).

Standard library only.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs  # noqa: E402


def main(argv):
    median = "--median" in argv
    args = [a for a in argv if a != "--median"]
    if "--out" not in args:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    i = args.index("--out")
    out_path = args[i + 1]
    paths = args[:i] + args[i + 2:]
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    loaded = [runs.load(p) for p in paths]
    run = runs.median(loaded) if median else runs.join(loaded)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(run, f, indent=1, sort_keys=False)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
