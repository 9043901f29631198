#!/usr/bin/env bash
# manyfiles.sh - more files than pcfs may hold descriptors for.  The
# daemon runs with RLIMIT_NOFILE 256 (prlimit), so it keeps at most 64
# inode descriptors open and reopens the others by file handle (fds.c):
#   - cp -a of a tree of 3000 files into the mount, and diff -r, succeed
#     (they failed with EMFILE), and the backing copy is right after
#     unmount;
#   - a file whose descriptor was closed, in a directory whose descriptor
#     was closed, is still the right file after the directory is renamed
#     and another file is made at the old path (pcfs-reopen.py);
#   - a file that takes the inode number of a deleted file pcfs still
#     knows gets an inode of its own, and reads right after a reopen by
#     handle (pcfs-reuse.py);
#   - without CAP_DAC_READ_SEARCH (no handles: every inode keeps its
#     descriptor) the same copy works under the usual limit, and under 256
#     the copy fails and pcfs says why in one line.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd python3 prlimit setpriv
setup_scratch pcfs-manyfiles
# The backing directory on an ext4 of its own (a loop device):
# pcfs-reuse.py waits for ext4 to reuse a freed inode number, which any
# other process creating files on a shared file system may take first.
need_cmd mkfs.ext4
truncate -s 256M "$T/img"
mkfs.ext4 -q -F -N 16384 "$T/img" || fail "mkfs.ext4"
mkdir "$T/fs"
mount -o loop "$T/img" "$T/fs" || skip "cannot mount an ext4 on a loop device here"
LATE_MOUNTS+=("$T/fs")
S=$T/src B=$T/fs/back M=$T/mnt
LIMIT=(prlimit --nofile=256:256)
NOHANDLES=(setpriv --inh-caps=-dac_read_search --bounding-set=-dac_read_search)

# 30 directories of 100 files (sizes 10 B to 3 KB), a symlink, a hard link
# and a subdirectory each, and one 3 MB file.
mkdir -p "$S"
for d in $(seq 30); do
	mkdir -p "$S/d$d/sub"
	for f in $(seq 100); do
		printf 'file %d/%d\n%0*d\n' "$d" "$f" $((f * 37 % 3000)) 0 >"$S/d$d/f$f"
	done
	ln -s f1 "$S/d$d/link"
	ln "$S/d$d/f2" "$S/d$d/sub/hard"
done
head -c 3000000 /dev/urandom >"$S/big"
nfiles=$(find "$S" | wc -l)

# copy_and_check: cp -a of the tree into the mount and diff -r.
copy_and_check() {
	cp -a "$S" "$M/copy" || fail "cp -a of $nfiles files"
	diff -r --no-dereference "$S" "$M/copy" || fail "diff -r of the copy"
	[ "$(find "$M/copy" | wc -l)" -eq "$nfiles" ] || fail "find counts $(find "$M/copy" | wc -l), want $nfiles"
}

PCFS_WRAP=("${LIMIT[@]}")
pcfs_mount "$B" "$M" -o memory=64M
[ "$(stat_field "$M" file_handles)" = 1 ] || fail "no file handles as root"
[ "$(stat_field "$M" inode_fd_limit)" = 64 ] || fail "inode_fd_limit $(stat_field "$M" inode_fd_limit), want 64"
copy_and_check
ev=$(stat_field "$M" inode_fd_evictions)
[ "$ev" -gt 0 ] || fail "no inode descriptor was closed: the test did not need handles"
[ "$(stat_field "$M" inode_fds)" -le 64 ] || fail "$(stat_field "$M" inode_fds) inode descriptors open, limit 64"
echo "limit 256: cp -a + diff -r of $nfiles files through the mount ok ($ev descriptors closed, $(stat_field "$M" inode_fd_reopens) reopened)"

reopens=$(stat_field "$M" inode_fd_reopens)
python3 "$(dirname "$0")/pcfs-reopen.py" "$M" || fail "pcfs-reopen.py"
[ "$(stat_field "$M" inode_fd_reopens)" -gt "$reopens" ] || fail "pcfs-reopen.py reopened nothing by handle"
python3 "$(dirname "$0")/pcfs-reuse.py" "$M" "$B" || fail "pcfs-reuse.py"
pcfs_umount "$M"
diff -r --no-dereference "$S" "$B/copy" || fail "backing copy differs after unmount"
[ "$(cat "$B/e/f")" = old ] && [ "$(cat "$B/d/f")" = new ] || fail "backing files of pcfs-reopen.py"
echo "limit 256: the backing copy is right after unmount"

# No handles: every inode keeps its descriptor.
rm -rf "${B:?}"/*
PCFS_WRAP=("${NOHANDLES[@]}")
pcfs_mount "$B" "$M"
[ "$(stat_field "$M" file_handles)" = 0 ] || fail "file handles without CAP_DAC_READ_SEARCH"
copy_and_check
pcfs_umount "$M"
echo "no handles, usual limit: cp -a + diff -r ok"

# No handles and limit 256: the copy runs out, and pcfs says so, once.
rm -rf "${B:?}"/*
"${LIMIT[@]}" "${NOHANDLES[@]}" "$PCFS" -f "$B" "$M" 2>"$T/err" &
pid=$!
MOUNTS+=("$M")
wait_for 10 mountpoint -q "$M" || fail "pcfs -f did not mount"
if cp -a "$S" "$M/copy" 2>/dev/null; then fail "no handles, limit 256: the copy of $nfiles files worked"; fi
fusermount3 -u "$M"
wait "$pid" || fail "pcfs -f exited $? after the shortage"
[ "$(grep -c "out of file descriptors" "$T/err")" -eq 1 ] || { cat "$T/err"; fail "want one line about the shortage"; }
grep -q "CAP_DAC_READ_SEARCH" "$T/err" || { cat "$T/err"; fail "the line does not say why"; }
echo "no handles, limit 256: $(cat "$T/err")"
echo "manyfiles: ok"
