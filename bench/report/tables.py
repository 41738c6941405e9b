"""Markdown tables of one hostcall_bench run (report.py and perf_doc.py).
Standard library only."""
import math

from runs import index
from targets import fmt_value

LISTENERS = ["ours", "phasebit", "baseline", "classic2026", "phase2026", "floor-db", "floor-st"]
REFERENCES = ["baseline", "classic2026", "phase2026", "floor-db", "floor-st"]


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def configs(run, kinds, harness="faithful"):
    seen = []
    for r in run["results"]:
        key = (r["kind"], r["waves"], r["buffers"], r["pace_us"])
        if r["kind"] in kinds and r.get("harness", "faithful") == harness and key not in seen:
            seen.append(key)
    return seen


def label(key):
    kind, w, b, pace = key
    extra = {"device_paced": f", paced {pace} µs", "device_heavy": ", heavy packets"}.get(kind, "")
    return f"W={w} B={b}{extra}"


def figures_table(run):
    idx = index(run)
    lines = ["| configuration | listener | rt/s | p50 µs | p99 µs | listener CPU µs per request "
             "| listener CPU, % of a core |",
             "|---|---|---|---|---|---|---|"]
    for key in configs(run, {"device", "device_paced", "device_heavy"}):
        for mode in LISTENERS:
            r = idx.get(key + (mode,))
            if r is None:
                continue
            lines.append(f"| {label(key)} | {mode} | {fmt(r['round_trips_per_s'])} | {fmt(r['p50_us'])} "
                         f"| {fmt(r['p99_us'])} | {fmt(r['listener_cpu_us_per_rt'])} "
                         f"| {fmt(r.get('listener_cpu_pct'))} |")
    return lines


def ratio_table(run):
    idx = index(run)
    head = "| configuration | listener | " + " | ".join(f"vs {m}: rt/s, p99, CPU" for m in REFERENCES) + " |"
    lines = [head, "|---|---|" + "---|" * len(REFERENCES)]
    for key in configs(run, {"device", "device_paced"}):
        for mode in ("ours", "phasebit"):
            r = idx.get(key + (mode,))
            if r is None:
                continue
            cells = []
            for ref in REFERENCES:
                o = idx.get(key + (ref,))
                if o is None:
                    cells.append("-")
                    continue
                cells.append(f"{r['round_trips_per_s'] / o['round_trips_per_s']:.2f}× "
                             f"{r['p99_us'] / o['p99_us']:.2f}× "
                             f"{r['listener_cpu_us_per_rt'] / o['listener_cpu_us_per_rt']:.2f}×")
            lines.append(f"| {label(key)} | {mode} | " + " | ".join(cells) + " |")
    return lines


def harness_table(run):
    """Ours / baseline and ours / classic2026 under the earlier (legacy) and the
    faithful harness, for the configurations the harness section measured."""
    legacy = index(run, "legacy")
    faithful = index(run)
    keys = configs(run, {"device", "device_paced"}, "legacy")
    if not keys:
        return []
    lines = ["| configuration | listener | legacy harness: rt/s, p99, CPU (µs) | faithful harness: rt/s, p99, "
             "CPU (µs) | ours/baseline rt/s, p99, CPU: legacy → faithful |",
             "|---|---|---|---|---|"]

    def cell(r):
        return "-" if r is None else (f"{fmt(r['round_trips_per_s'])}, {fmt(r['p99_us'])}, "
                                      f"{fmt(r['listener_cpu_us_per_rt'])}")

    def ratios(idx, key):
        o, b = idx.get(key + ("ours",)), idx.get(key + ("baseline",))
        if o is None or b is None:
            return "-"
        return (f"{o['round_trips_per_s'] / b['round_trips_per_s']:.2f}× "
                f"{o['p99_us'] / b['p99_us']:.2f}× "
                f"{o['listener_cpu_us_per_rt'] / b['listener_cpu_us_per_rt']:.2f}×")
    for key in keys:
        for mode in ("ours", "baseline", "classic2026"):
            if key + (mode,) not in legacy:
                continue
            change = f"{ratios(legacy, key)} → {ratios(faithful, key)}" if mode == "ours" else ""
            lines.append(f"| {label(key)} | {mode} | {cell(legacy.get(key + (mode,)))} "
                         f"| {cell(faithful.get(key + (mode,)))} | {change} |")
    return lines


def count(counters, key):
    """A count of version 5 of the counters (absent from older runs)."""
    return f"{counters[key]:,}" if key in counters else "—"


def counters_table(run):
    rows = [r for r in run["results"] if r.get("counters") and r["ok"]]
    if not rows:
        return []
    lines = ["| configuration | listener | packets | rings seen | lost rings | blocked waits (timed out) "
             "| hand-offs | longest service µs | forecast sleeps | watch looks |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["counters"]
        harness = " (legacy harness)" if r.get("harness") == "legacy" else ""
        lines.append(f"| {label((r['kind'], r['waves'], r['buffers'], r['pace_us']))}{harness} | {r['mode']} "
                     f"| {c['packets']:,} | {c['doorbell_rings']:,} | {c['lost_rings']} "
                     f"| {c['blocked_waits']:,} ({c['wait_timeouts']:,}) | {c['helper_handoffs']} "
                     f"| {fmt(c['longest_service_ns'] / 1e3)} | {count(c, 'forecast_sleeps')} "
                     f"| {count(c, 'watch_looks')} |")
    return lines


def quiet_sections(run):
    out = []
    wake = run.get("wakeup", [])
    if wake:
        def where(w):
            return " (in the rounds of paced 1000 µs, W=1)" if w.get("with") == "paced" else ""
        out += ["**Bare wake-up** (one post per 1000 µs, poster on the device's CPU, sleeper on the "
                "listener's): " + "; ".join(f"{w['kind']}{where(w)} p50 {fmt(w['p50_us'])} µs, "
                                             f"p99 {fmt(w['p99_us'])} µs" for w in wake) + ".", ""]
    idle = run.get("idle", [])
    if idle:
        out += ["**Idle** (8 buffers, no traffic, listener CPU over 2 s): "
                + ", ".join(f"{i['mode']} {fmt(i['listener_cpu_ms'] * 2.0 / i['seconds'])} ms" for i in idle)
                + ".", ""]
    lost = run.get("lost_rings", [])
    if lost:
        out += ["**Lost rings** (a request posted without a ring; wait in ms until answered; > = not answered "
                "within the rescue time, then rung; the first one on a fresh listener after each gap, later "
                "ones after the first; idle CPU per 2 s of one buffer before the first and after the later ones):",
                "", "| listener | first lost ring, by gap | later lost rings, by gap | idle per 2 s before → after |",
                "|---|---|---|---|"]
        around = run.get("idle_around_lost_rings", {})
        for mode in LISTENERS:
            mine = [x for x in lost if x["mode"] == mode]
            if not mine:
                continue

            def cells(which):
                return ", ".join(f"{x['gap_ms']} ms: {'' if x['served'] else '>'}{fmt(x['wait_ms'])}"
                                 for x in mine if x["which"] == which) or "-"
            a = around.get(mode, {})
            out.append(f"| {mode} | {cells('first')} | {cells('later')} | "
                       f"{fmt(a.get('before_ms_per_2s'))} → {fmt(a.get('after_ms_per_2s'))} ms |")
        out.append("")
    return out


def targets_table(targets):
    lines = ["| group | target | goal | measured | met |", "|---|---|---|---|---|"]
    for t in targets:
        met = "-" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['group']} | {t['name']} | {t['goal']}{t['unit']} | {fmt_value(t)} ({t['detail']}) "
                     f"| {met} |")
    return lines


def run_sections(run):
    out = ["### Every listener", ""] + figures_table(run) + [""]
    out += ["### Ours against every reference (listener / reference)", ""] + ratio_table(run) + [""]
    h = harness_table(run)
    if h:
        out += ["### The earlier harness against the faithful one", ""] + h + [""]
    c = counters_table(run)
    if c:
        out += ["### The library's counters (summed over each configuration's rounds and buffers)", ""] + c + [""]
    out += quiet_sections(run)
    return out
