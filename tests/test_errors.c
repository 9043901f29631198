/*
 * test_errors.c - device errors (through the cache's fault hook), errseq
 * reporting, argument checks, and the lock that keeps other processes out.
 *
 * Fault injection: right after pc_cache_new (before any file, so before any
 * flusher thread) the process's fault_hook is set to a hook that fails device writes
 * and/or reads with -EIO while the test says so (atomics: the hook runs on
 * the flusher and completion threads).
 *
 *   - a failed write-back keeps the data dirty and pc_fsync reports EIO;
 *     once the fault is gone the next fsync succeeds and the data is on the
 *     device (read with plain O_DIRECT).  An error met by background
 *     writeback is reported by the next fsync once, then fsync is 0.
 *   - errseq: every handle open when the error happened sees it once (on
 *     fsync or close); a handle opened after it was reported does not.
 *   - pc_cache_destroy returns -1/EIO when dirty data can never be written
 *     (with the handle still open, and after a failed pc_close).
 *   - a failed device read is -1/EIO from pc_pread and caches nothing
 *     wrong: a read after the fault is gone returns the right data; also
 *     for the read-modify-write of a partial block (PC_DSYNC write; the
 *     deferred partial write merged by a reader and by fsync).
 *   - argument checks: EINVAL / EBADF / EFBIG / EISDIR / EOPNOTSUPP as the
 *     header says, never a crash.
 *   - another process opening the file through pagecache gets EBUSY while
 *     this one has it open, and succeeds after it closed it.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <limits.h>
#include <linux/falloc.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

/* The scratch directory; the exit guard is for the other process that
 * the EBUSY case forks (tu_fork_alone). */
static const char *dir;

static void setup(void)
{
	tu_exit_guard();
	dir = test_dir("errors");
}

static void teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(setup, teardown)

/* ------------------------------------------------------------ the hook */

static _Atomic int fail_writes, fail_reads;
static _Atomic long injected_writes, injected_reads;

static int fault_hook(void *arg, int op, int fd, off_t off, size_t len)
{
	(void)arg, (void)fd, (void)off, (void)len;
	if (op == IO_WRITE && atomic_load(&fail_writes)) {
		atomic_fetch_add(&injected_writes, 1);
		return -EIO;
	}
	if (op == IO_READ && atomic_load(&fail_reads)) {
		atomic_fetch_add(&injected_reads, 1);
		return -EIO;
	}
	return 0;
}

/* A small cache (4 MiB, 64 KiB folios) whose device I/O passes
 * fault_hook, with no fault on. */
static struct pc_cache *cache_with_fault_hook(void)
{
	struct pc_config cfg = tu_config(4 * MiB);
	cfg.max_folio_size = 64 * KiB;
	struct pc_cache *c = tu_cache_new(&cfg);
	cache_proc(c)->fault_hook = fault_hook;
	cache_proc(c)->fault_arg = NULL;
	atomic_store(&fail_writes, 0);
	atomic_store(&fail_reads, 0);
	return c;
}

/* Start background writeback of the file (it fails while the fault is on)
 * and wait (up to 5 s) until the cache has counted the failed write. */
static void background_writeback_fails(struct pc_cache *c, struct pc_file *h)
{
	uint64_t before = tu_stats(c).write_errors;
	CHECK(pc_fadvise(h, 0, 0, POSIX_FADV_DONTNEED) == 0);
	CHECK(TU_POLL(tu_stats(c).write_errors > before, 5000));
	/* Let the completion finish redirtying before the fault goes. */
	(void)TU_POLL(tu_stats(c).writeback_bytes == 0, 5000);
}

/* The backing file holds exactly data[0, n): CHECKs its size and bytes. */
static void check_backing(const char *path, const uint8_t *data, size_t n)
{
	size_t size;
	uint8_t *disk = tu_read_backing(path, &size);
	CHECK(size == n);
	CHECK(memcmp(disk, data, n) == 0);
	free(disk);
}

/* A fresh cache (*c) with `path` created empty in it and data[0, n)
 * written there while device writes fail (fail_writes left on). */
static struct pc_file *open_write_failing(struct pc_cache **c, const char *path, const uint8_t *data, size_t n)
{
	*c = cache_with_fault_hook();
	struct pc_file *h = pc_open(*c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	atomic_store(&fail_writes, 1);
	CHECK(pc_pwrite(h, data, n, 0, 0) == (ssize_t)n);
	return h;
}

/* ------------------------------------------------ failed write-back */

TEST_CASE(writeback_failure_keeps_data_dirty)
{
	char path[4300];
	test_path(path, sizeof(path), dir, "dirty");
	struct pc_cache *c = cache_with_fault_hook();
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	uint8_t data[8192];
	tu_fill_pattern(data, sizeof(data), 1, 0);

	/* Through fsync. */
	atomic_store(&fail_writes, 1);
	CHECK(pc_pwrite(h, data, sizeof(data), 0, 0) == (ssize_t)sizeof(data));
	errno = 0;
	CHECK(pc_fsync(h) == -1 && errno == EIO);
	struct pc_stats s;
	pc_cache_stats(c, &s);
	CHECK(s.dirty_bytes >= sizeof(data));
	CHECK(s.write_errors > 0);
	CHECK(atomic_load(&injected_writes) > 0);
	/* Still failing: a new failure, reported again. */
	errno = 0;
	CHECK(pc_fdatasync(h) == -1 && errno == EIO);
	pc_cache_stats(c, &s);
	CHECK(s.dirty_bytes >= sizeof(data));
	/* The data is still readable from the cache meanwhile. */
	uint8_t rd[8192];
	CHECK(pc_pread(h, rd, sizeof(rd), 0, 0) == (ssize_t)sizeof(rd));
	CHECK(memcmp(rd, data, sizeof(rd)) == 0);
	/* Fault gone: written, reported clean. */
	atomic_store(&fail_writes, 0);
	CHECK(pc_fsync(h) == 0);
	pc_cache_stats(c, &s);
	CHECK(s.dirty_bytes == 0);
	CHECK(pc_fsync(h) == 0);
	check_backing(path, data, sizeof(data));

	/* Through background writeback: the next fsync reports it once. */
	tu_fill_pattern(data, sizeof(data), 2, 0);
	atomic_store(&fail_writes, 1);
	CHECK(pc_pwrite(h, data, sizeof(data), 4096, 0) == (ssize_t)sizeof(data));
	background_writeback_fails(c, h);
	pc_cache_stats(c, &s);
	CHECK(s.dirty_bytes >= sizeof(data));
	atomic_store(&fail_writes, 0);
	errno = 0;
	CHECK(pc_fsync(h) == -1 && errno == EIO);
	pc_cache_stats(c, &s);
	CHECK(s.dirty_bytes == 0); /* that fsync wrote it */
	CHECK(pc_fsync(h) == 0);
	size_t size;
	uint8_t *disk = tu_read_backing(path, &size);
	CHECK(size == 4096 + sizeof(data));
	CHECK(memcmp(disk + 4096, data, sizeof(data)) == 0);
	free(disk);

	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	unlink(path);
}

/* ------------------------------------------------------------ errseq */

TEST_CASE(errseq_once_per_handle_open_at_error)
{
	char path[4300];
	test_path(path, sizeof(path), dir, "errseq");
	struct pc_cache *c = cache_with_fault_hook();
	struct pc_file *h1 = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	struct pc_file *h2 = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h1 && h2);
	uint8_t data[4096];
	tu_fill_pattern(data, sizeof(data), 3, 0);

	atomic_store(&fail_writes, 1);
	CHECK(pc_pwrite(h1, data, sizeof(data), 0, 0) == (ssize_t)sizeof(data));
	background_writeback_fails(c, h1);
	atomic_store(&fail_writes, 0);
	struct pc_file *h3 = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h3);
	errno = 0;
	CHECK(pc_fsync(h1) == -1 && errno == EIO);
	CHECK(pc_fsync(h1) == 0);
	errno = 0;
	CHECK(pc_fdatasync(h2) == -1 && errno == EIO);
	CHECK(pc_fsync(h2) == 0);
	/* Opened after the error but before anyone reported it: it sees it
	 * too (the kernel's rule: an error nobody saw is not lost on a
	 * handle opened later); one opened after the report does not. */
	errno = 0;
	CHECK(pc_fsync(h3) == -1 && errno == EIO);
	struct pc_file *h4 = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h4);
	CHECK(pc_fsync(h4) == 0);

	/* A second error; close reports it to a handle that has not seen it. */
	tu_fill_pattern(data, sizeof(data), 4, 0);
	atomic_store(&fail_writes, 1);
	CHECK(pc_pwrite(h2, data, sizeof(data), 0, 0) == (ssize_t)sizeof(data));
	background_writeback_fails(c, h2);
	atomic_store(&fail_writes, 0);
	errno = 0;
	CHECK(pc_close(h2) == -1 && errno == EIO);
	errno = 0;
	CHECK(pc_fsync(h1) == -1 && errno == EIO);
	CHECK(pc_close(h1) == 0); /* already reported to h1 */
	errno = 0;
	CHECK(pc_close(h3) == -1 && errno == EIO);
	errno = 0;
	CHECK(pc_close(h4) == -1 && errno == EIO);

	check_backing(path, data, sizeof(data));
	CHECK(pc_cache_destroy(c) == 0);
	unlink(path);
}

/* ------------------------------------------- destroy with lost data */

TEST_CASE(destroy_reports_unwritable_data)
{
	char path[4300];
	test_path(path, sizeof(path), dir, "lost");
	uint8_t data[4096];
	tu_fill_pattern(data, sizeof(data), 5, 0);

	/* The handle still open. */
	struct pc_cache *c;
	struct pc_file *h = open_write_failing(&c, path, data, sizeof(data));
	errno = 0;
	CHECK(pc_cache_destroy(c) == -1 && errno == EIO);
	atomic_store(&fail_writes, 0);

	/* After a close (which leaves the write-back to the flusher). */
	h = open_write_failing(&c, path, data, sizeof(data));
	CHECK(pc_close(h) == 0);
	errno = 0;
	CHECK(pc_cache_destroy(c) == -1 && errno == EIO);
	atomic_store(&fail_writes, 0);

	/* And a clean destroy is 0 (the fault gone before it). */
	h = open_write_failing(&c, path, data, sizeof(data));
	errno = 0;
	CHECK(pc_fsync(h) == -1 && errno == EIO);
	atomic_store(&fail_writes, 0);
	CHECK(pc_cache_destroy(c) == 0);
	check_backing(path, data, sizeof(data));
	unlink(path);
}

/* ------------------------------------------------- failed device read */

TEST_CASE(read_failure_is_eio_caches_nothing_wrong)
{
	char path[4300];
	test_path(path, sizeof(path), dir, "readfail");
	uint8_t data[64 * 1024];
	tu_fill_pattern(data, sizeof(data), 6, 0);
	tu_write_file(path, data, sizeof(data));
	struct pc_cache *c = cache_with_fault_hook();
	struct pc_file *h = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h);
	uint8_t *rd = malloc(sizeof(data));
	REQUIRE(rd);

	/* A plain read, twice while failing, then right. */
	atomic_store(&fail_reads, 1);
	errno = 0;
	CHECK(pc_pread(h, rd, 8192, 0, 0) == -1 && errno == EIO);
	errno = 0;
	CHECK(pc_pread(h, rd, 8192, 0, 0) == -1 && errno == EIO);
	errno = 0;
	CHECK(pc_pread(h, rd, 100, 5000, 0) == -1 && errno == EIO);
	CHECK(atomic_load(&injected_reads) > 0);
	atomic_store(&fail_reads, 0);
	memset(rd, 0, sizeof(data));
	CHECK(pc_pread(h, rd, sizeof(data), 0, 0) == (ssize_t)sizeof(data));
	CHECK(memcmp(rd, data, sizeof(data)) == 0);

	/* Nothing cached past here: the read-modify-write of a partial
	 * block.  PC_DSYNC reads at write time: the write fails, changes
	 * nothing. */
	CHECK(pc_fadvise(h, 0, 0, POSIX_FADV_DONTNEED) == 0);
	uint8_t small[100];
	memset(small, 0xc3, sizeof(small));
	atomic_store(&fail_reads, 1);
	errno = 0;
	CHECK(pc_pwrite(h, small, sizeof(small), 16384 + 10, PC_DSYNC) == -1 && errno == EIO);
	atomic_store(&fail_reads, 0);
	CHECK(pc_pread(h, rd, 4096, 16384, 0) == 4096);
	CHECK(memcmp(rd, data + 16384, 4096) == 0);

	/* A deferred partial write (no read at write time): a reader that
	 * must merge device data around it fails with EIO and returns no
	 * garbage; fsync, which must merge too, fails; the data stays
	 * dirty; once reads work again everything comes right. */
	CHECK(pc_fadvise(h, 0, 0, POSIX_FADV_DONTNEED) == 0);
	atomic_store(&fail_reads, 1);
	struct pc_stats s;
	errno = 0;
	ssize_t w = pc_pwrite(h, small, sizeof(small), 32768 + 10, 0);
	/* (A cache that reads at write time fails the write instead.) */
	CHECK(w == (ssize_t)sizeof(small) || (w == -1 && errno == EIO));
	if (w == (ssize_t)sizeof(small)) {
		memcpy(data + 32768 + 10, small, sizeof(small));
		pc_cache_stats(c, &s);
		CHECK(s.deferred_rmw > 0);
		errno = 0;
		CHECK(pc_pread(h, rd, 4096, 32768, 0) == -1 && errno == EIO);
		errno = 0;
		CHECK(pc_pread(h, rd, 20, 32768 + 5, 0) == -1 && errno == EIO); /* 5 bytes not written */
		errno = 0;
		CHECK(pc_fsync(h) == -1 && errno == EIO);
		pc_cache_stats(c, &s);
		CHECK(s.dirty_bytes > 0);
	}
	atomic_store(&fail_reads, 0);
	memset(rd, 0, 4096);
	CHECK(pc_pread(h, rd, 4096, 32768, 0) == 4096);
	CHECK(memcmp(rd, data + 32768, 4096) == 0);
	CHECK(pc_fsync(h) == 0);
	pc_cache_stats(c, &s);
	CHECK(s.dirty_bytes == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	check_backing(path, data, sizeof(data));
	free(rd);
	unlink(path);
}

/* --------------------------------------------------- argument checks */

#define CHECK_ERR(call, err)                                                   \
	do {                                                                   \
		errno = 0;                                                     \
		long long r_ = (long long)(call);                              \
		int e_ = errno;                                                \
		CHECK(r_ == -1 && e_ == (err));                                \
		if (r_ != -1 || e_ != (err))                                   \
			fprintf(stderr, "  %s: got %lld errno %d (%s), expected -1 %s\n", #call, r_, e_, \
				strerror(e_), #err);                           \
	} while (0)

#define CHECK_NULL_ERR(call, err)                                              \
	do {                                                                   \
		errno = 0;                                                     \
		void *p_ = (void *)(call);                                     \
		int e_ = errno;                                                \
		CHECK(p_ == NULL && e_ == (err));                              \
		if (p_ != NULL || e_ != (err))                                 \
			fprintf(stderr, "  %s: got %p errno %d (%s), expected NULL %s\n", #call, p_, e_, \
				strerror(e_), #err);                           \
	} while (0)

static void bad_config(void (*change)(struct pc_config *), const char *what)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	change(&cfg);
	errno = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	int e = errno;
	CHECK(c == NULL && e == EINVAL);
	if (c || e != EINVAL)
		fprintf(stderr, "  config %s: got %p errno %d, expected NULL EINVAL\n", what, (void *)c, e);
	if (c)
		pc_cache_destroy(c);
}

static void cfg_mem_small(struct pc_config *c) { c->memory_limit = 512 * KiB; c->max_folio_size = 4096; }
static void cfg_mem_lt_16_folios(struct pc_config *c) { c->memory_limit = 2 * MiB; c->max_folio_size = 256 * KiB; }
static void cfg_folio_not_pow2(struct pc_config *c) { c->max_folio_size = 12288; }
static void cfg_folio_too_small(struct pc_config *c) { c->max_folio_size = 2048; }
static void cfg_folio_too_big(struct pc_config *c) { c->max_folio_size = 4 * MiB; c->memory_limit = 256 * MiB; }
static void cfg_block_1000(struct pc_config *c) { c->block_size = 1000; }
static void cfg_block_256(struct pc_config *c) { c->block_size = 256; }
static void cfg_block_128k(struct pc_config *c) { c->block_size = 128 * 1024; }
static void cfg_dirty_over_half(struct pc_config *c) { c->memory_limit = 64 * MiB; c->dirty_limit_bytes = 33 * MiB; }
static void cfg_bg_over_limit(struct pc_config *c)
{
	c->memory_limit = 64 * MiB;
	c->dirty_limit_bytes = 8 * MiB;
	c->dirty_background_bytes = 9 * MiB;
}
static void cfg_unknown_flag(struct pc_config *c) { c->flags = 0x100; }

TEST_CASE(bad_arguments_fail_with_their_errno)
{
	char path[4300], rpath[4300];
	test_path(path, sizeof(path), dir, "args");
	test_path(rpath, sizeof(rpath), dir, "args_ro");
	struct pc_cache *c = cache_with_fault_hook();
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	uint8_t buf[4096];
	memset(buf, 1, sizeof(buf));
	CHECK(pc_pwrite(h, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));

	/* Buffers, offsets, flags. */
	CHECK_ERR(pc_pread(h, NULL, 10, 0, 0), EINVAL);
	CHECK_ERR(pc_pwrite(h, NULL, 10, 0, 0), EINVAL);
	CHECK(pc_pread(h, NULL, 0, 0, 0) == 0);
	CHECK(pc_pwrite(h, NULL, 0, 0, 0) == 0);
	CHECK_ERR(pc_pread(h, buf, 10, -1, 0), EINVAL);
	CHECK_ERR(pc_pwrite(h, buf, 10, -1, 0), EINVAL);
	CHECK_ERR(pc_pwrite(h, buf, 10, (off_t)INT64_MAX - 5, 0), EFBIG);
	CHECK_ERR(pc_pwrite(h, buf, 10, (off_t)INT64_MAX, 0), EFBIG);
	CHECK(pc_pread(h, buf, 10, (off_t)INT64_MAX - 5, 0) == 0);
	CHECK_ERR(pc_pread(h, buf, 10, 0, 0x100), EINVAL);
	CHECK_ERR(pc_pwrite(h, buf, 10, 0, 0x100), EINVAL);
	CHECK_ERR(pc_pread(h, buf, 10, 0, 0x40000000), EINVAL);
	CHECK(pc_size(h) == 4096); /* nothing above changed the file */

	/*
	 * Past the backing file system's largest file (2^62 is beyond ext4's
	 * 16 TiB): what pwrite/ftruncate on a normal descriptor of the same
	 * file system says, the cache must say too, at the call, rather than
	 * take the data and fail every later fsync/close with it.
	 */
	{
		char spath[4400];
		snprintf(spath, sizeof(spath), "%s/args_limit", dir);
		int fd = open(spath, O_RDWR | O_CREAT | O_TRUNC, 0644);
		REQUIRE(fd >= 0);
		const off_t far = (off_t)1 << 62;
		errno = 0;
		ssize_t kw = pwrite(fd, buf, 10, far);
		int kwe = errno;
		errno = 0;
		int kt = ftruncate(fd, far);
		int kte = errno;
		close(fd);
		unlink(spath);
		errno = 0;
		int pt = pc_ftruncate(h, far);
		int pte = errno;
		CHECK(kt < 0 ? (pt == -1 && pte == kte) : pt == 0);
		if (kt < 0 ? (pt != -1 || pte != kte) : pt != 0)
			fprintf(stderr, "  pc_ftruncate to 2^62: got %d errno %d, ftruncate on the file system: %d errno "
				"%d\n", pt, pte, kt, kte);
		/* Back to 4 KiB either way (drops what could not be written). */
		CHECK(pc_ftruncate(h, 4096) == 0);
		errno = 0;
		ssize_t pw = pc_pwrite(h, buf, 10, far, 0);
		int pwe = errno;
		CHECK(kw < 0 ? (pw == -1 && pwe == kwe) : pw == 10);
		if (kw < 0 ? (pw != -1 || pwe != kwe) : pw != 10)
			fprintf(stderr, "  pc_pwrite of 10 bytes at 2^62: got %zd errno %d, pwrite on the file system: %zd "
				"errno %d\n", pw, pwe, kw, kwe);
		CHECK(pc_ftruncate(h, 4096) == 0);
		CHECK(pc_fsync(h) == 0);
	}

	/* Vectors. */
	struct iovec iov[2] = { { buf, 10 }, { NULL, 10 } };
	CHECK_ERR(pc_preadv(h, iov, 2, 0, 0), EINVAL);
	CHECK_ERR(pc_pwritev(h, iov, 2, 0, 0), EINVAL);
	CHECK_ERR(pc_preadv(h, NULL, 1, 0, 0), EINVAL);
	CHECK_ERR(pc_pwritev(h, NULL, 1, 0, 0), EINVAL);
	CHECK_ERR(pc_preadv(h, iov, -1, 0, 0), EINVAL);
	CHECK(pc_preadv(h, NULL, 0, 0, 0) == 0);
	struct iovec *many = calloc(IOV_MAX + 1, sizeof(*many));
	REQUIRE(many);
	for (int i = 0; i <= IOV_MAX; i++)
		many[i] = (struct iovec){ buf, 1 };
	CHECK_ERR(pc_preadv(h, many, IOV_MAX + 1, 0, 0), EINVAL);
	CHECK_ERR(pc_pwritev(h, many, IOV_MAX + 1, 0, 0), EINVAL);
	CHECK(pc_preadv(h, many, IOV_MAX, 0, 0) == IOV_MAX);
	free(many);

	/* truncate, fallocate, fadvise. */
	CHECK_ERR(pc_ftruncate(h, -1), EINVAL);
	CHECK_ERR(pc_fallocate(h, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), EOPNOTSUPP);
	CHECK_ERR(pc_fallocate(h, FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP); /* without KEEP_SIZE */
	CHECK_ERR(pc_fallocate(h, FALLOC_FL_INSERT_RANGE, 0, 4096), EOPNOTSUPP);
	CHECK_ERR(pc_fallocate(h, 0x4000, 0, 4096), EOPNOTSUPP);
	CHECK_ERR(pc_fallocate(h, 0, 0, 0), EINVAL);
	CHECK_ERR(pc_fallocate(h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 0), EINVAL);
	CHECK_ERR(pc_fallocate(h, 0, 0, -4096), EINVAL);
	CHECK_ERR(pc_fallocate(h, 0, -1, 4096), EINVAL);
	CHECK_ERR(pc_fallocate(h, 0, (off_t)INT64_MAX - 10, 4096), EFBIG);
	CHECK_ERR(pc_fadvise(h, 0, 0, 99), EINVAL);
	CHECK_ERR(pc_fadvise(h, 0, 0, -1), EINVAL);
	CHECK_ERR(pc_fadvise(h, -1, 0, POSIX_FADV_WILLNEED), EINVAL);
	CHECK_ERR(pc_fadvise(h, 0, -1, POSIX_FADV_WILLNEED), EINVAL);
	CHECK(pc_size(h) == 4096);

	/* Access modes. */
	CHECK(pc_fsync(h) == 0);
	struct pc_file *ro = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(ro);
	CHECK(pc_pread(ro, buf, 10, 0, 0) == 10);
	CHECK_ERR(pc_pwrite(ro, buf, 10, 0, 0), EBADF);
	CHECK_ERR(pc_pwritev(ro, iov, 1, 0, 0), EBADF);
	CHECK_ERR(pc_ftruncate(ro, 0), EBADF);
	CHECK_ERR(pc_fallocate(ro, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), EBADF);
	CHECK(pc_size(h) == 4096);
	CHECK(pc_close(ro) == 0);
	struct pc_file *wo = pc_open(c, path, O_WRONLY, 0);
	REQUIRE(wo);
	CHECK(pc_pwrite(wo, buf, 10, 0, 0) == 10);
	CHECK_ERR(pc_pread(wo, buf, 10, 0, 0), EBADF);
	CHECK_ERR(pc_preadv(wo, iov, 1, 0, 0), EBADF);
	CHECK(pc_close(wo) == 0);
	/* A file opened read-only only (no writable handle in the cache). */
	{
		int fd = open(rpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
		REQUIRE(fd >= 0);
		REQUIRE(write(fd, buf, 4096) == 4096);
		close(fd);
	}
	ro = pc_open(c, rpath, O_RDONLY, 0);
	REQUIRE(ro);
	CHECK_ERR(pc_pwrite(ro, buf, 10, 0, 0), EBADF);
	CHECK(pc_pread(ro, buf, 4096, 0, 0) == 4096);
	CHECK(pc_close(ro) == 0);

	/* pc_open. */
	CHECK_NULL_ERR(pc_open(c, path, O_RDWR | O_APPEND, 0), EINVAL);
	CHECK_NULL_ERR(pc_open(c, path, O_RDWR | O_NONBLOCK, 0), EINVAL);
	CHECK_NULL_ERR(pc_open(c, path, O_ACCMODE, 0), EINVAL);
	CHECK_NULL_ERR(pc_open(c, path, O_RDWR | O_PATH, 0), EINVAL);
	CHECK_NULL_ERR(pc_open(c, NULL, O_RDWR, 0), EINVAL);
	CHECK_NULL_ERR(pc_open(NULL, path, O_RDWR, 0), EINVAL);
	CHECK_NULL_ERR(pc_open(c, dir, O_RDONLY, 0), EISDIR);
	CHECK_NULL_ERR(pc_open(c, dir, O_RDWR, 0), EISDIR);
	char missing[4400];
	snprintf(missing, sizeof(missing), "%s/no/such/file", dir);
	CHECK_NULL_ERR(pc_open(c, missing, O_RDWR | O_CREAT, 0644), ENOENT);
	CHECK_NULL_ERR(pc_open(c, path, O_RDWR | O_CREAT | O_EXCL, 0644), EEXIST);
	CHECK_NULL_ERR(pc_open(c, "/dev/null", O_RDONLY, 0), EINVAL);

	/* Closed handle: EBADF for every call, right after close. */
	struct pc_file *cl = pc_open(c, path, O_RDWR, 0);
	REQUIRE(cl);
	CHECK(pc_close(cl) == 0);
	CHECK_ERR(pc_pread(cl, buf, 10, 0, 0), EBADF);
	CHECK_ERR(pc_pwrite(cl, buf, 10, 0, 0), EBADF);
	CHECK_ERR(pc_preadv(cl, iov, 1, 0, 0), EBADF);
	CHECK_ERR(pc_pwritev(cl, iov, 1, 0, 0), EBADF);
	CHECK_ERR(pc_fsync(cl), EBADF);
	CHECK_ERR(pc_fdatasync(cl), EBADF);
	CHECK_ERR(pc_ftruncate(cl, 0), EBADF);
	CHECK_ERR(pc_fallocate(cl, 0, 0, 4096), EBADF);
	CHECK_ERR(pc_fadvise(cl, 0, 0, POSIX_FADV_DONTNEED), EBADF);
	CHECK_ERR(pc_size(cl), EBADF);
	CHECK_ERR(pc_close(cl), EBADF);
	struct pc_stats st;
	memset(&st, 0xff, sizeof(st));
	pc_file_stats(cl, &st);
	CHECK(st.dev_read_ios == 0 && st.cached_bytes == 0 && st.block_size == 0);
	CHECK(pc_size(h) == 4096); /* the open handle is untouched */

	/* NULL handle everywhere. */
	CHECK_ERR(pc_pread(NULL, buf, 10, 0, 0), EBADF);
	CHECK_ERR(pc_pwrite(NULL, buf, 10, 0, 0), EBADF);
	CHECK_ERR(pc_preadv(NULL, iov, 1, 0, 0), EBADF);
	CHECK_ERR(pc_pwritev(NULL, iov, 1, 0, 0), EBADF);
	CHECK_ERR(pc_fsync(NULL), EBADF);
	CHECK_ERR(pc_fdatasync(NULL), EBADF);
	CHECK_ERR(pc_close(NULL), EBADF);
	CHECK_ERR(pc_ftruncate(NULL, 0), EBADF);
	CHECK_ERR(pc_fallocate(NULL, 0, 0, 4096), EBADF);
	CHECK_ERR(pc_fadvise(NULL, 0, 0, POSIX_FADV_DONTNEED), EBADF);
	CHECK_ERR(pc_size(NULL), EBADF);
	CHECK_ERR(pc_cache_destroy(NULL), EINVAL);
	memset(&st, 0xff, sizeof(st));
	pc_file_stats(NULL, &st);
	CHECK(st.dev_write_ios == 0 && st.dirty_bytes == 0);
	memset(&st, 0xff, sizeof(st));
	pc_cache_stats(NULL, &st);
	CHECK(st.dev_write_ios == 0 && st.cached_bytes == 0 && st.folios == 0);
	pc_cache_stats(c, NULL);
	pc_file_stats(h, NULL);
	pc_config_init(NULL);

	/* Config: every field is checked. */
	bad_config(cfg_mem_small, "memory_limit 512 KiB");
	bad_config(cfg_mem_lt_16_folios, "memory_limit < 16 * max_folio_size");
	bad_config(cfg_folio_not_pow2, "max_folio_size 12 KiB");
	bad_config(cfg_folio_too_small, "max_folio_size 2 KiB");
	bad_config(cfg_folio_too_big, "max_folio_size 4 MiB");
	bad_config(cfg_block_1000, "block_size 1000");
	bad_config(cfg_block_256, "block_size 256");
	bad_config(cfg_block_128k, "block_size 128 KiB");
	bad_config(cfg_dirty_over_half, "dirty_limit > 50 %");
	bad_config(cfg_bg_over_limit, "dirty_background > dirty_limit");
	bad_config(cfg_unknown_flag, "unknown flag");
	/* And the defaults are fine. */
	struct pc_cache *d = pc_cache_new(NULL);
	CHECK(d != NULL);
	if (d)
		CHECK(pc_cache_destroy(d) == 0);

	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	unlink(path);
	unlink(rpath);
}

/* ------------------------------------------- another process: EBUSY */

/*
 * The other process.  For each request it opens a path with the flags it
 * is sent, in a new cache of its own, and answers 0 when that opened, else
 * errno (EBUSY = 16); 100+ for setup failures.  It is forked once, at the
 * start of the EBUSY case, while this process has no thread (tu_fork_alone): it starts
 * the threads of its caches, which a child forked while this process held
 * its cache could not do safely under a sanitizer (a lock copied held:
 * such a child hung in pc_cache_destroy in 1 of about 1000 ASan runs).
 * A request fits in a pipe's atomic write.
 */
#define OTHER_WATCHDOG_S 120u

struct open_request {
	int flags;
	char path[4000];
};

static pid_t other_pid;
static int other_requests = -1, other_answers = -1;

static int open_in_new_cache(const struct open_request *q)
{
	struct pc_config cfg = tu_config(2 * MiB);
	cfg.max_folio_size = 64 * KiB;
	struct pc_cache *c = pc_cache_new(&cfg); /* not tu_cache_new: a failure is an answer */
	if (!c)
		return 100;
	errno = 0;
	struct pc_file *h = pc_open(c, q->path, q->flags, 0);
	int e = h ? 0 : errno;
	if (h && pc_close(h) != 0)
		e = 101;
	if (pc_cache_destroy(c) != 0)
		e = 102;
	return e;
}

static void other_process_start(void)
{
	int req[2], ans[2];
	REQUIRE(pipe(req) == 0 && pipe(ans) == 0);
	other_pid = tu_fork_alone(OTHER_WATCHDOG_S);
	if (other_pid == 0) {
		close(req[1]);
		close(ans[0]);
		struct open_request q;
		while (read(req[0], &q, sizeof(q)) == (ssize_t)sizeof(q)) {
			int e = open_in_new_cache(&q);
			if (write(ans[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
				_exit(1);
		}
		exit(0); /* the case is over; exit(): no thread was copied, so LSan checks it */
	}
	close(req[0]);
	close(ans[1]);
	other_requests = req[1];
	other_answers = ans[0];
}

static void other_process_stop(void)
{
	close(other_requests);
	CHECK(tu_wait_child(other_pid, OTHER_WATCHDOG_S + 5) == 0);
	close(other_answers);
}

/* What the other process gets opening path with flags. */
static int child_open(const char *path, int flags)
{
	struct open_request q = { .flags = flags };
	REQUIRE(strlen(path) < sizeof(q.path));
	strcpy(q.path, path);
	int e;
	REQUIRE(write(other_requests, &q, sizeof(q)) == (ssize_t)sizeof(q));
	if (read(other_answers, &e, sizeof(e)) != (ssize_t)sizeof(e)) {
		fprintf(stderr, "the other process did not answer: exit status %d\n", tu_wait_child(other_pid, 5));
		exit(1);
	}
	return e;
}

TEST_CASE(other_process_gets_ebusy_while_open)
{
	char path[4300];
	test_path(path, sizeof(path), dir, "busy");
	uint8_t buf[4096];
	memset(buf, 9, sizeof(buf));
	{
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		REQUIRE(fd >= 0);
		REQUIRE(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
		close(fd);
	}
	int r;
	other_process_start();

	/* Open read-only here (a new cache): other readers are fine,
	 * writers are not. */
	struct pc_cache *c = cache_with_fault_hook();
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	r = child_open(path, O_RDONLY);
	CHECK(r == 0);
	if (r != 0)
		fprintf(stderr, "  child pc_open O_RDONLY while held O_RDONLY: exit %d, expected 0\n", r);
	r = child_open(path, O_RDWR);
	CHECK(r == EBUSY);
	if (r != EBUSY)
		fprintf(stderr, "  child pc_open O_RDWR while held O_RDONLY: exit %d, expected EBUSY\n", r);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);

	/* Open read-write here, with data cached. */
	c = cache_with_fault_hook();
	h = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h);
	CHECK(pc_pwrite(h, buf, 100, 0, 0) == 100);
	uint8_t rd[4096];
	CHECK(pc_pread(h, rd, sizeof(rd), 0, 0) == (ssize_t)sizeof(rd));

	/* Open for writing here: refused for writing and for reading. */
	r = child_open(path, O_RDWR);
	CHECK(r == EBUSY);
	if (r != EBUSY)
		fprintf(stderr, "  child pc_open O_RDWR while held O_RDWR: exit %d, expected EBUSY\n", r);
	r = child_open(path, O_RDONLY);
	CHECK(r == EBUSY);
	if (r != EBUSY)
		fprintf(stderr, "  child pc_open O_RDONLY while held O_RDWR: exit %d, expected EBUSY\n", r);
	/* A second handle here does not release it. */
	struct pc_file *h2 = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h2);
	CHECK(pc_close(h2) == 0);
	CHECK(child_open(path, O_RDWR) == EBUSY);

	/* Closed here once its data is written (clean data may stay
	 * cached; dirty data keeps the lock until the flusher wrote it):
	 * the child gets it. */
	CHECK(pc_fsync(h) == 0);
	CHECK(pc_close(h) == 0);
	r = child_open(path, O_RDWR);
	CHECK(r == 0);
	if (r != 0)
		fprintf(stderr, "  child pc_open O_RDWR after close: exit %d, expected 0\n", r);

	/* Reopened here read-only, in the cache that had it open read-write
	 * (its clean data still cached): only a reader now, so other readers
	 * are fine and writers are not, as with a new cache. */
	h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	r = child_open(path, O_RDONLY);
	CHECK(r == 0);
	if (r != 0)
		fprintf(stderr, "  child pc_open O_RDONLY while held O_RDONLY (reopened after O_RDWR): exit %d, "
			"expected 0\n", r);
	CHECK(child_open(path, O_RDWR) == EBUSY);
	CHECK(pc_close(h) == 0);
	CHECK(child_open(path, O_RDWR) == 0);

	/* Reopened here after the child wrote nothing: data still right. */
	h = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h);
	CHECK(pc_pread(h, rd, sizeof(rd), 0, 0) == (ssize_t)sizeof(rd));
	CHECK(memcmp(rd, buf, sizeof(rd)) == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	other_process_stop();
	unlink(path);
}
