#!/usr/bin/env bash
# fsx.sh - pcfs-fsx through a pcfs mount (PCFS_FSX_OPS ops, default
# 100000; PCFS_FSX_SEED to replay), then the file after a remount.
. "$(dirname "$0")/lib.sh"
need_fuse
setup_scratch pcfs-fsx
pcfs_mount "$T/back" "$T/mnt" -o memory=64M
"$PCFS_FSX" "$T/mnt/f" "${PCFS_FSX_OPS:-100000}" ${PCFS_FSX_SEED:-} || fail "pcfs-fsx"
sum=$(md5sum <"$T/mnt/f")
pcfs_umount "$T/mnt"
[ "$(md5sum <"$T/back/f")" = "$sum" ] || fail "backing file differs from what the mount showed"
echo "fsx: ok"
