#!/usr/bin/env bash
# stats.sh - the counters where the user of a daemonised pcfs (stderr is
# /dev/null, maybe no syslog) can read them: MOUNTPOINT/.pcfs-stats (mode
# 0400, the mount owner's), and -o stats_file=PATH, made empty at mount,
# rewritten by kill -USR1 (mode 0600, other users cannot read it) and at
# exit with the last counters and unmount_status.
. "$(dirname "$0")/lib.sh"
need_fuse
setup_scratch pcfs-stats
B=$T/back M=$T/mnt F=$T/st/stats
mkdir -p "$T/st"
pcfs_mount "$B" "$M" -o stats_file="$F"
[ -f "$F" ] && [ ! -s "$F" ] || fail "-o stats_file: no empty $F after mounting"

head -c 1000000 /dev/urandom >"$T/data"
cp "$T/data" "$M/f"
cmp "$T/data" "$M/f" || fail "reading f back"
[ "$(stat -c '%a %u' "$M/.pcfs-stats")" = "400 $(id -u)" ] || fail ".pcfs-stats: $(stat -c '%a %u' "$M/.pcfs-stats")"
[ "$(stat_field "$M" fuse_write_bytes)" = 1000000 ] || fail ".pcfs-stats: fuse_write_bytes $(stat_field "$M" fuse_write_bytes)"

# field NAME: a counter from the stats file.
field() { awk -v k="$1" '$1 == k { print $2 }' "$F"; }
pid=$(pgrep -f "pcfs -o stats_file=$F $B $M\$" | head -1)
[ -n "$pid" ] || fail "no daemon pid"
kill -USR1 "$pid"
wait_for 5 test -s "$F" || fail "kill -USR1: nothing in $F"
[ "$(field fuse_write_bytes)" = 1000000 ] || fail "stats_file: fuse_write_bytes '$(field fuse_write_bytes)'"
[ "$(field hit_bytes)" -ge 1000000 ] || fail "stats_file: hit_bytes '$(field hit_bytes)', want the read back"
for k in dirty_bytes dev_read_ios dev_write_bytes edge_kept edge_completed rmw_reads write_errors; do
	[ -n "$(field $k)" ] || fail "stats_file: no $k"
done
[ "$(stat -c '%a %u' "$F")" = "600 $(id -u)" ] || fail "stats_file: mode and owner $(stat -c '%a %u' "$F")"
if setpriv --reuid=65534 --regid=65534 --clear-groups cat "$F" >/dev/null 2>&1; then
	fail "another user read the stats file"
fi
echo "kill -USR1: $(wc -l <"$F") lines in $F, mode 600"

pcfs_umount "$M"
[ "$(field unmount_status)" = 0 ] || fail "stats_file at exit: unmount_status '$(field unmount_status)'"
echo "exit: unmount_status 0 in $F"
echo "stats: ok"
