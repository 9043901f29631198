/*
 * test_crash.c - process crashes (SIGKILL) at random moments: nothing
 * acknowledged is lost, nothing is corrupted.
 *
 * The parent forks writer children one after the other, all on ONE file
 * (test_crash.<pid>/data in the build tree's testdata), and kills each with SIGKILL at a
 * random moment.  Each child makes its own cache (8 MiB of memory, so the
 * 1.6 MiB dirty limit throttles the writers and the flusher writes back and
 * evicts all the time), reopens the file the last child left behind (so
 * every open after the first recovers a file a crashed process left: size
 * rounded up, blocks allocated ahead, records half written) and runs two
 * writer threads.  Each thread writes misaligned records (6000, 47008,
 * 4096 and random sizes, at offsets that are rarely aligned; adjacent
 * records belong to different threads, so blocks are shared between
 * writers) with buffered writes, PC_DONTCACHE, a few PC_DIRECT, some of
 * them PC_DSYNC, calls pc_fsync or pc_fdatasync now and then, overwrites
 * its earlier records with new versions and reads some back through the
 * cache (they must read as last written).
 *
 * The record log.  What the children did lives in a MAP_SHARED anonymous
 * mapping made before the first fork, so it survives every child: for each
 * record its place (offset, length: records never overlap, and record ids
 * grow with offset), the highest version handed to pc_pwrite ("submitted",
 * stored BEFORE the call) and the highest version acknowledged ("acked",
 * stored with release ordering AFTER the acknowledgement).  A version is
 * acknowledged when its PC_DSYNC write returned, or when a pc_fsync or
 * pc_fdatasync of the writing thread that started after the write
 * returned has returned.  Nothing else counts: a plain write that returned,
 * a PC_DIRECT write without PC_DSYNC, an fsync still running when the
 * child died.  Record contents are exactly checkable: byte p of version v
 * of record r is tu_pattern_byte(record_seed(r, v), p), so a byte tells
 * which record, version and position it was written for.
 *
 * After each kill the parent reads the backing file with plain O_DIRECT
 * (not through pagecache) and checks:
 *   - every acknowledged record is on disk whole, each byte from its
 *     acknowledged version or a later one that was submitted (a later
 *     version may be half written: writes are not atomic, but the
 *     acknowledged one must never come back, nor anything older);
 *   - every other byte holds zero (never written, a hole, or allocated
 *     ahead) or what some submitted write put at that very position: a
 *     version of the record that lies there, never data of another record
 *     or position, never stale cache memory, never bytes of no write;
 *   - the file size: at least the end of every acknowledged record, at
 *     most the end of the furthest submitted record rounded up to a block
 *     (device writes, allocation ahead and PC_DSYNC extend the backing
 *     file to a block boundary until fsync or close makes the size exact,
 *     see PC_DSYNC in pagecache.h), and either a multiple of the block size
 *     or the exact end of a submitted record (the size fsync/fdatasync
 *     set).  Nothing else.
 * The children count their own surprises (a failed call, a read-back that
 * differs) in the log, which fails the test too.  The last child is not
 * killed: it closes the file and destroys its cache cleanly, and then the
 * size must be exactly what pc_size said before the close.
 *
 * Why one file across crash points: the point of a crash test is the state
 * a crash leaves behind, and the next process to open that state is where
 * it matters (the size at open is the rounded size, blocks past it may be
 * allocated, records are half written, earlier acknowledged data must
 * survive writes of the next process over it).  Checking the whole file
 * after every kill also re-checks everything acknowledged before.  The
 * file may grow a little further with every child (new records stop at
 * 24 MiB * n / 60 for the n-th child, then only old ones are rewritten), so
 * every child extends from the size its predecessor left, and the file
 * ends three times the size of the cache.
 *
 * Kill moments (seeded, print the seed; replay with PC_SEED, though thread
 * and device timing make a replay similar, not identical): a quarter of the
 * children die 0-60 ms after fork (cache setup, open, first writes), the
 * rest after a random number of completed operations plus up to 10 ms.
 * Waiting for operations doubles as the hang check: a child that completes
 * no operation for 30 s fails the test (it is killed and reported), and an
 * alarm fails the whole test after 240 s.  The test also fails if nothing
 * was ever acknowledged or no kill ever cost unacknowledged data (then the
 * kills did not land while data was in the cache and the test proved
 * nothing).
 *
 * PC_TEST_QUICK=1 only shortens the children (fewer operations), never the
 * number of crash points: at least 50 in every run.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define CRASH_POINTS 60
#define MEMORY_LIMIT (8 * MiB)
#define FILE_CAP (24 * MiB)      /* the file's final size: 3x the cache */
#define MAX_RECORDS 16384u
#define MAX_RECORD_LEN (96 * KiB)
#define NTHREADS 2
#define HANG_MS 30000            /* a child with no progress this long hangs */
#define WATCHDOG_S 240           /* the whole test */
#define MAX_REPORTS 8            /* bad records printed per crash point */
#define LIST_CAP 65536u          /* a writer's pending and written lists */

/* ------------------------------------------------------------ the log */

struct rec {
	uint64_t off;
	uint32_t len;
	uint32_t owner;            /* writer thread index: only it writes the record */
	_Atomic uint32_t submitted; /* highest version given to pc_pwrite (0: none) */
	_Atomic uint32_t acked;     /* highest acknowledged version (0: none) */
	_Atomic uint32_t gen;       /* the child that submitted the last version */
};

struct crash_log {
	_Atomic uint32_t nrec;         /* records [0, nrec) have their place set */
	_Atomic uint64_t next_off;     /* where the next record may start */
	_Atomic uint32_t block_size;   /* the file's block size, from the children */
	_Atomic uint32_t gen;          /* the current child: 1, 2, ... */
	_Atomic uint64_t cap;          /* no new records past this: overwrites only */
	_Atomic uint64_t progress;     /* operations completed by the current child */
	_Atomic uint32_t errors;       /* surprises the children saw */
	_Atomic uint64_t acks_dsync, acks_fsync, acks_fdatasync;
	_Atomic uint64_t writes, readbacks, open_busy;
	_Atomic int64_t final_size;    /* clean child: pc_size before pc_close */
	struct rec rec[MAX_RECORDS];
};

static struct crash_log *log_new(void)
{
	void *p = mmap(NULL, sizeof(struct crash_log), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED);
	return p; /* zeroed */
}

/* The pattern seed of version v of record id: distinct for every pair. */
static uint64_t record_seed(uint32_t id, uint32_t v)
{
	return ((uint64_t)(id + 1) << 24) | v;
}

/* ------------------------------------------------------------ the child */

struct pending {
	uint32_t id, v;
};

struct writer {
	struct crash_log *log;
	struct pc_file *f;
	unsigned t;                   /* thread index */
	uint64_t rng;
	long ops;                     /* operations to do, -1: until killed */
	uint8_t *buf, *rbuf;
	struct pending *pend;         /* written, waiting for an fsync to be acked */
	size_t npend;
	struct pending *mine;         /* written completely by this child */
	size_t nmine;
};

static pthread_mutex_t place_lock = PTHREAD_MUTEX_INITIALIZER;

static void child_error(struct crash_log *log, const char *what, uint32_t id)
{
	atomic_fetch_add(&log->errors, 1);
	fprintf(stderr, "child %d: %s (record %u, errno %d %s)\n", (int)getpid(), what, id, errno,
		strerror(errno));
}

/* Raise a record's acked version (only its owner thread writes it). */
static void ack(struct crash_log *log, uint32_t id, uint32_t v)
{
	if (atomic_load_explicit(&log->rec[id].acked, memory_order_relaxed) < v)
		atomic_store_explicit(&log->rec[id].acked, v, memory_order_release);
}

static uint32_t record_len(uint64_t *rng)
{
	switch (tu_rand(rng) % 6) {
	case 0:
		return 6000;
	case 1:
		return 47008;
	case 2:
		return 4096;
	case 3:
		return 1 + (uint32_t)(tu_rand(rng) % 700);
	default:
		return 1 + (uint32_t)(tu_rand(rng) % (64 * KiB));
	}
}

/* Place a new record of this thread after the last one; UINT32_MAX when
 * the file or the log is full.  Its place is in the log before any write. */
static uint32_t new_record(struct writer *w)
{
	struct crash_log *log = w->log;
	uint32_t len = record_len(&w->rng);
	uint64_t gap = tu_rand(&w->rng) % 2 ? 0 : tu_rand(&w->rng) % 9000;
	uint32_t id = UINT32_MAX;
	pthread_mutex_lock(&place_lock);
	uint32_t n = atomic_load(&log->nrec);
	uint64_t off = atomic_load(&log->next_off) + gap;
	if (n < MAX_RECORDS && off + len <= atomic_load(&log->cap)) {
		id = n;
		log->rec[id].off = off;
		log->rec[id].len = len;
		log->rec[id].owner = w->t;
		atomic_store(&log->next_off, off + len);
		atomic_store_explicit(&log->nrec, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&place_lock);
	return id;
}

/* One of this thread's records (written by any earlier child), or
 * UINT32_MAX if a few random picks find none. */
static uint32_t old_record(struct writer *w)
{
	uint32_t n = atomic_load(&w->log->nrec);
	for (int tries = 0; n && tries < 16; tries++) {
		uint32_t id = (uint32_t)(tu_rand(&w->rng) % n);
		if (w->log->rec[id].owner == w->t)
			return id;
	}
	return UINT32_MAX;
}

static int write_flags(uint64_t *rng)
{
	unsigned r = (unsigned)(tu_rand(rng) % 100);
	int flags = r < 40 ? PC_DONTCACHE : r < 45 ? PC_DIRECT : 0;
	if (tu_rand(rng) % 100 < 20)
		flags |= PC_DSYNC;
	return flags;
}

static void write_record(struct writer *w)
{
	struct crash_log *log = w->log;
	bool fresh = tu_rand(&w->rng) % 100 < 60;
	uint32_t id = fresh ? new_record(w) : old_record(w);
	if (id == UINT32_MAX)
		id = fresh ? old_record(w) : new_record(w);
	if (id == UINT32_MAX)
		return;
	struct rec *r = &log->rec[id];
	uint32_t v = atomic_load(&r->submitted) + 1;
	tu_fill_pattern(w->buf, r->len, record_seed(id, v), r->off);
	atomic_store(&r->gen, atomic_load(&log->gen));
	atomic_store_explicit(&r->submitted, v, memory_order_release); /* before the call */
	int flags = write_flags(&w->rng);
	ssize_t got = pc_pwrite(w->f, w->buf, r->len, (off_t)r->off, flags);
	if (got != (ssize_t)r->len) {
		int e = errno;
		struct pc_stats st;
		pc_file_stats(w->f, &st);
		fprintf(stderr, "child %d: pc_pwrite(%u bytes at %llu, flags 0x%x) returned %zd, %llu device write errors\n",
			(int)getpid(), r->len, (unsigned long long)r->off, flags, got, (unsigned long long)st.write_errors);
		errno = e;
		child_error(log, "pc_pwrite failed", id);
		return;
	}
	atomic_fetch_add(&log->writes, 1);
	if (flags & PC_DSYNC) {
		ack(log, id, v);
		atomic_fetch_add(&log->acks_dsync, 1);
	} else if (w->npend < LIST_CAP) {
		w->pend[w->npend++] = (struct pending){ id, v };
	}
	if (w->nmine < LIST_CAP)
		w->mine[w->nmine++] = (struct pending){ id, v };
}

/* fsync or fdatasync; then what this thread wrote before it is acked. */
static void sync_and_ack(struct writer *w)
{
	bool data = tu_rand(&w->rng) % 2;
	if ((data ? pc_fdatasync(w->f) : pc_fsync(w->f)) != 0) {
		child_error(w->log, data ? "pc_fdatasync failed" : "pc_fsync failed", 0);
		return;
	}
	for (size_t i = 0; i < w->npend; i++)
		ack(w->log, w->pend[i].id, w->pend[i].v);
	atomic_fetch_add(data ? &w->log->acks_fdatasync : &w->log->acks_fsync, w->npend);
	w->npend = 0;
}

/* Read back a record this thread wrote in this child: it is the version
 * written last (no one else writes it), whatever happened to the cache. */
static void read_back(struct writer *w)
{
	if (!w->nmine)
		return;
	struct pending p = w->mine[tu_rand(&w->rng) % w->nmine];
	struct rec *r = &w->log->rec[p.id];
	if (atomic_load(&r->submitted) != p.v)
		return; /* overwritten since */
	int flags = tu_rand(&w->rng) % 3 == 0 ? PC_DONTCACHE : 0;
	if (pc_pread(w->f, w->rbuf, r->len, (off_t)r->off, flags) != (ssize_t)r->len) {
		child_error(w->log, "pc_pread failed or short", p.id);
		return;
	}
	tu_fill_pattern(w->buf, r->len, record_seed(p.id, p.v), r->off);
	if (memcmp(w->buf, w->rbuf, r->len) != 0)
		child_error(w->log, "read back through the cache differs from what was written", p.id);
	atomic_fetch_add(&w->log->readbacks, 1);
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	for (long i = 0; w->ops < 0 || i < w->ops; i++) {
		unsigned r = (unsigned)(tu_rand(&w->rng) % 100);
		if (r < 5)
			read_back(w);
		else if (r < 12)
			sync_and_ack(w);
		else
			write_record(w);
		atomic_fetch_add(&w->log->progress, 1);
	}
	sync_and_ack(w); /* a clean child: everything it wrote is acked */
	return NULL;
}

/* The previous child's file description may linger for a moment after it
 * died (its lock with it): retry EBUSY for a while. */
static struct pc_file *open_retrying(struct pc_cache *c, const char *path, struct crash_log *log)
{
	for (int i = 0; i < 1000; i++) {
		struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT, 0644);
		if (f || errno != EBUSY)
			return f;
		atomic_fetch_add(&log->open_busy, 1);
		usleep(10000);
	}
	return NULL;
}

/* A writer child: ops < 0 runs until killed; else every thread does ops
 * operations, then the file is closed and the cache destroyed. */
static void child_main(struct crash_log *log, const char *path, uint64_t seed, long ops)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = MEMORY_LIMIT;
	struct pc_cache *c = pc_cache_new(&cfg);
	struct pc_file *f = c ? open_retrying(c, path, log) : NULL;
	if (!f) {
		child_error(log, c ? "pc_open failed" : "pc_cache_new failed", 0);
		_exit(2);
	}
	struct pc_stats st;
	pc_file_stats(f, &st);
	atomic_store(&log->block_size, st.block_size);

	struct writer w[NTHREADS];
	pthread_t th[NTHREADS];
	for (unsigned t = 0; t < NTHREADS; t++) {
		w[t] = (struct writer){ .log = log, .f = f, .t = t, .rng = seed * 31 + t + 1, .ops = ops };
		w[t].buf = malloc(MAX_RECORD_LEN);
		w[t].rbuf = malloc(MAX_RECORD_LEN);
		w[t].pend = malloc(LIST_CAP * sizeof(struct pending));
		w[t].mine = malloc(LIST_CAP * sizeof(struct pending));
		REQUIRE(w[t].buf && w[t].rbuf && w[t].pend && w[t].mine);
		REQUIRE(pthread_create(&th[t], NULL, writer_main, &w[t]) == 0);
	}
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	atomic_store(&log->final_size, (int64_t)pc_size(f));
	if (pc_close(f) != 0)
		child_error(log, "pc_close failed", 0);
	if (pc_cache_destroy(c) != 0)
		child_error(log, "pc_cache_destroy failed", 0);
	_exit(atomic_load(&log->errors) ? 1 : 0);
}

/* ------------------------------------------------------- the parent's check */

struct check {
	const uint8_t *disk;
	uint64_t size, bs;
	unsigned reports;
	bool ok;
	uint64_t acked_bytes;  /* acknowledged record bytes checked */
	uint64_t lost_unacked; /* records the last child wrote whose last version is not whole on disk */
};

static void fail(struct check *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct check *k, const char *fmt, ...)
{
	k->ok = false;
	if (k->reports++ >= MAX_REPORTS)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "   ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

/* What the disk block around a bad byte holds, for the report: zeros, or
 * the version of the record whose bytes match most of it. */
static void describe_block(const struct check *k, const struct crash_log *log, uint32_t id, uint64_t pos, uint8_t *tmp)
{
	const struct rec *r = &log->rec[id];
	uint64_t lo = tu_max_u64(tu_round_down(pos, k->bs), r->off);
	uint64_t hi = tu_min_u64(tu_min_u64(tu_round_up(pos + 1, k->bs), r->off + r->len), k->size);
	size_t zeros = 0;
	for (uint64_t p = lo; p < hi; p++)
		zeros += k->disk[p] == 0;
	fprintf(stderr, "      block %llu, record bytes [%llu, %llu) of it: %zu zero", (unsigned long long)(pos / k->bs),
		(unsigned long long)lo, (unsigned long long)hi, zeros);
	uint32_t s = atomic_load(&r->submitted);
	for (uint32_t v = 1; v <= s; v++) {
		tu_fill_pattern(tmp, hi - lo, record_seed(id, v), lo);
		size_t same = 0;
		for (uint64_t p = lo; p < hi; p++)
			same += k->disk[p] == tmp[p - lo];
		fprintf(stderr, ", %zu of v%u", same, v);
	}
	fprintf(stderr, "\n");
}

/* Bytes [from, to) of the disk image must be zero (no write covers them). */
static void check_zero(struct check *k, uint64_t from, uint64_t to, const char *what)
{
	to = tu_min_u64(to, k->size);
	for (uint64_t p = from; p < to; p++)
		if (k->disk[p]) {
			fail(k, "byte %llu is 0x%02x, but %s: no write ever put data there", (unsigned long long)p,
			     k->disk[p], what);
			return;
		}
}

/*
 * Record id on disk: each byte from a version in [lo, s], where lo is the
 * acked version (or 1), and zero allowed only if nothing is acked.
 */
static void check_record(struct check *k, const struct crash_log *log, uint32_t id, uint8_t **pat)
{
	const struct rec *r = &log->rec[id];
	uint32_t s = atomic_load(&r->submitted), a = atomic_load(&r->acked);
	uint64_t end = r->off + r->len;
	if (a && end > k->size) {
		fail(k, "record %u [%llu, %llu) v%u acknowledged, but the file is only %llu bytes", id,
		     (unsigned long long)r->off, (unsigned long long)end, a, (unsigned long long)k->size);
		return;
	}
	bool by_last_child = atomic_load(&r->gen) == atomic_load(&log->gen);
	if (r->off >= k->size) {
		k->lost_unacked += by_last_child;
		return;
	}
	size_t n = (size_t)(tu_min_u64(end, k->size) - r->off);
	const uint8_t *d = k->disk + r->off;
	uint32_t lo = a ? a : 1;
	if (a)
		k->acked_bytes += n;
	/* Usually the last version is there whole: one comparison. */
	tu_fill_pattern(pat[s - lo], n, record_seed(id, s), r->off);
	if (n == r->len && memcmp(d, pat[s - lo], n) == 0)
		return;
	k->lost_unacked += by_last_child;
	for (uint32_t v = lo; v < s; v++)
		tu_fill_pattern(pat[v - lo], n, record_seed(id, v), r->off);
	for (size_t i = 0; i < n; i++) {
		bool good = !a && d[i] == 0;
		for (uint32_t v = lo; v <= s && !good; v++)
			good = d[i] == pat[v - lo][i];
		if (good)
			continue;
		fail(k, "record %u [%llu, %llu) submitted v%u acked v%u: byte %llu is 0x%02x, v%u has 0x%02x%s", id,
		     (unsigned long long)r->off, (unsigned long long)end, s, a, (unsigned long long)(r->off + i), d[i],
		     s, pat[s - lo][i], a ? " (acknowledged data lost or corrupted)" : " (never written there)");
		if (k->reports <= MAX_REPORTS)
			describe_block(k, log, id, r->off + i, pat[s - lo + 1]);
		return;
	}
}

/* Is size the exact end of a submitted record (the size fsync sets)? */
static bool is_record_end(const struct crash_log *log, uint32_t nrec, uint64_t size)
{
	for (uint32_t id = 0; id < nrec; id++)
		if (atomic_load(&log->rec[id].submitted) && log->rec[id].off + log->rec[id].len == size)
			return true;
	return false;
}

static void check_size(struct check *k, const struct crash_log *log, uint32_t nrec)
{
	uint64_t max_end = 0, acked_end = 0;
	for (uint32_t id = 0; id < nrec; id++) {
		const struct rec *r = &log->rec[id];
		if (atomic_load(&r->submitted))
			max_end = tu_max_u64(max_end, r->off + r->len);
		if (atomic_load(&r->acked))
			acked_end = tu_max_u64(acked_end, r->off + r->len);
	}
	uint64_t max_size = tu_round_up(max_end, k->bs);
	if (k->size < acked_end || k->size > max_size)
		fail(k, "file size %llu: acknowledged data ends at %llu, submitted data at %llu (%llu rounded up)",
		     (unsigned long long)k->size, (unsigned long long)acked_end, (unsigned long long)max_end,
		     (unsigned long long)max_size);
	else if (k->size % k->bs && !is_record_end(log, nrec, k->size))
		fail(k, "file size %llu is neither a multiple of the block size %llu nor the end of a record",
		     (unsigned long long)k->size, (unsigned long long)k->bs);
}

/* Check the backing file against the log; true if all is well. */
static bool check_file(const char *path, const struct crash_log *log, uint64_t *lost_unacked, uint64_t *acked_bytes)
{
	struct check k = { .ok = true };
	size_t size = 0;
	/* The first child may die before it creates the file. */
	uint8_t *disk = access(path, F_OK) == 0 ? tu_read_backing(path, &size) : calloc(1, 1);
	REQUIRE(disk);
	k.disk = disk;
	k.size = size;
	k.bs = atomic_load(&log->block_size);
	if (!k.bs) /* no child got as far as pc_open: nothing was written */
		k.bs = 4096;
	uint32_t nrec = atomic_load_explicit(&log->nrec, memory_order_acquire);
	uint32_t maxv = 1;
	for (uint32_t id = 0; id < nrec; id++)
		maxv = tu_max_u64(maxv, atomic_load(&log->rec[id].submitted));
	uint8_t **pat = malloc((maxv + 2) * sizeof(*pat)); /* one more for describe_block */
	REQUIRE(pat);
	for (uint32_t v = 0; v < maxv + 2; v++)
		REQUIRE((pat[v] = malloc(MAX_RECORD_LEN)));

	check_size(&k, log, nrec);
	uint64_t pos = 0; /* everything before pos is checked */
	for (uint32_t id = 0; id < nrec; id++) {
		const struct rec *r = &log->rec[id];
		if (!atomic_load(&r->submitted))
			continue; /* never written: its place is checked as a gap */
		check_zero(&k, pos, r->off, "it lies between records");
		check_record(&k, log, id, pat);
		pos = r->off + r->len;
	}
	check_zero(&k, pos, size, "it lies past the last record");

	for (uint32_t v = 0; v < maxv + 2; v++)
		free(pat[v]);
	free(pat);
	free(disk);
	*lost_unacked += k.lost_unacked;
	*acked_bytes += k.acked_bytes;
	return k.ok;
}

/* --------------------------------------------------------- the parent */

static volatile pid_t current_child;

static void watchdog(int sig)
{
	(void)sig;
	static const char msg[] = "test_crash: watchdog: the test hangs (over 240 s); killing the child\n";
	if (current_child > 0)
		kill(current_child, SIGKILL);
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(3);
}

static pid_t spawn(struct crash_log *log, const char *path, uint64_t seed, long ops)
{
	atomic_store(&log->progress, 0);
	uint32_t gen = atomic_fetch_add(&log->gen, 1) + 1;
	/* The file grows all along (every child extends it from the size the
	 * last one left), to FILE_CAP at the last crash point. */
	atomic_store(&log->cap, tu_max_u64(MiB, FILE_CAP * tu_min_u64(gen, CRASH_POINTS) / CRASH_POINTS));
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		child_main(log, path, seed, ops);
	current_child = pid;
	return pid;
}

enum progress { REACHED, DIED, HUNG };

/* Wait until the child has completed `ops` operations, or died (its wait
 * status in *status), or made no progress for HANG_MS (reported). */
static enum progress wait_progress(struct crash_log *log, pid_t pid, uint64_t ops, int *status)
{
	uint64_t last = atomic_load(&log->progress), since = tu_now_ms();
	while (atomic_load(&log->progress) < ops) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return DIED;
		uint64_t now = atomic_load(&log->progress);
		if (now != last) {
			last = now;
			since = tu_now_ms();
		} else if (tu_now_ms() - since > HANG_MS) {
			fprintf(stderr, "child %d made no progress for %d s (at %llu operations)\n", (int)pid,
				HANG_MS / 1000, (unsigned long long)now);
			return HUNG;
		}
		usleep(200);
	}
	return REACHED;
}

static void kill_and_reap(pid_t pid, int *status)
{
	kill(pid, SIGKILL);
	REQUIRE(waitpid(pid, status, 0) == pid);
	current_child = 0;
}

/* Run one child and kill it at a random moment: a quarter of them 0-60 ms
 * after fork, the others after 1 to max_ops operations and up to 10 ms
 * more.  False if it hung or died by itself. */
static bool crash_once(struct crash_log *log, const char *path, uint64_t *rng, long max_ops)
{
	pid_t pid = spawn(log, path, tu_rand(rng), -1);
	enum progress p = REACHED;
	int status = 0;
	if (tu_rand(rng) % 4 == 0)
		usleep((useconds_t)(tu_rand(rng) % 60000));
	else
		p = wait_progress(log, pid, 1 + tu_rand(rng) % (uint64_t)max_ops, &status);
	if (p == REACHED)
		usleep((useconds_t)(tu_rand(rng) % 10000));
	if (p != DIED)
		kill_and_reap(pid, &status);
	current_child = 0;
	if (p == REACHED && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
		p = DIED;
	if (p == DIED)
		fprintf(stderr, "child %d died before it was killed (status 0x%x)\n", (int)pid, status);
	return p == REACHED;
}

/* The last child ends cleanly: it closes, destroys its cache and exits 0. */
static bool clean_run(struct crash_log *log, const char *path, uint64_t *rng, long ops)
{
	pid_t pid = spawn(log, path, tu_rand(rng), ops);
	int status = 0;
	enum progress p = wait_progress(log, pid, UINT64_MAX, &status);
	if (p != DIED)
		kill_and_reap(pid, &status);
	current_child = 0;
	return p == DIED && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The scratch directory is the case's own: it stays for a post-mortem
 * when a check failed. */
TEST_CASE(acknowledged_writes_survive_kills)
{
	uint64_t rng = test_seed("test_crash", 0x637261736821ull);
	long max_ops = tu_quick() ? 150 : 300;
	const char *dir = test_dir("test_crash");
	char path[4200];
	test_path(path, sizeof(path), dir, "data");
	struct crash_log *log = log_new();
	signal(SIGALRM, watchdog);
	alarm(WATCHDOG_S);
	double t0 = tu_now_s();

	uint64_t lost_unacked = 0, acked_bytes = 0, lossy_points = 0;
	double check_s = 0;
	int points = 0;
	for (; points < CRASH_POINTS; points++) {
		bool ran = crash_once(log, path, &rng, max_ops);
		CHECK(ran);
		uint64_t before = lost_unacked;
		double c0 = tu_now_s();
		bool good = check_file(path, log, &lost_unacked, &acked_bytes);
		check_s += tu_now_s() - c0;
		CHECK(good);
		lossy_points += lost_unacked > before;
		CHECK(atomic_load(&log->errors) == 0);
		if (!ran || !good || atomic_load(&log->errors)) {
			fprintf(stderr, "test_crash: failed at crash point %d\n", points);
			break;
		}
	}
	if (points == CRASH_POINTS) {
		CHECK(clean_run(log, path, &rng, max_ops / 2));
		uint64_t dummy = 0;
		CHECK(check_file(path, log, &dummy, &acked_bytes));
		struct stat st;
		CHECK(stat(path, &st) == 0 && st.st_size == atomic_load(&log->final_size));
		CHECK(atomic_load(&log->errors) == 0);
	}
	/* The test proved something only if data was acknowledged and kills
	 * landed while unacknowledged data was still in a cache. */
	CHECK(atomic_load(&log->acks_dsync) > 0);
	CHECK(atomic_load(&log->acks_fsync) > 0);
	CHECK(atomic_load(&log->acks_fdatasync) > 0);
	CHECK(lossy_points > 0);

	printf("test_crash: %d crash points in %.1f s (%.1f s checking): %u records, %llu writes (%llu read back), acked %llu by PC_DSYNC, "
	       "%llu by fsync, %llu by fdatasync; %llu crash points cost unacked data; %llu EBUSY retries at open; "
	       "file %lld bytes, block %u\n",
	       points, tu_now_s() - t0, check_s, atomic_load(&log->nrec), (unsigned long long)atomic_load(&log->writes),
	       (unsigned long long)atomic_load(&log->readbacks), (unsigned long long)atomic_load(&log->acks_dsync),
	       (unsigned long long)atomic_load(&log->acks_fsync), (unsigned long long)atomic_load(&log->acks_fdatasync),
	       (unsigned long long)lossy_points, (unsigned long long)atomic_load(&log->open_busy),
	       (long long)atomic_load(&log->final_size), atomic_load(&log->block_size));
	alarm(0);
	if (!tu_failed)
		test_rmdir(dir);
}
