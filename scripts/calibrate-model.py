#!/usr/bin/env python3
"""Fits the cost model's parameters (docs/simulator.md) to hetccl-perf runs
on the machine at hand, writes them as a cluster file, and reports how
well the model then predicts layouts and sizes it was not fitted to.

    scripts/calibrate-model.py [--perf build/hetccl-perf] [--sim build/hetccl-sim]
                               [--runs 3] [--out build/calibrated.cluster] [--table FILE]
                               [--save m.json | --load m.json --cores N] [--fail-above PCT]

Here (CPU ranks, one host): the "vendor library" of a domain is hetccl's
own host algorithms among its ranks, the "NIC" between domains is the
shared-memory transport (each rank its own link). Every series, fitted
and checked, is measured in `--runs` rounds, each passing every series
once (a shared machine's speed drifts by the minute: so it falls on all
alike), its sizes in a hetccl-perf run per iteration count. The fit, from
the medians:
  library:  all-reduce in one domain of two ranks: t = latency + 2 S (n-1)/n / busbw;
            its all-gather: S (n-1)/n / the copy bandwidth (all-gathers, broadcasts),
            its latency a ring round's for the smallest messages (step);
  links:    all-gather across two one-rank domains: t = latency + S / 2 / bandwidth;
  reduce:   all-reduce across the same two ranks: what its slope adds to the links';
  cache:    the host's buffers (both ranks' input and output) up to which
            those bandwidths hold, and what a byte beyond costs more: the
            pair that fits those four series best (up to 16 MiB messages);
  gap:      the smallest broadcast between two one-rank domains: how far
            apart back-to-back messages follow each other (its time less
            its bytes at the links' bandwidth);
  further:  on hosts of four cores or more, four one-rank domains'
            smallest broadcast against two's: each further message a
            root posts at once with its first (two of its three);
  reduce-scatter: on hosts of four cores or more, one domain of four's
            reduce-scatter: its bus bandwidth (a ring step that reduces
            costs more than the all-reduce's figure gives it);
  one way:  its sizes above the eager size: the links' bandwidth for a
            message going one way at a time (the rooted calls'; a lone
            message outruns the both-ways all-gather's per-direction rate
            where the two directions' copies share the host's memory);
  hand-off: where four ranks outnumber the cores, the small all-reduces of
            two domains of two, pipelined and by leaders: the wake-up (each
            round of messages, each hand-off to the progress thread) that
            brings the model's times closest to theirs;
  many ranks: every collective of two domains of two ranks (and, on hosts
            of eight cores or more, of four) at the fitted sizes from 256
            KiB: the factor (0.90-1.05 in 5% steps) on every bandwidth above
            that brings the model's times closest to theirs. Calls of more
            ranks share the host's caches and memory among more cores: on
            most 16-core hosts their bandwidths came out a few percent below
            the two-rank series', by an amount that differs from host to
            host (fitted on half of the layouts, it held on the other half).
            The file holds the bandwidths times the factor.
The measurements fix the switch between the plans (the threshold's), so
the plan that ran is known. HETCCL_MODEL_FILE=<the written file> makes the
library choose its plans by these figures.
Every other row (sizes between the fitted ones; one domain of four (its
reduce-scatter at the sizes between only, where fitted), two
domains of two ranks (up to 64 KiB and between the fitted sizes), one
and three, three domains of one; on hosts of eight cores or more also
one domain of eight, four and four (as two domains of two), two and six,
four domains of two) is a prediction checked against a measurement: the
table says each one's error, how far its runs lie apart ((slowest -
fastest) / median), and how many rows the model misses by more than 20%
and by more than their runs differ (a miss beyond the machine's noise);
with three runs or more, the same rows' first run taken as the
prediction of their other runs' median, and how many rows the model and
that run put within 20%: what a model that knew the machine exactly
would still miss by.
`--gpu-staged` also measures two GPU ranks in two domains on the host
path and predicts them as CPU ranks plus two staging copies per call
(their latency and bandwidth fitted to the GPU ranks' all-gather less
the CPU ranks' measured in the same rounds).
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

from model_fit import (beyond_factor, fit, further_fit, gap, handoff, line_fit, many_ranks_fit, one_way, rs_fit,
                       with_bandwidths_times)

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIT_SIZES = [1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24]  # fitted
HELD_SIZES = [1 << 12, 1 << 16, 1 << 21, 1 << 23]                    # held back
SMALL_ALLREDUCE = 64 << 10   # HETCCL_SMALL_ALLREDUCE_BYTES: leaders up to it (the rooted collectives too)
PIECE = 512 << 10            # every run's HETCCL_CHUNK_BYTES (set): the pipelined plans overlap chunk by chunk
CORES = os.cpu_count() or 1  # the measured host's (--cores with --load)
EAGER = int(os.environ.get("HETCCL_CMA_THRESHOLD", 65536))  # shared memory: larger messages wait for their receiver
RS_LAYOUT = ["-N", "4", "--domains", "1"]  # rs_fit's
FOUR_SINGLES = ["-N", "4", "--domains", "4"]  # further_fit's
HANDOFF_LAYOUT, HANDOFF_SIZES = ["-N", "4", "--domains", "2"], [1 << 10, 1 << 12]  # fit_handoff's
MANY_SIZES = [s for s in FIT_SIZES if s >= 1 << 18]  # fit_many_ranks': calls that bandwidth sets


MEASURED = {}  # every median measured (or --load-ed), by its key
RUNS = {}      # and each run's time, by the same key: --save writes these
LOADED_ONLY = False  # --load: predict only what the file holds
SAVE = None          # --save's path: written after every round, so a run cut short keeps its rounds
LAYOUT_DIR = tempfile.TemporaryDirectory(prefix="calibrate-model-")  # predict's cluster files


def key_of(coll, layout, s, switch, gpu_staged):
    return f"{'gpu-staged ' if gpu_staged else ''}{coll} {' '.join(layout)} {s} {switch}"


def iterations(s):
    """hetccl-perf's iterations for a size: enough calls to time the small ones."""
    return 400 if s <= (1 << 16) else 100 if s <= (1 << 20) else 30


def launches(sizes):
    """A series' sizes as hetccl-perf runs: one run for each iteration count,
    over a geometric range (-b, -e, -f) where its sizes form one, else one
    run per size. (A GPU rank's run starts its runtime, ~1 s: per size, the
    host-staged series alone took over 100 s a round.)"""
    groups = {}
    for s in sorted(sizes):
        groups.setdefault(iterations(s), []).append(s)
    runs = []
    for iters, group in groups.items():
        factor = group[1] // group[0] if len(group) > 1 else 2
        if all(b == a * factor for a, b in zip(group, group[1:])):
            runs.append((iters, group, factor))
        else:
            runs += [(iters, [s], 2) for s in group]
    return runs


def run_once(perf, coll, layout, sizes, switch, gpu_staged, iters, factor):
    """One hetccl-perf run's out-of-place times (us) of `sizes` (a geometric
    range by `factor`), the plans switching at `switch` bytes (a fixed
    threshold: the plan that ran is known, whatever the library's own model
    would pick). CPU ranks, or (`gpu_staged`) GPU ranks on the host path."""
    env = dict(os.environ, HETCCL_SMALL_ALLREDUCE_BYTES=str(switch), HETCCL_CHUNK_BYTES=str(PIECE))
    if gpu_staged:
        env.pop("HETCCL_DEVICE", None)
        env.update(HETCCL_STREAM_COLLECTIVES="0", HETCCL_STREAM_HIERARCHY="0")
    else:
        env["HETCCL_DEVICE"] = "host"
    cmd = [perf, coll, "-b", str(sizes[0]), "-e", str(sizes[-1]), "-f", str(factor), "-n", str(iters), "-w", "10",
           "-c", "0"] + layout
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True, env=env).stdout
    rows = [float(l.split()[5]) for l in out.splitlines() if re.match(r"^\s+\d+\s+\d+", l)]
    if len(rows) != len(sizes):
        sys.exit(f"calibrate-model: {' '.join(cmd)} printed {len(rows)} sizes, not {len(sizes)}")
    return dict(zip(sizes, rows))


def measure_rounds(perf, series, runs):
    """Measures every (coll, layout, sizes, switch, gpu_staged) series not
    yet measured, in `runs` rounds that each pass every series once: a
    shared machine's speed drifts by the minute (the dev VM's by up to 3x),
    and so the drift falls on the fitted series and the checked ones
    alike, and each row's runs show it."""
    todo = [(c, l, [s for s in sizes if key_of(c, l, s, sw, g) not in MEASURED], sw, g)
            for c, l, sizes, sw, g in series]
    todo = [x for x in todo if x[2]]
    if LOADED_ONLY or not todo:  # --load: another machine's measurements; what they lack is not measured here
        return
    for _ in range(runs):
        for coll, layout, sizes, switch, staged in todo:
            for iters, group, factor in launches(sizes):
                for s, t in run_once(perf, coll, layout, group, switch, staged, iters, factor).items():
                    RUNS.setdefault(key_of(coll, layout, s, switch, staged), []).append(t)
        save()
    for coll, layout, sizes, switch, staged in todo:
        for s in sizes:
            k = key_of(coll, layout, s, switch, staged)
            MEASURED[k] = statistics.median(RUNS[k])


def save():
    """Writes every run measured or loaded so far to --save's file."""
    if SAVE:
        pathlib.Path(SAVE).write_text(json.dumps({**MEASURED, **RUNS}, indent=0, sort_keys=True))


def measure(perf, coll, layout, sizes, runs, switch=SMALL_ALLREDUCE, gpu_staged=False):
    """The median time (us) per size (measured now where it was not in
    a round before); None where --load's file lacks it."""
    measure_rounds(perf, [(coll, layout, sizes, switch, gpu_staged)], runs)
    keys = {s: key_of(coll, layout, s, switch, gpu_staged) for s in sizes}
    if not all(k in MEASURED for k in keys.values()):
        return None
    return {s: MEASURED[k] for s, k in keys.items()}


def first_against_rest(coll, layout, s, switch=SMALL_ALLREDUCE, gpu_staged=False):
    """A row's first run taken as the prediction of its other runs' median:
    its relative error (None with fewer than three runs). What a model
    that knew the machine exactly could still miss by: the noise."""
    v = RUNS.get(key_of(coll, layout, s, switch, gpu_staged), [])
    if len(v) < 3:
        return None
    rest = statistics.median(v[1:])
    return abs(v[0] - rest) / rest


def spread(coll, layout, s, switch=SMALL_ALLREDUCE, gpu_staged=False):
    """How far a row's runs lie apart: (slowest - fastest) / median (None
    where only the median is known)."""
    v = RUNS.get(key_of(coll, layout, s, switch, gpu_staged), [])
    return (max(v) - min(v)) / statistics.median(v) if len(v) > 1 else None


def self_test():
    """The fit recovers known parameters from the formulas it inverts."""
    want = {"lib_us": 12.0, "step_us": 6.0, "lib_gbs": 5.0, "copy_gbs": 7.0, "link_us": 9.0, "link_gbs": 8.0, "reduce_gbs": 3.0,
            "cache_mib": 8.0, "beyond": 1.5}
    m = lambda s, per_rank: beyond_factor(2 * per_rank * s, want["cache_mib"], want["beyond"])
    lib = {s: want["lib_us"] + s * m(s, 2) / (want["lib_gbs"] * 1e3) for s in FIT_SIZES}
    copy = {s: want["step_us"] + s / 2 * m(s, 1.5) / (want["copy_gbs"] * 1e3) for s in FIT_SIZES}
    links = {s: want["link_us"] + s / 2 * m(s, 1.5) / (want["link_gbs"] * 1e3) for s in FIT_SIZES}
    ar = {s: 2 * want["link_us"] + s * m(s, 2) * (1 / (want["link_gbs"] * 1e3) + 1 / 2 / (want["reduce_gbs"] * 1e3))
          for s in FIT_SIZES}
    got = fit(lib, links, ar, copy)
    # The hand-off: calls whose model time grows by `per_us` for each us of it.
    want["handoff_us"] = 7.0
    modelled = {"a": (20.0, 4.0), "b": (30.0, 6.0), "c": (5.0, 2.0)}
    got["handoff_us"] = handoff({k: t0 + want["handoff_us"] * per_us for k, (t0, per_us) in modelled.items()}, modelled)
    want["one_way_gbs"] = 12.0
    got["one_way_gbs"] = one_way({s: want["link_us"] + s * m(s, 1.5) / (want["one_way_gbs"] * 1e3) for s in FIT_SIZES}, got, EAGER)
    want["rs_gbs"] = 4.0
    rs = {s: 3.0 + s * 3 / 4 * beyond_factor(5 * s, want["cache_mib"], want["beyond"]) / (want["rs_gbs"] * 1e3) for s in FIT_SIZES}
    got["rs_gbs"] = rs_fit(rs, got, 4)
    # Calls of more ranks whose times come out 5% longer than the two-rank figures say.
    want["many_ranks"] = 0.95
    got["many_ranks"] = many_ranks_fit(lambda k: [(t / k, t / 0.95) for t in (10.0, 200.0, 4000.0)])
    want["gap_us"] = 0.5
    got["gap_us"] = gap({1024: 0.5 + 1024 / (want["link_gbs"] * 1e3), 1 << 20: 999.0}, got)
    want["further_us"] = 0.3  # the root's three messages: the gap, two further ones, three halves at the links' rate
    half = 512 / (want["link_gbs"] * 1e3)
    got["further_us"] = further_fit({1024: 0.5 + 2 * 0.3 + 3 * half}, {1024: 0.5 + half}, got)
    # A row's first run against its others' median (12 against 10), and none from two runs.
    want["first_vs_rest"] = 0.2
    RUNS[key_of("all_gather", ["-N", "2"], 1024, SMALL_ALLREDUCE, False)] = [12.0, 9.0, 10.0, 11.0]
    RUNS[key_of("all_gather", ["-N", "2"], 2048, SMALL_ALLREDUCE, False)] = [12.0, 9.0]
    got["first_vs_rest"] = first_against_rest("all_gather", ["-N", "2"], 1024)
    if first_against_rest("all_gather", ["-N", "2"], 2048) is not None:
        got["first_vs_rest"] = -1
    # The fitted and held-back sizes in three runs (by iteration count); a
    # range that is no geometric one in a run per size.
    want["runs"] = 3.0
    got["runs"] = float(len(launches(FIT_SIZES + HELD_SIZES)))
    want["uneven"] = 4.0
    got["uneven"] = float(len(launches([1 << 10, 1 << 12, 1 << 13, 1 << 16])))
    bad = {k: (got[k], v) for k, v in want.items() if abs(got[k] - v) > 1e-6 * v}
    print("calibrate-model self-test:", "ok" if not bad else f"wrong {bad}")
    return 1 if bad else 0


def percent(x):
    return "" if x is None else f"{x * 100:.0f}%"


def summary_row(name, checked, misses=True):
    """A table row of (error, runs apart) pairs: the median and largest
    error, the median of how far each row's runs lie apart, and (`misses`)
    how many rows the model misses by more than 20% and by more than their
    runs differ among themselves (a miss beyond the machine's noise)."""
    errors = [e for e, _ in checked]
    aparts = [x for _, x in checked if x is not None]
    beyond = sum(e > 0.2 and (x is None or e > x) for e, x in checked) if misses else ""
    return (f"| {name} | {len(errors)} | {percent(statistics.median(errors))} | {percent(max(errors))} | "
            f"{percent(statistics.median(aparts)) if aparts else ''} | {beyond} |")


def within(checked):
    """How many of the rows lie within 20%, in words."""
    n = sum(e <= 0.2 for e, _ in checked)
    return f"{n} of {len(checked)} rows ({percent(n / len(checked))})"


def cluster_text(domains, p):
    """A cluster file of CPU domains of the given sizes on this host."""
    lines = ["name = this host's CPU ranks (calibrated)", "[network]", "one_host = yes",
             f"nic_gbps = {p['link_gbs'] * 8:.6g}", f"latency_us = {p['link_us']:.6g}",
             f"one_way_gbps = {p.get('one_way_gbs', 0) * 8:.6g}", f"handoff_us = {p.get('handoff_us', 0):.6g}",
             f"gap_us = {p.get('gap_us', 0):.6g}", f"further_message_us = {p.get('further_us', 0):.6g}",
             f"eager_bytes = {EAGER}"]
    for i, n in enumerate(domains):
        lines += [f"[domain d{i}]", "vendor = cpu", "nodes = 1", f"gpus_per_node = {n}", f"nics_per_node = {n}",
                  f"cores_per_node = {CORES}",
                  f"library_busbw_gbs = {p['lib_gbs']:.6g}", f"library_copy_gbs = {p['copy_gbs']:.6g}",
                  f"library_rs_gbs = {p.get('rs_gbs', 0):.6g}",
                  f"library_latency_us = {p['lib_us']:.6g}", f"library_step_us = {p['step_us']:.6g}",
                  f"reduce_gbs = {p['reduce_gbs']:.6g}", f"cache_mib = {p.get('cache_mib', 0):.6g}",
                  f"beyond_cache = {p.get('beyond', 1):.6g}"]
    return "\n".join(lines) + "\n"


def predict(sim, domains, p, coll, size, plan=None):
    """The model's time (us) for `plan`, else the one the fixed threshold runs."""
    path = pathlib.Path(LAYOUT_DIR.name) / "layout.cluster"  # (a build folder need not exist where this runs)
    path.write_text(cluster_text(domains, p))
    out = subprocess.run([sim, str(path), "-c", coll, "-b", str(size), "-e", str(size), "--csv",
                          "--piece-bytes", str(PIECE)], capture_output=True, text=True, check=True).stdout
    rows = [l.split(",") for l in out.splitlines()[1:]]
    if plan is None:
        plan = "hierarchical" if coll == "all_gather" or size > SMALL_ALLREDUCE else "leaders"
    return next(float(r[5]) for r in rows if r[2] == plan) * 1e6


def fit_handoff(perf, sim, p, runs):
    """handoff_us from two domains of two ranks, where they outnumber the
    cores (0 where they do not: the threads spin)."""
    if CORES >= 4:
        return 0.0
    layout, sizes, measured, modelled = HANDOFF_LAYOUT, HANDOFF_SIZES, {}, {}
    for coll in ["all_reduce", "reduce_scatter"]:
        for plan, switch in [("leaders", 1 << 40), ("hierarchical", 0)]:
            times = measure(perf, coll, layout, sizes, runs, switch=switch)
            if times is None:  # --load without these series: no wake-up in the model
                return 0.0
            for s in sizes:
                without = predict(sim, [2, 2], dict(p, handoff_us=0), coll, s, plan)
                measured[(coll, plan, s)] = times[s]
                modelled[(coll, plan, s)] = (without, predict(sim, [2, 2], dict(p, handoff_us=1), coll, s, plan) - without)
    return handoff(measured, modelled)


def fit_many_ranks(perf, sim, p, runs, layouts, colls):
    """The factor on every bandwidth for calls of more than two ranks
    (many_ranks_fit), from every collective of `layouts` ((domains,
    hetccl-perf layout) pairs) at MANY_SIZES; 1 where none was measured."""
    measured = []
    for domains, layout in layouts:
        for coll in colls:
            times = measure(perf, coll, layout, MANY_SIZES, runs)
            if times:
                measured += [(domains, coll, s, times[s]) for s in MANY_SIZES]
    if not measured:
        return 1.0
    return many_ranks_fit(lambda k: [(predict(sim, d, with_bandwidths_times(p, k), c, s), t) for d, c, s, t in measured])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", default=str(ROOT / "build" / "hetccl-perf"))
    ap.add_argument("--sim", default=str(ROOT / "build" / "hetccl-sim"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "build" / "calibrated.cluster"))
    ap.add_argument("--table", help="also write the table (markdown) here")
    ap.add_argument("--rows", action="store_true", help="every prediction, not only each layout's summary")
    ap.add_argument("--self-test", action="store_true", help="check the fit on synthetic measurements, and exit")
    ap.add_argument("--save", help="write every measurement (JSON) here")
    ap.add_argument("--load", help="take the measurements from --save files (another machine's: fit and predict only); "
                                   "several, comma-separated, pool their runs")
    ap.add_argument("--cores", type=int, default=os.cpu_count(), help="the measured host's cores (with --load)")
    ap.add_argument("--fail-above", type=float, metavar="PCT",
                    help="exit 1 when the median error of all the CPU ranks' rows is above PCT percent")
    ap.add_argument("--gpu-staged", action="store_true",
                    help="also two GPU ranks in two domains on the host path (HETCCL_STREAM_COLLECTIVES=0; one GPU: "
                         "under MPS), predicted as the CPU ranks' plus two staging copies per call (staging_us)")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    global CORES
    CORES = a.cores
    global SAVE
    SAVE = a.save
    if a.load:
        global LOADED_ONLY
        LOADED_ONLY = True
        for f in a.load.split(","):
            for k, v in json.loads(pathlib.Path(f).read_text()).items():
                if isinstance(v, list):  # each run's time (an older file: the median alone)
                    RUNS.setdefault(k, []).extend(v)
                    MEASURED[k] = statistics.median(RUNS[k])
                else:
                    MEASURED[k] = v

    one_domain = ["-N", "2", "--domains", "1"]
    two_singles = ["-N", "2", "--domains", "2"]
    every = ["all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter"]
    checks = [("two one-rank domains", [1, 1], two_singles, ["all_gather", "all_reduce", "broadcast", "reduce"], HELD_SIZES),
              ("two domains of two", [2, 2], ["-N", "4", "--domains", "2"],
               ["all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter"], FIT_SIZES + HELD_SIZES),
              ("one and three", [1, 3], ["-N", "4", "--domain-list", "a,b,b,b"],
               ["all_reduce", "all_gather", "broadcast", "reduce"], FIT_SIZES + HELD_SIZES),
              ("three one-rank domains", [1, 1, 1], ["-N", "3", "--domains", "3"], ["all_reduce", "all_gather"],
               FIT_SIZES + HELD_SIZES),
              ("one domain of four", [4], ["-N", "4", "--domains", "1"], every, FIT_SIZES + HELD_SIZES)]
    if CORES >= 8:  # eight ranks, on hosts with a core for each
        checks += [("one domain of eight", [8], ["-N", "8", "--domains", "1"], every, FIT_SIZES + HELD_SIZES),
                   ("two domains of four", [4, 4], ["-N", "8", "--domains", "2"], every, FIT_SIZES + HELD_SIZES),
                   ("two and six", [2, 6], ["-N", "8", "--domain-list", "a,a,b,b,b,b,b,b"], every, FIT_SIZES + HELD_SIZES),
                   ("four domains of two", [2, 2, 2, 2], ["-N", "8", "--domains", "4"], every, FIT_SIZES + HELD_SIZES)]
    staged_sizes = sorted(FIT_SIZES + HELD_SIZES)
    per_rank = {"all_reduce": 2, "reduce_scatter": 1.5, "all_gather": 1.5, "broadcast": 2, "reduce": 2}
    # Every series, fitted and checked, measured in the same rounds. The
    # broadcast of two one-rank domains gives the gap (its smallest size)
    # and the one-way links (its sizes above the eager size).
    fitted = [("all_reduce", one_domain, FIT_SIZES), ("all_gather", two_singles, FIT_SIZES),
              ("all_reduce", two_singles, [s for s in FIT_SIZES if s > SMALL_ALLREDUCE]),
              ("all_gather", one_domain, FIT_SIZES), ("broadcast", two_singles, FIT_SIZES)]
    if CORES >= 4:  # a root's messages to several peers at once (further_fit)
        fitted += [("broadcast", FOUR_SINGLES, FIT_SIZES[:1])]
    series = [(c, l, s, SMALL_ALLREDUCE, False) for c, l, s in fitted]
    series += [(c, l, sorted(s), SMALL_ALLREDUCE, False) for _, _, l, colls, s in checks for c in colls]
    if CORES < 4:  # the hand-off's (fit_handoff)
        series += [(c, HANDOFF_LAYOUT, HANDOFF_SIZES, sw, False) for c in ["all_reduce", "reduce_scatter"] for sw in [1 << 40, 0]]
    if a.gpu_staged:
        series += [(c, two_singles, staged_sizes, SMALL_ALLREDUCE, True) for c in per_rank]
    measure_rounds(a.perf, series, a.runs)

    def needed(coll, layout, sizes):
        """A series the fit cannot do without (--load: the file must hold it)."""
        series = measure(a.perf, coll, layout, sizes, a.runs)
        if series is None:
            sys.exit(f"calibrate-model: {a.load} lacks the fitted series {coll} {' '.join(layout)}")
        return series

    p = fit(needed("all_reduce", one_domain, FIT_SIZES), needed("all_gather", two_singles, FIT_SIZES),
            needed("all_reduce", two_singles, [s for s in FIT_SIZES if s > SMALL_ALLREDUCE]),
            needed("all_gather", one_domain, FIT_SIZES))
    p["handoff_us"] = fit_handoff(a.perf, a.sim, p, a.runs)
    smallest_broadcast = measure(a.perf, "broadcast", two_singles, FIT_SIZES[:1], a.runs)
    p["gap_us"] = gap(smallest_broadcast, p)
    p["further_us"] = further_fit(measure(a.perf, "broadcast", FOUR_SINGLES, FIT_SIZES[:1], a.runs) if CORES >= 4 else {},
                                  smallest_broadcast, p)
    # Where four ranks have a core each: the reduce-scatter of one domain of four.
    p["rs_gbs"] = rs_fit(measure(a.perf, "reduce_scatter", RS_LAYOUT, FIT_SIZES, a.runs) or {}, p, 4) if CORES >= 4 else 0.0
    p["one_way_gbs"] = one_way(measure(a.perf, "broadcast", two_singles, [s for s in FIT_SIZES if s > EAGER], a.runs) or {}, p, EAGER)
    # Calls of more ranks: two domains of two (and, with eight cores or
    # more, of four) from 256 KiB; their other sizes stay checks.
    many_layouts = [([2, 2], ["-N", "4", "--domains", "2"])] + ([([4, 4], ["-N", "8", "--domains", "2"])] if CORES >= 8 else [])
    many = fit_many_ranks(a.perf, a.sim, p, a.runs, many_layouts, every)
    p = with_bandwidths_times(p, many)
    pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.out).write_text(cluster_text([2, 2], p))
    print(f"fitted: library {p['lib_gbs']:.2f} GB/s busbw ({p['copy_gbs']:.2f} moving bytes only), {p['lib_us']:.1f} us (a ring round's smallest {p['step_us']:.1f}); links {p['link_gbs']:.2f} GB/s, "
          f"{p['link_us']:.1f} us, back to back {p['gap_us']:.2f} us apart ({p['further_us']:.2f} a further one at once), one way {p['one_way_gbs']:.2f} GB/s; "
          f"reduce-scatter {p['rs_gbs']:.2f} GB/s; reductions {p['reduce_gbs']:.2f} GB/s; "
          f"hand-off {p['handoff_us']:.1f} us; "
          f"beyond {p['cache_mib']:.3g} MiB of buffers a byte costs {p['beyond']:.2f} times; "
          f"every bandwidth here the two-rank series' x {many:.2f} (calls of more ranks) -> {a.out}")

    rows, summary, noise = [], [], []

    def check(name, domains, layout, coll, sizes, staging=None):
        """Each size's error of the prediction (GPU ranks on the host path:
        plus `staging(coll, s)`, the copies) and how far its runs lie apart;
        the rows and the summary line."""
        measured = measure(a.perf, coll, layout, sizes, a.runs, gpu_staged=staging is not None)
        mine = []
        if measured is None:
            return mine
        for s in sizes:
            predicted = predict(a.sim, domains, p, coll, s) + (staging(coll, s) if staging else 0)
            err = (predicted - measured[s]) / measured[s]
            apart = spread(coll, layout, s, gpu_staged=staging is not None)
            mine.append((abs(err), apart))
            if staging is None and (first := first_against_rest(coll, layout, s)) is not None:
                noise.append((first, None))
            rows.append(f"| {name} | {coll} | {s} | {measured[s]:.1f} | {predicted:.1f} | {err * 100:+.0f}% | "
                        f"{percent(apart)} |")
        summary.append(summary_row(f"{name} | {coll}", mine))
        return mine

    def held(coll, layout, sizes):
        """The sizes a row predicts: all but those a fit used."""
        fitted_here = coll == "reduce_scatter" and layout == RS_LAYOUT and p["rs_gbs"] > 0
        many_here = any(layout == l for _, l in many_layouts)
        return sorted(s for s in sizes if not (fitted_here and s in FIT_SIZES) and not (many_here and s in MANY_SIZES))

    errors = [e for name, domains, layout, colls, sizes in checks for coll in colls
              for e in check(name, domains, layout, coll, held(coll, layout, sizes))]
    gpu = []  # (not in the CPU ranks' totals)
    if a.gpu_staged:
        two, sizes = two_singles, staged_sizes
        gathered = measure(a.perf, "all_gather", two, sizes, a.runs, gpu_staged=True)
        # The copies (staging_us each, pcie_gbs): the line fit of the GPU
        # ranks' all-gather less the CPU ranks' (the same rounds), so the
        # CPU model's own error stays out of them; the other four are predictions.
        cpu = needed("all_gather", two, sizes)
        st2, u = line_fit([(per_rank["all_gather"] * s, gathered[s] - cpu[s]) for s in sizes])
        st = max(st2, 0.0) / 2
        print(f"host staging: two copies of {st:.1f} us and {1e-3 / u:.1f} GB/s (fitted to the all-gather's excess over the CPU ranks')")
        gpu = [e for coll in per_rank
               for e in check("two GPU ranks, host-staged", [1, 1], two, coll, sizes,
                              staging=lambda c, s: 2 * st + per_rank[c] * s * u)]
    if a.rows:
        table = ["| layout | collective | bytes | measured (us) | predicted (us) | error | runs apart |",
                 "|---|---|---|---|---|---|---|"] + rows
    else:
        table = ["| layout | collective | sizes | median error | largest error | runs apart (median) | "
                 "off by more than 20% and their runs |", "|---|---|---|---|---|---|---|"] + summary
    table.append(summary_row("**all** | ", errors))
    if noise:  # (three runs or more)
        table.append(summary_row("**a run against the others** | ", noise, misses=False))
    if a.gpu_staged:
        table.append(summary_row("**GPU, host-staged** | ", gpu))
    table += ["", f"Within 20%: the model {within(errors)}" +
              (f"; a row's first run against the median of its others {within(noise)}" if noise else "") + "."]
    print("\n".join(table))
    if a.table:
        pathlib.Path(a.table).write_text("\n".join(table) + "\n")
    save()
    median = statistics.median(e for e, _ in errors) * 100
    if a.fail_above is not None and median > a.fail_above:
        print(f"calibrate-model: the median error {median:.1f}% is above {a.fail_above:g}%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
