/*
 * test_fault.c - the public fault-injection hooks (pc_fault_inject,
 * pc_fault_remove, pc_fault_count) through the cache's public API, with
 * io_uring and with PC_CFG_NO_IO_URING.  (test_backend.c checks every rule
 * kind at the backend: exact counts, rule order, continuations of cut
 * transfers, failed io_uring submissions completed exactly once.)
 *
 *   (a) FAIL on writes (EIO, ENOSPC): pc_fsync reports the error, the data
 *       stays dirty and readable; once the rule is removed the next fsync
 *       succeeds and a plain O_DIRECT read of the backing file holds it.
 *   (b) FAIL on reads (EIO, ENOSPC): pc_pread reports it; after removal
 *       the right data is read.
 *   (c) FAIL on sync (EIO, ENOSPC): pc_fsync and pc_fdatasync report it
 *       (the data itself was written); then fsync succeeds.
 *   (d) SHORT reads (read-ahead, misses) and writes (write-back): the data
 *       is right, and the cut transfers really were continued.
 *   (e) DELAY: a read takes at least delay_ms.
 *   (f) file and offset filters; skip/count; one_in with a seed gives the
 *       same faults on the same I/O sequence.
 *   (g) PC_FAULT_SUBMIT: never hangs pc_fsync, pc_pread or
 *       pc_cache_destroy; the I/O is done anyway (io_uring mode), the rule
 *       never fires without io_uring.
 *   (h) bad rules (a handle of another cache, a closed handle) are EINVAL;
 *       a rule may outlive its handle (no leak, no use after free: ASan).
 *
 * A buffered pread that misses may ask the device more than once (the
 * miss read, then the reader's own retry after a failure), so counts are
 * exact only with PC_DIRECT reads (one device read each); read-ahead is off
 * except where it is tested.  A watchdog fails the test if anything hangs.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <stdatomic.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

extern _Atomic long backend_test_continued;

static const char *dir;
static bool uring_mode;   /* this round: io_uring wanted */
static bool uring_active; /* ...and the cache got it */

/* ------------------------------------------------------------ helpers */

static struct pc_cache *new_cache(bool readahead)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 8 * MiB;
	cfg.max_folio_size = 64 * KiB;
	if (!readahead)
		cfg.readahead_max_bytes = 0;
	if (!uring_mode)
		cfg.flags |= PC_CFG_NO_IO_URING;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	return c;
}

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

/* ---------------------------------------------------------------- (a) */

static void a_write_fail(int err)
{
	char path[4200];
	path_of(path, sizeof(path), "a");
	const size_t n = 256 * KiB + 1000;
	uint8_t *data = pattern(n, 1 + (uint64_t)err);
	struct pc_cache *c = new_cache(false);
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

/* ---------------------------------------------------------------- (b) */

static void b_read_fail(int err)
{
	char path[4200];
	path_of(path, sizeof(path), "b");
	const size_t n = 256 * KiB;
	uint8_t *data = pattern(n, 2);
	tu_write_file(path, data, n);
	struct pc_cache *c = new_cache(false);
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

/* ---------------------------------------------------------------- (c) */

static void c_sync_fail(int err)
{
	char path[4200];
	path_of(path, sizeof(path), "c");
	const size_t n = 128 * KiB + 7;
	uint8_t *data = pattern(n, 3);
	struct pc_cache *c = new_cache(false);
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

/* ---------------------------------------------------------------- (d) */

static void d_short_transfers(void)
{
	char path[4200], wpath[4200];
	path_of(path, sizeof(path), "d");
	path_of(wpath, sizeof(wpath), "dw");
	const size_t n = 1 * MiB + 3000;
	uint8_t *data = pattern(n, 4);
	tu_write_file(path, data, n);
	struct pc_cache *c = new_cache(true); /* read-ahead's reads too */
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

/* ---------------------------------------------------------------- (e) */

static void e_delay(void)
{
	char path[4200];
	path_of(path, sizeof(path), "e");
	const size_t n = 64 * KiB;
	uint8_t *data = pattern(n, 6);
	tu_write_file(path, data, n);
	struct pc_cache *c = new_cache(false);
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

/* ---------------------------------------------------------------- (f) */

static void f_filters(void)
{
	char pa[4200], pb[4200];
	path_of(pa, sizeof(pa), "fa");
	path_of(pb, sizeof(pb), "fb");
	const size_t n = 512 * KiB;
	uint8_t *da = pattern(n, 7), *db = pattern(n, 8);
	tu_write_file(pa, da, n);
	tu_write_file(pb, db, n);
	struct pc_cache *c = new_cache(false);
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
	c = new_cache(false);
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

/* The failing reads (bit i: the i-th of 32 PC_DIRECT reads) of a fresh
 * cache with a one_in 2 rule of `seed`. */
static uint32_t one_in_pattern(const char *path, uint64_t seed)
{
	struct pc_cache *c = new_cache(false);
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

static void f_one_in(void)
{
	char path[4200];
	path_of(path, sizeof(path), "f1");
	const size_t n = 2 * MiB;
	uint8_t *data = pattern(n, 11);
	tu_write_file(path, data, n);
	uint32_t p1 = one_in_pattern(path, 1234), p2 = one_in_pattern(path, 1234);
	CHECK(p1 == p2);
	CHECK(p1 != 0 && p1 != UINT32_MAX);
	free(data);
}

/* ---------------------------------------------------------------- (g) */

static void g_submit_fault(void)
{
	char path[4200], wpath[4200];
	path_of(path, sizeof(path), "g");
	path_of(wpath, sizeof(wpath), "gw");
	const size_t n = 512 * KiB + 100;
	uint8_t *data = pattern(n, 12), *wdata = pattern(n, 13);
	tu_write_file(path, data, n);
	struct pc_cache *c = new_cache(true);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	struct pc_file *w = pc_open(c, wpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h && w);
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

/* ---------------------------------------------------------------- (h) */

static void h_handles(void)
{
	char path[4200];
	path_of(path, sizeof(path), "h");
	const size_t n = 64 * KiB;
	uint8_t *data = pattern(n, 15);
	tu_write_file(path, data, n);
	struct pc_cache *c = new_cache(false), *other = new_cache(false);
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

/* ------------------------------------------------------------------ main */

static void run_round(bool uring)
{
	uring_mode = uring;
	struct pc_cache *c = new_cache(false);
	uring_active = tu_stats(c).io_uring != 0;
	CHECK(pc_cache_destroy(c) == 0);
	printf("round: %s (io_uring %s)\n", uring ? "io_uring wanted" : "PC_CFG_NO_IO_URING",
	       uring_active ? "active" : "not active");
	if (!uring)
		CHECK(!uring_active);
	const int errs[2] = {EIO, ENOSPC};
	for (int i = 0; i < 2; i++) {
		a_write_fail(errs[i]);
		b_read_fail(errs[i]);
		c_sync_fail(errs[i]);
	}
	d_short_transfers();
	e_delay();
	f_filters();
	f_one_in();
	g_submit_fault();
	h_handles();
}

int main(void)
{
	alarm(120); /* a lost completion hangs: fail instead */
	dir = test_dir("test_fault");
	run_round(true);
	run_round(false);
	test_rmdir(dir);
	return test_done();
}
