#!/usr/bin/env bash
# flush.sh - what close(2) does on a pcfs mount (FUSE FLUSH):
#   - by default it does not wait: the data reaches the backing file later,
#     written by the flusher, with no fsync;
#   - with -o close_to_open the data is in the backing file when close(2)
#     returns;
#   - on a full backing file system the error reaches the program (write,
#     fsync or close fails with ENOSPC), on both mounts, and nothing hangs;
#     once there is room again the same program succeeds.
# The backing directory is a 4 MiB tmpfs, so that it can be filled.
. "$(dirname "$0")/lib.sh"
need_fuse
setup_scratch pcfs-flush
B=$T/back D=$T/mnt C=$T/cto
mkdir -p "$B" "$D" "$C"
mount -t tmpfs -o size=4M pcfs-flush "$B" || fail "cannot mount a tmpfs"
MOUNTS+=("$B") # unmounted last, after the pcfs mounts (cleanup's order)
head -c 5000 /dev/urandom >"$T/data"

pcfs_mount "$B" "$C" -o close_to_open
pcfs_mount "$B" "$D"
# Mounted after B in MOUNTS but must go first: put B at the end.
MOUNTS=("$C" "$D" "$B")

# same FILE: the backing copy holds exactly the data.
same() { cmp -s "$T/data" "$B/$1"; }

cp "$T/data" "$C/a"
same a || fail "close_to_open: the data is not in the backing file when close(2) returned"
echo "close_to_open: in the backing file at close"

cp "$T/data" "$D/b"
wait_for 10 same b || fail "default mount: the data did not reach the backing file (no fsync)"
echo "default: written back by the flusher, no fsync"

# Its mtime is put on the backing file once settled (a stat through the
# mount asks for it); the data stays cached: reading it again reads
# nothing from the device.
want=$(stat -c %y "$D/b")
mtime_shown() {
	stat "$D/b" >/dev/null
	[ "$(stat -c %y "$B/b")" = "$want" ]
}
wait_for 10 mtime_shown || fail "the backing file's mtime $(stat -c %y "$B/b") is not the one shown, $want"
reads=$(stat_field "$D" dev_read_ios)
cmp -s "$T/data" "$D/b" || fail "reading b back through the mount"
[ "$(stat_field "$D" dev_read_ios)" = "$reads" ] || fail "reading b back read the device (the cached data was dropped)"
echo "default: mtime on the backing file, data still cached"

# Fill the backing file system behind pcfs's back.
dd if=/dev/zero of="$B/fill" bs=64k 2>/dev/null || true
for m in "$C" "$D"; do
	rc=0
	timeout 60 dd if="$T/data" of="$m/full" bs=5000 count=1 conv=fsync 2>"$T/err" || rc=$?
	[ "$rc" -ne 124 ] || fail "$m: dd on a full backing file system hung"
	[ "$rc" -ne 0 ] || fail "$m: dd on a full backing file system succeeded"
	grep -q "No space left" "$T/err" || { cat "$T/err"; fail "$m: want ENOSPC"; }
	echo "$m: full backing file system: $(head -n 1 "$T/err")"
	rm -f "$m/full"
done
# Without fsync: close_to_open's close reports the error; on the default
# mount close may not know it yet, and then the next fsync of the file
# (through a new descriptor: sync FILE) reports it.
rc=0
timeout 60 dd if="$T/data" of="$C/full" bs=5000 count=1 2>"$T/err" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "No space left" "$T/err" ||
	{ cat "$T/err"; fail "close_to_open: close on a full backing file system: status $rc, want ENOSPC"; }
echo "close_to_open, no fsync: $(head -n 1 "$T/err")"
rm -f "$C/full"
rc=0
timeout 60 dd if="$T/data" of="$D/full" bs=5000 count=1 2>"$T/err" || rc=$?
[ "$rc" -ne 124 ] || fail "default mount: dd without fsync hung"
if [ "$rc" -eq 0 ]; then
	rc=0
	timeout 60 sync "$D/full" 2>"$T/err" || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "default mount: the write error was lost (close and a later fsync both succeeded)"
fi
grep -q "No space left" "$T/err" || { cat "$T/err"; fail "default mount: want ENOSPC"; }
echo "default, no fsync: $(head -n 1 "$T/err")"
rm -f "$D/full"
rm -f "$B/fill"
for m in "$C" "$D"; do
	dd if="$T/data" of="$m/again" bs=5000 count=1 conv=fsync 2>"$T/err" || { cat "$T/err"; fail "$m: dd after space was freed"; }
	same again || fail "$m: the data written after space was freed is not in the backing file"
	rm -f "$m/again"
done
echo "room again: written"
pcfs_umount "$C"
pcfs_umount "$D"
umount "$B"
echo "flush: ok"
