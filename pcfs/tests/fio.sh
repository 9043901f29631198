#!/usr/bin/env bash
# fio.sh - fio with verify=crc32c through a pcfs mount and on the backing
# file system: sequential and random writes, buffered, --direct=1 and
# --sync=1, four jobs on one file (each its own quarter), then read back
# and checked; after the unmount fio checks the backing files again
# (--verify_only).  Any verify error fails.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd fio
setup_scratch pcfs-fio
pcfs_mount "$T/back" "$T/mnt"
mkdir -p "$T/ref"
# run_fio DIR NAME [--verify_only] FIO_ARGS...: one job, in file NAME.
run_fio() {
	local dir=$1 name=$2
	shift 2
	fio --name="$name" --directory="$dir" --filename="$name" --size=8M --numjobs=4 --offset_increment=8M \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --group_reporting --output-format=terse \
		"$@" >"$T/$name.out" 2>&1 || { cat "$T/$name.out"; fail "fio $name in $dir: $*"; }
	grep -qi "verify:.*bad\|crc32c.*bad" "$T/$name.out" && { cat "$T/$name.out"; fail "fio $name: verify"; }
	return 0
}
JOBS=(
	"seq-buffered --rw=write --bs=128k"
	"rand-buffered --rw=randwrite --bs=4k --ioengine=psync"
	"seq-direct --rw=write --bs=1M --direct=1"
	"rand-direct --rw=randwrite --bs=4k --direct=1 --ioengine=libaio --iodepth=8"
	"seq-sync --rw=write --bs=64k --sync=1"
	"rand-sync --rw=randwrite --bs=16k --sync=1"
	"rand-misaligned --rw=randwrite --bs=6000 --ioengine=pvsync2"
)
for dir in "$T/ref" "$T/mnt"; do
	for job in "${JOBS[@]}"; do
		# shellcheck disable=SC2086 # a job is its name and its options
		run_fio "$dir" $job
	done
	rm -f "$T/ref"/*
done
pcfs_umount "$T/mnt"
# What pcfs wrote is on the backing file system: fio checks each file there
# again, after the unmount, with the same jobs (same offsets and seeds).
for job in "${JOBS[@]}"; do
	# shellcheck disable=SC2086
	run_fio "$T/back" $job --verify_only
done
echo "fio: all verified, through the mount and on the backing files after unmount"
