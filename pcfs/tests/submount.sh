#!/usr/bin/env bash
# submount.sh - file systems mounted inside BACKING_DIR (fds.c, dev_take).
# The daemon runs with RLIMIT_NOFILE 256 (at most 64 inode descriptors):
#   - a tmpfs mounted inside BACKING_DIR decodes its own file handles:
#     cp -a and diff -r of 1200 files into it through the mount succeed,
#     with at most 64 inode descriptors open (they failed with EMFILE when
#     only BACKING_DIR's own files could be reopened by handle);
#   - a file system that gives no handles (another pcfs: FUSE without
#     export support) mounted inside BACKING_DIR: its files keep their
#     descriptors while the kernel knows them, and inode_fds_pinned in the
#     stats counts them.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd prlimit mount umount
setup_scratch pcfs-submount
S=$T/src B=$T/back M=$T/mnt
mkdir -p "$B/sub" "$B/nofh" "$T/inner"
mount -t tmpfs -o size=256m pcfs-test "$B/sub" || skip "cannot mount a tmpfs"
MOUNTS+=("$B/sub")

# 40 directories of 30 files.
for d in $(seq 40); do
	mkdir -p "$S/d$d"
	for f in $(seq 30); do
		echo "file $d/$f" >"$S/d$d/f$f"
	done
done
nfiles=$(find "$S" | wc -l)
for f in $(seq 100); do
	echo "inner $f" >"$T/inner/g$f"
done

# The file system without handles first (the outer pcfs's lookups of it
# must not be the inner one's: it is mounted before).
pcfs_mount "$T/inner" "$B/nofh"
PCFS_WRAP=(prlimit --nofile=256:256)
pcfs_mount "$B" "$M"
[ "$(stat_field "$M" inode_fd_limit)" = 64 ] || fail "inode_fd_limit $(stat_field "$M" inode_fd_limit), want 64"

cp -a "$S" "$M/sub/copy" || fail "cp -a of $nfiles files into a tmpfs inside BACKING_DIR"
diff -r "$S" "$M/sub/copy" || fail "diff -r of the copy on the tmpfs"
[ "$(stat_field "$M" inode_fds)" -le 64 ] || fail "$(stat_field "$M" inode_fds) inode descriptors open, limit 64"
[ "$(stat_field "$M" inode_fd_evictions)" -gt 0 ] || fail "no inode descriptor was closed: the test did not need handles"
pinned=$(stat_field "$M" inode_fds_pinned)
[ "$pinned" -le 2 ] || fail "inode_fds_pinned $pinned after the copy to the tmpfs, want (almost) none"
echo "tmpfs inside BACKING_DIR: cp -a + diff -r of $nfiles files, $(stat_field "$M" inode_fd_evictions) descriptors closed, $pinned pinned"

ls -l "$M/nofh" >/dev/null || fail "ls -l of the file system without handles"
cat "$M/nofh/g7" | grep -qx "inner 7" || fail "reading a file of the file system without handles"
pinned=$(stat_field "$M" inode_fds_pinned)
[ "$pinned" -ge 100 ] || fail "inode_fds_pinned $pinned after ls -l of 100 files without handles"
echo "file system without handles inside BACKING_DIR: inode_fds_pinned $pinned"

pcfs_umount "$M"
diff -r "$S" "$B/sub/copy" || fail "the copy on the tmpfs after unmount"
pcfs_umount "$B/nofh"
umount "$B/sub" || fail "the tmpfs is still busy after pcfs exited"
echo "submount: ok"
