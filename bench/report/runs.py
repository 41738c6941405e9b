"""hostcall_bench JSON: loading, joining the sections of one run, medians of runs.

A run is one JSON object as bench/harness writes it (see bench/README.md).
A long run can be split over several processes (--sections), each writing
its own file; join() puts them back together. median() takes several full
runs of the same host and keeps, per figure, the median over the runs.
Standard library only.
"""
import json
import statistics

RESULT_KEY = ("kind", "mode", "harness", "waves", "buffers", "pace_us")
FIGURES = ("round_trips_per_s", "p50_us", "p99_us", "p999_us", "max_us", "listener_cpu_us_per_rt",
           "listener_cpu_pct", "process_cpu_us_per_rt", "device_cpu_us_per_rt",
           "other_processes_cpu_cores")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def result_key(r):
    return tuple(r.get(k, "faithful" if k == "harness" else None) for k in RESULT_KEY)


def wakeup_key(w):
    """A bare wake-up yardstick: its kind, and where it was measured (its own
    section, or beside the rounds of paced 1000 µs; runs before that have
    only the former)."""
    return (w["kind"], w.get("with", "wakeup"))


def join(parts):
    """One run from the section files of one run (same host), in order."""
    out = {"benchmark": "hostcall_bench", "sections": [], "machine": parts[0]["machine"],
           "settings": parts[0]["settings"], "results": [], "idle": [], "wakeup": [], "lost_rings": [],
           "idle_around_lost_rings": {}}
    for key in ("note", "median_of"):
        if key in parts[0]:
            out[key] = parts[0][key]
    for p in parts:
        if p["machine"].get("host") != out["machine"].get("host"):
            raise ValueError("sections of different hosts: %s, %s" % (p["machine"].get("host"),
                                                                     out["machine"].get("host")))
        out["sections"] += [s for s in p.get("sections", []) if s not in out["sections"]]
        for key in ("results", "idle", "wakeup", "lost_rings"):
            out[key] += p.get(key, [])
        out["idle_around_lost_rings"].update(p.get("idle_around_lost_rings", {}))
    return out


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def median(runs):
    """Per-figure medians over several full runs of one host."""
    if len(runs) == 1:
        return runs[0]
    out = dict(runs[0])
    out["median_of"] = len(runs)
    results = []
    for r in runs[0]["results"]:
        same = [x for run in runs for x in run["results"] if result_key(x) == result_key(r) and x["ok"]]
        m = dict(r)
        m["ok"] = bool(same)
        for f in FIGURES:
            m[f] = _median([x.get(f) for x in same])
        results.append(m)
    out["results"] = results
    out["idle"] = []
    for i in runs[0]["idle"]:
        same = [x for run in runs for x in run["idle"] if x["mode"] == i["mode"]]
        m = dict(i)
        for f in ("listener_cpu_ms", "seconds", "bare_sleeper_cpu_ms", "bare_watch_period_cpu_ms", "listener_cpu_pct"):
            m[f] = _median([x.get(f) for x in same])
        out["idle"].append(m)
    out["wakeup"] = []
    for w in runs[0]["wakeup"]:
        same = [x for run in runs for x in run["wakeup"] if wakeup_key(x) == wakeup_key(w)]
        m = dict(w)
        for f in ("p50_us", "p99_us"):
            m[f] = _median([x.get(f) for x in same])
        out["wakeup"].append(m)
    lost = []
    for i, l in enumerate(runs[0]["lost_rings"]):
        same = [run["lost_rings"][i] for run in runs if i < len(run["lost_rings"])
                and run["lost_rings"][i]["mode"] == l["mode"] and run["lost_rings"][i]["which"] == l["which"]]
        m = dict(l)
        m["served"] = all(x["served"] for x in same)
        m["wait_ms"] = max(x["wait_ms"] for x in same)  # the worst of the runs: a bound, not a median
        lost.append(m)
    out["lost_rings"] = lost
    around = {}
    for mode in runs[0].get("idle_around_lost_rings", {}):
        vals = [run["idle_around_lost_rings"].get(mode, {}) for run in runs]
        around[mode] = {k: _median([v.get(k) for v in vals]) for k in ("before_ms_per_2s", "after_ms_per_2s")}
    out["idle_around_lost_rings"] = around
    return out


def index(run, harness="faithful"):
    """(kind, waves, buffers, pace_us, mode) -> result, for one harness."""
    out = {}
    for r in run["results"]:
        if r["ok"] and r.get("harness", "faithful") == harness:
            out[(r["kind"], r["waves"], r["buffers"], r["pace_us"], r["mode"])] = r
    return out
