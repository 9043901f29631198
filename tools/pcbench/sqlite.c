/*
 * sqlite.c - suite sqlite (issue 38): a speedtest-like workload of SQLite
 * through the unix VFS (the kernel's page cache, path kernel-buffered)
 * and through the pagecache VFS (sqlite/, path pagecache-buffered; with
 * pc_uncached=1 for the bulk load, path pagecache-dontcache).
 *
 *   bulk load      rows of (id, k, 100-byte text) in id order, in
 *                  transactions of 10000 (1M rows; --quick 20000), then
 *                  CREATE INDEX on k
 *   bulk insert    the same into a table with its index on k: each row
 *                  also goes into the index at a random place, so SQLite
 *                  reads back index pages it wrote, over and over
 *   point, warm    SELECT v FROM t WHERE k = ? at random, for --seconds,
 *                  after a scan of the table and the index
 *   point, cold    the same, a fixed number, in a fresh process: a fresh
 *                  pagecache, and the kernel's pages of the file dropped
 *                  (fdatasync + POSIX_FADV_DONTNEED); the median of 3
 *                  rounds (the shared disk's latency drifts)
 *   range scans    100 rows of the index on k and their text, --seconds
 *   updates        UPDATE of v at a random k, 1000 per transaction
 *   deletes        DELETE of 10-row id ranges, 1000 rows per transaction,
 *                  a tenth of the table
 *   mixed          one writer thread (transactions of 100 updates) and
 *                  two readers (point selects), each a connection of its
 *                  own, for --seconds: reads/s, the writer's updates/s in
 *                  the note
 *
 * SQLite's defaults otherwise (rollback journal, journal_mode=DELETE,
 * synchronous=FULL) but for cache_size=100 pages on the reading
 * connections, so that the reads reach the VFS (as the check
 * did).  The pagecache VFS's cache has --mem bytes (--block-size and
 * --no-io-uring apply), one per process as the VFS makes it.
 *
 * Each path runs in a child process (the VFS's cache lives as long as
 * its process; the cold phase forks again to get a fresh one), which
 * hands its figures back through a pipe.  Per result: ops/s; the note has
 * the device bytes read and written (/proc/self/io of the child, so the
 * kernel's write-back of the file done by the flusher threads is not
 * counted: the kernel path's writes show as its fsyncs wrote them), the
 * peak RSS of the phase (VmHWM after clear_refs), the database's size and
 * the bytes of it cached after the phase: the kernel's (cachestat(2)),
 * and pagecache's cached_bytes; cached_after_bytes is their sum.  For
 * the bulk phases it is their sum once the connection closed (what the
 * load leaves in the caches: the targets' "leave"), and the note gives
 * both.  With pc_uncached=1 the VFS caches the pages SQLite reads back at
 * random (an index's leaves) while the connection is open, and drops
 * them at its close.
 *
 * Targets: warm point selects >= 1.5x kernel-buffered, cold >= 1.0x,
 * bulk load, bulk insert and updates >= 1.0x; pagecache-dontcache's bulk
 * load and bulk insert leave at most 1 % of the database in any cache and
 * run >= 0.9x kernel-buffered's.
 */
#include "bench.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "pagecache_sqlite.h"

#define SUITE "sqlite"
#define KSPACE 2147483647ll      /* k = id * KMUL mod KSPACE: distinct for every id */
#define KMUL 1000003ll
#define INSERT_TXN 10000
#define UPDATE_TXN 1000
#define DELETE_TXN 1000
#define READERS 2

enum { W_LOAD, W_BULK, W_WARM, W_COLD, W_RANGE, W_UPDATE, W_DELETE, W_MIXED, W_COUNT };

/* What a phase measured, as the child hands it to the parent. */
struct sq_fig {
	bool run;
	double ops_s, secs, ops;
	double read_bytes, write_bytes;   /* /proc/self/io */
	double rss_peak;                  /* VmHWM */
	double kernel_cached, pc_cached;  /* of the database, after, still open */
	/* The bulk phases: the same once the connection closed (what the
	 * load leaves in the caches). */
	bool closed_run;
	double kernel_cached_closed, pc_cached_closed;
	double db_bytes;
	double pc_misses;                 /* pagecache miss_bytes during the phase */
	double extra;                     /* mixed: the writer's updates/s */
	char rounds[64];                  /* cold: every round's ops/s */
	char err[160];
};

struct sq_path {
	const char *name;
	bool pc;
	bool uncached_load;  /* pc_uncached=1, bulk load only */
};
static const struct sq_path sq_paths[] = {
	{ "kernel-buffered", false, false },
	{ "pagecache-buffered", true, false },
	{ "pagecache-dontcache", true, true },
};
#define NPATHS (int)(sizeof(sq_paths) / sizeof(sq_paths[0]))

struct sq_run {
	const struct sq_path *p;
	char db[PATH_MAX];
	char uri[PATH_MAX + 64];
	int64_t rows;
	struct sq_fig fig[W_COUNT];
};

static int64_t sq_rows(void)
{
	return bo.scale == SCALE_QUICK ? 20000 : 1000000;
}

static int64_t key_of(int64_t id)
{
	return id * KMUL % KSPACE;
}

/* ------------------------------------------------------------ measuring */

/* cachestat(2) (Linux 6.5): pages of a file in the kernel's page cache. */
struct sq_cachestat_range {
	uint64_t off, len;
};
struct sq_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

/* Bytes of `path` the kernel caches: cachestat(2), else mincore. */
static double kernel_cached_bytes(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NAN;
	struct sq_cachestat_range r = { 0, 0 };
	struct sq_cachestat cs;
	long rc = syscall(__NR_cachestat, fd, &r, &cs, 0);
	close(fd);
	if (rc == 0)
		return (double)cs.nr_cache * (double)sysconf(_SC_PAGESIZE);
	int64_t b = bu_kernel_resident_bytes(path);
	return b < 0 ? NAN : (double)b;
}

static int64_t proc_io(const char *field)
{
	char line[128];
	int64_t v = -1;
	size_t n = strlen(field);
	FILE *fp = fopen("/proc/self/io", "re");
	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp))
		if (!strncmp(line, field, n) && line[n] == ':')
			v = strtoll(line + n + 1, NULL, 10);
	fclose(fp);
	return v;
}

/* Peak RSS since the last reset_peak_rss, in bytes (VmHWM). */
static double peak_rss(void)
{
	char line[128];
	double v = NAN;
	FILE *fp = fopen("/proc/self/status", "re");
	if (!fp)
		return NAN;
	while (fgets(line, sizeof(line), fp))
		if (!strncmp(line, "VmHWM:", 6))
			v = (double)strtoll(line + 6, NULL, 10) * 1024;
	fclose(fp);
	return v;
}

static void reset_peak_rss(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "5", 1) != 1)
			bu_warn("pcbench: sqlite: clear_refs:");
		close(fd);
	}
}

/* A pagecache counter through the VFS's pragma; 0 on the unix VFS
 * (which has no such pragma: no row). */
static double pc_counter(sqlite3 *db, const char *name)
{
	char sql[64];
	sqlite3_stmt *st;
	double v = 0;
	snprintf(sql, sizeof(sql), "PRAGMA pagecache_stats=%s", name);
	if (db && sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_double(st, 0);
		sqlite3_finalize(st);
	}
	return v;
}

struct meter {
	uint64_t t0;
	int64_t rb, wb;
	double misses;
};

static void meter_start(struct meter *m, sqlite3 *db)
{
	reset_peak_rss();
	m->rb = proc_io("read_bytes");
	m->wb = proc_io("write_bytes");
	m->misses = pc_counter(db, "miss_bytes");
	m->t0 = bu_now_ns();
}

/* The phase's figures into f: `ops` done; db (may be NULL) for the
 * cache's counters. */
static void meter_stop(struct meter *m, struct sq_fig *f, double ops, struct sq_run *r, sqlite3 *db)
{
	f->secs = bu_secs(bu_now_ns() - m->t0);
	f->ops = ops;
	f->ops_s = ops / f->secs;
	f->read_bytes = (double)(proc_io("read_bytes") - m->rb);
	f->write_bytes = (double)(proc_io("write_bytes") - m->wb);
	f->rss_peak = peak_rss();
	f->kernel_cached = kernel_cached_bytes(r->db);
	f->pc_cached = pc_counter(db, "cached_bytes");
	f->pc_misses = pc_counter(db, "miss_bytes") - m->misses;
	struct stat st;
	f->db_bytes = stat(r->db, &st) == 0 ? (double)st.st_size : NAN;
	f->run = true;
}

/* ------------------------------------------------------------ SQL */

static bool sq_fail(struct sq_fig *f, sqlite3 *db, const char *what)
{
	snprintf(f->err, sizeof(f->err), "%s: %s", what, db ? sqlite3_errmsg(db) : "no connection");
	f->run = true;
	return false;
}

static bool sq_exec(sqlite3 *db, const char *sql, struct sq_fig *f)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK) {
		snprintf(f->err, sizeof(f->err), "%s: %s", sql, err ? err : sqlite3_errstr(rc));
		f->run = true;
	}
	sqlite3_free(err);
	return rc == SQLITE_OK;
}

/* A connection to the run's database: the pagecache VFS by URI (with
 * pc_uncached=1 if asked), else the unix VFS. */
static sqlite3 *sq_open(struct sq_run *r, bool uncached, int cache_pages, struct sq_fig *f)
{
	sqlite3 *db = NULL;
	char sql[64];
	snprintf(r->uri, sizeof(r->uri), "file:%s%s", r->db,
		 !r->p->pc ? "?vfs=unix" : uncached ? "?vfs=pagecache&pc_uncached=1" : "?vfs=pagecache");
	int rc = sqlite3_open_v2(r->uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL);
	if (rc != SQLITE_OK) {
		sq_fail(f, db, "open");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 10000);
	snprintf(sql, sizeof(sql), "PRAGMA cache_size=%d", cache_pages);
	if (cache_pages && !sq_exec(db, sql, f)) {
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

static void fill_text(char *v, size_t len, struct bu_rng *rng)
{
	for (size_t i = 0; i < len; i++)
		v[i] = (char)('a' + bu_rng_below(rng, 26));
}

/* ------------------------------------------------------------ phases */

/* What the caches hold of the database once its connection closed: the
 * kernel's (cachestat), and the pagecache VFS's cache as a whole, asked
 * through a connection to another, empty database (nothing of which is
 * cached: it has no pages). */
static void measure_cached_closed(struct sq_run *r, struct sq_fig *f)
{
	f->kernel_cached_closed = kernel_cached_bytes(r->db);
	f->pc_cached_closed = 0;
	if (r->p->pc) {
		char probe[PATH_MAX + 64], uri[PATH_MAX + 96];
		sqlite3 *db = NULL;
		snprintf(probe, sizeof(probe), "%s.probe", r->db);
		unlink(probe);
		snprintf(uri, sizeof(uri), "file:%s?vfs=pagecache", probe);
		if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL) ==
		    SQLITE_OK)
			f->pc_cached_closed = pc_counter(db, "cached_bytes");
		sqlite3_close(db);
		unlink(probe);
	}
	f->closed_run = true;
}

/* The rows in id order, in transactions; the index on k made first
 * (W_BULK: every insert also goes into the index, at a random place), or
 * after the rows (W_LOAD: one CREATE INDEX, as bulk loads are done). */
static bool phase_bulk(struct sq_run *r, int w, bool uncached)
{
	struct sq_fig *f = &r->fig[w];
	bool index_first = w == W_BULK;
	sqlite3_stmt *st;
	struct bu_rng rng;
	char v[100];
	struct meter m;

	unlink(r->db);
	sqlite3 *db = sq_open(r, uncached, 0, f);
	if (!db || !sq_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT)", f) ||
	    (index_first && !sq_exec(db, "CREATE INDEX t_k ON t(k)", f)))
		return sqlite3_close(db), false;
	if (sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?, ?, ?)", -1, &st, NULL) != SQLITE_OK)
		return sq_fail(f, db, "prepare"), sqlite3_close(db), false;
	bu_rng_seed(&rng, 38);
	meter_start(&m, db);
	bool ok = true;
	for (int64_t id = 1; id <= r->rows && ok; id++) {
		if (id % INSERT_TXN == 1)
			ok = sq_exec(db, "BEGIN", f);
		fill_text(v, sizeof(v), &rng);
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, key_of(id));
		sqlite3_bind_text(st, 3, v, sizeof(v), SQLITE_STATIC);
		if (ok && sqlite3_step(st) != SQLITE_DONE)
			ok = sq_fail(f, db, "insert");
		sqlite3_reset(st);
		if (ok && (id % INSERT_TXN == 0 || id == r->rows))
			ok = sq_exec(db, "COMMIT", f);
		if ((id & 4095) == 0)
			prog_advance(4096);
	}
	sqlite3_finalize(st);
	if (ok && !index_first)
		ok = sq_exec(db, "CREATE INDEX t_k ON t(k)", f);
	if (ok)
		meter_stop(&m, f, (double)r->rows, r, db);
	ok = sqlite3_close(db) == SQLITE_OK && ok;
	if (ok)
		measure_cached_closed(r, f);
	return ok;
}

/* Random point selects until `deadline` (or `count` of them). */
static bool point_selects(sqlite3 *db, int64_t rows, uint64_t deadline, int64_t count, uint64_t seed,
			  double *done, struct sq_fig *f)
{
	sqlite3_stmt *st;
	struct bu_rng rng;
	int64_t n = 0;
	if (sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?", -1, &st, NULL) != SQLITE_OK)
		return sq_fail(f, db, "prepare");
	bu_rng_seed(&rng, seed);
	bool ok = true;
	while (ok && (count ? n < count : (n & 7) || bu_now_ns() < deadline)) {
		sqlite3_bind_int64(st, 1, key_of(1 + (int64_t)bu_rng_below(&rng, (uint64_t)rows)));
		int rc = sqlite3_step(st);
		ok = rc == SQLITE_ROW || rc == SQLITE_DONE || sq_fail(f, db, "select");
		sqlite3_reset(st);
		n++;
	}
	sqlite3_finalize(st);
	*done = (double)n;
	return ok;
}

/* Read the table and its index once: what the warm phases find cached. */
static bool warm_up(sqlite3 *db, struct sq_fig *f)
{
	return sq_exec(db, "SELECT sum(length(v)) FROM t; SELECT count(*) FROM t INDEXED BY t_k WHERE k >= 0;", f);
}

static bool phase_warm(struct sq_run *r)
{
	struct sq_fig *f = &r->fig[W_WARM];
	struct meter m;
	double n;
	sqlite3 *db = sq_open(r, false, 100, f);
	if (!db || !warm_up(db, f))
		return sqlite3_close(db), false;
	prog_step_timed("point selects, warm", r->p->name, (uint64_t)(bo.seconds * 1e9), NULL, NULL);
	meter_start(&m, db);
	bool ok = point_selects(db, r->rows, bu_now_ns() + (uint64_t)(bo.seconds * 1e9), 0, 1, &n, f);
	if (ok)
		meter_stop(&m, f, n, r, db);
	prog_step_done();
	return sqlite3_close(db) == SQLITE_OK && ok;
}

static int64_t cold_count(void)
{
	return bo.scale == SCALE_QUICK ? 2000 : 20000;
}

/* In a child of this process: a fresh pagecache (the VFS makes one per
 * process), and the kernel's pages of the file dropped first. */
static void cold_round(struct sq_run *r, struct sq_fig *f)
{
	int fds[2];
	if (bu_drop_file_cache(r->db, false) < 0 || pipe(fds) != 0) {
		snprintf(f->err, sizeof(f->err), "dropping the kernel's cache or pipe: %s", strerror(errno));
		f->run = true;
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct meter m;
		double n;
		close(fds[0]);
		memset(f, 0, sizeof(*f));
		sqlite3 *db = sq_open(r, false, 100, f);
		meter_start(&m, db);
		if (db && point_selects(db, r->rows, 0, cold_count(), 2, &n, f))
			meter_stop(&m, f, n, r, db);
		sqlite3_close(db);
		_exit(write(fds[1], f, sizeof(*f)) == sizeof(*f) ? 0 : 1);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], f, sizeof(*f)) != sizeof(*f)) {
		snprintf(f->err, sizeof(f->err), "the cold phase's process failed");
		f->run = true;
	}
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* Cold lookups are bound by the shared disk's latency, which drifts:
 * COLD_ROUNDS rounds, the median's figures, every round's in the note. */
#define COLD_ROUNDS 3
static int cmp_fig(const void *a, const void *b)
{
	double x = ((const struct sq_fig *)a)->ops_s, y = ((const struct sq_fig *)b)->ops_s;
	return x < y ? -1 : x > y;
}

static void phase_cold(struct sq_run *r)
{
	struct sq_fig rounds[COLD_ROUNDS];
	for (int i = 0; i < COLD_ROUNDS; i++) {
		memset(&rounds[i], 0, sizeof(rounds[i]));
		cold_round(r, &rounds[i]);
		if (rounds[i].err[0]) {
			r->fig[W_COLD] = rounds[i];
			return;
		}
	}
	char all[64];
	snprintf(all, sizeof(all), "%.0f, %.0f, %.0f", rounds[0].ops_s, rounds[1].ops_s, rounds[2].ops_s);
	qsort(rounds, COLD_ROUNDS, sizeof(rounds[0]), cmp_fig);
	r->fig[W_COLD] = rounds[COLD_ROUNDS / 2];
	snprintf(r->fig[W_COLD].rounds, sizeof(r->fig[W_COLD].rounds), "%s", all);
}

static bool phase_range(struct sq_run *r)
{
	struct sq_fig *f = &r->fig[W_RANGE];
	struct meter m;
	struct bu_rng rng;
	sqlite3_stmt *st;
	int64_t n = 0, span = 100 * (KSPACE / r->rows);
	sqlite3 *db = sq_open(r, false, 100, f);
	if (!db || !warm_up(db, f))
		return sqlite3_close(db), false;
	if (sqlite3_prepare_v2(db, "SELECT count(*), sum(length(v)) FROM t WHERE k BETWEEN ? AND ?", -1, &st,
			       NULL) != SQLITE_OK)
		return sq_fail(f, db, "prepare"), sqlite3_close(db), false;
	bu_rng_seed(&rng, 3);
	prog_step_timed("range scans", r->p->name, (uint64_t)(bo.seconds * 1e9), NULL, NULL);
	uint64_t deadline = bu_now_ns() + (uint64_t)(bo.seconds * 1e9);
	bool ok = true;
	meter_start(&m, db);
	while (ok && ((n & 15) || bu_now_ns() < deadline)) {
		int64_t lo = (int64_t)bu_rng_below(&rng, (uint64_t)(KSPACE - span));
		sqlite3_bind_int64(st, 1, lo);
		sqlite3_bind_int64(st, 2, lo + span);
		ok = sqlite3_step(st) == SQLITE_ROW || sq_fail(f, db, "range");
		sqlite3_reset(st);
		n++;
	}
	sqlite3_finalize(st);
	if (ok)
		meter_stop(&m, f, (double)n, r, db);
	prog_step_done();
	return sqlite3_close(db) == SQLITE_OK && ok;
}

static int64_t update_count(void)
{
	return bo.scale == SCALE_QUICK ? 5000 : 100000;
}

/* `count` random updates, `per_txn` in a transaction. */
static bool updates(sqlite3 *db, int64_t rows, int64_t count, int per_txn, uint64_t seed, const atomic_bool *stop,
		    double *done, struct sq_fig *f)
{
	sqlite3_stmt *st;
	struct bu_rng rng;
	char v[100];
	int64_t n = 0;
	if (sqlite3_prepare_v2(db, "UPDATE t SET v = ? WHERE k = ?", -1, &st, NULL) != SQLITE_OK)
		return sq_fail(f, db, "prepare");
	bu_rng_seed(&rng, seed);
	bool ok = true;
	while (ok && (count ? n < count : !atomic_load(stop))) {
		ok = sq_exec(db, "BEGIN", f);
		for (int i = 0; i < per_txn && ok; i++, n++) {
			fill_text(v, sizeof(v), &rng);
			sqlite3_bind_text(st, 1, v, sizeof(v), SQLITE_STATIC);
			sqlite3_bind_int64(st, 2, key_of(1 + (int64_t)bu_rng_below(&rng, (uint64_t)rows)));
			ok = sqlite3_step(st) == SQLITE_DONE || sq_fail(f, db, "update");
			sqlite3_reset(st);
		}
		ok = ok && sq_exec(db, "COMMIT", f);
		if (count)
			prog_advance((uint64_t)per_txn);
	}
	sqlite3_finalize(st);
	*done = (double)n;
	return ok;
}

static bool phase_update(struct sq_run *r)
{
	struct sq_fig *f = &r->fig[W_UPDATE];
	struct meter m;
	double n;
	sqlite3 *db = sq_open(r, false, 0, f);
	if (!db)
		return false;
	prog_step_count("updates", r->p->name, (uint64_t)update_count(), "updates");
	meter_start(&m, db);
	bool ok = updates(db, r->rows, update_count(), UPDATE_TXN, 4, NULL, &n, f);
	if (ok)
		meter_stop(&m, f, n, r, db);
	prog_step_done();
	return sqlite3_close(db) == SQLITE_OK && ok;
}

/* A tenth of the rows, in 10-row id ranges at random (a range may find
 * rows deleted already: the rows deleted are what counts). */
static bool phase_delete(struct sq_run *r)
{
	struct sq_fig *f = &r->fig[W_DELETE];
	struct meter m;
	struct bu_rng rng;
	sqlite3_stmt *st;
	int64_t deleted = 0, goal = r->rows / 10, tries = 0;
	sqlite3 *db = sq_open(r, false, 0, f);
	if (!db)
		return false;
	if (sqlite3_prepare_v2(db, "DELETE FROM t WHERE id BETWEEN ?1 AND ?1 + 9", -1, &st, NULL) != SQLITE_OK)
		return sq_fail(f, db, "prepare"), sqlite3_close(db), false;
	bu_rng_seed(&rng, 5);
	prog_step_count("deletes", r->p->name, (uint64_t)goal, "rows");
	bool ok = true;
	meter_start(&m, db);
	while (ok && deleted < goal) {
		if (++tries > goal) /* each transaction deletes some: never this many */
			ok = sq_fail(f, db, "deletes find nothing to delete");
		ok = ok && sq_exec(db, "BEGIN", f);
		for (int i = 0; i < DELETE_TXN / 10 && ok; i++) {
			sqlite3_bind_int64(st, 1, 1 + 10 * (int64_t)bu_rng_below(&rng, (uint64_t)(r->rows / 10)));
			ok = sqlite3_step(st) == SQLITE_DONE || sq_fail(f, db, "delete");
			sqlite3_reset(st);
			deleted += sqlite3_changes(db);
		}
		ok = ok && sq_exec(db, "COMMIT", f);
		prog_advance(DELETE_TXN);
	}
	sqlite3_finalize(st);
	if (ok)
		meter_stop(&m, f, (double)deleted, r, db);
	prog_step_done();
	return sqlite3_close(db) == SQLITE_OK && ok;
}

/* ------------------------------------------------------------ mixed */

struct mixed_worker {
	struct sq_run *r;
	pthread_t th;
	bool writer;
	int index;
	uint64_t deadline;
	atomic_bool *stop;
	double ops;
	bool ok;
	struct sq_fig fig;  /* its error */
};

static void *mixed_main(void *arg)
{
	struct mixed_worker *w = arg;
	sqlite3 *db = sq_open(w->r, false, 100, &w->fig);
	w->ok = db != NULL;
	if (w->ok && w->writer)
		w->ok = updates(db, w->r->rows, 0, 100, 6, w->stop, &w->ops, &w->fig);
	else if (w->ok)
		w->ok = point_selects(db, w->r->rows, w->deadline, 0, 7 + (uint64_t)w->index, &w->ops, &w->fig);
	sqlite3_close(db);
	return NULL;
}

static bool phase_mixed(struct sq_run *r)
{
	struct sq_fig *f = &r->fig[W_MIXED];
	struct mixed_worker w[READERS + 1];
	atomic_bool stop = false;
	struct meter m;
	sqlite3 *db = sq_open(r, false, 100, f);
	if (!db || !warm_up(db, f))
		return sqlite3_close(db), false;
	prog_step_timed("mixed", r->p->name, (uint64_t)(bo.seconds * 1e9), NULL, NULL);
	meter_start(&m, db);
	uint64_t deadline = bu_now_ns() + (uint64_t)(bo.seconds * 1e9);
	for (int i = 0; i <= READERS; i++) {
		w[i] = (struct mixed_worker){ .r = r, .writer = i == READERS, .index = i, .deadline = deadline,
					      .stop = &stop };
		if (pthread_create(&w[i].th, NULL, mixed_main, &w[i]) != 0)
			bu_die("pthread_create:");
	}
	double reads = 0;
	bool ok = true;
	for (int i = 0; i < READERS; i++) {
		pthread_join(w[i].th, NULL);
		reads += w[i].ops;
		ok &= w[i].ok;
	}
	atomic_store(&stop, true); /* the writer ends its transaction */
	pthread_join(w[READERS].th, NULL);
	ok &= w[READERS].ok;
	if (ok) {
		meter_stop(&m, f, reads, r, db);
		f->extra = w[READERS].ops / f->secs;
	}
	for (int i = 0; i <= READERS && ok == false && !f->err[0]; i++)
		if (w[i].fig.err[0])
			snprintf(f->err, sizeof(f->err), "%s", w[i].fig.err);
	prog_step_done();
	sqlite3_close(db);
	return ok;
}

/* ------------------------------------------------------------ a path */

/* Every phase of one path, in this (child) process. */
static void run_path(struct sq_run *r)
{
	if (r->p->pc) {
		struct pc_config cfg;
		bench_config(&cfg, bo.mem, 0);
		if (sqlite3_pagecache_register(&cfg, 0) != SQLITE_OK) {
			snprintf(r->fig[W_BULK].err, sizeof(r->fig[W_BULK].err), "sqlite3_pagecache_register failed");
			r->fig[W_BULK].run = true;
			return;
		}
	}
	prog_step_count("bulk load, then index", r->p->name, (uint64_t)r->rows, "rows");
	bool ok = phase_bulk(r, W_LOAD, r->p->uncached_load);
	prog_step_done();
	prog_step_count("bulk insert, index in place", r->p->name, (uint64_t)r->rows, "rows");
	ok = ok && phase_bulk(r, W_BULK, r->p->uncached_load);
	prog_step_done();
	if (!ok || r->p->uncached_load)
		return;
	ok = phase_warm(r);
	if (ok)
		phase_cold(r); /* no connection open: the child starts clean */
	ok = ok && phase_range(r) && phase_update(r) && phase_delete(r);
	if (ok)
		phase_mixed(r);
}

/* The path in a child process; its figures into r. */
static void run_path_in_child(struct sq_run *r)
{
	int fds[2];
	if (pipe(fds) != 0)
		bu_die("pipe:");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		bu_die("fork:");
	if (pid == 0) {
		close(fds[0]);
		run_path(r);
		bool ok = write(fds[1], r->fig, sizeof(r->fig)) == sizeof(r->fig);
		_exit(ok ? 0 : 1);
	}
	close(fds[1]);
	size_t got = 0;
	while (got < sizeof(r->fig)) {
		ssize_t n = read(fds[0], (char *)r->fig + got, sizeof(r->fig) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (got != sizeof(r->fig)) {
		memset(r->fig, 0, sizeof(r->fig));
		snprintf(r->fig[W_BULK].err, sizeof(r->fig[W_BULK].err), "the path's process died (status %#x)",
			 status);
		r->fig[W_BULK].run = true;
	}
}

/* ------------------------------------------------------------ results */

static char workloads[W_COUNT][96];

static void name_workloads(int64_t rows)
{
	snprintf(workloads[W_LOAD], 96, "bulk load, %lld rows, %d per transaction, then CREATE INDEX", (long long)rows,
		 INSERT_TXN);
	snprintf(workloads[W_BULK], 96, "bulk insert, %lld rows, %d per transaction, index in place", (long long)rows,
		 INSERT_TXN);
	snprintf(workloads[W_WARM], 96, "point selects, warm, cache_size=100");
	snprintf(workloads[W_COLD], 96, "point selects, cold (fresh caches), %lld of them",
		 (long long)cold_count());
	snprintf(workloads[W_RANGE], 96, "range scans of 100 rows, warm");
	snprintf(workloads[W_UPDATE], 96, "updates, %lld, %d per transaction", (long long)update_count(),
		 UPDATE_TXN);
	snprintf(workloads[W_DELETE], 96, "deletes, a tenth of the rows, %d per transaction", DELETE_TXN);
	snprintf(workloads[W_MIXED], 96, "mixed: 1 writer (100 updates per transaction) + %d readers", READERS);
}

static void add_result(const struct sq_run *r, int w)
{
	const struct sq_fig *f = &r->fig[w];
	if (!f->run)
		return;
	struct bres *b = res_add(SUITE, workloads[w], r->p->name);
	if (f->err[0]) {
		snprintf(b->error, sizeof(b->error), "%s", f->err);
		return;
	}
	snprintf(b->unit, sizeof(b->unit), w == W_LOAD || w == W_BULK || w == W_DELETE ? "rows/s" : "ops/s");
	res_figure(b, f->ops_s);
	b->cached_after_bytes = f->kernel_cached + f->pc_cached;
	b->device_reads_4k = f->read_bytes / 4096;
	res_note(b, "%.0f in %.2f s; device read %s, written %s; peak RSS %s; database %s, cached %s: "
		    "kernel %s, pagecache %s",
		 f->ops, f->secs, bu_human((uint64_t)f->read_bytes), bu_human((uint64_t)f->write_bytes),
		 bu_human((uint64_t)f->rss_peak), bu_human((uint64_t)f->db_bytes),
		 f->closed_run ? "with the connection open" : "after", bu_human((uint64_t)f->kernel_cached),
		 bu_human((uint64_t)f->pc_cached));
	if (f->closed_run) {
		b->cached_after_bytes = f->kernel_cached_closed + f->pc_cached_closed;
		res_note(b, "cached after its close: kernel %s, pagecache %s",
			 bu_human((uint64_t)f->kernel_cached_closed), bu_human((uint64_t)f->pc_cached_closed));
	}
	if (r->p->pc && (w == W_WARM || w == W_RANGE))
		res_note(b, "pagecache misses while timed: %s%s", bu_human((uint64_t)f->pc_misses),
			 f->pc_misses > 0 ? " (the database did not fit --mem: not all warm)" : "");
	if (w == W_MIXED)
		res_note(b, "the writer: %.0f updates/s", f->extra);
	if (w == W_COLD)
		res_note(b, "the median of %d rounds (ops/s: %s)", COLD_ROUNDS, f->rounds);
}

/* r's figure at least `min` times kernel-buffered's in workload w. */
static void target_ratio(int w, const char *path, double min)
{
	struct bres *k = res_find(SUITE, workloads[w], "kernel-buffered");
	struct bres *p = res_find(SUITE, workloads[w], path);
	if (!p || p->error[0])
		return;
	if (res_base_ok(k))
		res_target(p, p->value >= min * k->value, ">= %.1fx kernel-buffered (%.2fx)", min, p->value / k->value);
	else
		res_target_na(p, "kernel-buffered", ">= %.1fx kernel-buffered", min);
}

/* pc_uncached=1's bulk load: at most 1 % of the database left cached
 * once its connection closed. */
static void target_uncached_load(const struct sq_run *r, int w)
{
	struct bres *p = res_find(SUITE, workloads[w], "pagecache-dontcache");
	const struct sq_fig *f = &r->fig[w];
	if (!p || p->error[0])
		return;
	res_target(p, p->cached_after_bytes <= f->db_bytes / 100, "left cached <= 1%% of the database (%.2f %%)",
		   100 * p->cached_after_bytes / f->db_bytes);
}

void suite_sqlite(void)
{
	static struct sq_run runs[NPATHS];
	name_workloads(sq_rows());
	for (int i = 0; i < NPATHS; i++) {
		struct sq_run *r = &runs[i];
		if (!name_selected(sq_paths[i].name))
			continue;
		memset(r, 0, sizeof(*r));
		r->p = &sq_paths[i];
		r->rows = sq_rows();
		bu_join(r->db, sizeof(r->db), bo.dir, "pcbench-sqlite.db");
		run_path_in_child(r);
		for (int w = 0; w < W_COUNT; w++)
			add_result(r, w);
		unlink(r->db);
	}
	for (int w = W_LOAD; w <= W_BULK; w++) {
		target_ratio(w, "pagecache-buffered", 1.0);
		target_ratio(w, "pagecache-dontcache", 0.9);
		target_uncached_load(&runs[2], w);
	}
	target_ratio(W_WARM, "pagecache-buffered", 1.5);
	target_ratio(W_COLD, "pagecache-buffered", 1.0);
	target_ratio(W_UPDATE, "pagecache-buffered", 1.0);
	for (int w = 0; w < W_COUNT; w++)
		report_workload(SUITE, workloads[w]);
}
