/*
 * crash.c - SIGKILL in the middle of transactions (sqlite_crash_rollback,
 * sqlite_crash_wal):
 *
 *   crash MODE [KILLS]     MODE: rollback or wal; KILLS: at least 50
 *
 * Each round forks a writer that runs transactions through the VFS
 * (synchronous=FULL; WAL in exclusive locking mode, which the VFS needs):
 * each inserts a random number of rows tagged with its id, updates random
 * older rows (so the journal holds old pages and SQLite's small page
 * cache spills into the database mid-transaction), and records its row
 * count in a table of its own.  Once COMMIT returned, the writer sends
 * (id, rows) to the parent through a pipe.  The parent kills it with
 * SIGKILL at a random moment, then checks the database twice, in turn
 * recovering it first through the VFS (in a child, which makes its own
 * cache) and first through plain SQLite (the default VFS, in the parent):
 * PRAGMA integrity_check says ok, every transaction the writer reported
 * is there whole, and every transaction there is whole.
 *
 * A killed writer's pagecache lock goes with its last reference to the
 * file (an io_uring request in flight holds one a little longer), so
 * the checks wait out SQLITE_BUSY.  The round's seed is printed;
 * PC_SEED=N replays the kill times.
 */
#define _GNU_SOURCE
#include "sqt.h"

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#include "pagecache_sqlite.h"

#define DB "crash.db"
#define MAX_TXNS 200000

struct committed {
	int64_t id, rows;
};

static bool wal_mode;
static struct committed *done;
static size_t ndone;

static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int setup_connection(sqlite3 *db)
{
	const char *sql = wal_mode ? "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
				   : "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL;";
	int rc = sqt_exec(db, sql, 0);
	/* The first read: a hot journal or WAL is recovered here. */
	return rc == SQLITE_OK ? sqt_exec(db, "SELECT count(*) FROM sqlite_schema", 0) : rc;
}

/* Open through the VFS and read, waiting out SQLITE_BUSY: the database's
 * or its journal's lock, kept by a killed writer's last references. */
static sqlite3 *open_vfs(void)
{
	sqlite3 *db = NULL;
	int rc = SQLITE_BUSY;
	for (int i = 0; i < 2000 && rc == SQLITE_BUSY; i++) {
		if (i)
			usleep(10000);
		rc = sqt_open("file:" DB "?vfs=pagecache", &db);
		if (rc == SQLITE_OK)
			rc = setup_connection(db);
		if (rc == SQLITE_OK)
			return db;
		sqlite3_close(db);
	}
	fprintf(stderr, "open through the VFS: %d%s\n", rc, rc == SQLITE_BUSY ? " after 20 s" : "");
	return NULL;
}

/* ------------------------------------------------------------ writer */

static void write_u64s(int fd, int64_t a, int64_t b)
{
	int64_t v[2] = { a, b };
	if (write(fd, v, sizeof(v)) != sizeof(v))
		_exit(3);
}

static void writer(int fd)
{
	if (sqlite3_pagecache_register(NULL, 0) != SQLITE_OK)
		_exit(2);
	sqlite3 *db = open_vfs();
	if (!db || sqt_exec(db,
		     "PRAGMA cache_size=20;"
		     "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, txn INTEGER, v BLOB, w TEXT);"
		     "CREATE INDEX IF NOT EXISTS t_txn ON t(txn);"
		     "CREATE INDEX IF NOT EXISTS t_w ON t(w);"
		     "CREATE TABLE IF NOT EXISTS txns(id INTEGER PRIMARY KEY, nrows INTEGER);",
		     1) != SQLITE_OK)
		_exit(2);
	int64_t id = sqt_int(db, "SELECT coalesce(max(id), 0) FROM txns") + 1;
	write_u64s(fd, 0, 0); /* ready: the kill timer starts now */
	char sql[512];
	for (;; id++) {
		int64_t rows = 1 + (int64_t)(rng() % 20);
		snprintf(sql, sizeof(sql),
			 "BEGIN;"
			 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %lld)"
			 " INSERT INTO t(txn, v, w) SELECT %lld, randomblob(100 + abs(random()) %% 3000),"
			 " hex(randomblob(8)) FROM n;"
			 "UPDATE t SET v = randomblob(200 + abs(random()) %% 2000)"
			 " WHERE id IN (SELECT 1 + abs(random()) %% (SELECT max(id) FROM t) FROM t LIMIT %lld);"
			 "INSERT INTO txns VALUES (%lld, %lld);"
			 "COMMIT;",
			 (long long)rows, (long long)id, (long long)rows, (long long)id, (long long)rows);
		if (sqt_exec(db, sql, 1) != SQLITE_OK)
			_exit(4);
		write_u64s(fd, id, rows); /* only once COMMIT returned */
	}
}

/* ------------------------------------------------------------ checks */

/* What must hold after a crash, on connection db; a description of the
 * first failure in why.  `who` names the connection. */
static bool check_db(sqlite3 *db, const char *who, char *why, size_t len)
{
	char ok[256];
	sqt_text(db, "PRAGMA integrity_check", ok, sizeof(ok));
	if (strcmp(ok, "ok") != 0) {
		snprintf(why, len, "%s: integrity_check: %s", who, ok);
		return false;
	}
	long long broken = sqt_int(db, "SELECT count(*) FROM txns x WHERE nrows != "
				       "(SELECT count(*) FROM t WHERE txn = x.id)");
	if (broken != 0) {
		snprintf(why, len, "%s: %lld transactions not whole (%s)", who, broken, sqlite3_errmsg(db));
		return false;
	}
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE txn = ?", -1, &st, NULL) != SQLITE_OK) {
		snprintf(why, len, "%s: %s", who, sqlite3_errmsg(db));
		return false;
	}
	bool good = true;
	for (size_t i = 0; i < ndone && good; i++) {
		sqlite3_bind_int64(st, 1, done[i].id);
		good = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) == done[i].rows;
		if (!good)
			snprintf(why, len, "%s: committed transaction %lld (%lld rows) has %lld", who,
				 (long long)done[i].id, (long long)done[i].rows, sqlite3_column_int64(st, 0));
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return good;
}

/* Through the VFS, in a child (the parent keeps no cache of its own). */
static bool check_through_vfs(char *why, size_t len)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0, "pipe");
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		close(fds[0]);
		char msg[512] = "";
		sqlite3 *db = NULL;
		bool ok = sqlite3_pagecache_register(NULL, 0) == SQLITE_OK && (db = open_vfs());
		if (!ok)
			snprintf(msg, sizeof(msg), "pagecache VFS: cannot open");
		else
			ok = check_db(db, "pagecache VFS", msg, sizeof(msg));
		if (db && sqlite3_close(db) != SQLITE_OK && ok) {
			ok = false;
			snprintf(msg, sizeof(msg), "pagecache VFS: close failed");
		}
		if (write(fds[1], msg, strlen(msg)) < 0)
			_exit(3);
		_exit(ok ? 0 : 1);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], why, len - 1);
	why[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Through plain SQLite (the default VFS), here. */
static bool check_plain(char *why, size_t len)
{
	sqlite3 *db;
	int rc = sqlite3_open_v2(DB, &db, SQLITE_OPEN_READWRITE, "unix");
	sqlite3_busy_timeout(db, 20000);
	bool ok = rc == SQLITE_OK && check_db(db, "plain SQLite", why, len);
	if (rc != SQLITE_OK)
		snprintf(why, len, "plain SQLite: open: %s", sqlite3_errmsg(db));
	sqlite3_close(db);
	return ok;
}

/* ------------------------------------------------------------ rounds */

static bool writer_ready;

static void record(const int64_t v[2])
{
	if (v[0] == 0) {
		writer_ready = true;
		return;
	}
	REQUIRE(ndone < MAX_TXNS, "too many transactions");
	done[ndone].id = v[0];
	done[ndone++].rows = v[1];
}

/* Read what the writer reported until `deadline_ns` (0: until EOF), or
 * until it is ready if `until_ready`. */
static void collect(int fd, uint64_t deadline_ns, bool until_ready)
{
	static int64_t buf[2];
	static size_t have;
	for (;;) {
		int timeout = -1;
		if (until_ready && writer_ready)
			return;
		if (deadline_ns) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
			if (now >= deadline_ns)
				return;
			timeout = (int)((deadline_ns - now) / 1000000u) + 1;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, timeout) <= 0)
			continue;
		ssize_t n = read(fd, (char *)buf + have, sizeof(buf) - have);
		if (n <= 0) {
			have = 0;
			return;
		}
		have += (size_t)n;
		if (have == sizeof(buf)) {
			record(buf);
			have = 0;
		}
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "rollback") && strcmp(argv[1], "wal"))) {
		fprintf(stderr, "usage: %s rollback|wal [KILLS]\n", argv[0]);
		return 2;
	}
	wal_mode = !strcmp(argv[1], "wal");
	int kills = argc > 2 ? atoi(argv[2]) : 50;
	const char *seed_env = getenv("PC_SEED");
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
	rng_state = seed ? seed : 1;
	printf("crash %s: %d kills, seed %llu (PC_SEED=%llu replays the kill times)\n", argv[1], kills,
	       (unsigned long long)seed, (unsigned long long)seed);
	char dir[64];
	snprintf(dir, sizeof(dir), "sqlite-crash-%s", argv[1]);
	sqt_chdir_fresh(dir);
	done = calloc(MAX_TXNS, sizeof(*done));
	REQUIRE(done, "calloc");
	int hot = 0, failed = 0;
	for (int round = 0; round < kills && !failed; round++) {
		int fds[2];
		REQUIRE(pipe(fds) == 0, "pipe");
		fflush(NULL);
		pid_t pid = fork();
		REQUIRE(pid >= 0, "fork");
		if (pid == 0) {
			close(fds[0]);
			rng_state ^= (uint64_t)getpid();
			writer(fds[1]);
		}
		close(fds[1]);
		/* Kill it 1 to 200 ms after it is ready (on a loaded machine
		 * it may take long to start: its start is no crash to test). */
		writer_ready = false;
		collect(fds[0], now_ns() + 60000000000ull, true);
		REQUIRE(writer_ready, "round %d: the writer did not start within 60 s", round);
		collect(fds[0], now_ns() + (1 + rng() % 200) * 1000000u, false);
		kill(pid, SIGKILL);
		int status;
		REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
		collect(fds[0], 0, false); /* what it sent before it died */
		close(fds[0]);
		if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
			CHECK(0, "round %d: the writer ended by itself (status %#x) before the kill", round, status);
			failed = 1;
			break;
		}
		hot += access(wal_mode ? DB "-wal" : DB "-journal", F_OK) == 0;
		char why[512] = "";
		bool vfs_first = round % 2 == 0;
		bool ok = vfs_first ? check_through_vfs(why, sizeof(why)) && check_plain(why, sizeof(why))
				    : check_plain(why, sizeof(why)) && check_through_vfs(why, sizeof(why));
		CHECK(ok, "round %d (%s first): %s", round, vfs_first ? "VFS" : "plain", why);
		failed = !ok;
	}
	printf("%d kills, %zu transactions committed, a %s left by %d of them\n", kills, ndone,
	       wal_mode ? "WAL" : "journal", hot);
	CHECK(ndone > (size_t)kills, "the writers committed only %zu transactions", ndone);
	/* The rounds must have met the recovery they are there to test. */
	CHECK(hot >= kills / 10, "only %d kills left a %s behind", hot, wal_mode ? "WAL" : "journal");
	return sqt_done(wal_mode ? "crash wal" : "crash rollback");
}
