#!/usr/bin/env bash
# crashreplace.sh - the safe-write patterns across a crash of the daemon
# (SIGKILL, as the OOM killer sends it), each round on a fresh mount whose
# daemon is then killed and its dead mount cleaned:
#   - replace: a program writes t, closes it and renames it over a, which
#     holds the previous round's content; the daemon is killed as soon as
#     the rename returned.  The backing a must be the new content, whole
#     (never empty, short or the old one: the rename was done).
#   - race: the same with the kill sent at a random moment of the write,
#     close and rename: the backing a must be the old content or the new,
#     whole, never empty or partial.
#   - truncate: a is truncated to zero and written again, by an O_TRUNC
#     open (`: >a; cat new >a`) or by ftruncate (truncate(1)) and an
#     append (`truncate -s 0 a; cat new >>a`), then closed; the daemon is killed
#     as soon as the close returned.  The backing a must be the new
#     content, whole.
# Sizes go round from 1 byte to 3 MB: small files, which close leaves to
# the flusher and the kernel's page cache, and larger ones written
# directly.  The counts of old, new and other outcomes are printed.
# CRASHREPLACE_ROUNDS (default 50) rounds of replace and of truncate,
# 20 of race.
. "$(dirname "$0")/lib.sh"
need_fuse
setup_scratch pcfs-crashreplace
B=$T/back M=$T/mnt
mkdir -p "$B" "$M"
ROUNDS=${CRASHREPLACE_ROUNDS:-50}
SIZES=(1 5 100 4095 4096 5000 40000 65536 65537 200000 1048576 3000001)

# A fresh mount; its daemon's pid in PID.
mount_fresh() {
	pcfs_mount "$B" "$M" -o memory=16M
	PID=$(pgrep -f "^$PCFS -o memory=16M $B $M\$" | head -1)
	[ -n "$PID" ] || fail "no daemon pid"
}

# Has the daemon died?  A zombie counts: it has let go of its files and
# memory (and a daemonised one waits for whoever reaps orphans here, up
# to seconds).
dead() {
	local st
	st=$(awk '{ print $3 }' "/proc/$PID/stat" 2>/dev/null) || return 0
	[ -z "$st" ] || [ "$st" = Z ]
}

# SIGKILL the daemon, wait for it to die, clean the dead mount.
crash() {
	kill -9 "$PID" 2>/dev/null || true
	wait_for 5 dead || fail "daemon $PID still alive after SIGKILL"
	fusermount3 -u "$M" 2>/dev/null || umount -l "$M" || fail "cannot clean the dead mount $M"
}

# new_content ROUND: $T/new gets the round's content; the previous round's
# (what the backing a holds) is $T/old.
new_content() {
	[ ! -e "$T/new" ] || mv "$T/new" "$T/old"
	head -c "${SIZES[$1 % ${#SIZES[@]}]}" /dev/urandom >"$T/new"
}

# outcome: old, new, empty or other, for the backing a.
outcome() {
	if cmp -s "$T/new" "$B/a"; then
		echo new
	elif cmp -s "$T/old" "$B/a"; then
		echo old
	elif [ ! -s "$B/a" ]; then
		echo empty
	else
		echo "other ($(stat -c %s "$B/a") bytes)"
	fi
}

declare -A COUNT
# tally PHASE ROUND ALLOWED...: count the outcome; fail unless allowed.
tally() {
	local phase=$1 round=$2 o
	shift 2
	o=$(outcome)
	COUNT[$phase ${o%% *}]=$((${COUNT[$phase ${o%% *}]:-0} + 1))
	local a
	for a in "$@"; do
		[ "$o" != "$a" ] || return 0
	done
	fail "$phase round $round ($(stat -c %s "$T/new") bytes): the backing a is $o after the crash, want ${*// / or }"
}

summary() {
	local phase=$1 o line="$1:"
	for o in new old empty other; do
		line+=" $o ${COUNT[$phase $o]:-0}"
	done
	echo "$line"
}

# The first old content, written and synced on the backing directory.
new_content 0
cp "$T/new" "$B/a"
sync "$B/a"

for ((r = 1; r <= ROUNDS; r++)); do
	new_content "$r"
	mount_fresh
	cat "$T/new" >"$M/t"
	mv -f "$M/t" "$M/a"
	crash
	tally replace "$r" new
done
summary replace

# ms N: N milliseconds, for sleep(1).
ms() { printf 0.%03d "$1"; }
for ((r = 1; r <= 20; r++)); do
	new_content "$r"
	mount_fresh
	(cat "$T/new" >"$M/t" && sleep "$(ms $((RANDOM % 20)))" && mv -f "$M/t" "$M/a") 2>/dev/null &
	writer=$!
	sleep "$(ms $((RANDOM % 20)))"
	crash
	wait "$writer" || true
	tally race "$r" new old
	# Old (the kill came first): the backing a holds $T/old, the base of
	# the next round.
	[ "$(outcome)" = new ] || cp "$T/old" "$T/new"
	rm -f "$B/t"
done
summary race

for ((r = 1; r <= ROUNDS; r++)); do
	new_content "$r"
	mount_fresh
	if ((r % 2)); then
		: >"$M/a"
		cat "$T/new" >"$M/a"
	else
		truncate -s 0 "$M/a"
		cat "$T/new" >>"$M/a"
	fi
	crash
	tally truncate "$r" new
done
summary truncate
echo "crashreplace: ok"
