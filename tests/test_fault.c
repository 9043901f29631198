/*
 * test_fault.c - the public fault-injection hooks (pc_fault_inject,
 * pc_fault_remove, pc_fault_count) through the cache's public API, each
 * case with io_uring (_uring) and with PC_CFG_NO_IO_URING (_no_uring).
 * (test_io_faults.c checks every rule kind at the I/O layer: exact counts, rule
 * order, continuations of cut transfers, failed io_uring submissions
 * completed exactly once.)
 *
 *   - FAIL on writes (EIO, ENOSPC): pc_fsync reports the error, the data
 *     stays dirty and readable; once the rule is removed the next fsync
 *     succeeds and a plain O_DIRECT read of the backing file holds it.
 *   - FAIL on reads (EIO, ENOSPC): pc_pread reports it; after removal the
 *     right data is read.
 *   - FAIL on sync (EIO, ENOSPC): pc_fsync and pc_fdatasync report it (the
 *     data itself was written); then fsync succeeds.
 *   - SHORT reads (read-ahead, misses) and writes (write-back): the data is
 *     right, and the cut transfers really were continued.
 *   - DELAY: a read takes at least delay_ms.
 *   - file and offset filters; skip/count; one_in with a seed gives the
 *     same faults on the same I/O sequence.
 *   - PC_FAULT_SUBMIT: never hangs pc_fsync, pc_pread or pc_cache_destroy;
 *     the I/O is done anyway (io_uring mode), the rule never fires without
 *     io_uring.
 *   - bad rules (a handle of another cache, a closed handle) are EINVAL; a
 *     rule may outlive its handle (no leak, no use after free: ASan).
 *   - PC_CFG_NO_IO_URING really leaves io_uring out.
 *
 * A buffered pread that misses may ask the device more than once (the
 * miss read, then the reader's own retry after a failure), so counts are
 * exact only with PC_DIRECT reads (one device read each); read-ahead is off
 * except where it is tested.  The harness's watchdog fails a case that
 * hangs (a lost completion).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <stdatomic.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

extern _Atomic long backend_test_continued;

TEST_SCRATCH_DIR("fault")

static bool uring_mode; /* this case: io_uring wanted (else PC_CFG_NO_IO_URING) */

/* An 8 MiB cache, 64 KiB folios, read-ahead on or off, io_uring as the
 * case wants it (uring_mode). */
static struct pc_cache *cache_with_readahead(bool readahead)
{
	struct pc_config cfg = tu_config(8 * MiB);
	cfg.max_folio_size = 64 * KiB;
	if (!readahead)
		cfg.readahead_max_bytes = 0;
	if (!uring_mode)
		cfg.flags |= PC_CFG_NO_IO_URING;
	return tu_cache_new(&cfg);
}

/* ----------------------------------------------------------- io_uring */

TEST_CASE(io_uring_only_when_wanted)
{
	for (int i = 0; i < 2; i++) {
		uring_mode = i == 0;
		struct pc_cache *c = cache_with_readahead(false);
		bool active = tu_stats(c).io_uring != 0;
		CHECK(pc_cache_destroy(c) == 0);
		printf("%s: io_uring %s\n", uring_mode ? "io_uring wanted" : "PC_CFG_NO_IO_URING",
		       active ? "active" : "not active");
		if (!uring_mode)
			CHECK(!active);
	}
}

/* ------------------------------------------------------------ helpers */

static void path_of(char *out, size_t n, const char *name)
{
	test_path(out, n, dir, name);
}

static uint8_t *pattern(size_t n, uint64_t seed)
{
	uint8_t *p = malloc(n);
	REQUIRE(p);
	tu_fill_pattern(p, n, seed, 0);
	return p;
}

/* pc_pread of [off, off+len) must return exactly expect[off, off+len). */
static bool read_matches(struct pc_file *h, const uint8_t *expect, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len);
	REQUIRE(buf);
	ssize_t r = pc_pread(h, buf, len, (off_t)off, 0);
	bool ok = r == (ssize_t)len && memcmp(buf, expect + off, len) == 0;
	if (!ok)
		fprintf(stderr, "   pread [%llu, +%zu): %zd (errno %d)\n", (unsigned long long)off, len, r, errno);
	free(buf);
	return ok;
}

/* pc_pread of 4 KiB at off (with flags) fails with `err`. */
static bool read_fails_flags(struct pc_file *h, uint64_t off, int flags, int err)
{
	uint8_t buf[4096];
	errno = 0;
	return pc_pread(h, buf, sizeof(buf), (off_t)off, flags) == -1 && errno == err;
}

static bool read_fails(struct pc_file *h, uint64_t off, int err)
{
	return read_fails_flags(h, off, 0, err);
}

/* A PC_DIRECT pread of 4 KiB at off: exactly one device read. */
static bool direct_read_matches(struct pc_file *h, const uint8_t *expect, uint64_t off)
{
	uint8_t buf[4096];
	return pc_pread(h, buf, sizeof(buf), (off_t)off, PC_DIRECT) == (ssize_t)sizeof(buf) &&
	       memcmp(buf, expect + off, sizeof(buf)) == 0;
}

/* Write data[0, n) through the cache in unaligned pieces. */
static void write_all(struct pc_file *h, const uint8_t *data, size_t n)
{
	size_t piece = 100 * KiB + 123;
	for (size_t off = 0; off < n; off += piece) {
		size_t l = tu_min_u64(piece, n - off);
		REQUIRE(pc_pwrite(h, data + off, l, (off_t)off, 0) == (ssize_t)l);
	}
}

/* Read all of expect[0, n) back in unaligned pieces. */
static bool read_all_matches(struct pc_file *h, const uint8_t *expect, size_t n)
{
	size_t piece = 77 * KiB + 5;
	bool ok = true;
	for (size_t off = 0; off < n && ok; off += piece)
		ok = read_matches(h, expect, off, tu_min_u64(piece, n - off));
	return ok;
}

/* ----------------------------------------------------- failing writes */

static void write_fail(int err)
{
	char path[4200];
	path_of(path, sizeof(path), "writefail");
	const size_t n = 256 * KiB + 1000;
	uint8_t *data = pattern(n, 1 + (uint64_t)err);
	struct pc_cache *c = cache_with_readahead(false);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	/* Written first: once its write-back fails, the file refuses new
	 * writes (the header's "Write errors"). */
	write_all(h, data, n);
	int id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_WRITE, .action = PC_FAULT_FAIL,
						       .error = err, .file = h});
	CHECK(id >= 0);
	errno = 0;
	CHECK(pc_fsync(h) == -1 && errno == err);
	CHECK(pc_fault_count(c, id) > 0);
	CHECK(tu_stats(c).write_errors > 0);
	CHECK(tu_stats(c).dirty_bytes > 0); /* kept dirty */
	CHECK(read_all_matches(h, data, n));
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_stats(c).dirty_bytes == 0);
	CHECK(tu_verify_disk(path, data, n));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
}

TEST_CASE(write_fail_eio_keeps_dirty_uring) { uring_mode = true; write_fail(EIO); }
TEST_CASE(write_fail_enospc_keeps_dirty_uring) { uring_mode = true; write_fail(ENOSPC); }
TEST_CASE(write_fail_eio_keeps_dirty_no_uring) { uring_mode = false; write_fail(EIO); }
TEST_CASE(write_fail_enospc_keeps_dirty_no_uring) { uring_mode = false; write_fail(ENOSPC); }

/* ------------------------------------------------------ failing reads */

static void read_fail(int err)
{
	char path[4200];
	path_of(path, sizeof(path), "readfail");
	const size_t n = 256 * KiB;
	uint8_t *data = pattern(n, 2);
	tu_write_file(path, data, n);
	struct pc_cache *c = cache_with_readahead(false);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	int id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_READ, .action = PC_FAULT_FAIL,
						       .error = err});
	CHECK(id >= 0);
	CHECK(read_fails(h, 0, err));
	CHECK(read_fails(h, 100 * KiB, err));
	CHECK(pc_fault_count(c, id) >= 2);
	CHECK(read_fails_flags(h, 200 * KiB, PC_DIRECT, err));
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(read_all_matches(h, data, n));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
}

TEST_CASE(read_fail_eio_reported_uring) { uring_mode = true; read_fail(EIO); }
TEST_CASE(read_fail_enospc_reported_uring) { uring_mode = true; read_fail(ENOSPC); }
TEST_CASE(read_fail_eio_reported_no_uring) { uring_mode = false; read_fail(EIO); }
TEST_CASE(read_fail_enospc_reported_no_uring) { uring_mode = false; read_fail(ENOSPC); }

/* ------------------------------------------------------ failing syncs */

static void sync_fail(int err)
{
	char path[4200];
	path_of(path, sizeof(path), "syncfail");
	const size_t n = 128 * KiB + 7;
	uint8_t *data = pattern(n, 3);
	struct pc_cache *c = cache_with_readahead(false);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	write_all(h, data, n);
	int id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_SYNC, .action = PC_FAULT_FAIL,
						       .error = err, .file = h});
	CHECK(id >= 0);
	errno = 0;
	CHECK(pc_fsync(h) == -1 && errno == err);
	CHECK(tu_stats(c).dirty_bytes == 0); /* the writes themselves went */
	errno = 0;
	CHECK(pc_fdatasync(h) == -1 && errno == err);
	CHECK(pc_fault_count(c, id) == 2);
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, data, n));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
}

TEST_CASE(sync_fail_eio_reported_uring) { uring_mode = true; sync_fail(EIO); }
TEST_CASE(sync_fail_enospc_reported_uring) { uring_mode = true; sync_fail(ENOSPC); }
TEST_CASE(sync_fail_eio_reported_no_uring) { uring_mode = false; sync_fail(EIO); }
TEST_CASE(sync_fail_enospc_reported_no_uring) { uring_mode = false; sync_fail(ENOSPC); }

/* ---------------------------------------------------- short transfers */

static void short_transfers(void)
{
	char path[4200], wpath[4200];
	path_of(path, sizeof(path), "short");
	path_of(wpath, sizeof(wpath), "shortw");
	const size_t n = 1 * MiB + 3000;
	uint8_t *data = pattern(n, 4);
	tu_write_file(path, data, n);
	struct pc_cache *c = cache_with_readahead(true); /* read-ahead's reads too */
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	struct pc_file *w = pc_open(c, wpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h && w);

	/* Reads, all of them cut. */
	int id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_READ, .action = PC_FAULT_SHORT});
	CHECK(id >= 0);
	long c0 = atomic_load(&backend_test_continued);
	CHECK(read_all_matches(h, data, n));
	uint64_t cuts = pc_fault_count(c, id);
	CHECK(cuts > 0);
	CHECK(atomic_load(&backend_test_continued) > c0);
	CHECK(pc_fault_remove(c, id) == 0);

	/* Writes (write-back at fsync), all of them cut. */
	uint8_t *wdata = pattern(n, 5);
	id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_WRITE, .action = PC_FAULT_SHORT, .file = w});
	CHECK(id >= 0);
	long c1 = atomic_load(&backend_test_continued);
	write_all(w, wdata, n);
	CHECK(pc_fsync(w) == 0);
	CHECK(pc_fault_count(c, id) > 0);
	CHECK(atomic_load(&backend_test_continued) > c1);
	CHECK(tu_stats(c).write_errors == 0);
	CHECK(tu_verify_disk(wpath, wdata, n));
	CHECK(pc_fault_remove(c, id) == 0);
	printf("   short: %llu reads and %llu writes cut\n", (unsigned long long)cuts,
	       (unsigned long long)(pc_fault_count(c, -1) - cuts));

	CHECK(pc_close(h) == 0);
	CHECK(pc_close(w) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
	free(wdata);
}

TEST_CASE(short_transfers_continued_uring) { uring_mode = true; short_transfers(); }
TEST_CASE(short_transfers_continued_no_uring) { uring_mode = false; short_transfers(); }

/* -------------------------------------------------------------- delay */

static void delay(void)
{
	char path[4200];
	path_of(path, sizeof(path), "delay");
	const size_t n = 64 * KiB;
	uint8_t *data = pattern(n, 6);
	tu_write_file(path, data, n);
	struct pc_cache *c = cache_with_readahead(false);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	int id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_READ, .action = PC_FAULT_DELAY,
						       .delay_ms = 120, .count = 1, .file = h});
	CHECK(id >= 0);
	uint64_t t0 = tu_now_ms();
	CHECK(read_matches(h, data, 0, 4096));
	CHECK(tu_now_ms() - t0 >= 120); /* a lower bound: never flaky */
	CHECK(pc_fault_count(c, id) == 1);
	CHECK(read_matches(h, data, 32 * KiB, 4096));
	CHECK(pc_fault_count(c, id) == 1); /* count 1: spent */
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0); /* the spent rule goes with it */
	free(data);
}

TEST_CASE(delay_slows_one_read_uring) { uring_mode = true; delay(); }
TEST_CASE(delay_slows_one_read_no_uring) { uring_mode = false; delay(); }

/* ------------------------------------------------------------ filters */

static void filters(void)
{
	char pa[4200], pb[4200];
	path_of(pa, sizeof(pa), "filter_a");
	path_of(pb, sizeof(pb), "filter_b");
	const size_t n = 512 * KiB;
	uint8_t *da = pattern(n, 7), *db = pattern(n, 8);
	tu_write_file(pa, da, n);
	tu_write_file(pb, db, n);
	struct pc_cache *c = cache_with_readahead(false);
	struct pc_file *a = pc_open(c, pa, O_RDWR, 0);
	struct pc_file *b = pc_open(c, pb, O_RDWR, 0);
	REQUIRE(a && b);

	/* Reads of file a overlapping [64K, 128K) only. */
	int id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_READ, .action = PC_FAULT_FAIL,
						       .error = EIO, .file = a, .start = 64 * KiB,
						       .end = 128 * KiB});
	CHECK(id >= 0);
	CHECK(read_matches(b, db, 64 * KiB, 4096));
	CHECK(read_matches(a, da, 0, 4096));
	CHECK(read_fails(a, 64 * KiB, EIO));
	CHECK(read_fails(a, 124 * KiB, EIO));
	CHECK(read_matches(a, da, 128 * KiB, 4096));
	CHECK(pc_fault_count(c, id) >= 2);
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(read_matches(a, da, 64 * KiB, 4096));

	/* Writes of file b fail, file a's go (written before the rule: a
	 * failing file refuses new writes). */
	tu_fill_pattern(da, n, 9, 0);
	tu_fill_pattern(db, n, 10, 0);
	write_all(a, da, n);
	write_all(b, db, n);
	id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_WRITE, .action = PC_FAULT_FAIL,
						   .error = ENOSPC, .file = b});
	CHECK(id >= 0);
	CHECK(pc_fsync(a) == 0);
	errno = 0;
	CHECK(pc_fsync(b) == -1 && errno == ENOSPC);
	CHECK(tu_verify_disk(pa, da, n));
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(pc_fsync(b) == 0);
	CHECK(tu_verify_disk(pb, db, n));

	/* skip 1, count 1 on PC_DIRECT reads (one device read each): pass,
	 * fail, pass. */
	CHECK(pc_close(a) == 0);
	CHECK(pc_close(b) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	c = cache_with_readahead(false);
	a = pc_open(c, pa, O_RDONLY, 0);
	REQUIRE(a);
	id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_READ, .action = PC_FAULT_FAIL, .error = EIO,
						   .skip = 1, .count = 1});
	CHECK(direct_read_matches(a, da, 0));
	CHECK(read_fails_flags(a, 128 * KiB, PC_DIRECT, EIO));
	CHECK(direct_read_matches(a, da, 256 * KiB));
	CHECK(direct_read_matches(a, da, 128 * KiB));
	CHECK(pc_fault_count(c, id) == 1);
	CHECK(pc_close(a) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(da);
	free(db);
}

TEST_CASE(file_range_skip_count_filters_uring) { uring_mode = true; filters(); }
TEST_CASE(file_range_skip_count_filters_no_uring) { uring_mode = false; filters(); }

/* The failing reads (bit i: the i-th of 32 PC_DIRECT reads) of a fresh
 * cache with a one_in 2 rule of `seed`. */
static uint32_t one_in_pattern(const char *path, uint64_t seed)
{
	struct pc_cache *c = cache_with_readahead(false);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	int id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_READ, .action = PC_FAULT_FAIL,
						       .error = EIO, .one_in = 2, .seed = seed});
	CHECK(id >= 0);
	uint32_t bits = 0;
	uint8_t buf[4096];
	for (int i = 0; i < 32; i++) {
		ssize_t r = pc_pread(h, buf, sizeof(buf), (off_t)i * 64 * (off_t)KiB, PC_DIRECT);
		CHECK(r == (ssize_t)sizeof(buf) || (r == -1 && errno == EIO));
		if (r < 0)
			bits |= 1u << i;
	}
	CHECK(pc_fault_count(c, id) == (uint64_t)__builtin_popcount(bits));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	return bits;
}

static void one_in(void)
{
	char path[4200];
	path_of(path, sizeof(path), "one_in");
	const size_t n = 2 * MiB;
	uint8_t *data = pattern(n, 11);
	tu_write_file(path, data, n);
	uint32_t p1 = one_in_pattern(path, 1234), p2 = one_in_pattern(path, 1234);
	CHECK(p1 == p2);
	CHECK(p1 != 0 && p1 != UINT32_MAX);
	free(data);
}

TEST_CASE(one_in_same_seed_same_faults_uring) { uring_mode = true; one_in(); }
TEST_CASE(one_in_same_seed_same_faults_no_uring) { uring_mode = false; one_in(); }

/* ----------------------------------------------------- submit failure */

static void submit_fault(void)
{
	char path[4200], wpath[4200];
	path_of(path, sizeof(path), "submit");
	path_of(wpath, sizeof(wpath), "submitw");
	const size_t n = 512 * KiB + 100;
	uint8_t *data = pattern(n, 12), *wdata = pattern(n, 13);
	tu_write_file(path, data, n);
	struct pc_cache *c = cache_with_readahead(true);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	struct pc_file *w = pc_open(c, wpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h && w);
	bool uring_active = tu_stats(c).io_uring != 0;
	int id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_SUBMIT, .action = PC_FAULT_FAIL,
						       .error = EIO});
	CHECK(id >= 0);

	write_all(w, wdata, n);
	CHECK(pc_fsync(w) == 0);               /* the writes were done anyway */
	CHECK(read_all_matches(w, wdata, n));
	CHECK(read_all_matches(h, data, n));   /* device reads, read-ahead too */
	CHECK(tu_verify_disk(wpath, wdata, n));
	if (uring_active)
		CHECK(pc_fault_count(c, id) > 0);
	else
		CHECK(pc_fault_count(c, id) == 0); /* no submissions to fail */
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(pc_fsync(w) == 0);

	/* Destroy with the rule on and dirty data: no hang, all written. */
	id = pc_fault_inject(c, &(struct pc_fault){.ops = PC_FAULT_SUBMIT, .action = PC_FAULT_FAIL,
						   .error = EBADF});
	CHECK(id >= 0);
	tu_fill_pattern(wdata, n, 14, 0);
	write_all(w, wdata, n);
	CHECK(pc_cache_destroy(c) == 0);
	CHECK(tu_verify_disk(wpath, wdata, n));
	free(data);
	free(wdata);
}

TEST_CASE(submit_fault_never_hangs_uring) { uring_mode = true; submit_fault(); }
TEST_CASE(submit_fault_never_hangs_no_uring) { uring_mode = false; submit_fault(); }

/* ------------------------------------------------------ rule handles */

static void rule_handles(void)
{
	char path[4200];
	path_of(path, sizeof(path), "handles");
	const size_t n = 64 * KiB;
	uint8_t *data = pattern(n, 15);
	tu_write_file(path, data, n);
	struct pc_cache *c = cache_with_readahead(false), *other = cache_with_readahead(false);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	struct pc_file *o = pc_open(other, path, O_RDONLY, 0); /* same process: not EBUSY */
	REQUIRE(h && o);
	struct pc_fault f = {.ops = PC_FAULT_READ, .action = PC_FAULT_FAIL, .error = EIO, .file = o};
	errno = 0;
	CHECK(pc_fault_inject(c, &f) == -1 && errno == EINVAL);

	/* A rule outlives its handle; the handle's memory can go. */
	f.file = h;
	int id = pc_fault_inject(c, &f);
	CHECK(id >= 0);
	CHECK(read_fails(h, 0, EIO));
	CHECK(pc_close(h) == 0);
	errno = 0;
	CHECK(pc_fault_inject(c, &f) == -1 && errno == EINVAL); /* closed */
	/* Reopened: the same file (its mapping, kept by the rule). */
	h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	CHECK(read_fails(h, 0, EIO));
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(read_matches(h, data, 0, n));
	f.file = h;
	CHECK(pc_fault_inject(c, &f) >= 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_close(o) == 0);
	/* Destroyed with a rule on a closed file: nothing leaks (ASan). */
	CHECK(pc_cache_destroy(c) == 0);
	CHECK(pc_cache_destroy(other) == 0);
	free(data);
}

TEST_CASE(rules_check_handles_outlive_them_uring) { uring_mode = true; rule_handles(); }
TEST_CASE(rules_check_handles_outlive_them_no_uring) { uring_mode = false; rule_handles(); }
