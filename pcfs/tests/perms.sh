#!/usr/bin/env bash
# perms.sh RULE - one of the kernel's permission rules, through a pcfs
# mount (root daemon, -o allow_other) and on the backing file system:
# perms.py RULE sets up the same files in a directory of each, runs the
# rule's calls as two unprivileged users (pcfs-u1, in the supplementary
# group pcfs-g, then pcfs-u2), and lists the files afterwards; the outputs
# must be the same line by line.  RULE: create, open, truncate, chmod,
# chown, setid, sticky, acl, xattr, race (an O_CREAT that finds a file
# made meanwhile on the backing file system); quota and reserved, on a loop ext4
# with user quotas on (pcfs-u1 may use 512 KiB) or with half its blocks
# reserved (for uid 65534), where pcfs-u1's write must fail: the error is
# compared, not whether write, fsync or close gave it (with a cache it
# comes at fsync or close).  setid mounts with -o suid (pcfs's default,
# libfuse's, is nosuid) to run a set-user-ID program.
# The users and group are made (useradd, groupadd) if missing, and kept.
. "$(dirname "$0")/lib.sh"
RULE=${1:?usage: perms.sh RULE}
need_fuse
need_cmd python3 setpriv useradd groupadd setfacl
case $RULE in quota) need_cmd mkfs.ext4 setquota ;; reserved) need_cmd mkfs.ext4 tune2fs ;; esac
PY=$(cd "$(dirname "$0")" && pwd)/perms.py
# The users' python: root's PATH may lead to one of root's own (pyenv).
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || skip "no $PYTHON"

getent group pcfs-g >/dev/null || groupadd --system pcfs-g
for u in pcfs-u1 pcfs-u2; do
	id "$u" >/dev/null 2>&1 ||
		useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$u"
done
id -nG pcfs-u1 | grep -qw pcfs-g || usermod -a -G pcfs-g pcfs-u1

setup_scratch "pcfs-perms-$RULE"
chmod 755 "$T"
# The users must reach the scratch directory.
setpriv --reuid=pcfs-u2 --regid=pcfs-u2 --clear-groups -- test -x "$T" ||
	skip "$T is not reachable by other users"

# quota and reserved: a small ext4 on a loop device.
FS=$T
if [ "$RULE" = quota ] || [ "$RULE" = reserved ]; then
	truncate -s 64M "$T/img"
	OPTS=loop
	if [ "$RULE" = quota ]; then
		mkfs.ext4 -q -F -O quota "$T/img" || fail "mkfs.ext4 -O quota"
		OPTS=loop,usrquota
	else
		# Half of it reserved, for uid 65534 alone: not for root (the
		# daemon) without CAP_SYS_RESOURCE.
		mkfs.ext4 -q -F -m 50 "$T/img" && tune2fs -u 65534 "$T/img" >/dev/null || fail "mkfs.ext4 -m 50"
	fi
	mkdir "$T/fs"
	if ! mount -o "$OPTS" "$T/img" "$T/fs" 2>"$T/mount.err"; then
		# A kernel without quota support says so in its log; only that
		# is a skip in CI, any other mount failure is the test's.
		noquota=$(dmesg 2>/dev/null | grep -o 'kernel was not built with CONFIG_QUOTA.*' | tail -1)
		[ "$RULE" != quota ] || [ -z "$noquota" ] || skip_kernel "$noquota"
		skip "cannot mount an ext4 with $RULE on a loop device here: $(cat "$T/mount.err")"
	fi
	LOOP_FS=$T/fs
	chmod 755 "$T/fs"
	[ "$RULE" != quota ] || setquota -u pcfs-u1 0 512 0 0 "$T/fs" || fail "setquota"
	FS=$T/fs
fi
B=$FS/back M=$T/mnt REF=$FS/ref
mkdir -p "$REF/run" "$B/run"
chmod 755 "$REF" "$B" "$REF/run" "$B/run"
"$PYTHON" "$PY" "$RULE" setup "$REF/run"
"$PYTHON" "$PY" "$RULE" setup "$B/run"
SUID=()
[ "$RULE" != setid ] || SUID=(-o suid)
pcfs_mount "$B" "$M" -o allow_other "${SUID[@]}"
# cleanup unmounts in order: the loop file system after pcfs.
[ -z "${LOOP_FS:-}" ] || MOUNTS+=("$LOOP_FS")

if [ "$RULE" = reserved ]; then
	# Where root may use reserved blocks (not every kernel lets it: this
	# rule's ENOSPC alone cannot tell), the daemon must not: no thread of
	# it has CAP_SYS_RESOURCE (bit 24) in its effective or permitted set.
	pid=$(pgrep -f "pcfs.* $M\$") || fail "no pcfs daemon for $M"
	for st in /proc/$pid/task/*/status; do
		for set in CapEff CapPrm; do
			caps=$(awk -v k="$set:" '$1 == k { print $2 }' "$st")
			((((0x$caps >> 24) & 1) == 0)) || fail "pcfs thread $st has CAP_SYS_RESOURCE in $set ($caps)"
		done
	done
	echo "the daemon's $(ls /proc/$pid/task | wc -l) threads have no CAP_SYS_RESOURCE"
fi

# run DIR BACKING: the rule's calls as each user (BACKING: DIR's backing
# directory, for the race rule); then the files, as root.
run() {
	local u
	for u in pcfs-u1 pcfs-u2; do
		(cd / && PERMS_BACKING=$2 setpriv --reuid="$u" --regid="$u" --init-groups -- \
			"$PYTHON" "$PY" "$RULE" run "$1") 2>&1 ||
			return 1
	done
	"$PYTHON" "$PY" "$RULE" state "$1"
}
run "$REF/run" "$REF/run" >"$T/ref.out" || { cat "$T/ref.out"; fail "perms.py $RULE on the backing file system"; }
run "$M/run" "$B/run" >"$T/mnt.out" || { cat "$T/mnt.out"; fail "perms.py $RULE through the mount"; }
diff -u "$T/ref.out" "$T/mnt.out" || fail "$RULE: the mount differs from the backing file system"
pcfs_umount "$M"
# What reached the backing files, once pcfs has written everything back.
"$PYTHON" "$PY" "$RULE" state "$B/run" >"$T/back.out"
"$PYTHON" "$PY" "$RULE" state "$REF/run" >"$T/ref-state.out"
diff -u "$T/ref-state.out" "$T/back.out" || fail "$RULE: the backing files after unmount differ"
grep "^$RULE " "$T/mnt.out"
echo "perms $RULE: $(grep -c "^$RULE " "$T/mnt.out") calls and $(wc -l <"$T/back.out") files, the same as on the backing file system"
