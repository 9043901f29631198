/*
 * load_extension.c - sqlite3_load_extension from a program that knows
 * nothing of pagecache (ctest sqlite_load_extension): it links SQLite
 * only, loads libpagecache_sqlite.so by its path (the entry point comes
 * from the file name), opens a database with vfs=pagecache from another
 * connection than the one that loaded it (the extension stays loaded),
 * and sees the cache's counters move.
 *
 *   load_extension PATH_OF_LIBPAGECACHE_SQLITE
 */
#include "sqt.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s LIBPAGECACHE_SQLITE\n", argv[0]);
		return 2;
	}
	sqt_chdir_fresh("sqlite-load-extension");
	sqlite3 *mem, *db;
	char *err = NULL;
	REQUIRE(sqlite3_open(":memory:", &mem) == SQLITE_OK, "open :memory:");
	REQUIRE(sqlite3_enable_load_extension(mem, 1) == SQLITE_OK, "enable");
	int rc = sqlite3_load_extension(mem, argv[1], NULL, &err);
	REQUIRE(rc == SQLITE_OK, "load %s: %d %s", argv[1], rc, err ? err : "");
	sqlite3_close(mem); /* the VFS stays */
	REQUIRE(sqlite3_vfs_find("pagecache"), "no VFS pagecache after the load");
	REQUIRE(sqt_open("file:loaded.db?vfs=pagecache", &db) == SQLITE_OK, "open through the VFS");
	REQUIRE(sqt_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (42)", 1) == SQLITE_OK, "write");
	CHECK(sqt_int(db, "SELECT x FROM t") == 42, "read back");
	CHECK(sqt_int(db, "PRAGMA pagecache_stats=dev_write_bytes") > 0, "the cache wrote");
	char *vfsname = NULL;
	CHECK(sqlite3_file_control(db, "main", SQLITE_FCNTL_VFSNAME, &vfsname) == SQLITE_OK && vfsname &&
		      !strcmp(vfsname, "pagecache"),
	      "VFSNAME: %s", vfsname ? vfsname : "(none)");
	sqlite3_free(vfsname);
	CHECK(sqlite3_close(db) == SQLITE_OK, "close");
	return sqt_done("load_extension");
}
