#!/usr/bin/env python3
"""Side-by-side table of two benchmark outputs, repeated runs each.

usage: median_table.py TITLE DIR REPEATS NAME_A PREFIX_A COLUMN_A NAME_B PREFIX_B COLUMN_B

Reads DIR/PREFIX.1 .. DIR/PREFIX.REPEATS for both sides; a row is a line
whose first field is the size in bytes, COLUMN (0-based) its busbw. Prints
the median of each side per size, the ratio B/A, the difference B-A (for
times: what B adds), and the lowest ratio from 1 MiB up and from 16 MiB up.
"""
import pathlib
import statistics
import sys


def rows(path, column):
    table = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields and not line.startswith('#') and fields[0].isdigit():
            table[int(fields[0])] = float(fields[column])
    return table


def main():
    title, folder, repeats = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])
    name_a, prefix_a, col_a, name_b, prefix_b, col_b = sys.argv[4:10]
    # Runs cut short (a time budget) leave fewer files: use the pairs present.
    present = [i for i in range(1, repeats + 1)
               if (folder / f"{prefix_a}.{i}").exists() and (folder / f"{prefix_b}.{i}").exists()]
    if not present:
        print(f"# {title}: no complete pair of runs")
        return
    a = [rows(folder / f"{prefix_a}.{i}", int(col_a)) for i in present]
    b = [rows(folder / f"{prefix_b}.{i}", int(col_b)) for i in present]
    short = f" (of {repeats} planned)" if len(present) < repeats else ""
    print(f"# {title}, median of {len(present)} alternating runs{short}")
    print(f"# {'bytes':>10} {name_a:>10} {name_b:>10} {'ratio':>6} {'B-A':>8}")
    worst = worst_all = None
    for size in sorted(set.intersection(*(set(r) for r in a + b))):
        ma = statistics.median(r[size] for r in a)
        mb = statistics.median(r[size] for r in b)
        ratio = mb / ma if ma else float('inf')
        if size >= 16 << 20:
            worst = ratio if worst is None else min(worst, ratio)
        if size >= 1 << 20:
            worst_all = ratio if worst_all is None else min(worst_all, ratio)
        print(f"  {size:>10} {ma:10.2f} {mb:10.2f} {ratio:6.2f} {mb - ma:8.2f}")
    if worst_all is not None:
        print(f"# lowest ratio ({name_b} / {name_a}) from 1 MiB up: {worst_all:.3f}")
    if worst is not None:
        print(f"# lowest ratio ({name_b} / {name_a}) from 16 MiB up: {worst:.3f}")


if __name__ == '__main__':
    main()
