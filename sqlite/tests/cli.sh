#!/usr/bin/env bash
# cli.sh - Debian's sqlite3 program through the VFS (ctest sqlite_cli):
# cli_script.sql (schema, inserts, indexes, VACUUM, ATTACH of a second
# database and a transaction over both, .dump and a restore with .read)
# runs once loaded with the extension (.load, then .open of a URI with
# vfs=pagecache) and once on the default VFS, each in a directory of its
# own; the printed output, the dumps and what plain sqlite3 then reads
# from the files must be the same.
#
#   EXT=path/to/libpagecache_sqlite.so PC_TEST_DIR=dir cli.sh
#
# ASAN_PRELOAD (the ASan build): the runtime the extension needs in an
# sqlite3 that was not built with it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${EXT:?EXT=path of libpagecache_sqlite.so}"
top=${PC_TEST_DIR:-.}/sqlite-cli
rm -rf "$top"
mkdir -p "$top/pc" "$top/plain"

fail() { echo "sqlite_cli: $*" >&2; exit 1; }

run_sqlite3() {
	if [ -n "${ASAN_PRELOAD:-}" ]; then
		LD_PRELOAD=$ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0 sqlite3 "$@"
	else
		sqlite3 "$@"
	fi
}

sed 's/@VFS@/?vfs=pagecache/g' "$here/cli_script.sql" > "$top/pc/script.sql"
sed 's/@VFS@//g' "$here/cli_script.sql" > "$top/plain/script.sql"

# The form that works with Debian's sqlite3 3.40: .load first, then .open
# (a database named on the command line is opened inside .load, before
# the VFS exists: "no such vfs").
(cd "$top/pc" && run_sqlite3 -cmd ".load $EXT" -cmd ".open file:main.db?vfs=pagecache" \
	< script.sql > out.txt 2> err.txt) || { cat "$top/pc/err.txt" >&2; fail "the run through the VFS failed"; }
(cd "$top/plain" && sqlite3 -cmd ".open file:main.db" < script.sql > out.txt 2> err.txt) ||
	{ cat "$top/plain/err.txt" >&2; fail "the run on the default VFS failed"; }

[ -s "$top/pc/out.txt" ] || fail "no output through the VFS"
grep -qx ok "$top/pc/out.txt" || fail "no integrity_check ok through the VFS"
for f in out.txt err.txt dump-main.sql dump-restored.sql; do
	diff -u "$top/plain/$f" "$top/pc/$f" >&2 || fail "$f differs between the default VFS and pagecache"
done

# The files written through the VFS, read by plain sqlite3.
for db in main.db second.db restored.db; do
	a=$(cd "$top/pc" && sqlite3 "$db" .dump) || fail "plain sqlite3 cannot read $db written through the VFS"
	b=$(cd "$top/plain" && sqlite3 "$db" .dump)
	[ "$a" = "$b" ] || fail "$db: plain sqlite3 reads another database than the default VFS wrote"
	[ "$(cd "$top/pc" && sqlite3 "$db" 'PRAGMA integrity_check')" = ok ] || fail "$db: integrity_check"
done

# Through the VFS at all: its counters say it wrote.
w=$(cd "$top/pc" && run_sqlite3 -cmd ".load $EXT" -cmd ".open file:main.db?vfs=pagecache" :memory: \
	'PRAGMA pagecache_stats=hit_bytes' '.vfsname')
[ "$(echo "$w" | tail -n 1)" = pagecache ] || fail ".vfsname says: $w"
echo "sqlite_cli: $(wc -l < "$top/pc/out.txt") lines of output and the dumps the same; passed"
