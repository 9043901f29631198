#!/usr/bin/env bash
# pcfs-bench.sh - fio through pcfs against fio on the backing directory
# (kernel buffered, kernel O_DIRECT), side by side in one run, and the
# interleaved 6000-byte workload through pcfs (-o uncached=always) against
# the kernel's RWF_DONTCACHE on the backing directory.  Each figure is the
# median of PCFS_BENCH_REPS runs (default 3), interleaved so that a change
# in the machine's speed hits every row alike.  Needs root, /dev/fuse, fio
# and a build (build/pcfs, build/pcfs-tests/pcfs-interleaved).
#
#   bash scripts/pcfs-bench.sh [DIR]     (DIR: scratch on the backing fs,
#                                         default build/testdata)
# Environment: PCFS_BENCH_REPS, PCFS_BENCH_SIZE (file size, default 512M),
# PCFS_BENCH_SECONDS (timed random runs, default 5).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
PCFS=$ROOT/build/pcfs
IL=$ROOT/build/pcfs-tests/pcfs-interleaved
DIR=${1:-$ROOT/build/testdata}
REPS=${PCFS_BENCH_REPS:-3}
SIZE=${PCFS_BENCH_SIZE:-512M}
SECS=${PCFS_BENCH_SECONDS:-5}
[ -x "$PCFS" ] && [ -x "$IL" ] || { echo "pcfs-bench: build first (cmake --build build)" >&2; exit 1; }
W=$(mktemp -d "$DIR/pcfs-bench.XXXXXX")
B=$W/back M=$W/mnt
mkdir -p "$B" "$M"
cleanup() { mountpoint -q "$M" && fusermount3 -u "$M"; sleep 0.5; rm -rf "$W"; }
trap cleanup EXIT

mount_pcfs() { "$PCFS" -o memory=2G"${1:+,$1}" "$B" "$M"; }
umount_pcfs() {
	fusermount3 -u "$M"
	while pgrep -f "pcfs .* $B $M\$" >/dev/null; do sleep 0.1; done
}

# fio_mibs DIR ARGS...: MiB/s of the job (read + write bandwidth).
fio_mibs() {
	local dir=$1
	shift
	fio --name=b --directory="$dir" --filename=f --size="$SIZE" --output-format=json "$@" 2>/dev/null |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.1f" % ((j["read"]["bw"]+j["write"]["bw"])/1024))'
}

# One run of workload NAME in CONFIG (kbuf, kdirect, pcfs): MiB/s.
run() {
	local w=$1 cfg=$2 dir=$B extra=()
	case $cfg in
	kdirect) extra=(--direct=1) ;;
	pcfs) dir=$M ;;
	esac
	case $w in
	seqwrite)
		rm -f "$dir/f"
		fio_mibs "$dir" --rw=write --bs=1M --end_fsync=1 "${extra[@]}" ;;
	seqwrite-nofsync)
		# Into memory only: the kernel's figure is its memcpy into the page
		# cache; pcfs pays a FUSE round trip and two copies per 1 MiB.
		rm -f "$dir/f"
		fio_mibs "$dir" --rw=write --bs=1M "${extra[@]}" ;;
	seqread)
		# Cold: the kernel's copy is invalidated by fio; pcfs is remounted.
		[ "$cfg" = pcfs ] && { umount_pcfs; mount_pcfs; }
		fio_mibs "$dir" --rw=read --bs=1M --invalidate=1 "${extra[@]}" ;;
	randread)
		# Warm: one pass first, then a timed run (O_DIRECT has no cache).
		fio_mibs "$dir" --rw=read --bs=1M --invalidate=0 "${extra[@]}" >/dev/null
		fio_mibs "$dir" --rw=randread --bs=4k --invalidate=0 --time_based --runtime="$SECS" "${extra[@]}" ;;
	randwrite)
		fio_mibs "$dir" --rw=randwrite --bs=4k --invalidate=0 --time_based --runtime="$SECS" --end_fsync=1 \
			"${extra[@]}" ;;
	esac
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

mount_pcfs
declare -A R
for rep in $(seq "$REPS"); do
	for w in seqwrite seqwrite-nofsync seqread randread randwrite; do
		for cfg in kbuf kdirect pcfs; do
			R[$w.$cfg]+="$(run "$w" "$cfg") "
		done
	done
done
rm -f "$B/f"
umount_pcfs

# Interleaved 6000-byte records, 32 threads, one file.
mount_pcfs uncached=always,threads=32
il_reads=""
for rep in $(seq "$REPS"); do
	R[il.kdontcache]+="$("$IL" --kernel-dontcache "$B" 6000 8192 | awk '/MiB\/s/ { print $2 }') "
	out=$("$IL" "$M" 6000 8192)
	R[il.pcfs]+="$(echo "$out" | awk '/MiB\/s/ { print $2 }') "
	il_reads+="$(echo "$out" | sed -n 's/.*device reads per write \([0-9.]*\).*/\1/p') "
done
umount_pcfs

med() { echo "${R[$1]}" | tr ' ' '\n' | grep . | median; }
printf '\npcfs-bench: medians of %s runs, MiB/s (file %s, %s cores, %s)\n' "$REPS" "$SIZE" "$(nproc)" "$(uname -r)"
printf '%-34s %12s %12s %12s %10s\n' workload "kernel buf" "kernel O_DIRECT" pcfs "pcfs/kbuf"
for w in seqwrite seqwrite-nofsync seqread randread randwrite; do
	kb=$(med $w.kbuf) kd=$(med $w.kdirect) p=$(med $w.pcfs)
	case $w in
	seqwrite) label="1 MiB sequential write (+fsync)" ;;
	seqwrite-nofsync) label="1 MiB sequential write (no fsync)" ;;
	seqread) label="1 MiB sequential read (cold)" ;;
	randread) label="4 KiB random read (warm)" ;;
	randwrite) label="4 KiB random write (+fsync)" ;;
	esac
	printf '%-34s %12s %12s %12s %9.2fx\n' "$label" "$kb" "$kd" "$p" "$(echo "$p / $kb" | bc -l)"
done
kd=$(med il.kdontcache) p=$(med il.pcfs)
printf '%-34s %12s %12s %12s %9.2fx  (vs kernel RWF_DONTCACHE)\n' "6000 B interleaved, 32 threads" "$kd" "-" "$p" \
	"$(echo "$p / $kd" | bc -l)"
echo "raw runs:"
for k in "${!R[@]}"; do echo "  $k: ${R[$k]}"; done | sort
echo "  pcfs interleaved device reads per write: $il_reads"
