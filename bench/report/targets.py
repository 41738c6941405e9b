"""The targets of the hostcall benchmark, computed from one run (or the
median of several, runs.median). Each is a dict: name, group, value, goal
(">= x" or "<= x"), unit, met (None: not measured), detail.

Groups: "item 2" (round trips, latency and CPU against the references),
"item 3" (lost rings and idle), "item 6" (the heavy one-buffer case),
"counters" (the library's own counts agree with what the bench saw),
"kept" (earlier targets still held). Standard library only.
"""
import math

from runs import index

LOADS = [(1, 1), (4, 1), (16, 1), (64, 1), (16, 8)]
FIELD = {"rts": "round_trips_per_s", "p99": "p99_us", "cpu": "listener_cpu_us_per_rt"}
FIGURE = {"rts": "round trips/s", "p99": "p99", "cpu": "listener CPU per round trip"}
LOST_GAPS = (5, 50, 200, 1000)


def _target(out, group, name, value, op, threshold, unit, detail):
    met = None if value is None or (isinstance(value, float) and math.isnan(value)) else (
        value >= threshold if op == ">=" else value <= threshold)
    out.append({"group": group, "name": name, "value": value, "goal": f"{op} {threshold:g}",
                "unit": unit, "met": met, "detail": detail})


def _config(kind, w, b, pace):
    return (f"paced {pace} µs, " if kind == "device_paced" else "") + f"W={w} B={b}"


def _ratio(out, idx, group, kind, w, b, pace, mine, ref, fig, op, threshold):
    a = idx.get((kind, w, b, pace, mine))
    c = idx.get((kind, w, b, pace, ref))
    name = f"{_config(kind, w, b, pace)}: {FIGURE[fig]} {mine}/{ref}"
    if a is None or c is None or not c[FIELD[fig]]:
        _target(out, group, name, None, op, threshold, "×", "not measured")
        return
    unit = "/s" if fig == "rts" else " µs"
    _target(out, group, name, a[FIELD[fig]] / c[FIELD[fig]], op, threshold, "×",
            f"{mine} {a[FIELD[fig]]:.4g}{unit}, {ref} {c[FIELD[fig]]:.4g}{unit}")


def _idle_per_2s(run, mode, field="listener_cpu_ms"):
    """An idle-section figure of `mode` scaled to 2 s; None if not measured
    (older runs have no `bare_watch_period_cpu_ms`)."""
    i = [x for x in run.get("idle", []) if x["mode"] == mode]
    v = i[0].get(field) if i else None
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v * 2.0 / i[0]["seconds"]


def _idle_control(run, mode):
    """What a bare thread's wake-ups at the lost-ring watch's period cost on
    the same machine in the same window."""
    v = _idle_per_2s(run, mode, "bare_watch_period_cpu_ms")
    if v is None:
        return "idle section"
    return f"idle section; a bare thread that only sleeps in the watch's period costs {v:.2f} ms here"


def compute(run):
    out = []
    idx = index(run)
    # Item 2: against the 2019-20 strategy, in the same protocol.
    for w, b in LOADS:
        for fig, op in (("rts", ">="), ("p99", "<="), ("cpu", "<=")):
            _ratio(out, idx, "item 2", "device", w, b, 0, "ours", "baseline", fig, op, 1.0)
    for pace in (50, 200):
        for w in (1, 16):
            for ref in ("baseline", "classic2026"):
                _ratio(out, idx, "item 2", "device_paced", w, 1, pace, "ours", ref, "p99", "<=", 1.0)
    for w, b in ((64, 1), (16, 8)):
        _ratio(out, idx, "item 2", "device", w, b, 0, "phasebit", "phase2026", "rts", ">=", 1.0)
        _ratio(out, idx, "item 2", "device", w, b, 0, "phasebit", "phase2026", "cpu", "<=", 1.0)
    ours = idx.get(("device_paced", 1, 1, 1000, "ours"))
    # The yardstick measured in the same rounds as ours when the run has it
    # (it then saw the same stretch of the host), else the wake-up section's.
    futex = sorted((x for x in run.get("wakeup", []) if x["kind"] == "futex"),
                   key=lambda x: x.get("with", "wakeup") != "paced")
    name = "paced 1000 µs, W=1 B=1: p99 ours − bare futex wake-up p99"
    if ours and futex:
        where = "measured in the same rounds" if futex[0].get("with") == "paced" else "measured in its own section"
        _target(out, "item 2", name, ours["p99_us"] - futex[0]["p99_us"], "<=", 20.0, " µs",
                f"ours {ours['p99_us']:.1f} µs, futex wake-up {futex[0]['p99_us']:.1f} µs {where}")
    else:
        _target(out, "item 2", name, None, "<=", 20.0, " µs", "not measured")
    _ratio(out, idx, "item 2", "device_paced", 1, 1, 1000, "ours", "baseline", "cpu", "<=", 0.25)
    # Item 3: every lost ring within 20 ms, the first one included; idle.
    lost = run.get("lost_rings", [])
    for mode in ("ours", "phasebit"):
        for gap in LOST_GAPS:
            first = [x for x in lost if x["mode"] == mode and x["which"] == "first" and x["gap_ms"] == gap]
            name = f"lost ring: {mode} first one after {gap} ms"
            if first:
                x = first[0]
                _target(out, "item 3", name, x["wait_ms"] if x["served"] else math.inf, "<=", 20.0, " ms",
                        "served" if x["served"] else "not served before the rescue")
            else:
                _target(out, "item 3", name, None, "<=", 20.0, " ms", "not measured")
        later = [x for x in lost if x["mode"] == mode and x["which"] == "later"]
        name = f"lost ring: {mode} later ones, worst"
        if later:
            worst = max(x["wait_ms"] if x["served"] else math.inf for x in later)
            _target(out, "item 3", name, worst, "<=", 20.0, " ms",
                    ", ".join(f"{x['gap_ms']} ms gap: {x['wait_ms']:.3g}" for x in later))
        else:
            _target(out, "item 3", name, None, "<=", 20.0, " ms", "not measured")
        per_2s = _idle_per_2s(run, mode)
        _target(out, "item 3", f"idle: {mode} listener CPU per 2 s (8 buffers)", per_2s, "<=", 1.0, " ms",
                _idle_control(run, mode))
        around = run.get("idle_around_lost_rings", {}).get(mode, {})
        for when in ("before", "after"):
            v = around.get(f"{when}_ms_per_2s")
            _target(out, "item 3", f"idle: {mode} listener CPU per 2 s {when} lost rings", v, "<=", 1.0,
                    " ms", "one buffer")
    # Item 6: the heavy one-buffer case costs no more CPU than the 2019-20 strategy.
    heavy_o = idx.get(("device_heavy", 64, 1, 0, "ours"))
    heavy_b = idx.get(("device_heavy", 64, 1, 0, "baseline"))
    name = "heavy packets, 64 waves on one buffer: listener CPU (cores) ours/baseline"
    if heavy_o and heavy_b and heavy_b["listener_cpu_pct"]:
        _target(out, "item 6", name, heavy_o["listener_cpu_pct"] / heavy_b["listener_cpu_pct"], "<=", 1.1, "×",
                f"ours {heavy_o['listener_cpu_pct']:.0f} %, baseline {heavy_b['listener_cpu_pct']:.0f} % of a core; "
                f"round trips/s ours {heavy_o['round_trips_per_s']:.4g}, baseline "
                f"{heavy_b['round_trips_per_s']:.4g}")
        c = heavy_o.get("counters")
        if c is not None:
            _target(out, "item 6", "heavy packets: hand-offs to the helper (library's count)",
                    c["helper_handoffs"], "<=", 0, "", f"longest service call {c['longest_service_ns'] / 1e3:.0f} µs")
    else:
        _target(out, "item 6", name, None, "<=", 1.1, "×", "not measured")
    # Counters: the library counted every lost ring it served.
    for mode in ("ours", "phasebit"):
        mine = [x for x in lost if x["mode"] == mode and x["served"] and "counted_by_library" in x]
        if mine:
            missed = sum(1 for x in mine if x["counted_by_library"] < 1)
            _target(out, "counters", f"lost rings served by {mode} that its counters missed", missed, "<=", 0, "",
                    f"of {len(mine)} served")
    # Kept from earlier rounds.
    c2026 = _idle_per_2s(run, "classic2026")
    per_2s = _idle_per_2s(run, "ours")
    if c2026 and per_2s is not None:
        _target(out, "kept", "idle: ours/classic2026 listener CPU", per_2s / c2026, "<=", 0.05, "×",
                f"ours {per_2s:.3f} ms, classic2026 {c2026:.3f} ms per 2 s")
    tb = index(run).get(("threads", 1, 1, 0, "baseline"))
    to = index(run).get(("threads", 1, 1, 0, "ours"))
    if tb and to:
        _target(out, "kept", "thread-per-wave W=1 B=1: round trips/s ours/baseline",
                to["round_trips_per_s"] / tb["round_trips_per_s"], ">=", 1.0, "×",
                f"ours {to['round_trips_per_s']:.0f}/s, baseline {tb['round_trips_per_s']:.0f}/s")
    ref = idx.get(("threads_isolation_reference", 14, 8, 0, "ours"))
    slow = idx.get(("threads_isolation_slow_buffer", 14, 8, 0, "ours"))
    if ref and slow:
        _target(out, "kept", "slow buffer: other buffers' p99 with/without", slow["p99_us"] / ref["p99_us"], "<=",
                2.0, "×", f"{slow['p99_us']:.1f} µs with a 1 ms function on buffer 0, {ref['p99_us']:.1f} µs without")
    return out


def fmt_value(t):
    v = t["value"]
    if v is None:
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "not served"
    if isinstance(v, int):
        return f"{v}{t['unit']}"
    return f"{v:.3g}{t['unit']}"
