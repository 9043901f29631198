#!/usr/bin/env bash
# interleaved.sh - 32 threads, interleaved 6000- and 47008-byte records on
# an uncached=always mount: 0.000 device reads per write, nothing cached
# after fsync, every record right.
. "$(dirname "$0")/lib.sh"
need_fuse
setup_scratch pcfs-interleaved
pcfs_mount "$T/back" "$T/mnt" -o uncached=always,threads=32
"$PCFS_INTERLEAVED" "$T/mnt" 6000 4096 || fail "6000-byte records"
"$PCFS_INTERLEAVED" "$T/mnt" 47008 1024 || fail "47008-byte records"
pcfs_umount "$T/mnt"
echo "interleaved: ok"
