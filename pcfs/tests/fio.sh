#!/usr/bin/env bash
# fio.sh - fio with verify=crc32c through a pcfs mount and on the backing
# file system: sequential and random writes, buffered, --direct=1 and
# --sync=1, four jobs on one file (each its own quarter), then read back
# and checked.  Any verify error fails.
. "$(dirname "$0")/lib.sh"
need_fuse
command -v fio >/dev/null || { echo "skipped: no fio" >&2; exit 77; }
setup_scratch pcfs-fio
pcfs_mount "$T/back" "$T/mnt"
mkdir -p "$T/ref"
run_fio() {
	local dir=$1 name=$2
	shift 2
	fio --name="$name" --directory="$dir" --filename=one --size=8M --numjobs=4 --offset_increment=8M \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --group_reporting --output-format=terse \
		"$@" >"$T/$name.out" 2>&1 || { cat "$T/$name.out"; fail "fio $name in $dir: $*"; }
	grep -qi "verify:.*bad\|crc32c.*bad" "$T/$name.out" && { cat "$T/$name.out"; fail "fio $name: verify"; }
	rm -f "$dir/one"
}
for dir in "$T/ref" "$T/mnt"; do
	run_fio "$dir" seq-buffered --rw=write --bs=128k
	run_fio "$dir" rand-buffered --rw=randwrite --bs=4k --ioengine=psync
	run_fio "$dir" seq-direct --rw=write --bs=1M --direct=1
	run_fio "$dir" rand-direct --rw=randwrite --bs=4k --direct=1 --ioengine=libaio --iodepth=8
	run_fio "$dir" seq-sync --rw=write --bs=64k --sync=1
	run_fio "$dir" rand-sync --rw=randwrite --bs=16k --sync=1
	run_fio "$dir" rand-misaligned --rw=randwrite --bs=6000 --ioengine=pvsync2
done
pcfs_umount "$T/mnt"
echo "fio: all verified"
