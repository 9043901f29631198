/*
 * test_reliability.c - persistent write errors end in a reported error or
 * in success, never in a hang, and nothing acknowledged is lost.
 *
 * Device write errors are injected with the public testing hook
 * (pc_fault_inject) on one file (ENOSPC, EIO, EDQUOT, EFBIG), for
 * buffered, PC_DONTCACHE, PC_DSYNC and PC_DIRECT writes:
 *   - a writer of the failing file gets the error (a short count, then
 *     -1) instead of waiting in the throttle for ever, while a writer of
 *     another file goes on; PC_NOWAIT writers get the error, not EAGAIN;
 *     new writes fail up front; the failed data stays dirty and cached
 *     (uncached data too); fsync reports the error while it lasts;
 *   - once the fault is gone, a retried fsync writes everything, and
 *     every byte a write acknowledged is on the device;
 *   - recovery without fsync: the flusher's retry succeeds and writes
 *     are taken again; truncate and punch also let writes in again;
 *   - pc_cache_destroy with unwritable dirty data returns the error;
 *   - memory full of failing dirty data: a call that needs memory gets
 *     the error, never waits;
 *   - one write larger than the whole cache is throttled as it goes
 *     (dirty data never far past the limit) and, against a failing file,
 *     stops short with what it wrote;
 *   - writeback that cannot allocate a request reports ENOMEM to fsync
 *     (never 0 with data still dirty), and the next fsync writes it.
 * Besides: space reserved ahead of a growing file (reserved once inline,
 * then by the flusher, given back at the end); folio ages across the
 * 32-bit millisecond clock's wrap; a write ending at the largest size the
 * file system allows is written back and one byte more is EFBIG; a
 * write-only handle's partial-block write over existing data is merged
 * and written (the cache reads what the caller may not).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define RECORD 47008u

TEST_SCRATCH_DIR("reliability")

/* ------------------------------------------------------- the faults */

/* Device writes of one file fail with err (the public testing hook). */
static void fail_writes_of(struct pc_file *f, int err)
{
	struct pc_fault rule = { .ops = PC_FAULT_WRITE, .action = PC_FAULT_FAIL, .error = err, .file = f };
	REQUIRE(pc_fault_inject(f->c, &rule) >= 0);
}

static void fault_off(struct pc_cache *c)
{
	CHECK(pc_fault_remove(c, -1) == 0);
}

/* A cache of mem bytes with folios of at most 64 KiB: many folios, so
 * that failing dirty data fills it in small steps. */
static struct pc_cache *cache_with_small_folios(size_t mem)
{
	struct pc_config cfg = tu_config(mem);
	cfg.max_folio_size = 64 * KiB;
	return tu_cache_new(&cfg);
}

/* Say what the cache injected, then destroy it; returns what destroy did. */
static int destroy_cache(struct pc_cache *c)
{
	uint64_t n = pc_fault_count(c, -1);
	if (n)
		printf("%s: %llu faults injected\n", tu_case_name(), (unsigned long long)n);
	return pc_cache_destroy(c);
}

static struct pc_file *open_file(struct pc_cache *c, const char *name)
{
	return tu_open_new(c, dir, name);
}

/* The backing file holds the pattern over [0, len). */
static bool device_has(const char *name, uint64_t len, unsigned salt)
{
	char path[4200];
	test_path(path, sizeof(path), dir, name);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	uint8_t *buf = malloc(MiB), *want = malloc(MiB);
	bool ok = true;
	for (uint64_t at = 0; at < len && ok; at += MiB) {
		size_t n = (size_t)tu_min_u64(MiB, len - at);
		ok = pread(fd, buf, n, (off_t)at) == (ssize_t)n;
		tu_fill_pattern(want, n, salt, at);
		ok = ok && memcmp(buf, want, n) == 0;
	}
	free(buf);
	free(want);
	close(fd);
	return ok;
}

/* After the fault cleared: the error that no fsync reported yet is
 * reported once (errseq), by the fsync that writes the data; then 0. */
static void sync_reports_once(struct pc_file *f, int err)
{
	errno = 0;
	CHECK(pc_fsync(f) == -1 && errno == err);
	CHECK(pc_fsync(f) == 0);
}

/*
 * Fault cleared: fsync reports a write-back error of the file once if its
 * write-back failed since the handle last looked, and 0 if it never did;
 * then 0.  Returns whether there was one.  The file's errseq counter,
 * read after the fsync, says which: no I/O can fail any more then.
 */
static bool sync_reports_any_error_once(struct pc_file *f, int err)
{
	uint64_t seen = f->wb_err_seen;
	errno = 0;
	int r = pc_fsync(f);
	bool failed = (errseq_sample(&f->m->wb_err) >> 16) != (seen >> 16);
	CHECK(failed ? r == -1 && errno == err : r == 0);
	CHECK(pc_fsync(f) == 0);
	return failed;
}

/* ----------------------------------------- a failing file, each mode */

struct other_writer {
	struct pc_file *f;
	uint64_t bytes; /* acknowledged, from 0 */
	int err;        /* the error that stopped it, or 0 */
};

/* Writes 16 MiB to another file of the same device: it must not be
 * stalled by the failing one (it ends, written or refused). */
static void *other_writer_main(void *arg)
{
	struct other_writer *o = arg;
	static uint8_t buf[256 * KiB];
	for (uint64_t at = 0; at < 16 * MiB && !o->err; at += sizeof(buf)) {
		tu_fill_pattern(buf, sizeof(buf), 9, at);
		ssize_t n = pc_pwrite(o->f, buf, sizeof(buf), (off_t)at, 0);
		if (n > 0)
			o->bytes += (uint64_t)n;
		if (n != (ssize_t)sizeof(buf))
			o->err = n < 0 ? errno : EIO;
	}
	return NULL;
}

/* ENOSPC and EDQUOT are the device's: every file of it is refused. */
static bool device_wide(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

/* Write records until the failing file refuses; returns bytes acknowledged. */
static uint64_t write_until_error(struct pc_file *f, int flags, int want_errno)
{
	static uint8_t rec[RECORD];
	uint64_t at = 0;
	for (int i = 0; i < 4096; i++) {
		tu_fill_pattern(rec, RECORD, 1, at);
		errno = 0;
		ssize_t n = pc_pwrite(f, rec, RECORD, (off_t)at, flags);
		if (n < 0) {
			CHECK(errno == want_errno);
			return at;
		}
		at += (uint64_t)n;
		if ((size_t)n < RECORD) { /* short: the error comes next */
			errno = 0;
			CHECK(pc_pwrite(f, rec, RECORD, (off_t)at, flags) == -1 && errno == want_errno);
			return at;
		}
	}
	CHECK(!"the failing file never refused a write");
	return at;
}

/* A failing file in write mode `flags`, with error err: its writer gets
 * the error, another file's writer goes on; the failed data stays dirty
 * and is all written once the fault is gone. */
static void failing_file(int flags, int err)
{
	struct pc_cache *c = cache_with_small_folios(16 * MiB);
	struct pc_file *f = open_file(c, "failing");
	struct pc_file *g = open_file(c, "other");
	fail_writes_of(f, err);

	struct other_writer o = { g, 0, 0 };
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, other_writer_main, &o) == 0);
	uint64_t acked = write_until_error(f, flags, err);
	pthread_join(t, NULL);
	if (device_wide(err) && !(flags & PC_DIRECT))
		CHECK(o.err == 0 || o.err == err); /* all written, or refused too */
	else
		CHECK(o.err == 0 && o.bytes == 16 * MiB);

	uint8_t b[100] = { 0 };
	if (flags & PC_DIRECT) {
		/* Direct writes meet the device themselves: each reports it. */
		static uint8_t rec[RECORD];
		errno = 0;
		CHECK(pc_pwrite(f, rec, RECORD, (off_t)acked, flags) == -1 && errno == err);
	} else {
		/* Refused up front now, PC_NOWAIT too. */
		errno = 0;
		CHECK(pc_pwrite(f, b, sizeof(b), 0, 0) == -1 && errno == err);
		errno = 0;
		CHECK(pc_pwrite(f, b, sizeof(b), (off_t)acked, PC_NOWAIT) == -1 && errno == err);
	}
	/* The failed data is still there, dirty and cached. */
	struct pc_stats st;
	pc_file_stats(f, &st);
	if (!(flags & (PC_DSYNC | PC_DIRECT)))
		CHECK(st.dirty_bytes > 0 && st.cached_bytes >= st.dirty_bytes);
	errno = 0;
	if (flags & PC_DIRECT) /* maybe nothing is dirty: at most the error */
		CHECK(pc_fsync(f) == 0 || errno == err);
	else
		CHECK(pc_fsync(f) == -1 && errno == err);

	/* The fault clears: a retried fsync writes it all. */
	fault_off(c);
	CHECK(pc_fsync(f) == 0);
	pc_file_stats(f, &st);
	CHECK(st.dirty_bytes == 0);
	CHECK(device_has("failing", acked, 1));
	CHECK(pc_pwrite(f, b, sizeof(b), (off_t)acked, 0) == (ssize_t)sizeof(b));
	errno = 0;
	int r = pc_fsync(g); /* g's own write-back may have met the fault too */
	CHECK(r == 0 || errno == err);
	CHECK(pc_close(f) == 0);
	CHECK(pc_close(g) == 0);
	CHECK(destroy_cache(c) == 0);
	CHECK(device_has("other", o.bytes, 9));
	printf("mode %#x, %s: %llu bytes acknowledged before the error\n", flags, strerror(err),
	       (unsigned long long)acked);
}

TEST_CASE(failing_file_buffered_enospc)
{
	failing_file(0, ENOSPC);
}

TEST_CASE(failing_file_dontcache_eio)
{
	failing_file(PC_DONTCACHE, EIO);
}

TEST_CASE(failing_file_dsync_edquot)
{
	failing_file(PC_DSYNC, EDQUOT);
}

TEST_CASE(failing_file_dontcache_dsync_efbig)
{
	failing_file(PC_DONTCACHE | PC_DSYNC, EFBIG);
}

TEST_CASE(failing_file_direct_enospc)
{
	failing_file(PC_DIRECT, ENOSPC);
}

/* File `name` of `size` bytes (pattern 8) left by a cache now gone. */
static void leave_file(const char *name, uint64_t size)
{
	struct pc_cache *c = cache_with_small_folios(16 * MiB);
	struct pc_file *f = open_file(c, name);
	static uint8_t buf[MiB];
	for (uint64_t at = 0; at < size; at += MiB) {
		size_t n = (size_t)tu_min_u64(MiB, size - at);
		tu_fill_pattern(buf, n, 8, at);
		REQUIRE(pc_pwrite(f, buf, n, (off_t)at, 0) == (ssize_t)n);
	}
	REQUIRE(pc_close(f) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}

/* The buffered ENOSPC case over files that earlier caches wrote and left
 * (truncated at open): what they left behind changes nothing. */
TEST_CASE(failing_file_buffered_enospc_over_old_files)
{
	leave_file("failing", 100);
	leave_file("other", 16 * MiB);
	failing_file(0, ENOSPC);
}

/* ------------------------------------------------------ recovery */

/* Without fsync: the flusher's retry succeeds and writes are taken again.
 * Truncate also lets a failing file take writes again. */
TEST_CASE(recovery_by_flusher_retry_or_truncate)
{
	struct pc_cache *c = cache_with_small_folios(16 * MiB);
	struct pc_file *f = open_file(c, "recover");
	fail_writes_of(f, ENOSPC);
	uint64_t acked = write_until_error(f, 0, ENOSPC);
	fault_off(c);
	/* The flusher retries (after a back-off of a second) and succeeds. */
	uint8_t b[4096];
	tu_fill_pattern(b, sizeof(b), 1, acked);
	bool taken = false;
	for (int i = 0; i < 600 && !taken; i++) { /* 30 s: slow sanitizer builds */
		taken = pc_pwrite(f, b, sizeof(b), (off_t)acked, 0) == (ssize_t)sizeof(b);
		if (!taken)
			usleep(50000);
	}
	CHECK(taken);
	sync_reports_once(f, ENOSPC);
	CHECK(device_has("recover", acked + sizeof(b), 1));

	/* Truncate lets writes in again even while the fault lasts. */
	fail_writes_of(f, EIO);
	write_until_error(f, 0, EIO);
	CHECK(pc_ftruncate(f, 0) == 0);
	CHECK(pc_pwrite(f, b, sizeof(b), 0, 0) == (ssize_t)sizeof(b));
	fault_off(c);
	sync_reports_once(f, EIO);
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
}

/* ------------------------- the throttle, the other files of a device */

struct bulk_writer {
	struct pc_file *f;
	uint64_t acked;
	int err;
};

/* Writes 64 MiB in 1 MiB pieces until an error. */
static void *bulk_writer_main(void *arg)
{
	struct bulk_writer *b = arg;
	static uint8_t buf[MiB];
	for (uint64_t at = 0; at < 64 * MiB; at += MiB) {
		tu_fill_pattern(buf, MiB, 2, at);
		ssize_t n = pc_pwrite(b->f, buf, MiB, (off_t)at, 0);
		if (n < 0) {
			b->err = errno;
			return NULL;
		}
		b->acked = at + (uint64_t)n;
		if ((size_t)n < MiB) {
			n = pc_pwrite(b->f, buf, MiB, (off_t)b->acked, 0);
			b->err = n < 0 ? errno : 0;
			return NULL;
		}
	}
	return NULL;
}

/*
 * A writer waiting in the dirty throttle when the write-back of its file
 * starts failing gets the error instead of waiting for ever: write-back is
 * made slow (each device write 200 ms late) until the writer waits, then
 * it fails.
 */
TEST_CASE(throttled_writer_gets_error)
{
	struct pc_cache *c = cache_with_small_folios(16 * MiB);
	struct pc_file *f = open_file(c, "throttled");
	struct pc_fault slow = { .ops = PC_FAULT_WRITE, .action = PC_FAULT_DELAY, .delay_ms = 200, .file = f };
	int slow_id = pc_fault_inject(c, &slow);
	REQUIRE(slow_id >= 0);
	struct bulk_writer b = { f, 0, 0 };
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, bulk_writer_main, &b) == 0);
	struct pc_stats st;
	for (int i = 0; i < 3000; i++) {
		pc_cache_stats(c, &st);
		if (st.throttle_waits > 0)
			break;
		usleep(10000);
	}
	CHECK(st.throttle_waits > 0); /* it waits in the throttle now */
	CHECK(pc_fault_remove(c, slow_id) == 0);
	double t0 = tu_now_s();
	fail_writes_of(f, ENOSPC);
	pthread_join(t, NULL); /* the watchdog fails a writer that never returns */
	double took = tu_now_s() - t0;
	printf("throttled writer: ENOSPC %.3f s after the fault began\n", took);
	/* The header's bound is about 20 ms after the failed write-back; the
	 * write-back itself comes within the flusher's round.  10 s is far
	 * beyond both (a loaded machine), far below "for ever". */
	CHECK(took < 10.0);
	CHECK(b.err == ENOSPC);
	CHECK(b.acked < 64 * MiB);
	fault_off(c);
	sync_reports_once(f, ENOSPC);
	CHECK(device_has("throttled", b.acked, 2));
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
}

/* A full device refuses new writes to every file of it, not only to the
 * one whose write-back met it; a retried fsync lets them in again. */
TEST_CASE(full_device_refuses_every_file)
{
	struct pc_cache *c = cache_with_small_folios(16 * MiB);
	struct pc_file *f = open_file(c, "full-a");
	struct pc_file *g = open_file(c, "full-b");
	fail_writes_of(f, ENOSPC);
	write_until_error(f, 0, ENOSPC);
	uint8_t b[100] = { 0 };
	errno = 0;
	CHECK(pc_pwrite(g, b, sizeof(b), 0, 0) == -1 && errno == ENOSPC);
	fault_off(c);
	sync_reports_once(f, ENOSPC);
	CHECK(pc_pwrite(g, b, sizeof(b), 0, 0) == (ssize_t)sizeof(b));
	/* And a punch lets a failing file take writes again, as truncate. */
	fail_writes_of(f, EIO);
	uint64_t at = write_until_error(f, 0, EIO);
	/* No write-back in flight: one that fails after the punch makes the
	 * file failing again, rightly (its data still cannot go), and the
	 * write below would be refused for that (ASan's slower runs). */
	struct pc_stats st;
	CHECK(TU_POLL((pc_cache_stats(c, &st), st.writeback_bytes == 0), 10000));
	CHECK(pc_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0);
	CHECK(pc_pwrite(f, b, sizeof(b), (off_t)at, 0) == (ssize_t)sizeof(b));
	fault_off(c);
	sync_reports_once(f, EIO);
	CHECK(pc_close(f) == 0);
	CHECK(pc_close(g) == 0);
	CHECK(destroy_cache(c) == 0);
}

/*
 * The read that merges a partly written block before its write-back fails:
 * the data cannot go, so the file is failing as for a failed write, and a
 * writer past the dirty limit gets the error, never waits for ever.
 */
TEST_CASE(failed_merge_read_fails_file)
{
	struct pc_cache *c = cache_with_small_folios(16 * MiB);
	char path[4200];
	test_path(path, sizeof(path), dir, "merge");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, 0) == 0);
	uint8_t *zero = calloc(1, MiB);
	REQUIRE(zero);
	for (int i = 0; i < 32; i++)
		REQUIRE(pwrite(fd, zero, MiB, (off_t)i * (off_t)MiB) == (ssize_t)MiB);
	REQUIRE(fsync(fd) == 0);
	close(fd);
	free(zero);
	struct pc_file *f = pc_open(c, path, O_RDWR, 0);
	REQUIRE(f);
	struct pc_fault rule = { .ops = PC_FAULT_READ, .action = PC_FAULT_FAIL, .error = EIO, .file = f };
	REQUIRE(pc_fault_inject(c, &rule) >= 0);
	/* 5 bytes in each block: deferred partial writes, merged at write-back. */
	int err = 0;
	for (uint64_t at = 100; at < 32 * MiB && !err; at += 4096)
		if (pc_pwrite(f, "abcde", 5, (off_t)at, 0) != 5)
			err = errno;
	CHECK(err == EIO);
	fault_off(c);
	errno = 0;
	CHECK(pc_fsync(f) == -1 && errno == EIO); /* reported once */
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
}

/* ------------------------------------------------------ destroy */

/* Destroy with unwritable dirty data returns the error. */
TEST_CASE(destroy_reports_unwritable_data)
{
	struct pc_cache *c = cache_with_small_folios(16 * MiB);
	struct pc_file *f = open_file(c, "destroy");
	fail_writes_of(f, EDQUOT);
	uint8_t b[RECORD];
	tu_fill_pattern(b, sizeof(b), 1, 0);
	CHECK(pc_pwrite(f, b, sizeof(b), 0, 0) == (ssize_t)sizeof(b));
	CHECK(pc_close(f) == 0); /* the flusher writes it, and fails */
	errno = 0;
	CHECK(destroy_cache(c) == -1 && errno == EDQUOT);
}

/* ------------------------------------- memory full of failing data */

/*
 * Memory full of dirty data that cannot be written (every file's
 * write-back fails with EIO, which refuses only that file, so the next
 * file takes more memory): a call that needs a folio gets the error, it
 * never waits for memory that only the fault clearing could free.
 */
TEST_CASE(alloc_fails_when_all_dirty_data_fails)
{
	struct pc_config cfg = tu_config(4 * MiB);
	cfg.max_folio_size = 64 * KiB;
	cfg.dirty_limit_bytes = 2 * MiB;
	struct pc_cache *c = tu_cache_new(&cfg);
	/* A file with data on the device, not cached yet. */
	char cold[4200];
	test_path(cold, sizeof(cold), dir, "cold");
	int fd = open(cold, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	static uint8_t buf[MiB];
	tu_fill_pattern(buf, MiB, 5, 0);
	REQUIRE(pwrite(fd, buf, MiB, 0) == (ssize_t)MiB);
	close(fd);
	struct pc_fault rule = { .ops = PC_FAULT_WRITE, .action = PC_FAULT_FAIL, .error = EIO };
	REQUIRE(pc_fault_inject(c, &rule) >= 0);
	enum { NF = 64 };
	struct pc_file *f[NF];
	uint64_t acked[NF];
	unsigned used = 0;
	struct pc_stats st;
	for (; used < NF; used++) {
		char name[32];
		snprintf(name, sizeof(name), "stuck%u", used);
		f[used] = open_file(c, name);
		acked[used] = write_until_error(f[used], 0, EIO);
		pc_cache_stats(c, &st);
		if (st.dirty_bytes + cfg.max_folio_size > cfg.memory_limit)
			break; /* not one more folio: memory is full of failing dirty data */
	}
	REQUIRE(used < NF);
	used++;
	struct pc_file *g = pc_open(c, cold, O_RDONLY, 0);
	REQUIRE(g);
	/* What little memory is left may serve a first short read; the next
	 * read needs memory that nothing can free: the error, not a wait
	 * (the watchdog fails a hang). */
	uint64_t got = 0;
	ssize_t n;
	errno = 0;
	while ((n = pc_pread(g, buf, MiB - got, (off_t)got, 0)) > 0 && got + (uint64_t)n < MiB)
		got += (uint64_t)n;
	printf("all dirty data failing: %u files, dirty %llu KiB of %zu; a cold read got %llu bytes, then %zd (errno "
	       "%d)\n",
	       used, (unsigned long long)(st.dirty_bytes / KiB), cfg.memory_limit / 1024, (unsigned long long)got, n,
	       errno);
	CHECK(n == -1 && errno == EIO);
	fault_off(c);
	unsigned failed = 0;
	for (unsigned i = 0; i < used; i++) {
		/* A file may have been refused only because memory was full
		 * (the allocation's error) before the flusher tried its data:
		 * it has no write error to report, and its fsync writes it. */
		failed += sync_reports_any_error_once(f[i], EIO);
		char name[32];
		snprintf(name, sizeof(name), "stuck%u", i);
		CHECK(device_has(name, acked[i], 1));
		CHECK(pc_close(f[i]) == 0);
	}
	printf("all dirty data failing: %u of %u files had a write-back error to report\n", failed, used);
	CHECK(failed >= 1);
	CHECK(pc_pread(g, buf, MiB, 0, 0) == (ssize_t)MiB); /* memory again */
	CHECK(device_has("cold", MiB, 5));
	CHECK(pc_close(g) == 0);
	CHECK(destroy_cache(c) == 0);
}

/* ----------------------------------------------- space reserved ahead */

/* Blocks the backing file has allocated, in bytes. */
static uint64_t allocated_bytes(const char *name)
{
	char path[4200];
	test_path(path, sizeof(path), dir, name);
	struct stat st;
	REQUIRE(stat(path, &st) == 0);
	return (uint64_t)st.st_blocks * 512;
}

/* Pages of the backing file in the kernel's page cache (mincore). */
static uint64_t kernel_cached_pages(const char *name)
{
	char path[4200];
	test_path(path, sizeof(path), dir, name);
	int fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	struct stat st;
	REQUIRE(fstat(fd, &st) == 0);
	size_t len = (size_t)st.st_size, page = (size_t)sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	REQUIRE(p != MAP_FAILED);
	unsigned char *vec = malloc((len + page - 1) / page);
	REQUIRE(vec && mincore(p, len, vec) == 0);
	uint64_t n = 0;
	for (size_t i = 0; i < (len + page - 1) / page; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(p, len);
	close(fd);
	return n;
}

/* Write [0, size) in 1 MiB pieces with pattern salt. */
static void write_sequential(struct pc_file *f, uint64_t size, unsigned salt)
{
	static uint8_t buf[MiB];
	for (uint64_t at = 0; at < size; at += MiB) {
		size_t n = (size_t)tu_min_u64(MiB, size - at);
		tu_fill_pattern(buf, n, salt, at);
		CHECK(pc_pwrite(f, buf, n, (off_t)at, 0) == (ssize_t)n);
	}
}

/*
 * Space reserved ahead of a growing file is given back once it is
 * written and closed, also when nothing truncated it (its last partial
 * block went through the kernel, which set the size: ext4 then ignores a
 * punch past the end).  And a truncate at open frees the old file's
 * blocks, reservation included, so the new data reserves again (ENOSPC
 * in the call, not at write-back).
 */
TEST_CASE(reservation_given_back_after_close)
{
	const uint64_t size = 20 * MiB + 100;
	for (int round = 0; round < 3; round++) {
		struct pc_cache *c = cache_with_small_folios(64 * MiB);
		struct pc_file *f = open_file(c, "reserve");
		write_sequential(f, size, 3);
		CHECK(pc_close(f) == 0); /* no fsync: the flusher, then destroy */
		CHECK(destroy_cache(c) == 0);
		uint64_t got = allocated_bytes("reserve");
		printf("reservation: %llu bytes written, %llu allocated after destroy\n", (unsigned long long)size,
		       (unsigned long long)got);
		CHECK(got <= size + 64 * KiB); /* the last block, metadata: not MiB */
		/* Only the last partial block went through the kernel's page
		 * cache: no direct write was turned buffered on the way. */
		uint64_t resident = kernel_cached_pages("reserve");
		CHECK(resident <= 1);
		if (resident > 1)
			printf("  %llu pages of it in the kernel's page cache\n", (unsigned long long)resident);
		CHECK(device_has("reserve", size, 3));
	}
	struct pc_cache *c = cache_with_small_folios(64 * MiB);
	struct pc_file *f = open_file(c, "reserve"); /* O_TRUNC of the 20 MiB file */
	write_sequential(f, 2 * MiB, 4);
	CHECK(allocated_bytes("reserve") >= 8 * MiB); /* reserved ahead (RESERVE_AHEAD_MIN), at once */
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
	CHECK(allocated_bytes("reserve") <= 2 * MiB + 64 * KiB);
	CHECK(device_has("reserve", 2 * MiB, 4));
}

/*
 * A sequential writer reserves space inline once, at its first write: the
 * flusher reserves ahead of it from then on (backing_reserve_soon), so the
 * writer never stalls on the fallocate.  After each write the test waits
 * for the flusher to take the request (it is not timing the flusher), and
 * the reservation must then reach past the next write; at the end the
 * space reserved ahead is given back as before.
 */
TEST_CASE(flusher_reserves_ahead_of_writer)
{
	struct pc_cache *c = cache_with_small_folios(64 * MiB);
	struct pc_file *f = open_file(c, "reserve-ahead");
	static uint8_t buf[MiB];
	const uint64_t size = 48 * MiB;
	bool ahead = true;
	for (uint64_t at = 0; at < size; at += MiB) {
		tu_fill_pattern(buf, MiB, 5, at);
		CHECK(pc_pwrite(f, buf, MiB, (off_t)at, PC_DONTCACHE) == (ssize_t)MiB);
		/* Up to a minute: a round of the flusher on a loaded machine
		 * (sanitizers, other tests' I/O) can spend seconds in a
		 * fallocate that waits for the file's write-back in flight;
		 * a request never taken fails all the same. */
		for (int i = 0; i < 60000 && atomic_load(&f->m->reserve_want); i++)
			usleep(1000);
		CHECK(atomic_load(&f->m->reserve_want) == 0);
		ahead = ahead && (uint64_t)atomic_load(&f->m->reserve_end) >= at + 2 * MiB;
	}
	CHECK(ahead);
	struct pc_stats s;
	pc_cache_stats(c, &s);
	printf("reservation ahead: %llu inline reservations for %llu MiB in 1 MiB writes\n",
	       (unsigned long long)s.reserve_inline, (unsigned long long)(size / MiB));
	CHECK(s.reserve_inline == 1);
	CHECK(allocated_bytes("reserve-ahead") > size); /* reserved past what was written */
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
	CHECK(allocated_bytes("reserve-ahead") <= size + 64 * KiB);
	CHECK(device_has("reserve-ahead", size, 5));
}

/*
 * A writer's own reservation (the file's first) reaches as far past the
 * write as the writer can dirty at memory speed before pacing slows it
 * (the dirty limit, here 51 MiB of a 256 MiB cache), so a burst of writes
 * right after it does not catch up with the flusher's renewal while that
 * is in fallocate: the writer reserves inline once for all of it.
 */
TEST_CASE(first_reservation_covers_burst)
{
	struct pc_cache *c = cache_with_small_folios(256 * MiB);
	struct pc_file *f = open_file(c, "reserve-burst");
	static uint8_t buf[MiB];
	tu_fill_pattern(buf, MiB, 6, 0);
	CHECK(pc_pwrite(f, buf, MiB, 0, PC_DONTCACHE) == (ssize_t)MiB);
	uint64_t limit = c->cfg.dirty_limit_bytes;
	CHECK((uint64_t)atomic_load(&f->m->reserve_end) >= MiB + limit);
	uint64_t burst = tu_round_up(limit, MiB);
	for (uint64_t at = MiB; at < burst; at += MiB) {
		tu_fill_pattern(buf, MiB, 6, at);
		CHECK(pc_pwrite(f, buf, MiB, (off_t)at, PC_DONTCACHE) == (ssize_t)MiB);
	}
	struct pc_stats s;
	pc_cache_stats(c, &s);
	CHECK(s.reserve_inline == 1);
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
	CHECK(allocated_bytes("reserve-burst") <= burst + 64 * KiB);
	CHECK(device_has("reserve-burst", burst, 6));
}

/* ------------------------------------------------------ huge write */

/* One write larger than the whole cache is throttled as it goes, and
 * against a failing file stops short with what it wrote. */
TEST_CASE(write_larger_than_cache_throttled_or_short)
{
	struct pc_cache *c = cache_with_small_folios(8 * MiB);
	struct pc_file *f = open_file(c, "huge");
	size_t len = 40 * MiB;
	uint8_t *buf = malloc(len);
	REQUIRE(buf);
	tu_fill_pattern(buf, len, 1, 0);
	CHECK(pc_pwrite(f, buf, len, 0, 0) == (ssize_t)len);
	struct pc_stats st;
	pc_cache_stats(c, &st);
	/* Throttled as it went: never much past the limit (1.6 MiB) plus one
	 * piece of the write (1 MiB). */
	CHECK(st.peak_dirty_bytes <= c->cfg.dirty_limit_bytes + 2 * MiB);
	CHECK(pc_fsync(f) == 0);
	CHECK(device_has("huge", len, 1));

	/* Against a failing file it stops short, with what it wrote. */
	fail_writes_of(f, ENOSPC);
	ssize_t n = pc_pwrite(f, buf, len, 0, 0);
	CHECK(n > 0 && (size_t)n < len);
	fault_off(c);
	sync_reports_once(f, ENOSPC);
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
	free(buf);
}

/* ------------------------------------------------ request allocation */

/* Writeback that cannot allocate a request reports ENOMEM to fsync, never
 * 0 with data still dirty; the next fsync writes it. */
TEST_CASE(request_alloc_failure_reported_by_fsync)
{
	/* Large enough, and patient enough, that the flusher leaves the
	 * data to the fsync. */
	struct pc_config cfg = tu_config(64 * MiB);
	cfg.dirty_expire_ms = 600000;
	struct pc_cache *c = tu_cache_new(&cfg);
	struct pc_file *f = open_file(c, "alloc");
	size_t len = 3 * MiB; /* several write-back requests of 1 MiB */
	uint8_t *buf = malloc(len);
	REQUIRE(buf);
	tu_fill_pattern(buf, len, 5, 0);
	CHECK(pc_pwrite(f, buf, len, 0, 0) == (ssize_t)len);
	/* The second request of the fsync cannot be allocated: the first is
	 * in flight, fsync must not say 0, and the data stays dirty. */
	struct pc_fault rule = { .ops = PC_FAULT_ALLOC, .action = PC_FAULT_FAIL, .error = ENOMEM, .skip = 1 };
	int id = pc_fault_inject(c, &rule);
	CHECK(id >= 0);
	errno = 0;
	CHECK(pc_fsync(f) == -1 && errno == ENOMEM);
	CHECK(pc_fault_count(c, id) >= 1);
	struct pc_stats st;
	pc_file_stats(f, &st);
	CHECK(st.dirty_bytes > 0);
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(pc_fsync(f) == 0);
	pc_file_stats(f, &st);
	CHECK(st.dirty_bytes == 0);
	CHECK(device_has("alloc", len, 5));
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
	free(buf);
}

/* ------------------------------------------------------ the rest */

/* Folio ages are right across the 32-bit millisecond clock's wrap. */
TEST_CASE(folio_age_across_clock_wrap)
{
	/* The clock of a cache started 49.7 days ago (only its start time is
	 * read), one second before it wraps; a stamp; then 6 s later. */
	struct pc_cache c;
	memset(&c, 0, sizeof(c));
	struct pc_folio f;
	memset(&f, 0, sizeof(f));
	c.start_ms = now_ms() - (UINT32_MAX - 1000ull);
	atomic_store(&f.stamp, folio_clock_ms(&c));
	c.start_ms -= 6000;
	uint64_t age = folio_age_ms(&c, &f);
	CHECK(age >= 6000 && age < 7000);
	/* A stamp a moment in the future (set after the clock was read). */
	atomic_store(&f.stamp, folio_clock_ms(&c) + 5);
	CHECK(folio_age_ms(&c, &f) == 0);
}

/* A write ending at the largest size the file system allows is written
 * back; one byte more is EFBIG. */
TEST_CASE(write_up_to_largest_size_then_efbig)
{
	struct pc_cache *c = cache_with_small_folios(4 * MiB);
	struct pc_file *f = open_file(c, "largest");
	int64_t max = f->m->max_bytes;
	CHECK(max % f->m->block_size == 0);
	uint8_t b[100];
	tu_fill_pattern(b, sizeof(b), 3, 0);
	CHECK(pc_pwrite(f, b, sizeof(b), (off_t)(max - 100), 0) == 100);
	errno = 0;
	CHECK(pc_pwrite(f, b, sizeof(b), (off_t)(max - 99), 0) == -1 && errno == EFBIG);
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_ftruncate(f, 0) == 0);
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
}

/* A write-only handle's partial-block write over existing data is merged
 * and written: the cache reads what the caller may not. */
TEST_CASE(write_only_partial_block_merged)
{
	char path[4200];
	test_path(path, sizeof(path), dir, "wronly");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	uint8_t a[8192];
	memset(a, 'a', sizeof(a));
	REQUIRE(pwrite(fd, a, sizeof(a), 0) == (ssize_t)sizeof(a));
	close(fd);
	struct pc_cache *c = cache_with_small_folios(4 * MiB);
	struct pc_file *f = pc_open(c, path, O_WRONLY, 0);
	REQUIRE(f);
	CHECK(pc_pwrite(f, "XY", 2, 100, 0) == 2);
	CHECK(pc_close(f) == 0);
	CHECK(destroy_cache(c) == 0);
	fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	uint8_t got[8192];
	CHECK(pread(fd, got, sizeof(got), 0) == (ssize_t)sizeof(got));
	memcpy(a + 100, "XY", 2);
	CHECK(memcmp(got, a, sizeof(a)) == 0);
	close(fd);
}
