#!/usr/bin/env bash
# cmake --install into a temporary prefix, then build a consumer with
# find_package(hetccl) and another with pkg-config, and run both; check
# the libnccl.so.2 link is installed.
set -euo pipefail
build="$1"
src="$(cd "$(dirname "$0")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
lib=$(ls -d "$tmp"/prefix/lib*/ | head -1)
test -e "$lib/libnccl.so.2" || { echo "libnccl.so.2 not installed"; exit 1; }
test -f "$tmp/prefix/include/nccl.h" && test -f "$tmp/prefix/include/hetccl.h"
cmake -S "$src" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$lib" "$tmp/consumer/consumer"
PKG_CONFIG_PATH="$lib/pkgconfig" g++ -std=c++17 "$src/consumer.cc" -o "$tmp/pc_consumer" \
  $(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs hetccl)
LD_LIBRARY_PATH="$lib" "$tmp/pc_consumer"
