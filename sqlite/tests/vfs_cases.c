/*
 * vfs_cases.c - the VFS's behaviour, one case per CTest (sqlite_vfs_CASE):
 *
 *   io           the methods on a file opened by the VFS's xOpen: short
 *                reads zero-filled, size, truncate, sync, sector size,
 *                device characteristics (psow=0 turns POWERSAFE off)
 *   errors       a directory as a database: SQLITE_CANTOPEN, errno kept;
 *                a bad URI parameter; a read-only open refuses writes
 *   locks        two connections of one process: RESERVED excludes a
 *                second writer, readers go on, PENDING holds off new
 *                readers, COMMIT waits for the last reader
 *   journal      a rollback journal is written uncached (drop-behind),
 *                the database cached
 *   uncached     pc_uncached=1 leaves the database's data uncached;
 *                PAGECACHE_SQLITE_UNCACHED=1 too, unless the URI says 0
 *   memory       pc_memory=16M makes a 16 MiB cache (it evicts)
 *   memory_env   PAGECACHE_SQLITE_MEMORY=16M the same
 *   memory_uri   the URI wins over the variable (128M: nothing evicted)
 *   block        pc_block=8192 makes the cache's blocks 8 KiB (the
 *                file's stats and xSectorSize say so)
 *   stats        PRAGMA pagecache_stats, =file, =NAME, an unknown name
 *   register     sqlite3_pagecache_register: default VFS, MISUSE once
 *                the cache exists
 *   wal          WAL only in exclusive locking mode; a WAL database
 *                opened without it is SQLITE_CANTOPEN; plain SQLite
 *                reads what it wrote
 *   fork         a child of fork makes its own cache, and its open of the
 *                parent's database is SQLITE_BUSY
 *   plain        plain sqlite3 (the CLI, default VFS) meets SQLITE_BUSY
 *                while the VFS has the database open and sees its data
 *                once closed; a plain reader holding a lock makes the
 *                VFS's open SQLITE_BUSY
 */
#define _GNU_SOURCE
#include "sqt.h"

#include <fcntl.h>
#include <sys/wait.h>

#include "pagecache_sqlite.h"

#define URI(name, params) "file:" name "?vfs=pagecache" params

/* A table of `mb` MiB in rows of 4000 random bytes. */
static void fill(sqlite3 *db, const char *table, int mb)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE %s(id INTEGER PRIMARY KEY, v BLOB);"
		 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
		 " INSERT INTO %s SELECT i, randomblob(4000) FROM n;",
		 table, mb * 262, table);
	REQUIRE(sqt_exec(db, sql, 1) == SQLITE_OK, "fill %s", table);
}

static long long counter(sqlite3 *db, const char *name)
{
	char sql[96];
	snprintf(sql, sizeof(sql), "PRAGMA pagecache_stats=%s", name);
	return sqt_int(db, sql);
}

/* A counter of the file's own stats ("PRAGMA pagecache_stats=file"). */
static long long file_counter(sqlite3 *db, const char *name)
{
	char text[4096];
	sqt_text(db, "PRAGMA pagecache_stats=file", text, sizeof(text));
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		size_t n = strlen(name);
		if (!strncmp(line, name, n) && line[n] == ' ')
			return atoll(line + n + 1);
	}
	return -1;
}

/* ------------------------------------------------------------ io */

static sqlite3_file *xopen(sqlite3_vfs *vfs, const char *name, int flags, int *rc)
{
	sqlite3_file *f = calloc(1, (size_t)vfs->szOsFile);
	int out = 0;
	*rc = vfs->xOpen(vfs, name, f, flags, &out);
	return f;
}

static void case_io(void)
{
	sqlite3_vfs *vfs = sqlite3_vfs_find("pagecache");
	REQUIRE(vfs, "no VFS pagecache");
	/* A name as SQLite passes it: URI parameters after it. */
	sqlite3_filename name = sqlite3_create_filename("io.db", "io.db-journal", "io.db-wal", 0, NULL);
	int rc;
	sqlite3_file *f = xopen(vfs, name, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &rc);
	REQUIRE(rc == SQLITE_OK && f->pMethods, "xOpen: %d", rc);
	const sqlite3_io_methods *m = f->pMethods;
	char buf[8192], data[100];
	memset(data, 'x', sizeof(data));
	CHECK(m->xWrite(f, data, 100, 0) == SQLITE_OK, "xWrite");
	sqlite3_int64 size = -1;
	CHECK(m->xFileSize(f, &size) == SQLITE_OK && size == 100, "size %lld", size);
	memset(buf, 0xAA, sizeof(buf));
	CHECK(m->xRead(f, buf, 200, 0) == SQLITE_IOERR_SHORT_READ, "short read at the end");
	CHECK(!memcmp(buf, data, 100), "the bytes written");
	int zeros = 1;
	for (int i = 100; i < 200; i++)
		zeros &= buf[i] == 0;
	CHECK(zeros, "a short read is zero-filled");
	CHECK((unsigned char)buf[200] == 0xAA, "nothing past amt");
	memset(buf, 0xAA, sizeof(buf));
	CHECK(m->xRead(f, buf, 4096, 4096) == SQLITE_IOERR_SHORT_READ && buf[0] == 0 && buf[4095] == 0,
	      "a read past the end: all zeros");
	CHECK(m->xTruncate(f, 50) == SQLITE_OK && m->xFileSize(f, &size) == SQLITE_OK && size == 50,
	      "truncate to 50: %lld", size);
	CHECK(m->xSync(f, SQLITE_SYNC_NORMAL) == SQLITE_OK, "sync");
	CHECK(m->xSync(f, SQLITE_SYNC_FULL | SQLITE_SYNC_DATAONLY) == SQLITE_OK, "sync data only");
	struct stat st;
	CHECK(stat("io.db", &st) == 0 && st.st_size == 50, "synced size on the backing file: %lld",
	      (long long)st.st_size);
	int sector = m->xSectorSize(f);
	CHECK(sector >= 512 && (sector & (sector - 1)) == 0, "sector size %d", sector);
	CHECK(m->xDeviceCharacteristics(f) == SQLITE_IOCAP_POWERSAFE_OVERWRITE, "device characteristics %#x",
	      m->xDeviceCharacteristics(f));
	int res = -1;
	CHECK(m->xLock(f, SQLITE_LOCK_SHARED) == SQLITE_OK && m->xLock(f, SQLITE_LOCK_RESERVED) == SQLITE_OK, "lock");
	CHECK(m->xCheckReservedLock(f, &res) == SQLITE_OK && res == 1, "reserved seen");
	CHECK(m->xLock(f, SQLITE_LOCK_EXCLUSIVE) == SQLITE_OK, "exclusive");
	CHECK(m->xUnlock(f, SQLITE_LOCK_NONE) == SQLITE_OK && m->xCheckReservedLock(f, &res) == SQLITE_OK && res == 0,
	      "unlocked");
	CHECK(m->xClose(f) == SQLITE_OK, "close");
	free(f);
	sqlite3_free_filename(name);

	const char *params[] = { "psow", "0", NULL };
	name = sqlite3_create_filename("io.db", "io.db-journal", "io.db-wal", 1, params);
	f = xopen(vfs, name, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READWRITE, &rc);
	REQUIRE(rc == SQLITE_OK, "xOpen psow=0: %d", rc);
	CHECK(f->pMethods->xDeviceCharacteristics(f) == 0, "psow=0: no POWERSAFE_OVERWRITE");
	f->pMethods->xClose(f);
	free(f);
	sqlite3_free_filename(name);
}

/* ------------------------------------------------------------ errors */

static void case_errors(void)
{
	sqlite3 *db;
	REQUIRE(mkdir("adir", 0755) == 0, "mkdir");
	int rc = sqt_open(URI("adir", ""), &db);
	if (rc == SQLITE_OK) /* SQLite opens lazily on some paths: make it read */
		rc = sqt_exec(db, "SELECT * FROM sqlite_schema", 0);
	CHECK(rc == SQLITE_CANTOPEN, "a directory: %d", rc);
	CHECK(sqlite3_system_errno(db) == EISDIR, "errno kept: %d", sqlite3_system_errno(db));
	sqlite3_close(db);

	rc = sqt_open(URI("bad.db", "&pc_memory=lots"), &db);
	CHECK(rc == SQLITE_CANTOPEN, "pc_memory=lots: %d", rc);
	sqlite3_close(db);
	rc = sqt_open(URI("bad.db", "&pc_uncached=maybe"), &db);
	CHECK(rc == SQLITE_CANTOPEN, "pc_uncached=maybe: %d", rc);
	sqlite3_close(db);

	REQUIRE(sqt_open(URI("ro.db", ""), &db) == SQLITE_OK, "open");
	REQUIRE(sqt_exec(db, "CREATE TABLE t(a); INSERT INTO t VALUES (1)", 1) == SQLITE_OK, "create");
	sqlite3_close(db);
	rc = sqlite3_open_v2(URI("ro.db", ""), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
	CHECK(rc == SQLITE_OK && sqt_int(db, "SELECT count(*) FROM t") == 1, "read-only open reads");
	CHECK(sqt_exec(db, "INSERT INTO t VALUES (2)", 0) == SQLITE_READONLY, "read-only refuses writes");
	sqlite3_close(db);
}

/* ------------------------------------------------------------ locks */

static void case_locks(void)
{
	sqlite3 *a, *b;
	REQUIRE(sqt_open(URI("locks.db", ""), &a) == SQLITE_OK && sqt_open(URI("locks.db", ""), &b) == SQLITE_OK,
		"two connections");
	REQUIRE(sqt_exec(a, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", 1) == SQLITE_OK, "create");
	CHECK(sqt_exec(a, "BEGIN IMMEDIATE", 1) == SQLITE_OK, "a: RESERVED");
	CHECK(sqt_exec(b, "BEGIN IMMEDIATE", 0) == SQLITE_BUSY, "b: a second writer is BUSY");
	CHECK(sqt_int(b, "SELECT count(*) FROM t") == 1, "b reads beside a RESERVED writer");
	CHECK(sqt_exec(a, "INSERT INTO t VALUES (2)", 1) == SQLITE_OK, "a writes");
	CHECK(sqt_exec(b, "BEGIN; SELECT count(*) FROM t", 1) == SQLITE_OK, "b: a read transaction");
	CHECK(sqt_exec(a, "COMMIT", 0) == SQLITE_BUSY, "a: COMMIT waits for b's SHARED (PENDING)");
	sqlite3 *c;
	REQUIRE(sqt_open(URI("locks.db", ""), &c) == SQLITE_OK, "c");
	CHECK(sqt_int(c, "SELECT count(*) FROM t") == -1 && sqlite3_errcode(c) == SQLITE_BUSY,
	      "c: no new reader while a is PENDING (%d)", sqlite3_errcode(c));
	CHECK(sqt_exec(b, "COMMIT", 1) == SQLITE_OK, "b ends its read");
	CHECK(sqt_exec(a, "COMMIT", 1) == SQLITE_OK, "a commits now");
	CHECK(sqt_int(b, "SELECT count(*) FROM t") == 2 && sqt_int(c, "SELECT count(*) FROM t") == 2,
	      "both see the commit");
	sqlite3_close(c);
	sqlite3_close(b);
	sqlite3_close(a);
}

/* ------------------------------------------------------------ journal */

static void case_journal(void)
{
	sqlite3 *db;
	REQUIRE(sqt_open(URI("journal.db", ""), &db) == SQLITE_OK, "open");
	fill(db, "t", 8);
	long long drops0 = counter(db, "dropbehind_drops"), cached0 = file_counter(db, "cached_bytes");
	CHECK(cached0 >= 8ll << 20, "the database is cached: %lld", cached0);
	/* Rewrite every page: the journal holds the whole old table. */
	REQUIRE(sqt_exec(db, "UPDATE t SET v = randomblob(4000)", 1) == SQLITE_OK, "update");
	long long drops = counter(db, "dropbehind_drops") - drops0;
	CHECK(drops >= 1, "the journal's folios were dropped behind: %lld", drops);
	CHECK(access("journal.db-journal", F_OK) != 0, "the journal is deleted at commit");
	CHECK(file_counter(db, "cached_bytes") >= 8ll << 20, "the database stays cached");
	sqlite3_close(db);
}

/* ------------------------------------------------------------ settings */

/* The database's cached bytes after 8 MiB written through `uri`. */
static long long cached_after_fill(const char *uri)
{
	sqlite3 *db;
	REQUIRE(sqt_open(uri, &db) == SQLITE_OK, "open %s", uri);
	fill(db, "t", 8);
	long long cached = file_counter(db, "cached_bytes");
	sqlite3_close(db);
	return cached;
}

static void case_uncached(void)
{
	long long c0 = cached_after_fill(URI("cached.db", ""));
	long long c1 = cached_after_fill(URI("uncached.db", "&pc_uncached=1"));
	CHECK(c0 >= 8ll << 20, "pc_uncached absent: cached %lld", c0);
	CHECK(c1 < 1ll << 20, "pc_uncached=1: cached %lld", c1);
	setenv("PAGECACHE_SQLITE_UNCACHED", "1", 1);
	long long c2 = cached_after_fill(URI("env.db", ""));
	long long c3 = cached_after_fill(URI("envuri.db", "&pc_uncached=0"));
	CHECK(c2 < 1ll << 20, "PAGECACHE_SQLITE_UNCACHED=1: cached %lld", c2);
	CHECK(c3 >= 8ll << 20, "the URI's pc_uncached=0 wins: cached %lld", c3);
}

/* 40 MiB written and read through the first open's `uri`: evictions. */
static long long evictions_after(const char *uri, long long limit)
{
	sqlite3 *db;
	REQUIRE(sqt_open(uri, &db) == SQLITE_OK, "open %s", uri);
	fill(db, "t", 40);
	CHECK(sqt_int(db, "SELECT sum(length(v)) FROM t") == 40ll * 262 * 4000, "read back");
	long long ev = counter(db, "evictions"), cached = counter(db, "cached_bytes");
	printf("%s: evictions %lld, cached %lld\n", uri, ev, cached);
	CHECK(cached >= 0 && cached <= limit, "cached %lld, the limit %lld", cached, limit);
	sqlite3_close(db);
	return ev;
}

static void case_memory(void)
{
	CHECK(evictions_after(URI("mem.db", "&pc_memory=16M"), 16 << 20) > 0, "a 16 MiB cache evicts");
}

static void case_memory_env(void)
{
	setenv("PAGECACHE_SQLITE_MEMORY", "16M", 1);
	CHECK(evictions_after(URI("mem.db", ""), 16 << 20) > 0, "a 16 MiB cache evicts");
}

static void case_memory_uri(void)
{
	setenv("PAGECACHE_SQLITE_MEMORY", "16M", 1);
	CHECK(evictions_after(URI("mem.db", "&pc_memory=128M"), 128 << 20) == 0, "the URI's 128 MiB: no eviction");
}

/* The block size a connection's database file has in the cache. */
static int sector_size(sqlite3 *db)
{
	sqlite3_file *f = NULL;
	if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK || !f || !f->pMethods)
		return -1;
	return f->pMethods->xSectorSize(f);
}

static void case_block(void)
{
	sqlite3 *db;
	REQUIRE(sqt_open(URI("block.db", "&pc_block=8192"), &db) == SQLITE_OK, "open");
	REQUIRE(sqt_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", 1) == SQLITE_OK, "create");
	CHECK(file_counter(db, "block_size") == 8192, "the file's block size: %lld", file_counter(db, "block_size"));
	CHECK(sector_size(db) == 8192, "xSectorSize %d", sector_size(db));
	sqlite3_close(db);
}

/* ------------------------------------------------------------ stats */

static void case_stats(void)
{
	sqlite3 *db;
	REQUIRE(sqt_open(URI("stats.db", ""), &db) == SQLITE_OK, "open");
	fill(db, "t", 1);
	long long hits0 = counter(db, "hit_bytes");
	CHECK(hits0 >= 0, "hit_bytes: %lld", hits0);
	REQUIRE(sqt_exec(db, "PRAGMA cache_size=0", 1) == SQLITE_OK, "no SQLite page cache");
	CHECK(sqt_int(db, "SELECT count(*) FROM t WHERE length(v) = 4000") == 262, "read");
	CHECK(counter(db, "hit_bytes") > hits0 + (1 << 20) / 2, "reads counted: %lld -> %lld", hits0,
	      counter(db, "hit_bytes"));
	char text[4096];
	sqt_text(db, "PRAGMA pagecache_stats", text, sizeof(text));
	CHECK(strstr(text, "\nhit_bytes ") && strstr(text, "\ndev_write_bytes "), "all counters: %s", text);
	CHECK(file_counter(db, "dev_write_bytes") > 1 << 20, "the file's own: %lld",
	      file_counter(db, "dev_write_bytes"));
	char *err = NULL;
	CHECK(sqlite3_exec(db, "PRAGMA pagecache_stats=nonesuch", NULL, NULL, &err) == SQLITE_ERROR && err &&
		      strstr(err, "nonesuch"),
	      "an unknown counter: %s", err ? err : "(no message)");
	sqlite3_free(err);
	sqlite3_close(db);
}

/* ------------------------------------------------------------ register */

static void case_register(void)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 32u << 20;
	CHECK(sqlite3_pagecache_register(&cfg, 1) == SQLITE_OK, "register as the default");
	CHECK(!strcmp(sqlite3_vfs_find(NULL)->zName, "pagecache"), "the default VFS");
	sqlite3 *db;
	REQUIRE(sqlite3_open("plain-name.db", &db) == SQLITE_OK, "open without a URI");
	REQUIRE(sqt_exec(db, "CREATE TABLE t(x)", 1) == SQLITE_OK, "create");
	CHECK(counter(db, "dev_write_bytes") > 0, "through the cache");
	CHECK(sqlite3_pagecache_register(&cfg, 0) == SQLITE_MISUSE, "a configuration once the cache exists");
	CHECK(sqlite3_pagecache_register(NULL, 0) == SQLITE_OK, "registering again without one");
	CHECK(strcmp(sqlite3_vfs_find(NULL)->zName, "pagecache") != 0, "no longer the default");
	sqlite3_close(db);
}

/* ------------------------------------------------------------ wal */

static void case_wal(void)
{
	sqlite3 *db;
	char mode[32];
	REQUIRE(sqt_open(URI("wal.db", ""), &db) == SQLITE_OK, "open");
	CHECK(!strcmp(sqt_text(db, "PRAGMA journal_mode=WAL", mode, sizeof(mode)), "delete"),
	      "WAL refused in the normal locking mode: %s", mode);
	sqlite3_close(db);
	REQUIRE(sqt_open(URI("wal.db", ""), &db) == SQLITE_OK, "open");
	CHECK(!strcmp(sqt_text(db, "PRAGMA locking_mode=EXCLUSIVE", mode, sizeof(mode)), "exclusive"), "%s", mode);
	CHECK(!strcmp(sqt_text(db, "PRAGMA journal_mode=WAL", mode, sizeof(mode)), "wal"), "WAL: %s", mode);
	fill(db, "t", 4);
	CHECK(access("wal.db-wal", F_OK) == 0 && access("wal.db-shm", F_OK) != 0, "a WAL, no -shm");
	CHECK(sqt_exec(db, "DELETE FROM t WHERE id % 2 = 0", 1) == SQLITE_OK, "delete");
	CHECK(sqt_int(db, "SELECT count(*) FROM t") == 4 * 262 / 2, "count");
	sqlite3_close(db);

	REQUIRE(sqt_open(URI("wal.db", ""), &db) == SQLITE_OK, "open");
	CHECK(sqt_exec(db, "SELECT count(*) FROM t", 0) == SQLITE_CANTOPEN,
	      "a WAL database without exclusive mode: SQLITE_CANTOPEN (%d)", sqlite3_errcode(db));
	sqlite3_close(db);
	REQUIRE(sqlite3_open_v2("wal.db", &db, SQLITE_OPEN_READWRITE, "unix") == SQLITE_OK, "plain");
	CHECK(sqt_int(db, "SELECT count(*) FROM t") == 4 * 262 / 2, "plain SQLite reads it");
	char ok[16];
	CHECK(!strcmp(sqt_text(db, "PRAGMA integrity_check", ok, sizeof(ok)), "ok"), "%s", ok);
	sqlite3_close(db);
}

/* ------------------------------------------------------------ fork */

static void case_fork(void)
{
	sqlite3 *db;
	REQUIRE(sqt_open(URI("parent.db", ""), &db) == SQLITE_OK, "open");
	REQUIRE(sqt_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", 1) == SQLITE_OK, "create");
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		sqlite3 *own, *theirs;
		int ok = sqt_open(URI("child.db", ""), &own) == SQLITE_OK &&
			 sqt_exec(own, "CREATE TABLE t(x); INSERT INTO t VALUES (2)", 1) == SQLITE_OK &&
			 sqt_int(own, "SELECT x FROM t") == 2 && counter(own, "dev_write_bytes") > 0;
		int rc = sqt_open(URI("parent.db", ""), &theirs);
		if (rc == SQLITE_OK)
			rc = sqt_exec(theirs, "SELECT * FROM t", 0);
		if (rc != SQLITE_BUSY)
			fprintf(stderr, "child: parent's database: %d, not SQLITE_BUSY\n", rc);
		_exit(ok && rc == SQLITE_BUSY ? 0 : 1);
	}
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: its own cache; BUSY on the parent's");
	CHECK(sqt_int(db, "SELECT x FROM t") == 1, "the parent goes on");
	sqlite3_close(db);
}

/* ------------------------------------------------------------ plain */

/* Run the sqlite3 CLI on `db` with `sql`: its exit status; its stderr in
 * err. */
static int cli(const char *db, const char *sql, char *out, size_t len)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "sqlite3 %s \"%s\" 2>&1", db, sql);
	FILE *p = popen(cmd, "r");
	REQUIRE(p, "popen");
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	return pclose(p);
}

static void case_plain(void)
{
	sqlite3 *db;
	char out[512];
	REQUIRE(sqt_open(URI("shared.db", ""), &db) == SQLITE_OK, "open");
	REQUIRE(sqt_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)", 1) == SQLITE_OK, "create");
	CHECK(cli("shared.db", "SELECT count(*) FROM t", out, sizeof(out)) != 0 && strstr(out, "locked"),
	      "plain reader while open: %s", out);
	CHECK(cli("shared.db", "INSERT INTO t VALUES (3)", out, sizeof(out)) != 0 && strstr(out, "locked"),
	      "plain writer while open: %s", out);
	sqlite3_close(db);
	CHECK(cli("shared.db", "SELECT count(*) FROM t", out, sizeof(out)) == 0 && !strcmp(out, "2\n"),
	      "plain reader after close sees the data: %s", out);

	/* A plain reader in a transaction holds SHARED: the VFS cannot open. */
	FILE *p = popen("sqlite3 shared.db", "w");
	REQUIRE(p, "popen");
	fprintf(p, "BEGIN;\nSELECT count(*) FROM t;\n.shell touch reader-ready\n");
	fflush(p);
	for (int i = 0; i < 3000 && access("reader-ready", F_OK) != 0; i++)
		usleep(10000);
	REQUIRE(access("reader-ready", F_OK) == 0, "the plain reader started");
	int rc = sqt_open(URI("shared.db", ""), &db);
	CHECK(rc == SQLITE_BUSY, "open beside a plain reader: %d (%s)", rc, sqlite3_errmsg(db));
	sqlite3_close(db);
	fprintf(p, "COMMIT;\n");
	pclose(p);
	REQUIRE(sqt_open(URI("shared.db", ""), &db) == SQLITE_OK, "open once it is gone");
	CHECK(sqt_int(db, "SELECT count(*) FROM t") == 2, "reads");
	sqlite3_close(db);
}

static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{ "io", case_io },
	{ "errors", case_errors },
	{ "locks", case_locks },
	{ "journal", case_journal },
	{ "uncached", case_uncached },
	{ "memory", case_memory },
	{ "memory_env", case_memory_env },
	{ "memory_uri", case_memory_uri },
	{ "block", case_block },
	{ "stats", case_stats },
	{ "register", case_register },
	{ "wal", case_wal },
	{ "fork", case_fork },
	{ "plain", case_plain },
};

int main(int argc, char **argv)
{
	for (size_t i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (strcmp(argv[1], cases[i].name) != 0)
			continue;
		char dir[64];
		snprintf(dir, sizeof(dir), "sqlite-vfs-%s", cases[i].name);
		sqt_chdir_fresh(dir);
		unsetenv("PAGECACHE_SQLITE_MEMORY");
		unsetenv("PAGECACHE_SQLITE_UNCACHED");
		unsetenv("PAGECACHE_SQLITE_BLOCK");
		if (strcmp(cases[i].name, "register") != 0)
			REQUIRE(sqlite3_pagecache_register(NULL, 0) == SQLITE_OK, "register");
		cases[i].run();
		return sqt_done(argv[1]);
	}
	fprintf(stderr, "usage: %s CASE (a case of vfs_cases.c)\n", argv[0]);
	return 2;
}
