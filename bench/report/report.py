#!/usr/bin/env python3
"""Markdown tables and the targets from hostcall_bench JSON.

Usage: report.py [--strict] RUN.json [RUN.json ...]

Several files are joined as the sections of one run (runs.join). Prints
every listener's figures, the ratios against every reference, the quiet
sections and the targets with their figures. --strict: exit 1 when the JSON
lacks a field the tables need (what the bench-smoke-report test
checks); targets that are missed do not fail it
(speed goals live in figures, not in tests). Standard library only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs  # noqa: E402
import tables  # noqa: E402
import targets  # noqa: E402

NEEDED = ("round_trips_per_s", "p50_us", "p99_us", "listener_cpu_us_per_rt", "listener_cpu_pct")


def check(run):
    problems = []
    for key in ("machine", "settings", "results", "idle", "wakeup", "lost_rings", "sections"):
        if key not in run:
            problems.append(f"no '{key}'")
    for r in run.get("results", []):
        if not r.get("ok"):
            continue  # a round the machine was too busy for; the bench's exit code says if one failed
        for f in NEEDED:
            if not isinstance(r.get(f), (int, float)):
                problems.append(f"{r['kind']} {r['mode']} W={r['waves']}: no {f}")
    paced_1ms = any(r.get("kind") == "device_paced" and r.get("pace_us") == 1000 and r.get("waves") == 1
                    and r.get("harness", "faithful") == "faithful" for r in run.get("results", []))
    paired = [w for w in run.get("wakeup", []) if w.get("with") == "paced" and isinstance(w.get("p99_us"), (int, float))]
    if paced_1ms and not any(w["kind"] == "futex" for w in paired):
        problems.append("paced 1000 µs W=1 without the futex wake-up of its rounds")
    return problems


def main(argv):
    strict = "--strict" in argv
    paths = [a for a in argv if a != "--strict"]
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    run = runs.join([runs.load(p) for p in paths])
    print("\n".join(tables.run_sections(run) + tables.targets_table(targets.compute(run))))
    if strict:
        problems = check(run)
        if problems:
            print("report: " + "; ".join(problems), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
