#!/usr/bin/env bash
# statsfile.sh - -o stats_file is written by the daemon (root here) through
# a descriptor of its directory opened at start, never through its path
# again (stats.c): an unprivileged user (made with useradd if missing)
# who owns a directory on the path cannot move the write elsewhere.
#   - the user renames the file's directory away and puts a symlink to a
#     root-owned directory in its place: kill -USR1 writes the counters
#     into the directory that was opened (now under the new name), and
#     nothing into the symlink's target;
#   - the same with a new real directory in its place;
#   - a symlink the user puts at the file's name (the directory is the
#     user's) is replaced by the stats file, not followed: its target is
#     unchanged;
#   - the exit's counters and unmount_status land there too, mode 0600,
#     root's.
. "$(dirname "$0")/lib.sh"
need_fuse
need_cmd setpriv useradd
setup_scratch pcfs-statsfile
B=$T/back M=$T/mnt
id -u pcfs-fds-a >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin pcfs-fds-a ||
	fail "useradd pcfs-fds-a"
# user_a CMD...: CMD as the user in $T/home, reached as root first (the
# user needs no way through $T's parents).
user_a() {
	(cd "$T/home" && setpriv --reuid="$(id -u pcfs-fds-a)" --regid="$(id -g pcfs-fds-a)" --clear-groups -- "$@")
}

# $T/home is the user's; the stats file is $T/home/d/stats; $T/target is
# root's (think /etc), and $T/victim a root file the user must not get
# the daemon to overwrite.
mkdir -p "$T/home/d" "$T/target"
chown -R pcfs-fds-a: "$T/home"
echo precious >"$T/victim"
F=$T/home/d/stats
pcfs_mount "$B" "$M" -o stats_file="$F"
[ -f "$F" ] && [ ! -s "$F" ] || fail "no empty $F after mounting"
pid=$(pgrep -f "pcfs -o stats_file=$F $B $M\$" | head -1)
[ -n "$pid" ] || fail "no daemon pid"
echo hello >"$M/f"

# usr1 FILE: kill -USR1, and wait until FILE has the counters.
usr1() {
	rm -f "$1" 2>/dev/null || true
	kill -USR1 "$pid"
	wait_for 5 grep -q '^fuse_write_bytes ' "$1" 2>/dev/null || fail "kill -USR1: no counters in $1"
}

# The directory renamed away, a symlink to a root directory in its place.
user_a sh -ec "mv d d.old && ln -s '$T/target' d && rm -f d.old/stats && ln -s '$T/victim' d.old/stats" ||
	fail "the user could not rename its directory and make the symlinks"
kill -USR1 "$pid"
# written() : the counters are somewhere, here or where they must not be.
written() {
	[ -n "$(ls -A "$T/target")" ] || [ "$(cat "$T/victim")" != precious ] ||
		{ [ ! -L "$T/home/d.old/stats" ] && grep -q '^fuse_write_bytes ' "$T/home/d.old/stats"; }
}
wait_for 5 written || fail "kill -USR1: no counters anywhere"
[ -z "$(ls -A "$T/target")" ] || fail "the write followed the symlinked directory: $(ls -A "$T/target")"
[ "$(cat "$T/victim")" = precious ] || fail "the write followed the symlink at the file's name"
[ ! -L "$T/home/d.old/stats" ] || fail "the symlink at the name was not replaced by the stats file"
echo "directory renamed and symlinked, symlink at the name: written in the directory opened at start"

# A new real directory in its place.
user_a sh -ec "rm d && mkdir d" || fail "the user could not replace the symlink"
usr1 "$T/home/d.old/stats"
[ -z "$(ls -A "$T/home/d")" ] || fail "the write went to the new directory: $(ls -A "$T/home/d")"
[ "$(stat -c '%a %u' "$T/home/d.old/stats")" = "600 0" ] ||
	fail "stats file mode and owner $(stat -c '%a %u' "$T/home/d.old/stats")"
echo "directory replaced by another: written in the directory opened at start, mode 600, root's"

pcfs_umount "$M"
grep -q '^unmount_status 0$' "$T/home/d.old/stats" || fail "exit: no unmount_status 0 in d.old/stats"
[ -z "$(ls -A "$T/home/d")" ] && [ -z "$(ls -A "$T/target")" ] || fail "exit: written elsewhere"
# Nothing left behind but the file itself (no temporary files).
[ "$(ls -A "$T/home/d.old")" = stats ] || fail "left in the directory: $(ls -A "$T/home/d.old")"
echo "exit: unmount_status 0 in the directory opened at start"
echo "statsfile: ok"
