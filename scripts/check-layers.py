#!/usr/bin/env python3
"""The library's layers, bottom to top: a file in src/<folder>/ may include
headers of its own folder and of the folders below it, never above.

    scripts/check-layers.py            # fails on an include that goes up a layer
    scripts/check-layers.py --list     # prints every upward include

It also fails when a folder of src/ holds more than 15 source files or
more than a fifth of the library's lines (split it by concept).

Includes that went up when the check was written are listed in
scripts/layer-exceptions.txt; the check also fails when one of them is gone
(remove its line), so that list only shrinks. docs/architecture.md
describes the layers.
"""
import pathlib
import re
import sys

# Bottom to top. Folders on one line are one layer (they may include each other).
LAYERS = [
    ["model"],
    ["common"],
    ["runtime"],
    ["library"],
    ["kernels"],
    ["bootstrap"],
    ["transport"],
    ["proxy"],
    ["core"],
    ["algorithms"],
    ["backend"],
    ["plan"],
    ["route"],
    ["api"],
]

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def level(folder):
    for i, layer in enumerate(LAYERS):
        if folder in layer:
            return i
    return None


def upward_includes():
    found = set()
    unknown = set()
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu"):
            continue
        folder = path.relative_to(ROOT / "src").parts[0]
        mine = level(folder)
        if mine is None:
            unknown.add(folder)
            continue
        for target, header in INCLUDE.findall(path.read_text(errors="replace")):
            theirs = level(target)
            if theirs is None:
                if (ROOT / "src" / target).is_dir():
                    unknown.add(target)
                continue
            if theirs > mine:
                found.add(f"{path.relative_to(ROOT)} -> {target}/{header}")
    return found, unknown


MAX_FILES = 15
MAX_SHARE = 0.20


def oversized_folders():
    """Folders of src/ with too many source files or too large a share of the lines."""
    sizes = {}
    for path in (ROOT / "src").rglob("*"):
        if path.suffix in (".h", ".cc", ".cu"):
            files, lines = sizes.get(path.parent, (0, 0))
            sizes[path.parent] = (files + 1, lines + len(path.read_text(errors="replace").splitlines()))
    total = sum(lines for _, lines in sizes.values())
    return [
        f"{folder.relative_to(ROOT)}: {files} source files, {100 * lines / total:.0f}% of the lines"
        for folder, (files, lines) in sorted(sizes.items())
        if files > MAX_FILES or lines > MAX_SHARE * total
    ]


def main():
    found, unknown = upward_includes()
    if "--list" in sys.argv:
        print("\n".join(sorted(found)))
        return 0
    status = 0
    for folder in oversized_folders():
        print(f"check-layers: {folder} (at most {MAX_FILES} files and {MAX_SHARE:.0%} of the lines)")
        status = 1
    if unknown:
        print(f"check-layers: folders in no layer (add them to LAYERS): {', '.join(sorted(unknown))}")
        status = 1
    listed_file = ROOT / "scripts" / "layer-exceptions.txt"
    listed = {line.strip() for line in listed_file.read_text().splitlines() if line.strip() and not line.startswith("#")}
    for new in sorted(found - listed):
        print(f"check-layers: {new} includes a higher layer's header")
        status = 1
    for gone in sorted(listed - found):
        print(f"check-layers: {gone} no longer goes up: remove it from scripts/layer-exceptions.txt")
        status = 1
    if status == 0:
        print(f"check-layers: no new upward include ({len(listed)} known ones left to remove)")
    return status


if __name__ == "__main__":
    sys.exit(main())
