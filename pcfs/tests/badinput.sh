#!/usr/bin/env bash
# badinput.sh - bad options and paths (one line on stderr, exit status 1,
# nothing mounted), a path escape through a symlink in the backing
# directory, and kill -9 of the daemon: fusermount3 -u cleans the mount and
# a remount finds the fsynced data.
. "$(dirname "$0")/lib.sh"
need_fuse
setup_scratch pcfs-badinput
# The mount one level deeper than the backing directory: a relative link
# that climbs out of the backing directory lands elsewhere in the mount.
B=$T/back M=$T/m/mnt
mkdir -p "$B" "$M"

# refuse WHY ARGS...: exit 1, one line on stderr, nothing mounted at $M.
refuse() {
	local why=$1 rc=0
	shift
	"$PCFS" "$@" >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq 1 ] || fail "$why: exit status $rc, want 1 ($*)"
	[ "$(wc -l <"$T/err")" -eq 1 ] || { cat "$T/err"; fail "$why: want one line on stderr"; }
	grep -q '^pcfs: ' "$T/err" || fail "$why: message does not start with 'pcfs: '"
	if mountpoint -q "$M"; then fusermount3 -u "$M"; fail "$why: mounted anyway"; fi
	echo "refused ($why): $(cat "$T/err")"
}
# refuse_says WHY TEXT ARGS...: refused, and the line says TEXT (the option
# and its limit).
refuse_says() {
	local why=$1 text=$2
	shift 2
	refuse "$why" "$@"
	grep -qF -- "$text" "$T/err" || fail "$why: the line does not say '$text'"
}
touch "$T/file"
refuse "unknown option" -o bogus "$B" "$M"
# FUSE options pcfs does not pass on: max_read= made INIT fail after pcfs
# had exited 0 (a dead mount); the others fuse_session_new refuses.
refuse_says "max_read" "-o max_read=65536: pcfs sets the request size itself" -o max_read=65536 "$B" "$M"
refuse_says "max_background" "-o max_background=8: not taken by" -o max_background=8 "$B" "$M"
refuse_says "congestion_threshold" "-o congestion_threshold=4: not taken by" -o congestion_threshold=4 "$B" "$M"
refuse "unknown flag" --bogus "$B" "$M"
refuse "bad memory" -o memory=lots "$B" "$M"
refuse "bad uncached" -o uncached=sometimes "$B" "$M"
refuse "bad threads" -o threads=many "$B" "$M"
# Every size out of its range: the option, and the limit.
refuse_says "memory too small" "-o memory=4K is too small: at least 4M (16 times max_folio, 256K)" -o memory=4K "$B" "$M"
refuse_says "memory 0" "-o memory=0 is too small: at least 4M" -o memory=0 "$B" "$M"
refuse_says "memory too small, small folios" "-o memory=512K is too small: at least 1M" \
	-o memory=512K,max_folio=4K "$B" "$M"
refuse_says "memory too small for max_folio" "-o memory=16M is too small: at least 32M (16 times max_folio, 2M)" \
	-o max_folio=2M,memory=16M "$B" "$M"
refuse_says "memory too large" "-o memory=16T is too large: less than 16T" -o memory=16T "$B" "$M"
refuse_says "memory more than the machine has" "-o memory=8T is more than this machine can back now" \
	-o memory=8T "$B" "$M"
refuse_says "max_folio too small" "-o max_folio=2K is too small: at least 4K" -o max_folio=2K "$B" "$M"
refuse_says "max_folio too large" "-o max_folio=4M is too large: at most 2M" -o max_folio=4M "$B" "$M"
refuse_says "max_folio not a power of two" "-o max_folio=3000 is not a power of two (4K to 2M)" \
	-o max_folio=3000 "$B" "$M"
refuse_says "block too small" "-o block=256 is too small: at least 512" -o block=256 "$B" "$M"
refuse_says "block not a power of two" "-o block=100 is not a power of two (512 to 64K)" -o block=100 "$B" "$M"
refuse_says "block too large" "-o block=128K is too large: at most 64K" -o block=128K "$B" "$M"
refuse_says "block above max_folio" "-o block=32K is too large: at most 16K (max_folio, 16K)" \
	-o max_folio=16K,block=32K "$B" "$M"
refuse_says "dirty_limit too large" "-o dirty_limit=1T is too large: at most 128M (half of memory, 256M)" \
	-o dirty_limit=1T "$B" "$M"
refuse_says "dirty_limit above half of memory" "-o dirty_limit=600M is too large: at most 512M (half of memory, 1G)" \
	-o dirty_limit=600M,memory=1G "$B" "$M"
refuse_says "dirty_limit too small" "-o dirty_limit=1K is too small: at least 4K" -o dirty_limit=1K "$B" "$M"
refuse_says "threads too few" "-o threads=0 is too small: at least 1" -o threads=0 "$B" "$M"
refuse_says "threads too many" "-o threads=257 is too large: at most 256" -o threads=257 "$B" "$M"
refuse_says "stats_file empty" "-o stats_file needs a file name" -o stats_file= "$B" "$M"
refuse_says "stats_file in no directory" "-o stats_file=$T/nosuch/s: $T/nosuch:" -o stats_file="$T/nosuch/s" "$B" "$M"
refuse_says "stats_file inside MOUNTPOINT" "is inside MOUNTPOINT" -o stats_file="$M/s" "$B" "$M"
refuse_says "stats_file a directory" "-o stats_file=$T/: not a file name" -o stats_file="$T/" "$B" "$M"
refuse "no arguments"
refuse "one argument" "$B"
refuse "three arguments" "$B" "$M" "$T"
refuse "missing BACKING_DIR" "$T/nosuch" "$M"
refuse "BACKING_DIR a file" "$T/file" "$M"
refuse "missing MOUNTPOINT" "$B" "$T/nosuch"
refuse "MOUNTPOINT a file" "$B" "$T/file"
refuse "MOUNTPOINT inside BACKING_DIR" "$B" "$B"
pcfs_mount "$B" "$M"
refuse_busy() {
	local rc=0
	"$PCFS" "$B" "$M" 2>"$T/err" || rc=$?
	[ "$rc" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] || { cat "$T/err"; fail "MOUNTPOINT in use: rc $rc"; }
	echo "refused (MOUNTPOINT in use): $(cat "$T/err")"
}
refuse_busy

# Symlink escape: a relative link in the backing directory that points out
# of it must resolve inside the mount's own tree, never reach $T/outside.
mkdir -p "$T/outside" "$B/sub"
echo secret >"$T/outside/secret"
ln -s ../outside "$B/esc"
ln -s ../../outside "$B/sub/esc2"
for p in "$M/esc/secret" "$M/sub/esc2/secret"; do
	if cat "$p" 2>/dev/null | grep -q secret; then fail "read $T/outside/secret through $p"; fi
done
(echo x >"$M/esc/new") 2>/dev/null || true
(echo x >"$M/sub/esc2/new") 2>/dev/null || true
[ ! -e "$T/outside/new" ] || fail "created a file outside BACKING_DIR through a symlink"
[ "$(readlink "$M/esc")" = ../outside ] || fail "readlink through the mount"
echo "symlink escape: refused"

# kill -9: fsynced data survives; the dead mount is cleaned by fusermount3 -u.
head -c 3000000 /dev/urandom >"$T/data"
dd if="$T/data" of="$M/synced" bs=64k conv=fsync status=none
head -c 100000 /dev/urandom >"$M/unsynced"
pid=$(pgrep -f "pcfs $B $M\$" | head -1)
[ -n "$pid" ] || fail "no daemon pid"
kill -9 "$pid"
for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
stat "$M" >/dev/null 2>&1 && fail "mount still answers after kill -9"
refuse_dead() {
	local rc=0
	"$PCFS" "$B" "$M" 2>"$T/err" || rc=$?
	[ "$rc" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] || { cat "$T/err"; fail "dead mount: rc $rc"; }
	echo "refused (dead mount): $(cat "$T/err")"
}
refuse_dead
fusermount3 -u "$M" || fail "fusermount3 -u of the dead mount"
mountpoint -q "$M" && fail "still mounted after fusermount3 -u"
pcfs_mount "$B" "$M"
cmp "$T/data" "$M/synced" || fail "fsynced data lost after kill -9"
pcfs_umount "$M"
echo "kill -9: fsynced data kept, mount cleaned"
echo "badinput: all passed"
