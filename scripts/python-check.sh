#!/usr/bin/env bash
# The Python package (python/): installed with pip as a user would (no
# network: its build backend is in the tree), then its tests against the
# installed copy, on CPU ranks with Gloo (Debian's python3-torch).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-/usr/bin/python3}
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
  "$python" -m pip install --quiet --target "$target" ./python
export HETCCL_LIB=${HETCCL_LIB:-$PWD/build/libhetccl.so}  # the build test.sh made
cd python/tests  # not python/: the tests must import the installed copy
PYTHONPATH=$target "$python" -m unittest discover -s . -t . "$@"
