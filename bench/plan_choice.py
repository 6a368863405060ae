#!/usr/bin/env python3
"""The cross-domain plan the cost model picks against today's fixed
threshold, on CPU ranks of this host, side by side in one run.

    bench/plan_choice.py [--perf build/hetccl-perf] [--runs 3] [--out FILE] [--gpu]

The ranks are CPU ranks (HETCCL_DEVICE=host) unless --gpu (then each uses
the machine's GPU: on one GPU, under MPS, bench/mps.sh).

For every layout and collective, `--runs` alternating rounds of four
hetccl-perf runs over the same sizes:
  leaders     HETCCL_SMALL_ALLREDUCE_BYTES huge: always the leaders' plan
  spread      HETCCL_SMALL_ALLREDUCE_BYTES=0: always the pipelined plan
  threshold   HETCCL_SMALL_ALLREDUCE_BYTES=65536: the fixed threshold
  model       unset: the cost model chooses (built-in figures, or
              --model-file's: HETCCL_MODEL_FILE)
and a table of medians (us): the model's time over the threshold's and
over the better of the two plans (1.00: it picked the faster), with the
plan the model chose (from hetccl-perf --plan).
"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYOUTS = {
    "1+1": ["-N", "2", "--domains", "2"],
    "2+2": ["-N", "4", "--domains", "2"],
    "1+3": ["-N", "4", "--domain-list", "a,b,b,b"],
    "1+1+1": ["-N", "3", "--domains", "3"],
    # For hosts of eight cores or more:
    "4+4": ["-N", "8", "--domains", "2"],
    "2+6": ["-N", "8", "--domain-list", "a,a,b,b,b,b,b,b"],
    "2+2+2+2": ["-N", "8", "--domains", "4"],
}
COLLECTIVES = ["all_reduce", "reduce_scatter", "broadcast", "reduce"]
THRESHOLD = 64 << 10  # today's fixed threshold: the leaders up to it, the pipelined plan above
PIECE = 512 << 10     # every run's HETCCL_CHUNK_BYTES (the pipelined plans' piece), set, not assumed
VARIANTS = {"leaders": str(1 << 40), "spread": "0", "threshold": str(THRESHOLD), "model": None}
ROW = re.compile(r"^\s+(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)")


def run(perf, coll, layout, sizes, iters, value, plan=False, model_file=None, gpu=False):
    env = dict(os.environ)
    if not gpu:
        env["HETCCL_DEVICE"] = "host"
    env.pop("HETCCL_SMALL_ALLREDUCE_BYTES", None)
    env["HETCCL_CHUNK_BYTES"] = str(PIECE)
    if value is not None:
        env["HETCCL_SMALL_ALLREDUCE_BYTES"] = value
    if model_file:
        env["HETCCL_MODEL_FILE"] = model_file
    cmd = [perf, coll] + sizes + ["-n", iters, "-w", "10", "-c", "0"] + layout + (["--plan"] if plan else [])
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        sys.exit(f"plan_choice: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    out = done.stdout
    if plan:
        return out
    return {int(m.group(1)): float(m.group(2)) for m in map(ROW.match, out.splitlines()) if m}


def chosen_plans(text):
    """{bytes: 'leaders' | 'spread'} from hetccl-perf --plan's lines."""
    plans, size = {}, None
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            size = int(m.group(1))
        elif size is not None and "plan" in line.lower():
            plans[size] = "leaders" if "leaders:" in line else "spread"
    return plans


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", default=str(ROOT / "build" / "hetccl-perf"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="-b 1K -e 1M -f 4")
    ap.add_argument("--iters", default="200")
    ap.add_argument("--layouts", default="1+1,2+2,1+3,1+1+1", help=f"of {', '.join(LAYOUTS)}")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--model-file", help="the model's figures (HETCCL_MODEL_FILE; default: built in)")
    ap.add_argument("--out", help="also write the table (markdown) here")
    ap.add_argument("--gpu", action="store_true", help="GPU ranks (HETCCL_DEVICE left as it is) instead of CPU ranks")
    a = ap.parse_args()
    sizes = a.sizes.split()
    rows = ["| layout | collective | bytes | leaders | spread | threshold | model (choice) | model / threshold | "
            "model / better |", "|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for name in a.layouts.split(","):
        layout = LAYOUTS[name]
        for coll in a.collectives.split(","):
            times = {v: {} for v in VARIANTS}
            for _ in range(a.runs):
                for variant, value in VARIANTS.items():
                    for s, t in run(a.perf, coll, layout, sizes, a.iters, value, model_file=a.model_file, gpu=a.gpu).items():
                        times[variant].setdefault(s, []).append(t)
            choice = chosen_plans(run(a.perf, coll, layout, sizes, "1", None, plan=True, model_file=a.model_file, gpu=a.gpu))
            for s in sorted(times["model"]):
                med = {v: statistics.median(times[v][s]) for v in VARIANTS}
                vs_threshold = med["model"] / med["threshold"]
                vs_better = med["model"] / min(med["leaders"], med["spread"])
                ratios.append(vs_threshold)
                rows.append(f"| {name} | {coll} | {s} | {med['leaders']:.1f} | {med['spread']:.1f} | "
                            f"{med['threshold']:.1f} | {med['model']:.1f} ({choice.get(s, '?')}) | "
                            f"{vs_threshold:.2f} | {vs_better:.2f} |")
            print("\n".join(rows[-len(times["model"]):]), flush=True)
    rows.append(f"| **median** | | {len(ratios)} | | | | | {statistics.median(ratios):.2f} | |")
    print(rows[-1])
    if a.out:
        pathlib.Path(a.out).write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
