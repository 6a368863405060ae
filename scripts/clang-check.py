#!/usr/bin/env python3
"""Compiles every C++ source of the build (library, tools, tests) again
with clang++-22, syntax only and warnings as errors, using the build's own
flags (build/compile_commands.json): the code builds warning-free with
clang as well as with the g++ that built it. CUDA/HIP sources are left to
their own compilers.

    scripts/clang-check.py [build dir, default build] [compiled dir ...]

A compiled dir is a build that clang++-22 compiled with -Werror
(scripts/sanitize-check.sh address: build-asan): a source it compiled with
the same definitions is not checked again.
"""
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def arguments(entry):
    return entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])


def definitions(entry):
    return sorted(a for a in arguments(entry) if a.startswith("-D"))


def load(build_dir):
    with open(os.path.join(root, build_dir, "compile_commands.json")) as f:
        # Each source once (a few are compiled into two targets with the same flags).
        return {e["file"]: e for e in reversed(json.load(f)) if e["file"].endswith(".cc")}


entries = load(build)
compiled = 0
for done_dir in sys.argv[2:]:
    for path, entry in load(done_dir).items():
        if path in entries and definitions(entries[path]) == definitions(entry):
            del entries[path]
            compiled += 1
entries = list(entries.values())


def command(entry):
    args = arguments(entry)
    out, skip = ["clang++-22"], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c" and not a.startswith("-fdiagnostics-color"):
            out.append(a)
    return out + ["-fsyntax-only", "-Werror"], entry["directory"]


def check(entry):
    cmd, cwd = command(entry)
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return entry["file"], r.returncode, r.stderr


seen, failed = set(), 0
with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    for path, code, err in pool.map(check, entries):
        if code != 0 and path not in seen:
            failed += 1
            print(f"clang-check: {os.path.relpath(path, root)}:\n{err}")
        seen.add(path)
print(f"clang-check: {len(seen)} sources, {failed} with warnings or errors under clang++-22"
      + (f" ({compiled} more compiled by it in {', '.join(sys.argv[2:])})" if compiled else ""))
sys.exit(1 if failed else 0)
