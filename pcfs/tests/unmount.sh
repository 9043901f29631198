#!/usr/bin/env bash
# unmount.sh - data still only cached when the mount ends: written back
# before the daemon exits, whatever ends it (fusermount3 -u right after the
# writes, SIGTERM, SIGINT, two SIGTERMs), with the mtimes `cp -a` set, and
# exit status 0; data that cannot be written (a full backing file system)
# gives a line on stderr and exit status 1.  pcfs runs with -f here, so
# that its exit status and stderr can be seen.
. "$(dirname "$0")/lib.sh"
need_fuse
setup_scratch pcfs-unmount
B=$T/back M=$T/mnt S=$T/src
mkdir -p "$B" "$M" "$S"
head -c 40000000 /dev/urandom >"$S/big"
for i in $(seq 100); do head -c $((i * 700)) /dev/urandom >"$S/small$i"; done
touch -d "2001-02-03 04:05:06.789" "$S/big" "$S/small7"

# start_fg [OPTIONS]: pcfs -f in the background, its pid in PID, stderr in
# $T/err.  Started with SIGINT at its default: a non-interactive shell
# starts background jobs with SIGINT ignored, and libfuse keeps that.
start_fg() {
	env --default-signal=INT "$PCFS" -f "$@" "$B" "$M" 2>"$T/err" &
	PID=$!
	MOUNTS+=("$M")
	wait_for 10 mountpoint -q "$M" || fail "pcfs -f $* did not mount"
}

# stop HOW: end the mount (umount, TERM, INT, TERM2: a second SIGTERM during
# the write-back); the daemon's exit status in RC.
stop() {
	case $1 in
	umount) fusermount3 -u "$M" || fail "fusermount3 -u" ;;
	TERM | INT) kill -"$1" "$PID" ;;
	TERM2)
		kill -TERM "$PID"
		sleep 0.02
		kill -TERM "$PID" 2>/dev/null || true
		;;
	esac
	RC=0
	wait "$PID" || RC=$?
	! mountpoint -q "$M" || fail "$1: still mounted after the daemon exited"
}

for how in umount TERM INT TERM2; do
	rm -rf "${B:?}"/*
	start_fg
	cp -a "$S/." "$M/"
	stop "$how"
	[ "$RC" -eq 0 ] || { cat "$T/err"; fail "$how: exit status $RC, want 0"; }
	[ ! -s "$T/err" ] || { cat "$T/err"; fail "$how: stderr not empty"; }
	diff -r "$S" "$B" || fail "$how: the backing directory differs from what was written"
	for f in big small7 small50; do
		[ "$(stat -c %y "$S/$f")" = "$(stat -c %y "$B/$f")" ] ||
			fail "$how: mtime of $f on the backing file $(stat -c %y "$B/$f"), want $(stat -c %y "$S/$f")"
	done
	echo "$how: everything written back, mtimes kept, exit status 0"
done

# A backing file system with no room: the data written through the mount
# is only cached; at unmount it cannot be written, and -o stats_file says
# so too (a daemon's stderr is /dev/null).
rm -rf "${B:?}"/*
mount -t tmpfs -o size=4M pcfs-unmount "$B" || fail "cannot mount a tmpfs"
dd if=/dev/zero of="$B/fill" bs=4k 2>/dev/null || true
start_fg -o stats_file="$T/stats"
MOUNTS=("$M" "$B") # the pcfs mount goes first at cleanup
head -c 300000 /dev/urandom >"$M/late" 2>/dev/null || true
stop umount
[ "$RC" -eq 1 ] || { cat "$T/err"; fail "full backing fs: exit status $RC, want 1"; }
grep -q "could not be written back at unmount: No space left" "$T/err" ||
	{ cat "$T/err"; fail "full backing fs: no line saying the data could not be written"; }
grep -qx "unmount_status 1" "$T/stats" && grep -q "^unmount_error data could not be written back" "$T/stats" ||
	{ cat "$T/stats"; fail "full backing fs: stats_file has no unmount_status 1 and unmount_error"; }
echo "full backing file system: $(grep "could not" "$T/err"), exit status 1"
umount "$B"
echo "unmount: ok"
