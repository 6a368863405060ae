#!/usr/bin/env python3
"""Fits the cost model's figures of hetccl's stream engines (the path of
GPU ranks, src/model/steps/stream_engine.h) to hetccl-perf runs on the GPUs
at hand, and reports the model's error on the defaults of every
collective, in two domains (the fitted layout) and three (held back).

    scripts/calibrate-stream.py [--perf build/hetccl-perf] [--sim build/hetccl-sim] [--runs 3]
                                [--one-gpu] [--relay] [--save m.json | --load m.json] [--table T.md]
                                [--out build/stream.cluster] [--fail-above PCT]

One rank per domain. --one-gpu: every rank on one GPU (under CUDA MPS:
`source bench/mps.sh` first), whose link to host memory the ranks share;
else a GPU each, on one host. --relay: also two domains made to reach
each other through the stream relay over TCP (HETCCL_TRANSPORT=socket),
as between hosts: the relay's [network] figures (latency_us: the relayed
kernel's all-reduce line past the local one's intercept; nic_gbps: the
relayed pieces' slope) and the defaults of every collective through it. What it fits, from two domains' all-reduce with
each protocol forced (docs/environment.md: HETCCL_STREAM_LL_BYTES,
HETCCL_STREAM_ONE_SHOT_BYTES), by a line through the sizes:
  stream_ll_us, stream_one_shot_us, stream_pieces_us: each line's intercept;
  pcie_gbs: the one-shot line's slope (each rank copies its input to host
            memory and its peer's back: the buffer each way, through the
            one GPU's engines twice with --one-gpu);
  stream_pieces_gbs: the pieces' line's slope, alike (their chain of
            streams and flags copies more slowly).
Then every collective with the library's defaults, 1 KiB to 16 MiB, in two
and three domains, against hetccl-sim's prediction on a cluster file of
those figures; medians of --runs rounds that each pass every series once.
--out keeps the figures as a cluster file of two such domains, whose
[domain] lines carry over to a cluster file of the user's GPUs.
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from model_fit import line_fit  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = [1 << k for k in range(10, 25, 2)]  # 1 KiB to 16 MiB, x4
FORCED = {  # the protocol alone at every size it takes
    "ll": {"HETCCL_STREAM_LL_BYTES": str(1 << 20), "HETCCL_STREAM_ONE_SHOT_BYTES": "0"},
    "os": {"HETCCL_STREAM_LL_BYTES": "0", "HETCCL_STREAM_ONE_SHOT_BYTES": str(1 << 26)},
    "pc": {"HETCCL_STREAM_LL_BYTES": "0", "HETCCL_STREAM_ONE_SHOT_BYTES": "0"},
    "df": {},
}
# --relay: the ranks reach each other through the stream relay over TCP, as
# between hosts (rl, rp: the kernel and the pieces forced; rd: the defaults).
RELAY = {"HETCCL_TRANSPORT": "socket"}
FORCED.update({"rl": {**FORCED["ll"], **RELAY}, "rp": {**FORCED["pc"], **RELAY}, "rd": RELAY})
COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]
FITTED = {"ll": "stream_ll_us", "os": "stream_one_shot_us", "pc": "stream_pieces_us"}


def series(relay):
    """(protocol, collective, ranks, sizes) of every measured series."""
    fit = [(p, "all_reduce", 2, [s for s in SIZES if p != "ll" or s <= 1 << 20]) for p in FITTED]
    out = fit + [("df", c, n, SIZES) for n in (2, 3) for c in COLLECTIVES]
    if relay:  # (the relayed kernel takes at most 32 KiB)
        out += [("rl", "all_reduce", 2, [s for s in SIZES if s <= 32 << 10]), ("rp", "all_reduce", 2, SIZES)]
        out += [("rd", c, 2, SIZES) for c in COLLECTIVES]
    return out


def run_once(perf, proto, coll, ranks, sizes):
    """One hetccl-perf run's out-of-place times (us) by size."""
    env = dict(os.environ, **FORCED[proto])
    out = subprocess.run([perf, coll, "-N", str(ranks), "--domains", str(ranks), "-b", str(sizes[0]), "-e",
                          str(sizes[-1]), "-f", "4", "-n", "40", "-w", "5", "-c", "0"],
                         capture_output=True, text=True, timeout=300, check=True, env=env).stdout
    rows = [l.split() for l in out.splitlines() if re.match(r"^\s+\d+\s+\d+", l)]
    return {int(r[0]): float(r[5]) for r in rows}


def key(proto, coll, ranks, size):
    return f"{proto} {coll} {ranks} {size}"


def fit(med, one_gpu):
    """The figures: each forced protocol's line through its all-reduce."""
    figures = {}
    for proto, name in FITTED.items():
        pts = [(s, med[key(proto, "all_reduce", 2, s)]) for s in SIZES if key(proto, "all_reduce", 2, s) in med]
        intercept, slope = line_fit(pts)
        figures[name] = max(intercept, 0.1)
        # Each rank's buffer each way: through the one GPU's engines twice with --one-gpu.
        if proto in ("os", "pc"):
            figures["pcie_gbs" if proto == "os" else "stream_pieces_gbs"] = (2 if one_gpu else 1) * 1e-3 / slope
    return figures


def fit_relay(med, figures, one_gpu):
    """The relay's network figures ([network] latency_us, nic_gbps) from
    two domains' relayed all-reduces: the kernel's line's intercept past
    the local kernel's, the pieces' slope (each rank sends its buffer,
    half of it twice) where it is steeper than their copies'; None where
    not measured."""
    lines = {}
    for proto in ("rl", "rp"):
        pts = [(s, med[key(proto, "all_reduce", 2, s)]) for s in SIZES if key(proto, "all_reduce", 2, s) in med]
        if len(pts) < 2:
            return None
        lines[proto] = line_fit(pts)
    copies = (2 if one_gpu else 1) / (figures["stream_pieces_gbs"] * 1e3)  # the pieces' copies, us per byte
    network = {"latency_us": max(lines["rl"][0] - figures["stream_ll_us"], 0.0)}
    # Both ways at once (the all-reduce), and one way (the broadcast's
    # pieces): where steeper than the copies, the network's rate.
    pts = [(s, med[key("rd", "broadcast", 2, s)]) for s in SIZES if s > 32 << 10 and key("rd", "broadcast", 2, s) in med]
    for name, slope in (("nic_gbps", lines["rp"][1]), ("one_way_gbps", line_fit(pts)[1] if len(pts) > 1 else 0)):
        network[name] = 8e-3 / slope if slope > copies * 1.05 else 8e-3 / copies * 10
    return network


def cluster_text(figures, ranks, one_gpu, relay=None):
    """Every rank a domain of one GPU; on one host, or (relay: its network
    figures) each apart."""
    text = "name = stream engines, calibrated\n[network]\n"
    text += "".join(f"{k} = {v:.6g}\n" for k, v in relay.items()) if relay else \
        "nic_gbps = 100\nlatency_us = 0\none_host = yes\n"
    text += "one_gpu = yes\n" if one_gpu else ""
    for r in range(ranks):
        text += f"[domain g{r}]\nvendor = nvidia\nnodes = 1\ngpus_per_node = 1\nnics_per_node = 1\nreduce_gbs = 1000\n"
        text += "".join(f"{k} = {v:.6g}\n" for k, v in figures.items())
    return text


def predict(sim, path, coll, size):
    out = subprocess.run([sim, str(path), "-c", coll, "-b", str(size), "-e", str(size), "--csv"],
                         capture_output=True, text=True, check=True).stdout
    return next(float(r.split(",")[5]) for r in out.splitlines()[1:] if r.split(",")[2] == "stream") * 1e6


def self_test(sim):
    """The fit recovers known figures from runs that follow the model's
    lines (two ranks on one GPU), the relay's from runs hetccl-sim makes
    of a cluster file with known network figures."""
    want = {"stream_ll_us": 9.0, "stream_one_shot_us": 30.0, "stream_pieces_us": 80.0, "pcie_gbs": 40.0,
            "stream_pieces_gbs": 34.0}
    runs = {}
    for proto, name in FITTED.items():
        words = 2 if proto == "ll" else 1  # the kernel's words: 4 bytes of data in 8
        gbs = want["stream_pieces_gbs" if proto == "pc" else "pcie_gbs"]
        for s in SIZES:
            runs[key(proto, "all_reduce", 2, s)] = [want[name] + words * 2 * s / (gbs * 1e3)]  # two ranks on one GPU
    # The relay: its runs as the model gives them (the kernel up to 32 KiB, the pieces beyond).
    network = {"latency_us": 25.0, "nic_gbps": 40.0, "one_way_gbps": 80.0}
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "c.cluster"
        path.write_text(cluster_text(want, 2, True, network))
        for s in SIZES:
            runs[key("rl" if s <= 32 << 10 else "rp", "all_reduce", 2, s)] = [predict(sim, path, "all_reduce", s)]
            runs[key("rd", "broadcast", 2, s)] = [predict(sim, path, "broadcast", s)]
    med = {k: v[0] for k, v in runs.items()}
    got = fit(med, True)
    got.update(fit_relay(med, got, True) or {})
    want.update(network)
    print(f"self-test: wanted {want}, fitted " + ", ".join(f"{k} {v:.4g}" for k, v in got.items()))
    return 0 if all(abs(got[k] / want[k] - 1) < 1e-3 for k in want) else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", default=str(ROOT / "build" / "hetccl-perf"))
    ap.add_argument("--sim", default=str(ROOT / "build" / "hetccl-sim"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--one-gpu", action="store_true", help="every rank on one GPU (under MPS)")
    ap.add_argument("--relay", action="store_true", help="also two domains through the stream relay over TCP")
    ap.add_argument("--save", help="write every run (JSON) here")
    ap.add_argument("--load", help="fit and predict from a --save file instead of measuring")
    ap.add_argument("--table", help="also write the table (markdown) here")
    ap.add_argument("--out", default=str(ROOT / "build" / "stream.cluster"),
                    help="the fitted figures as a cluster file of two domains (relayed where measured)")
    ap.add_argument("--self-test", action="store_true", help="check the fit on synthetic runs, and exit")
    ap.add_argument("--fail-above", type=float, metavar="PCT",
                    help="exit 1 when some layout's median error is above PCT percent")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a.sim)
    runs = {}
    if a.load:
        runs = json.loads(pathlib.Path(a.load).read_text())
    else:
        for _ in range(a.runs):  # rounds: a machine's drift falls on every series alike
            for proto, coll, ranks, sizes in series(a.relay):
                for s, t in run_once(a.perf, proto, coll, ranks, sizes).items():
                    runs.setdefault(key(proto, coll, ranks, s), []).append(t)
            if a.save:
                pathlib.Path(a.save).write_text(json.dumps(runs, indent=0, sort_keys=True))
    med = {k: statistics.median(v) for k, v in runs.items()}
    figures = fit(med, a.one_gpu)
    relay = fit_relay(med, figures, a.one_gpu)
    pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.out).write_text(cluster_text(figures, 2, a.one_gpu, relay))
    print("fitted: " + ", ".join(f"{k} {v:.3g}" for k, v in {**figures, **(relay or {})}.items()) + f" -> {a.out}")
    rows, errors = [], {}
    checks = [("2", "df", 2, None), ("3", "df", 3, None)] + ([("2, relayed", "rd", 2, relay)] if relay else [])
    with tempfile.TemporaryDirectory() as d:
        for name, proto, ranks, network in checks:
            path = pathlib.Path(d) / "c.cluster"
            path.write_text(cluster_text(figures, ranks, a.one_gpu, network))
            for coll in COLLECTIVES:
                # (hetccl-perf rounds a size down to whole elements per rank)
                for s in sorted(int(k.split()[-1]) for k in med if k.startswith(key(proto, coll, ranks, ""))):
                    k = key(proto, coll, ranks, s)
                    p = predict(a.sim, path, coll, s)
                    err = (p - med[k]) / med[k]
                    errors.setdefault(name, []).append(abs(err))
                    rows.append(f"| {name} | {coll} | {s} | {med[k]:.1f} | {p:.1f} | {err * 100:+.0f}% |")
    table = ["| domains | collective | bytes | measured (us) | predicted (us) | error |", "|---|---|---|---|---|---|"] + rows
    for name, e in errors.items():
        within = sum(x <= 0.2 for x in e)
        table.append(f"| **{name}: median {statistics.median(e) * 100:.0f}%, {within} of {len(e)} within 20%** |||||")
    print("\n".join(table))
    if a.table:
        pathlib.Path(a.table).write_text("\n".join(table) + "\n")
    worst = max(statistics.median(e) for e in errors.values()) * 100
    if a.fail_above is not None and worst > a.fail_above:
        print(f"calibrate-stream: a median error of {worst:.1f}% is above {a.fail_above:g}%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
