#!/bin/sh
# xfs-bench.sh - run pcbench (any of its suites) on a fresh XFS (or ext4)
# file system with 4 KiB blocks, on a loop device over a sparse image file
# with direct I/O, so that the loop device's read counters are those of the
# disk under it (nothing is served from the image file's own page cache).
#
#   scripts/xfs-bench.sh [OPTIONS] [--] [SUITE...] [pcbench options]
#
#   --size BYTES   size of the sparse image (default 8G; any size truncate(1)
#                  accepts)
#   --image PATH   image file (default: a new file build/xfs-bench.*.img;
#                  removed at exit either way)
#   --tool T       pcbench (the default; edgebench, the old name, runs
#                  pcbench's interleaved suite)
#   --fs FS        xfs (the default) or ext4: the file system made on it (a
#                  fresh one: on a long-used file system the kernel's inode
#                  allocator, after many deletes, makes create rates swing)
#   --in-memory    the image is a new file in /dev/shm (tmpfs; or --image,
#                  wherever it is) and the loop device reads it without
#                  direct I/O: a device served from memory, which dropping
#                  the caches cannot make cold.  Every byte still goes
#                  through the loop device's one worker thread, which copies
#                  it from the image: that thread, not a disk, bounds a cold
#                  read (this kernel has no RAM disk, brd or null_blk, to
#                  take its place).  The image holds as much memory as the
#                  data written; a run killed with SIGKILL leaves it in
#                  /dev/shm, to remove by hand.
#   --help         this text
#
# Everything after the script's own options (or after --) goes to pcbench,
# e.g.  scripts/xfs-bench.sh interleaved --total 256M
#       scripts/xfs-bench.sh files
#       scripts/xfs-bench.sh -- --quick --json xfs.json
# Needs root, losetup, mkfs.xfs (or mkfs.ext4) and mount.  Builds
# build/pcbench first if it is missing.  Cleans up (unmount, detach, remove
# the image) on any exit but SIGKILL.  Runs at once do not share an image.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
size=8G
image=
bench=pcbench
fs=xfs
loop_dio=on

while [ $# -gt 0 ]; do
	case "$1" in
	--size) [ $# -ge 2 ] || { echo "--size needs a value" >&2; exit 2; }
		size=$2; shift 2 ;;
	--size=*) size=${1#--size=}; shift ;;
	--image) [ $# -ge 2 ] || { echo "--image needs a value" >&2; exit 2; }
		image=$2; shift 2 ;;
	--image=*) image=${1#--image=}; shift ;;
	--tool) [ $# -ge 2 ] || { echo "--tool needs a value" >&2; exit 2; }
		bench=$2; shift 2 ;;
	--tool=*) bench=${1#--tool=}; shift ;;
	--fs) [ $# -ge 2 ] || { echo "--fs needs a value" >&2; exit 2; }
		fs=$2; shift 2 ;;
	--fs=*) fs=${1#--fs=}; shift ;;
	--in-memory) loop_dio=off; shift ;;
	--help|-h) sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	*) break ;;
	esac
done

case "$fs" in
xfs) mkfs="mkfs.xfs -f -q -b size=4096" ;;
ext4) mkfs="mkfs.ext4 -F -q -b 4096" ;;
*) echo "xfs-bench.sh: --fs: xfs or ext4, not '$fs'" >&2; exit 2 ;;
esac

if [ "$(id -u)" -ne 0 ]; then
	echo "xfs-bench.sh: must run as root (losetup, mkfs.xfs, mount)" >&2
	exit 1
fi
for tool in losetup "mkfs.$fs" mount umount truncate; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "xfs-bench.sh: $tool not found (apt-get install xfsprogs util-linux)" >&2
		exit 1
	}
done

case "$bench" in
pcbench) ;;
edgebench) bench=pcbench; set -- interleaved "$@" ;;
*) echo "xfs-bench.sh: --tool: pcbench, not '$bench'" >&2; exit 2 ;;
esac
if [ ! -x "$here/build/$bench" ]; then
	echo "xfs-bench.sh: building (build/$bench is missing)"
	cmake -S "$here" -B "$here/build" -DCMAKE_BUILD_TYPE=Release
	cmake --build "$here/build" -j2
fi

loopdev=
mnt=
cleanup() {
	rc=$?
	set +e
	if [ -n "$mnt" ]; then
		mountpoint -q "$mnt" && umount "$mnt"
		rmdir "$mnt"
	fi
	[ -n "$loopdev" ] && losetup -d "$loopdev"
	rm -f "$image"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A new image per run (unless --image names one), so that runs at once do
# not remove each other's.
if [ -z "$image" ]; then
	if [ "$loop_dio" = off ]; then
		dir=/dev/shm
	else
		dir="$here/build"
	fi
	mkdir -p "$dir"
	image=$(mktemp --suffix=.img "$dir/xfs-bench.XXXXXX")
else
	mkdir -p "$(dirname "$image")"
	rm -f "$image"
fi
truncate -s "$size" "$image"
if [ "$loop_dio" = off ]; then
	# The image's data lives in memory: a tmpfs that fills up mid-run
	# shows up as I/O errors inside the loop device, so say it up front.
	want=$(($(stat -c %s "$image") / 1024))
	free=$(df -k --output=avail "$(dirname "$image")" | tail -1)
	if [ "$free" -lt "$want" ]; then
		echo "xfs-bench.sh: --in-memory needs --size ($size) free in $(dirname "$image"), $free KiB are" >&2
		exit 1
	fi
fi
loopdev=$(losetup --find --show --direct-io=$loop_dio "$image")
# the loop device must really do direct I/O (unless --in-memory), or its
# reads come from the image file's page cache and the read counts mean
# nothing
dio=$(cat "/sys/block/$(basename "$loopdev")/loop/dio" 2>/dev/null || echo "?")
echo "xfs-bench.sh: $image ($size, sparse) on $loopdev, direct-io $dio"
if [ "$loop_dio" = on ] && [ "$dio" != 1 ]; then
	echo "xfs-bench.sh: WARNING: direct I/O is not on for $loopdev" >&2
fi
$mkfs "$loopdev"
mnt=$(mktemp -d /tmp/xfs-bench.XXXXXX)
mount "$loopdev" "$mnt"
echo "xfs-bench.sh: mounted on $mnt"

"$here/build/$bench" --dir "$mnt" "$@"
