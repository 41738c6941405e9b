#!/usr/bin/env python3
"""Markdown tables from one hostcall_bench JSON file.

Usage: report.py results.json > results.md

Device-model and paced runs, thread-per-wave runs (scheduler-bound ones
marked *), idle, and the targets with PASS/MISS. Each row is one listener
(ours, or ours serving phase-bit buffers) against the baseline measured in
the same rounds; every ratio is that listener / baseline. Standard library
only.
"""
import json
import sys


def pairs(results, kinds):
    """(baseline, ours) per configuration, in run order."""
    base = {}
    out = []
    for r in results:
        if r["kind"] not in kinds or not r["ok"]:
            continue
        key = (r["kind"], r["wake_delay_us"], r["waves"], r["buffers"], r["pace_us"])
        if r["mode"] == "baseline":
            base[key] = r
        elif key in base:
            out.append((base[key], r))
    return out


def fmt(v, digits=3):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def device_table(results, kind, title):
    rows = pairs(results, {kind})
    if not rows:
        return []
    lines = [f"**{title}**", "",
             "| listener | W | B | P µs | rt/s baseline / listener | × | p99 µs baseline / listener "
             "| × | listener CPU µs/rt baseline / listener | × | other cores |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for b, o in rows:
        lines.append(
            f"| {o['mode']} | {o['waves']} | {o['buffers']} | {o['pace_us'] or '-'} "
            f"| {fmt(b['round_trips_per_s'])} / {fmt(o['round_trips_per_s'])} "
            f"| {fmt(ratio(o['round_trips_per_s'], b['round_trips_per_s']))} "
            f"| {fmt(b['p99_us'])} / {fmt(o['p99_us'])} | {fmt(ratio(o['p99_us'], b['p99_us']))} "
            f"| {fmt(b['listener_cpu_us_per_rt'])} / {fmt(o['listener_cpu_us_per_rt'])} "
            f"| {fmt(ratio(o['listener_cpu_us_per_rt'], b['listener_cpu_us_per_rt']))} "
            f"| {fmt(max(b['other_processes_cpu_cores'], o['other_processes_cpu_cores']), 2)} |")
    return lines + [""]


def thread_table(results):
    rows = pairs(results, {"threads", "threads_isolation_reference", "threads_isolation_slow_buffer"})
    if not rows:
        return []
    lines = ["**Thread per wave** (* = scheduler-bound: more wave threads than cores)", "",
             "| case | listener | W | B | rt/s baseline / listener | × | p99 µs baseline / listener "
             "| × | listener CPU µs/rt baseline / listener | × |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    names = {"threads": "traffic", "threads_isolation_reference": "isolation, no slow buffer",
             "threads_isolation_slow_buffer": "isolation, slow buffer"}
    for b, o in rows:
        star = "*" if o.get("scheduler_bound") else ""
        lines.append(
            f"| {names[o['kind']]} | {o['mode']} | {o['waves']}{star} | {o['buffers']} "
            f"| {fmt(b['round_trips_per_s'])} / {fmt(o['round_trips_per_s'])} "
            f"| {fmt(ratio(o['round_trips_per_s'], b['round_trips_per_s']))} "
            f"| {fmt(b['p99_us'])} / {fmt(o['p99_us'])} | {fmt(ratio(o['p99_us'], b['p99_us']))} "
            f"| {fmt(b['listener_cpu_us_per_rt'])} / {fmt(o['listener_cpu_us_per_rt'])} "
            f"| {fmt(ratio(o['listener_cpu_us_per_rt'], b['listener_cpu_us_per_rt']))} |")
    return lines + [""]


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        run = json.load(f)
    results = run["results"]
    out = device_table(results, "device", "Device model") + \
        device_table(results, "device_paced", "Device model, paced") + thread_table(results)
    idle = {i["mode"]: i for i in run.get("idle", [])}
    if idle:
        def sleeper(i):
            ms = i.get("bare_sleeper_cpu_ms")
            return "" if ms is None else f" (a bare thread sleeping on ours' idle schedule meanwhile: {fmt(ms)} ms)"
        out += ["**Idle** (8 buffers, no traffic): " + ", ".join(
            f"{m} {fmt(i['listener_cpu_ms'])} ms of listener CPU in {fmt(i['seconds'])} s{sleeper(i)}"
            for m, i in idle.items()), ""]
    if run.get("targets"):
        out += ["| target | goal | measured | met |", "|---|---|---|---|"]
        for t in run["targets"]:
            out.append(f"| {t['name']} | {t['target']}{t['unit']} | {fmt(t['value'])}{t['unit']} "
                       f"({t['detail']}) | {'yes' if t['pass'] else '**no**'} |")
        out.append("")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
