#!/usr/bin/env python3
"""docs/performance.md and the CPU-per-request/p99 plot, from hostcall_bench JSON.

Usage:
  perf_doc.py [--check] [--doc docs/performance.md] [--svg PATH] [RUN.json ...]

Without RUN.json arguments it reads the runs listed in
bench/results/perf_doc_runs.txt (one a line, relative to the repository
root; several files on one line are the sections of one run, joined), which
is what the performance-doc test checks.

The first run is the main column (the many-core host), the others follow.
Writes the Markdown to --doc and the plot to --svg; with --check, writes
nothing and fails (exit 1) when either file differs from what it would
write. The targets are computed here (targets.py), the tables in tables.py.
Standard library only: the SVG is written directly.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runs as runs_mod  # noqa: E402
import tables  # noqa: E402
import targets as targets_mod  # noqa: E402
from runs import index  # noqa: E402
from tables import LISTENERS, fmt  # noqa: E402

RUNS_LIST = "bench/results/perf_doc_runs.txt"
DESCRIPTION = {
    "ours": "the product library, classic (ready-stack) buffers",
    "phasebit": "the product library, phase-bit buffers",
    "baseline": "2019-20 ROCclr strategy (1 ms waits, serves on a change)",
    "classic2026": "2026 ROCclr classic strategy (4-16 Mi-tick waits, serves on a change and on a timeout)",
    "phase2026": "2026 ROCclr phase-bit strategy (scan while active, 1 Mi-tick waits)",
    "floor-db": "floor: spins on the doorbell value, FUNCTION_CALL only",
    "floor-st": "floor: spins on the ready stacks, FUNCTION_CALL only",
}
COLORS = {"ours": "#1f77b4", "phasebit": "#2ca02c", "baseline": "#c0392b", "classic2026": "#9467bd",
          "phase2026": "#ff7f0e", "floor-db": "#7f7f7f", "floor-st": "#bcbd22"}


def host_name(run):
    m = run["machine"]
    return f"{m.get('host', 'unnamed')} ({m['cpus_online']} CPUs, {m['arch']})"


def summary(runs):
    """Headline figures, one column per host."""
    rows = [("one wave back to back: round trips/s ours / 2019-20", "device", 1, 1, 0, "rts", "baseline"),
            ("one wave back to back: p99 ours / 2019-20", "device", 1, 1, 0, "p99", "baseline"),
            ("64 waves: p99 ours / 2019-20", "device", 64, 1, 0, "p99", "baseline"),
            ("64 waves: listener CPU per request ours / 2019-20", "device", 64, 1, 0, "cpu", "baseline"),
            ("one wave: round trips/s ours / fastest floor", "device", 1, 1, 0, "rts", "floor"),
            ("paced 1 ms: CPU per request ours / 2019-20", "device_paced", 1, 1, 1000, "cpu", "baseline"),
            ("paced 200 µs: p99 ours / 2026 classic", "device_paced", 1, 1, 200, "p99", "classic2026"),
            ("paced 1 ms: p99 ours, µs", "device_paced", 1, 1, 1000, "p99", None),
            ("heavy packets, one buffer: listener CPU ours / 2019-20", "device_heavy", 64, 1, 0, "pct",
             "baseline")]
    head = "| figure | " + " | ".join(host_name(r) for r in runs) + " |"
    lines = [head, "|---|" + "---|" * len(runs)]
    field = {"rts": "round_trips_per_s", "p99": "p99_us", "cpu": "listener_cpu_us_per_rt",
             "pct": "listener_cpu_pct"}
    for name, kind, w, b, pace, fig, ref in rows:
        cells = []
        for run in runs:
            idx = index(run)
            ours = idx.get((kind, w, b, pace, "ours"))
            if ref == "floor":
                floors = [idx.get((kind, w, b, pace, m)) for m in ("floor-db", "floor-st")]
                floors = [f for f in floors if f]
                other = max(floors, key=lambda f: f["round_trips_per_s"]) if floors else None
            else:
                other = idx.get((kind, w, b, pace, ref)) if ref else None
            if ours is None or (ref and other is None):
                cells.append("-")
            elif ref is None:
                cells.append(fmt(ours[field[fig]]))
            else:
                cells.append(f"{ours[field[fig]] / other[field[fig]]:.2f}×")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for run_name, key in (("idle: ours, ms of CPU per 2 s", "ours"),):
        cells = []
        for run in runs:
            i = [x for x in run.get("idle", []) if x["mode"] == key]
            cells.append(fmt(i[0]["listener_cpu_ms"] * 2.0 / i[0]["seconds"]) if i else "-")
        lines.append(f"| {run_name} | " + " | ".join(cells) + " |")
    for which in ("first", "later"):
        cells = []
        for run in runs:
            waits = [x["wait_ms"] if x["served"] else math.inf for x in run.get("lost_rings", [])
                     if x["mode"] == "ours" and x["which"] == which]
            cells.append(fmt(max(waits)) if waits else "-")
        lines.append(f"| {which} lost rings: ours' worst wait, ms | " + " | ".join(cells) + " |")
    for group in ("item 2", "item 3"):
        cells = []
        for run in runs:
            t = [x for x in targets_mod.compute(run) if x["group"] == group]
            cells.append(f"{sum(1 for x in t if x['met'])} of {len(t)}")
        lines.append(f"| issue 27 {group} targets met | " + " | ".join(cells) + " |")
    return lines


def markdown(runs, names, svg_rel):
    out = ["# Hostcall listener performance", "",
           "Generated by `bench/report/perf_doc.py` from the benchmark's JSON files "
           f"({', '.join('`' + p + '`' for p in names)}); do not edit by hand. "
           "`bench/README.md` says how the benchmark measures, what made it disagree with an outside "
           "harness and what each change bought; the `performance-doc` test checks that this file "
           "matches the JSON.", "",
           "All figures are medians of alternating rounds in the device model (one host thread plays "
           "every wave, ringing as a GPU does), on the project's software HSA runtime, whose waits behave "
           "as ROCr's (a blocked wait polls its first 200 µs without pause or yield, then sleeps in an "
           "event wait counted in 250 Hz kernel ticks; 20 µs modelled interrupt latency). The reference "
           "listeners are our own implementations of upstream strategies (`bench/baseline/`):", ""]
    out += [f"* **{m}**: {DESCRIPTION[m]}" for m in LISTENERS] + [""]
    out += ["## Summary", ""] + summary(runs) + [""]
    out += [f"![listener CPU per request against p99, one point per listener]({svg_rel})", ""]
    for run, name in zip(runs, names):
        m = run["machine"]
        pin = (f"main thread CPU {m.get('cpu_main')}, listener CPU {m.get('cpu_listener')}, helper CPU "
               f"{m.get('cpu_helper')}, device thread CPU {m.get('cpu_device')}"
               if m.get("cpu_listener", -1) >= 0 else "not pinned")
        if m.get("cpu_main", -1) < 0 and m.get("cpu_listener", -1) >= 0:
            pin = pin.replace("main thread CPU -1", "main thread unpinned")
        med = f"; median of {run['median_of']} full runs" if run.get("median_of") else ""
        if run.get("note"):
            med = f"; {run['note']}"
        out += [f"## Host: {host_name(run)}", "",
                f"From `{name}`{med}; processor {m.get('cpu_model', 'unknown')}; kernel {m['kernel']}; "
                f"device-model pinning: {pin}.", ""]
        out += tables.run_sections(run)
        out += ["### Targets", ""] + tables.targets_table(targets_mod.compute(run)) + [""]
    return "\n".join(out)


def svg(runs):
    """One panel per pace (W = 1; back to back, 50, 200, 1000 µs), for the first
    run: x = listener CPU per request (log), y = p99 (log), one point per listener."""
    run = runs[0]
    idx = index(run)
    panels = [("device", 1, 1, 0, "back to back"), ("device_paced", 1, 1, 50, "paced 50 µs"),
              ("device_paced", 1, 1, 200, "paced 200 µs"), ("device_paced", 1, 1, 1000, "paced 1 ms")]
    pw, ph, left, top, gap = 300, 240, 60, 60, 70
    width = left + len(panels) * (pw + gap) + 150
    height = top + ph + 70
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{left}" y="22" font-size="14" font-weight="bold">Listener CPU per request against '
             f'p99, one wave, {host_name(run)}</text>',
             f'<text x="{left}" y="40" fill="#555">log scales; medians of alternating rounds; '
             'lower left is better</text>']
    for p, (kind, w, b, pace, title) in enumerate(panels):
        pts = [(m, idx[(kind, w, b, pace, m)]) for m in LISTENERS if (kind, w, b, pace, m) in idx]
        if not pts:
            continue
        xs = [r["listener_cpu_us_per_rt"] for _, r in pts]
        ys = [r["p99_us"] for _, r in pts]
        x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
        y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
        x1 = max(x1, x0 + 1)
        y1 = max(y1, y0 + 1)
        ox = left + p * (pw + gap)
        parts.append(f'<text x="{ox}" y="{top - 6}" font-weight="bold">{title}</text>')
        parts.append(f'<rect x="{ox}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
        for e in range(x0, x1 + 1):
            x = ox + (e - x0) / (x1 - x0) * pw
            parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#ddd"/>')
            parts.append(f'<text x="{x:.1f}" y="{top + ph + 14}" text-anchor="middle">{10 ** e:g}</text>')
        for e in range(y0, y1 + 1):
            y = top + ph - (e - y0) / (y1 - y0) * ph
            parts.append(f'<line x1="{ox}" y1="{y:.1f}" x2="{ox + pw}" y2="{y:.1f}" stroke="#ddd"/>')
            parts.append(f'<text x="{ox - 4}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
        parts.append(f'<text x="{ox + pw / 2}" y="{top + ph + 30}" text-anchor="middle">listener CPU µs per '
                     'request</text>')
        parts.append(f'<text x="{ox - 40}" y="{top + ph / 2}" text-anchor="middle" '
                     f'transform="rotate(-90 {ox - 40} {top + ph / 2})">p99 µs</text>')
        for m, r in pts:
            x = ox + (math.log10(r["listener_cpu_us_per_rt"]) - x0) / (x1 - x0) * pw
            y = top + ph - (math.log10(r["p99_us"]) - y0) / (y1 - y0) * ph
            parts.append(f'<g><title>{m}: {fmt(r["listener_cpu_us_per_rt"])} µs CPU, p99 {fmt(r["p99_us"])} '
                         f'µs</title><circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{COLORS[m]}"/></g>')
    lx = left + len(panels) * (pw + gap)
    for i, m in enumerate(LISTENERS):
        parts.append(f'<rect x="{lx}" y="{top + i * 18}" width="12" height="12" fill="{COLORS[m]}"/>'
                     f'<text x="{lx + 18}" y="{top + 10 + i * 18}">{m}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    doc, svg_path, paths = "docs/performance.md", "bench/results/cpu_vs_p99.svg", []
    i = 0
    while i < len(args):
        if args[i] == "--doc":
            doc, i = args[i + 1], i + 2
        elif args[i] == "--svg":
            svg_path, i = args[i + 1], i + 2
        else:
            paths.append(args[i])
            i += 1
    lines = []
    if paths:
        lines = [[p] for p in paths]
    else:
        with open(RUNS_LIST, encoding="utf-8") as f:
            lines = [line.split() for line in f if line.strip() and not line.startswith("#")]
    if not lines:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = [runs_mod.join([runs_mod.load(p) for p in files]) for files in lines]
    names = [" + ".join(files) for files in lines]
    svg_rel = os.path.relpath(svg_path, os.path.dirname(doc) or ".")
    want = {doc: markdown(runs, names, svg_rel) + "\n", svg_path: svg(runs)}
    if check:
        stale = []
        for path, text in want.items():
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(path)
            except FileNotFoundError:
                stale.append(path)
        if stale:
            print("perf_doc: out of date with the JSON: " + ", ".join(stale)
                  + " (regenerate with bench/report/perf_doc.py)", file=sys.stderr)
            return 1
        return 0
    for path, text in want.items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
