#!/usr/bin/env bash
# bench.sh - the one benchmark command.
#
# Builds `build` (Release, -O2 -g), then runs build/pcbench (every suite at
# reduced sizes, 2 to 4 minutes on 2 cores) on files in build/benchdata (on
# the build tree's file system, which supports O_DIRECT).  Extra arguments go
# to pcbench: suites, --full, --quick, --json FILE, --svg DIR, ...
#   bash scripts/bench.sh --help
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

bash scripts/setup.sh
. scripts/builds.sh

JOBS=$(nproc 2>/dev/null || echo 2)
pc_cmake_args build
cmake -S "$ROOT" -B "$ROOT/build" "${CMAKE_ARGS[@]}"
cmake --build "$ROOT/build" -j "$JOBS"

BENCHDIR=$ROOT/build/benchdata
mkdir -p "$BENCHDIR"

if [ ! -x "$ROOT/build/pcbench" ]; then
	echo "bench.sh: build/pcbench was not built (tools/pcbench/ missing?)" >&2
	exit 1
fi

# --help: pcbench's options, and nothing run.
for arg in "$@"; do
	if [ "$arg" = --help ] || [ "$arg" = -h ]; then
		exec "$ROOT/build/pcbench" --help
	fi
done

status=0
echo "==== pcbench --dir build/benchdata $* ===="
"$ROOT/build/pcbench" --dir "$BENCHDIR" "$@" || status=$?
if [ "$status" -ne 0 ]; then
	echo "bench.sh: pcbench failed (exit $status)" >&2
fi
exit "$status"
