"""Compares two train_gpt.py runs: identical losses (bit for bit), or the
largest relative difference and whether it is within --tolerance.

    python3 examples/compare_losses.py a.json b.json [--tolerance 1e-3]

Exits 0 when identical (or within the tolerance, if one is given), else 1.
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--tolerance", type=float, default=None)
    a = p.parse_args()
    x, y = (json.load(open(f)) for f in (a.a, a.b))
    if len(x["losses"]) != len(y["losses"]):
        print(f"different step counts: {len(x['losses'])} vs {len(y['losses'])}")
        return 1
    worst = max(abs(u - v) / max(abs(u), 1e-12) for u, v in zip(x["losses"], y["losses"]))
    same = all(u == v for u, v in zip(x["losses"], y["losses"]))
    print(f"{a.a}: {x['tokens_per_s']:.0f} tokens/s, final loss {x['losses'][-1]!r}")
    print(f"{a.b}: {y['tokens_per_s']:.0f} tokens/s, final loss {y['losses'][-1]!r}")
    print("losses identical bit for bit" if same else f"largest relative loss difference {worst:.3e}")
    if same:
        return 0
    return 0 if a.tolerance is not None and worst <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
