#!/usr/bin/env bash
# programs.sh - real programs through a pcfs mount, each compared with the
# same run on the backing file system: cp -a of /usr/include and diff -r,
# tar create and extract, git init/commit/fsck, sqlite3 (rollback journal,
# and WAL with exclusive locking) with integrity_check.  PCFS_TEST=cp|tar|
# git|sqlite runs one.
. "$(dirname "$0")/lib.sh"
need_fuse
setup_scratch pcfs-programs
pcfs_mount "$T/back" "$T/mnt"
M=$T/mnt
REF=$T/ref # the same runs, on the backing file system directly
mkdir -p "$REF"
only=${PCFS_TEST:-all}
want() { [ "$only" = all ] || [ "$only" = "$1" ]; }

if want cp; then
	t0=$(date +%s.%N)
	cp -a /usr/include "$M/inc"
	diff -r --no-dereference /usr/include "$M/inc" || fail "cp -a: the copy differs from /usr/include"
	# Metadata cp -a preserved: modes, owners, mtimes, symlinks.
	(cd /usr/include && find . -printf '%p %m %U %G %T@ %l\n' | sort) >"$T/want.meta"
	(cd "$M/inc" && find . -printf '%p %m %U %G %T@ %l\n' | sort) >"$T/got.meta"
	cmp -s "$T/want.meta" "$T/got.meta" || { diff "$T/want.meta" "$T/got.meta" | head; fail "cp -a: metadata differs"; }
	echo "cp -a + diff -r of $(find /usr/include -type f | wc -l) files: $(echo "$(date +%s.%N) - $t0" | bc) s"
fi

if want tar; then
	src=/usr/include/linux
	tar -C "$src" -cf "$REF/a.tar" --sort=name --mtime=@0 --owner=0 --group=0 .
	tar -C "$src" -cf "$M/a.tar" --sort=name --mtime=@0 --owner=0 --group=0 .
	cmp "$REF/a.tar" "$M/a.tar" || fail "tar c through the mount differs from tar c on the backing fs"
	mkdir -p "$M/x" "$REF/x"
	tar -C "$M/x" -xf "$M/a.tar"
	tar -C "$REF/x" -xf "$REF/a.tar"
	diff -r "$REF/x" "$M/x" || fail "tar x differs"
	# Read back what was just extracted (data still only cached): tar must
	# not see a file change while it reads it.
	tar -C "$M/x" -cf "$M/b.tar" --sort=name . || fail "tar c of just-extracted files"
	tar -C "$REF/x" -cf "$REF/b.tar" --sort=name .
	cmp "$REF/b.tar" "$M/b.tar" || fail "tar of the extracted trees differ"
	echo "tar: ok"
fi

if want git; then
	for d in "$REF/g" "$M/g"; do
		mkdir -p "$d"
		cp -r /usr/include/linux/netfilter "$d/src"
		(cd "$d" && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm one \
			&& echo change >src/zz_new && git add -A && git -c user.name=t -c user.email=t@t commit -qm two \
			&& git gc -q && git fsck --full --strict) || fail "git in $d"
	done
	[ "$(cd "$REF/g" && git rev-parse HEAD^{tree})" = "$(cd "$M/g" && git rev-parse HEAD^{tree})" ] ||
		fail "git trees differ"
	echo "git: ok"
fi

if want sqlite; then
	sql_fill() {
		local db=$1 mode=$2
		{
			echo "$mode"
			echo "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);"
			for i in $(seq 50); do
				echo "BEGIN;"
				for j in $(seq 40); do echo "INSERT INTO t(v) VALUES (printf('%0500d', $i * 1000 + $j));"; done
				echo "UPDATE t SET v = v || 'x' WHERE k % 7 = $((i % 7));"
				echo "DELETE FROM t WHERE k % 13 = $((i % 13));"
				echo "COMMIT;"
			done
			echo "PRAGMA integrity_check;"
			echo "SELECT count(*), sum(length(v)) FROM t;"
		} | sqlite3 "$db"
	}
	for mode in "PRAGMA journal_mode=DELETE;" "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL;"; do
		rm -f "$REF/db" "$M/db" "$REF"/db-* "$M"/db-*
		a=$(sql_fill "$REF/db" "$mode") || fail "sqlite3 on the backing fs ($mode)"
		b=$(sql_fill "$M/db" "$mode") || fail "sqlite3 through the mount ($mode)"
		[ "$a" = "$b" ] || fail "sqlite3 results differ ($mode): '$a' vs '$b'"
		echo "$b" | grep -qx ok || fail "integrity_check ($mode): $b"
		# WAL needs PRAGMA locking_mode=EXCLUSIVE on reopen too: its
		# shared-memory index would need MAP_SHARED (see pcfs/README.md).
		pre=${mode%%PRAGMA journal_mode*}
		[ "$(sqlite3 "$M/db" "$pre PRAGMA integrity_check;" | tail -1)" = ok ] || fail "reopened db ($mode)"
	done
	# The documented limit: shared WAL (MAP_SHARED of db-shm) fails cleanly.
	if sqlite3 "$M/db" 'PRAGMA journal_mode=WAL; SELECT count(*) FROM t;' >/dev/null 2>&1; then
		echo "note: shared-memory WAL worked (kernel and libfuse allow MAP_SHARED)"
	fi
	echo "sqlite3: ok"
fi

pcfs_umount "$M"
# After unmount everything is on the backing directory.
if want cp; then
	diff -r --no-dereference /usr/include "$T/back/inc" || fail "backing copy differs after unmount"
fi
echo "programs: all passed"
