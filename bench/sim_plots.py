#!/usr/bin/env python3
"""Plots of hetccl-sim's predictions (docs/simulator.md): all-reduce bus
bandwidth of the chosen plan against the number of nodes per domain, and
against the vendor mix at a fixed node count. Each point is hetccl-sim's
answer for the base cluster file with the domains' node counts replaced.

    /usr/bin/python3 bench/sim_plots.py [build/hetccl-sim] [examples/clusters/mixed_64_64.cluster]
    # writes docs/images/sim_nodes.png and docs/images/sim_mix.png

Needs Debian's matplotlib (apt-get install python3-matplotlib).
"""
import csv
import io
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIM = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "hetccl-sim")
BASE = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else ROOT / "examples" / "clusters" / "mixed_64_64.cluster")
OUT = ROOT / "docs" / "images"
SIZES = [1 << 20, 64 << 20, 1 << 30]


def with_nodes(text, nodes):
    """The cluster text with each [domain] section's `nodes` replaced, in
    order, and without its [training] section (a batch for other sizes)."""
    text = re.sub(r"(?ms)^\[training\].*?(?=^\[|\Z)", "", text)
    parts = re.split(r"(?m)^(\[domain [^\]]+\])", text)
    out, d = [parts[0]], 0
    for head, body in zip(parts[1::2], parts[2::2]):
        body = re.sub(r"(?m)^nodes\s*=.*$", f"nodes = {nodes[d]}", body)
        out += [head, body]
        d += 1
    return "".join(out)


def chosen_busbw(text, size):
    with tempfile.NamedTemporaryFile("w", suffix=".cluster") as f:
        f.write(text)
        f.flush()
        run = subprocess.run([SIM, f.name, "-c", "all_reduce", "-b", str(size), "-e", str(size), "--csv"],
                             capture_output=True, text=True, check=True)
    for row in csv.DictReader(io.StringIO(run.stdout)):
        if row["chosen"] == "1":
            return float(row["busbw_gbs"])
    raise RuntimeError("no plan chosen")


def plot(plt, xs, ys_for, xlabel, title, path, logx):
    """One line per message size: ys_for(size) against xs."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for size in SIZES:
        ax.plot(xs, ys_for(size), marker="o", label=f"{size >> 20} MiB")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("predicted all-reduce busbw (GB/s)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(title="message")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    text = BASE.read_text()
    OUT.mkdir(parents=True, exist_ok=True)
    counts = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    plot(plt, [2 * n for n in counts], lambda size: [chosen_busbw(with_nodes(text, [n, n]), size) for n in counts],
         "nodes (half of each vendor)", f"hetccl-sim: {BASE.name}, node count", OUT / "sim_nodes.png", True)
    mixes = [(9, 1), (8, 2), (6, 4), (5, 5), (4, 6), (2, 8), (1, 9)]
    plot(plt, [f"{a}+{b}" for a, b in mixes], lambda size: [chosen_busbw(with_nodes(text, list(m)), size) for m in mixes],
         "nodes: first domain + second domain", f"hetccl-sim: {BASE.name}, vendor mix of 10 nodes", OUT / "sim_mix.png",
         False)
    print("wrote", OUT / "sim_nodes.png", OUT / "sim_mix.png")


if __name__ == "__main__":
    main()
