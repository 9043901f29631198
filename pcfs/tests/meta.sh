#!/usr/bin/env bash
# meta.sh - metadata through a pcfs mount, compared with the same calls on
# the backing file system, and what only a mount has:
#   - meta.py (unlink and rename of open files, hard links, xattrs, fifos,
#     rename flags, symlinks, chmod, utime, O_RDONLY|O_TRUNC, umask) in the
#     mount and in a directory of the backing file system: the same output;
#   - -o allow_other, pcfs as root: what another user creates (files,
#     directories, symlinks, fifos) is that user's in the backing directory,
#     and takes a set-group-ID directory's group; the user can write it;
#   - .pcfs-stats cannot be removed, renamed, replaced or linked to.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd python3 setpriv
setup_scratch pcfs-meta
B=$T/back M=$T/mnt REF=$T/ref
mkdir -p "$REF"
pcfs_mount "$B" "$M" -o allow_other
PY=$(dirname "$0")/meta.py

mkdir "$M/run"
python3 "$PY" "$REF" >"$T/ref.out" 2>&1 || { cat "$T/ref.out"; fail "meta.py on the backing file system"; }
python3 "$PY" "$M/run" >"$T/mnt.out" 2>&1 || { cat "$T/mnt.out"; fail "meta.py through the mount"; }
diff -u "$T/ref.out" "$T/mnt.out" || fail "metadata through the mount differs from the backing file system"
echo "meta.py: $(wc -l <"$T/mnt.out") checks, the same through the mount as on the backing file system"

# Another user, through the mount (allow_other; nobody: uid and gid 65534).
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
mkdir "$M/pub" "$M/sgid"
chmod 1777 "$M/pub"
chgrp 100 "$M/sgid"
chmod 2777 "$M/sgid"
(cd "$M" && "${NOBODY[@]}" sh -ec '
	echo one >pub/f
	echo two >>pub/f
	mkdir pub/d
	echo three >pub/d/g
	ln -s f pub/l
	mkfifo pub/p
	echo four >sgid/x
	mkdir sgid/sd') || fail "another user could not create and write its own files through the mount"
[ "$(cat "$M/pub/f")" = "$(printf 'one\ntwo')" ] || fail "another user's appended file: '$(cat "$M/pub/f")'"
for n in pub/f pub/d pub/d/g pub/l pub/p; do
	[ "$(stat -c %u:%g "$B/$n")" = 65534:65534 ] ||
		fail "$n, made by uid 65534 through the mount, is $(stat -c %u:%g "$B/$n") in the backing directory"
done
for n in sgid/x sgid/sd; do
	[ "$(stat -c %u:%g "$B/$n")" = 65534:100 ] ||
		fail "$n in a set-group-ID directory of group 100 is $(stat -c %u:%g "$B/$n")"
done
[ -g "$B/sgid/sd" ] || fail "a directory made in a set-group-ID directory is not set-group-ID"
# Root's files stay root's.
echo r >"$M/pub/root-file"
[ "$(stat -c %u "$B/pub/root-file")" = 0 ] || fail "root's file is not root's"
echo "allow_other: files another user makes through the mount are that user's"

# The stats file's name is the daemon's.
echo x >"$M/plain"
for what in "rm -f $M/.pcfs-stats" "mv $M/.pcfs-stats $M/moved" "mv $M/plain $M/.pcfs-stats" \
	"ln $M/plain $M/.pcfs-stats" "mkdir $M/.pcfs-stats"; do
	if $what 2>/dev/null; then fail "allowed: $what"; fi
done
[ -f "$M/.pcfs-stats" ] && [ -f "$M/plain" ] || fail ".pcfs-stats or plain gone"
grep -q . "$M/.pcfs-stats" || fail ".pcfs-stats is empty"
echo ".pcfs-stats: not removed, renamed, replaced or linked to"
pcfs_umount "$M"
[ "$(cat "$B/pub/f")" = "$(printf 'one\ntwo')" ] || fail "another user's file after unmount: '$(cat "$B/pub/f")'"
