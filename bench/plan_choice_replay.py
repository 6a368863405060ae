#!/usr/bin/env python3
"""The cost model's plan choice replayed on bench/plan_choice.py's tables:
for every call, the plan the model picks (hetccl-sim on the figures of a
cluster file, the host's cores, hetccl's piece) and the medians measured
with each plan forced, so a model's choices are judged without the noise
of its own runs, and a changed model against old measurements.

    bench/plan_choice_replay.py --figures FILE --cores N TABLE.md [TABLE.md ...]

FILE: a cluster file whose network and first domain hold the figures
(scripts/calibrate-model.py writes one; `hetccl-sim --built-in-figures N`
prints the library's own). Counts the calls the model would run more
than 10% slower than the better plan, and than today's fixed threshold's
plan (the leaders up to 64 KiB, the pipelined plan above), and lists them.
Given several tables of the same host, it also judges each call over all
of them: the median of each table's own ratio (the model's plan over the
threshold's, both measured in the same run), which a run's noise moves
less than a single table's medians.
"""
import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

from plan_choice import LAYOUTS, PIECE, THRESHOLD  # the tables' layouts, their runs' switch and piece

ROOT = pathlib.Path(__file__).resolve().parent.parent


def cluster_of(figures, domains, cores):
    """The figures file with one copy of its first domain per entry of
    `domains` (its ranks), on one host of `cores` cores."""
    head, _, rest = figures.partition("[domain")
    body = "[domain" + re.split(r"\n\[", rest)[0].rstrip("\n") + "\n"
    body = re.sub(r"(?m)^cores_per_node\s*=.*\n", "", body)
    text = head
    for i, n in enumerate(domains):
        d = re.sub(r"^\[domain [^\]]*\]", f"[domain d{i}]", body)
        d = re.sub(r"(?m)^(gpus_per_node|nics_per_node)\s*=.*$", lambda m: f"{m.group(1)} = {n}", d)
        text += d + f"cores_per_node = {cores}\n"
    return text


def chosen(sim, path, coll, size):
    out = subprocess.run([sim, str(path), "-c", coll, "-b", str(size), "-e", str(size), "--csv", "--piece-bytes",
                          str(PIECE)], capture_output=True, text=True, check=True).stdout
    rows = [line.split(",") for line in out.splitlines()[1:]]
    return next(r[2] for r in rows if r[4] == "1")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--figures", required=True)
    ap.add_argument("--cores", type=int, required=True, help="the measured host's")
    ap.add_argument("--sim", default=str(ROOT / "build" / "hetccl-sim"))
    ap.add_argument("tables", nargs="+")
    a = ap.parse_args()
    figures = pathlib.Path(a.figures).read_text()
    calls, slower, behind, ahead = 0, [], [], 0
    per_call = {}  # (layout, collective, size): each table's model / threshold
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "layout.cluster"
        for table in a.tables:
            for line in pathlib.Path(table).read_text().splitlines():
                r = [x.strip() for x in line.split("|")]
                if len(r) < 9 or r[1] not in LAYOUTS or not r[3].isdigit():
                    continue
                layout, coll, size, leaders, spread = r[1], r[2], int(r[3]), float(r[4]), float(r[5])
                path.write_text(cluster_of(figures, [int(n) for n in layout.split("+")], a.cores))
                model = leaders if chosen(a.sim, path, coll, size) == "leaders" else spread
                threshold = leaders if size <= THRESHOLD else spread
                calls += 1
                call = f"{layout} {coll} {size >> 10} KiB: {model / min(leaders, spread):.2f} x the better plan, " \
                       f"{model / threshold:.2f} x the threshold's"
                if model > 1.1 * min(leaders, spread):
                    slower.append(call)
                if model > 1.1 * threshold:
                    behind.append(call)
                ahead += threshold > 1.1 * model
                per_call.setdefault((layout, coll, size), []).append(model / threshold)
    print(f"{calls} calls: the model's plan more than 10% slower than the better one in {len(slower)}, "
          f"than the threshold's in {len(behind)}; more than 10% faster than the threshold's in {ahead}")
    for call in slower:
        print(("  (also behind the threshold) " if call in behind else "  ") + call)
    if len(a.tables) > 1:
        medians = {k: statistics.median(v) for k, v in per_call.items()}
        late = sorted((k for k, m in medians.items() if m > 1.1), key=lambda k: -medians[k])
        print(f"per call over the {len(a.tables)} tables (the median of each table's own ratio), {len(medians)} calls: "
              f"more than 10% behind the threshold's plan in {len(late)}, more than 10% ahead in "
              f"{sum(m < 1 / 1.1 for m in medians.values())}; the worst {max(medians.values()):.2f}")
        for layout, coll, size in late:
            print(f"  {layout} {coll} {size >> 10} KiB: {medians[(layout, coll, size)]:.2f}")
    return 0 if calls else 1


if __name__ == "__main__":
    sys.exit(main())
