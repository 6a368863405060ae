#!/usr/bin/env python3
"""docs/environment.md's table of settings is written by the settings table
in src/common/params.cc (`hetccl-info --settings`):

    scripts/settings-doc.py build/hetccl-info           # fails when they differ
    scripts/settings-doc.py build/hetccl-info --write   # rewrites the docs' table
"""
import pathlib
import subprocess
import sys

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "environment.md"
BEGIN = "<!-- settings: written by scripts/settings-doc.py from src/common/params.cc -->"
END = "<!-- end of settings -->"


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    table = subprocess.run([sys.argv[1], "--settings"], check=True, capture_output=True, text=True).stdout
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        print(f"settings-doc: {DOC} lacks the markers {BEGIN!r} and {END!r}")
        return 1
    head, rest = text.split(BEGIN, 1)
    current, tail = rest.split(END, 1)
    wanted = "\n" + table
    if "--write" in sys.argv:
        DOC.write_text(head + BEGIN + wanted + END + tail)
        return 0
    if current != wanted:
        print("settings-doc: docs/environment.md's table differs from the settings table in src/common/params.cc;")
        print("  run scripts/settings-doc.py build/hetccl-info --write")
        return 1
    print(f"settings-doc: docs/environment.md lists the {table.count(chr(10)) - 2} settings as the code reads them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
