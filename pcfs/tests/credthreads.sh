#!/usr/bin/env bash
# credthreads.sh - pcfs takes a caller's ids only around that caller's own
# calls, never while pagecache may start a thread: a thread inherits the
# ids of the thread that starts it, and pagecache starts a device's
# flusher and I/O queue at the first file it opens there.
#   - the first call on a fresh mount is an unprivileged user's create
#     (a user made with useradd if missing);
#   - then every thread of the daemon has fsuid and fsgid 0;
#   - root writes a set-user-ID file over 64 KiB and a set-user-ID and
#     set-group-ID one under it: after the unmount (everything written
#     back) both keep their bits on the backing file system, which a
#     write-back done with the user's ids (no CAP_FSETID) would clear.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd setpriv useradd
setup_scratch pcfs-credthreads
chmod 755 "$T"
id -u pcfs-u1 >/dev/null 2>&1 ||
	useradd --system --user-group --no-create-home --shell /usr/sbin/nologin pcfs-u1 || fail "useradd pcfs-u1"
setpriv --reuid=pcfs-u1 --regid=pcfs-u1 --clear-groups -- test -x "$T" ||
	skip "$T is not reachable by other users"
B=$T/back M=$T/mnt
mkdir -p "$B/u"
chown pcfs-u1: "$B/u"
pcfs_mount "$B" "$M" -o allow_other
pid=$(pgrep -f "pcfs.* $B $M\$" | head -1)
[ -n "$pid" ] || fail "no daemon pid"

setpriv --reuid=pcfs-u1 --regid=pcfs-u1 --clear-groups -- sh -c "echo mine >'$M/u/first'" ||
	fail "pcfs-u1 could not create $M/u/first"
[ "$(stat -c %U "$B/u/first")" = pcfs-u1 ] || fail "the create was not the caller's: $(stat -c %U "$B/u/first")"

# Uid:/Gid: lines: real, effective, saved, file system.
for st in /proc/"$pid"/task/*/status; do
	for k in Uid Gid; do
		ids=$(awk -v k="$k:" '$1 == k { print $2, $3, $4, $5 }' "$st")
		[ "$ids" = "0 0 0 0" ] || fail "daemon thread $st has $k $ids after a user's create"
	done
done

head -c 300000 /dev/urandom >"$M/big" && chmod 4755 "$M/big" || fail "write big"
head -c 1000 /dev/urandom >"$M/small" && chmod 6755 "$M/small" || fail "write small"
pcfs_umount "$M"
[ "$(stat -c %a "$B/big")" = 4755 ] || fail "big lost its set-user-ID bit in write-back: $(stat -c %a "$B/big")"
[ "$(stat -c %a "$B/small")" = 6755 ] || fail "small lost its set-ID bits in write-back: $(stat -c %a "$B/small")"
echo "credthreads: ok"
