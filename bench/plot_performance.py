#!/usr/bin/env python3
"""Plots of docs/performance.md's tables where a curve says more than the
table: bus bandwidth against message size, one line per column. Reads the
tables from the document itself, so a plot shows what the table says.

    /usr/bin/python3 bench/plot_performance.py     # writes docs/images/*.png

Needs Debian's matplotlib (apt-get install python3-matplotlib).
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
OUT = ROOT / "docs" / "images"

# (heading of the table, image, title, y-axis label, a reference line or None)
PLOTS = [
    ("Two GPU domains on the stream path", "stream_path_busbw.png",
     "Two GPU domains on the stream path (2 x H200)", "busbw (GB/s)",
     (37.0, "host copy ceiling, both GPUs both ways")),
    ("CUDA graphs across domains", "graphs_busbw.png",
     "all-reduce across two domains on one H200: eager and captured", "busbw (GB/s), out-of-place", None),
]

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def table_after(text, heading):
    """The first markdown table after `## heading`, as (header, rows)."""
    lines = text[text.index("## " + heading):].splitlines()
    first = next(i for i, l in enumerate(lines) if l.startswith("|"))
    block = []
    for l in lines[first:]:
        if not l.startswith("|"):
            break
        block.append([c.strip() for c in l.strip("|").split("|")])
    return block[0], block[2:]


def size_of(cell):
    number, unit = cell.split()
    return float(number) * UNITS[unit]


def first_number(cell):
    m = re.search(r"\d+(\.\d+)?", cell)
    return float(m.group(0)) if m else None


def main():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_performance: needs matplotlib (apt-get install python3-matplotlib; run with /usr/bin/python3)")
        return 1
    text = DOC.read_text()
    OUT.mkdir(exist_ok=True)
    for heading, image, title, ylabel, reference in PLOTS:
        header, rows = table_after(text, heading)
        sizes = [size_of(r[0]) for r in rows]
        fig, ax = plt.subplots(figsize=(7, 4))
        for col in range(1, len(header)):
            ys = [first_number(r[col]) for r in rows]
            points = [(x, y) for x, y in zip(sizes, ys) if y is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=header[col])
        if reference:
            ax.axhline(reference[0], color="grey", linestyle="--", label=reference[1])
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([r[0] for r in rows], rotation=30)
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(OUT / image, dpi=90)
        plt.close(fig)
        print(f"plot_performance: {OUT / image}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
