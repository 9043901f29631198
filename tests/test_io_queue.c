/*
 * test_backend.c - device I/O (src/io/sync_io.c, src/io/ioq.c): the I/O
 * queue with io_uring and in synchronous mode, synchronous vector I/O, fault injection (the
 * internal hook, and the public pc_fault_* rules at the backend: every
 * action, filter and counter, short transfers really continued, failed
 * io_uring submissions completed exactly once), counters, depth limiting,
 * direct-I/O alignment and hole detection.  (test_fault.c covers the rules
 * through the cache's public API.)
 *
 * It needs a struct pc_cache only for the fault hook and the counters: a
 * zeroed one is enough (the backend must not depend on anything else).
 */
#include "testutil.h"

#include "api/internal.h"

#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif

static const char *dir;
static char path[4200];
static int fd;         /* O_DIRECT when the file system allows it */
static bool direct;
static struct pc_cache *cache;

/* ------------------------------------------------------------ helpers */

struct group {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int pending;
};

struct treq {
	struct pc_ioreq req;
	struct iovec iov[4];
	ssize_t res;
	_Atomic int done;
	_Atomic int ndone; /* done() calls: exactly one per submission */
	pthread_t done_thread;
	struct group *g;
};

static void group_init(struct group *g)
{
	pthread_mutex_init(&g->m, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->pending = 0;
}

static void group_wait(struct group *g)
{
	pthread_mutex_lock(&g->m);
	while (g->pending > 0)
		pthread_cond_wait(&g->cv, &g->m);
	pthread_mutex_unlock(&g->m);
}

static void group_destroy(struct group *g)
{
	pthread_mutex_destroy(&g->m);
	pthread_cond_destroy(&g->cv);
}

static void treq_done(struct pc_ioreq *req, ssize_t res)
{
	struct treq *t = (struct treq *)req;
	t->res = res;
	t->done_thread = pthread_self();
	struct group *g = t->g;
	pthread_mutex_lock(&g->m);
	atomic_store(&t->done, 1);
	atomic_fetch_add(&t->ndone, 1);
	g->pending--;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->m);
}

static void treq_prep(struct treq *t, struct group *g, int op, void *buf, size_t len, off_t off)
{
	memset(t, 0, sizeof(*t));
	t->g = g;
	t->req.op = op;
	t->req.fd = fd;
	t->req.off = off;
	t->req.len = len;
	t->req.done = treq_done;
	if (buf) {
		t->iov[0].iov_base = buf;
		t->iov[0].iov_len = len;
		t->req.iov = t->iov;
		t->req.iovcnt = 1;
	}
	t->res = -12345;
}

static void submit(struct pc_ioq *q, struct treq *t)
{
	pthread_mutex_lock(&t->g->m);
	t->g->pending++;
	pthread_mutex_unlock(&t->g->m);
	ioq_submit(q, &t->req);
}



/* One request, waited for; returns its result. */
static ssize_t do_io(struct pc_ioq *q, int op, void *buf, size_t len, off_t off, int rw_flags)
{
	struct group g;
	struct treq t;
	group_init(&g);
	treq_prep(&t, &g, op, buf, len, off);
	t.req.rw_flags = rw_flags;
	submit(q, &t);
	if (!ioq_is_uring(q))
		CHECK(atomic_load(&t.done)); /* sync: done before submit returns */
	group_wait(&g);
	group_destroy(&g);
	if (ioq_is_uring(q))
		CHECK(!pthread_equal(t.done_thread, pthread_self()));
	return t.res;
}

static void *abuf(size_t len)
{
	void *p = NULL;
	REQUIRE(posix_memalign(&p, 4096, len) == 0);
	return p;
}

/* 64 requests in a row, reads and NOPs alternating, 4 KiB each. */
static struct treq *submit_64_mixed(struct pc_ioq *q, struct group *g, uint8_t **bufp)
{
	uint8_t *buf = abuf(64 * 4096);
	struct treq *t = calloc(64, sizeof(*t));
	REQUIRE(t);
	group_init(g);
	for (int i = 0; i < 64; i++) {
		treq_prep(&t[i], g, i % 2 ? IO_READ : IO_NOP, buf + i * 4096, 4096, (off_t)i * 4096);
		submit(q, &t[i]);
	}
	*bufp = buf;
	return t;
}

static void fill(uint8_t *p, size_t len, uint64_t off, unsigned salt)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)((off + i) * 131 + ((off + i) >> 12) * 7 + salt);
}

static bool same(const uint8_t *p, size_t len, uint64_t off, unsigned salt)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)((off + i) * 131 + ((off + i) >> 12) * 7 + salt))
			return false;
	return true;
}

struct counters {
	uint64_t rios, rbytes, wios, wbytes;
};

static struct counters counters_now(void)
{
	struct counters k = {atomic_load(&cache->st_read_ios), atomic_load(&cache->st_read_bytes),
			     atomic_load(&cache->st_write_ios), atomic_load(&cache->st_write_bytes)};
	return k;
}

/* ------------------------------------------------------- fault hook */

static _Atomic int hook_calls;
static _Atomic int hook_fail_op = -1;     /* op to fail, -1: none */
static _Atomic long long hook_fail_off = -1; /* offset to fail, -1: any */

static int test_hook(void *arg, int op, int hfd, off_t off, size_t len)
{
	(void)len;
	CHECK(arg == (void *)&hook_calls);
	CHECK(hfd == fd);
	atomic_fetch_add(&hook_calls, 1);
	if (op == atomic_load(&hook_fail_op) &&
	    (atomic_load(&hook_fail_off) < 0 || atomic_load(&hook_fail_off) == (long long)off))
		return -EIO;
	return 0;
}

/* ------------------------------------------------------------- cases */

static void test_rw(struct pc_ioq *q)
{
	const size_t len = 64 * 1024;
	uint8_t *w = abuf(len), *r = abuf(len);
	REQUIRE(ftruncate(fd, 0) == 0);

	/* Write, counted. */
	struct counters k0 = counters_now();
	fill(w, len, 0, 1);
	CHECK(do_io(q, IO_WRITE, w, len, 0, 0) == (ssize_t)len);
	struct counters k1 = counters_now();
	CHECK(k1.wios == k0.wios + 1 && k1.wbytes == k0.wbytes + len);
	CHECK(k1.rios == k0.rios && k1.rbytes == k0.rbytes);

	/* Read back, one iovec. */
	memset(r, 0, len);
	CHECK(do_io(q, IO_READ, r, len, 0, 0) == (ssize_t)len);
	CHECK(same(r, len, 0, 1));
	struct counters k2 = counters_now();
	CHECK(k2.rios == k1.rios + 1 && k2.rbytes == k1.rbytes + len);

	/* Read back in three iovecs (READV). */
	struct group g;
	struct treq t;
	group_init(&g);
	memset(r, 0, len);
	treq_prep(&t, &g, IO_READ, NULL, 0, 4096);
	t.iov[0] = (struct iovec){r, 8192};
	t.iov[1] = (struct iovec){r + 8192, 4096};
	t.iov[2] = (struct iovec){r + 12288, 16384};
	t.req.iov = t.iov;
	t.req.iovcnt = 3;
	t.req.len = 8192 + 4096 + 16384;
	submit(q, &t);
	group_wait(&g);
	CHECK(t.res == (ssize_t)t.req.len);
	CHECK(same(r, t.req.len, 4096, 1));

	/* Write in two iovecs (WRITEV) with RWF_DSYNC, read back. */
	fill(w, len, 0, 2);
	treq_prep(&t, &g, IO_WRITE, NULL, 0, 8192);
	t.iov[0] = (struct iovec){w, 4096};
	t.iov[1] = (struct iovec){w + 4096, 12288};
	t.req.iov = t.iov;
	t.req.iovcnt = 2;
	t.req.len = 16384;
	t.req.rw_flags = RWF_DSYNC;
	submit(q, &t);
	group_wait(&g);
	CHECK(t.res == 16384);
	memset(r, 0, len);
	CHECK(do_io(q, IO_READ, r, 16384, 8192, 0) == 16384);
	CHECK(memcmp(r, w, 16384) == 0);
	group_destroy(&g);

	/* Short read at EOF, read at EOF, read past EOF. */
	CHECK(do_io(q, IO_READ, r, 16384, len - 8192, 0) == 8192);
	CHECK(do_io(q, IO_READ, r, 4096, len, 0) == 0);
	CHECK(do_io(q, IO_READ, r, 4096, len + 65536, 0) == 0);
	/* EOF inside a block (unaligned size): with O_DIRECT the rest cannot
	 * be read at the unaligned offset; it must still end at EOF. */
	REQUIRE(ftruncate(fd, (off_t)len + 1000) == 0);
	memset(r, 0xaa, 8192);
	CHECK(do_io(q, IO_READ, r, 8192, len, 0) == 1000);
	CHECK(r[0] == 0 && r[999] == 0);
	CHECK(do_io(q, IO_READ, r, 8192, len - 4096, 0) == 4096 + 1000);
	CHECK(same(r, 4096, len - 4096, 1));

	/* A short write (file size limit) is continued synchronously; the
	 * error that stops it is the result, not a short count. */
	struct sigaction sa = {.sa_handler = SIG_IGN}, old_sa;
	sigaction(SIGXFSZ, &sa, &old_sa);
	struct rlimit old_rl, rl;
	getrlimit(RLIMIT_FSIZE, &old_rl);
	rl = old_rl;
	rl.rlim_cur = len + 8192;
	if (setrlimit(RLIMIT_FSIZE, &rl) == 0) {
		fill(w, len, 0, 6);
		CHECK(do_io(q, IO_WRITE, w, 16384, (off_t)len, 0) == -EFBIG);
		setrlimit(RLIMIT_FSIZE, &old_rl);
		CHECK(do_io(q, IO_READ, r, 16384, (off_t)len, 0) == 8192);
		CHECK(same(r, 8192, 0, 6));
		REQUIRE(ftruncate(fd, (off_t)len) == 0);
	}
	sigaction(SIGXFSZ, &old_sa, NULL);

	/* fsync, fdatasync, nop: 0, not counted. */
	struct counters k3 = counters_now();
	CHECK(do_io(q, IO_FSYNC, NULL, 0, 0, 0) == 0);
	CHECK(do_io(q, IO_FDATASYNC, NULL, 0, 0, 0) == 0);
	CHECK(do_io(q, IO_NOP, NULL, 0, 0, 0) == 0);
	struct counters k4 = counters_now();
	CHECK(memcmp(&k3, &k4, sizeof(k3)) == 0);

	/* Errors come back as negative errno. */
	if (direct) {
		/* misaligned memory: refused by most file systems (tmpfs copes) */
		ssize_t mis = do_io(q, IO_READ, r + 1, 4096, 0, 0);
		CHECK(mis == -EINVAL || mis == 4096);
	}
	int saved = fd;
	fd = 1000000; /* not open */
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == -EBADF);
	CHECK(do_io(q, IO_FSYNC, NULL, 0, 0, 0) == -EBADF);
	fd = saved;
	free(w);
	free(r);
}

static void test_faults(struct pc_ioq *q)
{
	const size_t len = 16384;
	uint8_t *w = abuf(len), *r = abuf(len);
	fill(w, len, 0, 3);
	REQUIRE(ftruncate(fd, 0) == 0);

	cache->fault_hook = test_hook;
	cache->fault_arg = (void *)&hook_calls;
	int calls0 = atomic_load(&hook_calls);

	CHECK(do_io(q, IO_WRITE, w, len, 0, 0) == (ssize_t)len);
	CHECK(atomic_load(&hook_calls) == calls0 + 1);

	/* A failed read: -EIO, buffer untouched, not counted. */
	atomic_store(&hook_fail_op, IO_READ);
	atomic_store(&hook_fail_off, 4096);
	struct counters k0 = counters_now();
	memset(r, 0x5a, len);
	CHECK(do_io(q, IO_READ, r, 4096, 4096, 0) == -EIO);
	CHECK(r[0] == 0x5a && r[4095] == 0x5a);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096); /* other offsets work */
	struct counters k1 = counters_now();
	CHECK(k1.rios == k0.rios + 1 && k1.rbytes == k0.rbytes + 4096);
	/* Synchronous calls go through the hook too. */
	struct iovec v = {r, 4096};
	CHECK(sync_io_preadv(cache, fd, &v, 1, 4096) == -EIO);
	CHECK(sync_io_preadv(cache, fd, &v, 1, 8192) == 4096);
	CHECK(same(r, 4096, 8192, 3));

	/* A failed write leaves the file as it was. */
	atomic_store(&hook_fail_op, IO_WRITE);
	atomic_store(&hook_fail_off, -1);
	fill(w, len, 0, 4);
	CHECK(do_io(q, IO_WRITE, w, 4096, 0, 0) == -EIO);
	struct iovec wv = {w, 4096};
	CHECK(sync_io_pwritev(cache, fd, &wv, 1, 0, 0) == -EIO);
	CHECK(counters_now().wios == k1.wios);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);
	CHECK(same(r, 4096, 0, 3));

	/* fsync can fail too. */
	atomic_store(&hook_fail_op, IO_FDATASYNC);
	CHECK(do_io(q, IO_FDATASYNC, NULL, 0, 0, 0) == -EIO);
	CHECK(do_io(q, IO_FSYNC, NULL, 0, 0, 0) == 0);

	atomic_store(&hook_fail_op, -1);
	cache->fault_hook = NULL;
	cache->fault_arg = NULL;
	free(w);
	free(r);
}

/* ------------------------------------------- public fault rules (api/fault_rules.c) */

extern _Atomic long backend_test_continued;

static struct pc_fault rule_of(unsigned ops, int action)
{
	struct pc_fault f;
	memset(&f, 0, sizeof(f));
	f.ops = ops;
	f.action = action;
	return f;
}

/* Add a rule that must be accepted; its id. */
static int inject(const struct pc_fault *f)
{
	int id = pc_fault_inject(cache, f);
	CHECK(id >= 0);
	return id;
}

/* A request over buf[0, len) at off in three iovecs (len a multiple of
 * 16 KiB: 1/8, 1/2 and 3/8 of it), submitted and waited for. */
static ssize_t do_io3(struct pc_ioq *q, int op, uint8_t *buf, size_t len, off_t off)
{
	struct group g;
	struct treq t;
	group_init(&g);
	treq_prep(&t, &g, op, NULL, 0, off);
	t.iov[0] = (struct iovec){buf, len / 8};
	t.iov[1] = (struct iovec){buf + len / 8, len / 2};
	t.iov[2] = (struct iovec){buf + len / 8 + len / 2, len - len / 8 - len / 2};
	t.req.iov = t.iov;
	t.req.iovcnt = 3;
	t.req.len = len;
	submit(q, &t);
	group_wait(&g);
	group_destroy(&g);
	CHECK(atomic_load(&t.ndone) == 1);
	return t.res;
}

/* FAIL on reads, writes, flushes and allocations, with the range filter. */
static void test_rule_fail(struct pc_ioq *q)
{
	const size_t len = 16384;
	uint8_t *w = abuf(len), *r = abuf(len);
	REQUIRE(ftruncate(fd, 0) == 0);
	fill(w, len, 0, 11);
	CHECK(do_io(q, IO_WRITE, w, len, 0, 0) == (ssize_t)len);

	/* Reads overlapping [4096, 8192) fail with EIO and are not counted. */
	struct pc_fault f = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	f.error = EIO;
	f.start = 4096;
	f.end = 8192;
	int id = inject(&f);
	uint64_t all0 = pc_fault_count(cache, -1);
	struct counters k0 = counters_now();
	memset(r, 0x5a, len);
	CHECK(do_io(q, IO_READ, r, 4096, 4096, 0) == -EIO);
	CHECK(r[0] == 0x5a);
	CHECK(do_io(q, IO_READ, r, 8192, 0, 0) == -EIO);      /* overlaps the start */
	CHECK(do_io(q, IO_READ, r, 4096, 8192, 0) == 4096);   /* begins at the end */
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);      /* ends at the start */
	CHECK(same(r, 4096, 0, 11));
	struct iovec v = {r, 4096};
	CHECK(sync_io_preadv(cache, fd, &v, 1, 4096) == -EIO);
	CHECK(counters_now().rios == k0.rios + 2);
	CHECK(pc_fault_count(cache, id) == 3);
	CHECK(pc_fault_count(cache, -1) == all0 + 3);
	CHECK(do_io(q, IO_WRITE, w + 4096, 4096, 4096, 0) == 4096); /* a write is no read */
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(do_io(q, IO_READ, r, 4096, 4096, 0) == 4096);

	/* Writes fail with ENOSPC and leave the file as it was. */
	f = rule_of(PC_FAULT_WRITE, PC_FAULT_FAIL);
	f.error = ENOSPC;
	id = inject(&f);
	uint8_t *w2 = abuf(len);
	fill(w2, len, 0, 12);
	CHECK(do_io(q, IO_WRITE, w2, len, 0, 0) == -ENOSPC);
	struct iovec wv = {w2, 4096};
	CHECK(sync_io_pwritev(cache, fd, &wv, 1, 0, 0) == -ENOSPC);
	CHECK(pc_fault_count(cache, id) == 2);
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(do_io(q, IO_READ, r, len, 0, 0) == (ssize_t)len);
	CHECK(same(r, len, 0, 11));

	/* Flushes, queued and synchronous; a flush covers the whole file, so
	 * a range far away still matches. */
	f = rule_of(PC_FAULT_SYNC, PC_FAULT_FAIL);
	f.error = EIO;
	f.start = 1 << 30;
	id = inject(&f);
	CHECK(do_io(q, IO_FSYNC, NULL, 0, 0, 0) == -EIO);
	CHECK(do_io(q, IO_FDATASYNC, NULL, 0, 0, 0) == -EIO);
	CHECK(sync_io_fsync(cache, fd, false) == -EIO);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);
	CHECK(pc_fault_count(cache, id) == 3);
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(do_io(q, IO_FSYNC, NULL, 0, 0, 0) == 0);
	CHECK(sync_io_fsync(cache, fd, true) == 0);

	/* Allocation faults are asked for by writeback (fault_check) only. */
	f = rule_of(PC_FAULT_ALLOC, PC_FAULT_FAIL);
	f.error = ENOMEM;
	id = inject(&f);
	CHECK(fault_check(cache, PC_FAULT_ALLOC, fd, 0, 4096) == -ENOMEM);
	CHECK(fault_check(cache, PC_FAULT_WRITE, fd, 0, 4096) == 0);
	CHECK(do_io(q, IO_WRITE, w, 4096, 0, 0) == 4096);
	CHECK(pc_fault_count(cache, id) == 1);
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(fault_check(cache, PC_FAULT_ALLOC, fd, 0, 4096) == 0);
	free(w);
	free(w2);
	free(r);
}

/* SHORT: the device moves part, the backend continues: the data is whole
 * and the continuation really ran. */
static void test_rule_short(struct pc_ioq *q)
{
	const size_t len = 64 * 1024;
	uint8_t *w = abuf(len), *r = abuf(2 * len);
	REQUIRE(ftruncate(fd, 0) == 0);
	fill(w, len, 0, 13);
	struct pc_fault f = rule_of(PC_FAULT_READ | PC_FAULT_WRITE, PC_FAULT_SHORT);
	int id = inject(&f);
	CHECK(probe_short_len(fd, len) > 0 && probe_short_len(fd, len) <= len / 2);

	/* A vectored write cut inside its second iovec, then a vectored read. */
	long c0 = atomic_load(&backend_test_continued);
	struct counters k0 = counters_now();
	CHECK(do_io3(q, IO_WRITE, w, len, 0) == (ssize_t)len);
	CHECK(atomic_load(&backend_test_continued) == c0 + 1);
	memset(r, 0, len);
	CHECK(do_io3(q, IO_READ, r, len, 0) == (ssize_t)len);
	CHECK(same(r, len, 0, 13));
	CHECK(atomic_load(&backend_test_continued) == c0 + 2);
	CHECK(pc_fault_count(cache, id) == 2);
	/* One I/O each, counted once with the requested length. */
	struct counters k1 = counters_now();
	CHECK(k1.wios == k0.wios + 1 && k1.wbytes == k0.wbytes + len);
	CHECK(k1.rios == k0.rios + 1 && k1.rbytes == k0.rbytes + len);

	/* Cut at EOF exactly: the continuation finds EOF. */
	memset(r, 0, 2 * len);
	CHECK(do_io(q, IO_READ, r, len, (off_t)len / 2, 0) == (ssize_t)len / 2);
	CHECK(same(r, len / 2, len / 2, 13));
	/* The first part already crosses EOF. */
	CHECK(do_io(q, IO_READ, r, 2 * len, (off_t)len / 2, 0) == (ssize_t)len / 2);
	CHECK(same(r, len / 2, len / 2, 13));
	CHECK(pc_fault_count(cache, id) == 4);

	/* Synchronous vector calls are cut too. */
	struct iovec v[2] = {{r, len / 4}, {r + len / 4, 3 * len / 4}};
	memset(r, 0, len);
	long c1 = atomic_load(&backend_test_continued);
	CHECK(sync_io_preadv(cache, fd, v, 2, 0) == (ssize_t)len);
	CHECK(same(r, len, 0, 13));
	CHECK(atomic_load(&backend_test_continued) == c1 + 1);
	CHECK(pc_fault_count(cache, id) == 5);

	/* An I/O too small to cut (one direct-I/O unit) passes whole and is
	 * not a fault. */
	size_t unit = 1;
	while (probe_short_len(fd, 2 * unit) == 0)
		unit *= 2;
	CHECK(do_io(q, IO_READ, r, unit, 0, 0) == (ssize_t)unit);
	CHECK(pc_fault_count(cache, id) == 5);

	CHECK(pc_fault_remove(cache, id) == 0);
	free(w);
	free(r);
}

/* DELAY: the I/O is issued no sooner than delay_ms later (a lower bound
 * only: a loaded machine makes it later, never earlier). */
static void test_rule_delay(struct pc_ioq *q)
{
	uint8_t *r = abuf(4096);
	REQUIRE(ftruncate(fd, 4096) == 0);
	struct pc_fault f = rule_of(PC_FAULT_READ, PC_FAULT_DELAY);
	f.delay_ms = 150;
	f.count = 1;
	int id = inject(&f);
	uint64_t t0 = tu_now_ms();
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);
	CHECK(tu_now_ms() - t0 >= 150);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096); /* count 1: spent */
	CHECK(pc_fault_count(cache, id) == 1);
	CHECK(pc_fault_remove(cache, id) == 0);
	free(r);
}

/* Which reads of `n` at offset 0 fail (bit i: the i-th); each must be a
 * clean pass or -EIO. */
static uint64_t fail_pattern(struct pc_ioq *q, uint8_t *r, int n)
{
	uint64_t bits = 0;
	for (int i = 0; i < n; i++) {
		ssize_t res = do_io(q, IO_READ, r, 4096, 0, 0);
		CHECK(res == 4096 || res == -EIO);
		if (res == -EIO)
			bits |= 1ull << i;
	}
	return bits;
}

/* skip/count, rule order, one_in with a seed, remove and count. */
static void test_rule_selection(struct pc_ioq *q)
{
	uint8_t *r = abuf(4096);
	REQUIRE(ftruncate(fd, 16384) == 0);

	/* skip 2, count 3: pass, pass, fail x3, then spent (still there). */
	struct pc_fault f = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	f.error = EIO;
	f.skip = 2;
	f.count = 3;
	int id = inject(&f);
	uint64_t all0 = pc_fault_count(cache, -1);
	CHECK(fail_pattern(q, r, 7) == 0x1c);
	CHECK(pc_fault_count(cache, id) == 3);
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(pc_fault_remove(cache, id) == -1 && errno == EINVAL);
	CHECK(pc_fault_count(cache, id) == 0);
	CHECK(pc_fault_count(cache, -1) == all0 + 3); /* removed ones included */

	/* The first rule that fires decides; the next does not see the I/O. */
	struct pc_fault a = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	a.error = EIO;
	a.end = 4096;
	struct pc_fault b = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	b.error = ENOSPC;
	int ida = inject(&a), idb = inject(&b);
	CHECK(ida != idb);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == -EIO);
	CHECK(do_io(q, IO_READ, r, 4096, 8192, 0) == -ENOSPC);
	CHECK(pc_fault_count(cache, ida) == 1 && pc_fault_count(cache, idb) == 1);
	CHECK(pc_fault_remove(cache, -1) == 0);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);

	/* one_in 3: a seed gives the same faults each time; another seed
	 * others; seed 0 is a fixed default. */
	f = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	f.error = EIO;
	f.one_in = 3;
	uint64_t pat[4];
	const uint64_t seeds[4] = {42, 42, 43, 0};
	for (int i = 0; i < 4; i++) {
		f.seed = seeds[i];
		id = inject(&f);
		pat[i] = fail_pattern(q, r, 60);
		CHECK(pc_fault_count(cache, id) == (uint64_t)__builtin_popcountll(pat[i]));
		CHECK(pc_fault_remove(cache, id) == 0);
	}
	CHECK(pat[0] == pat[1]);
	CHECK(pat[0] != pat[2]);
	for (int i = 0; i < 4; i++) /* about a third of 60 */
		CHECK(__builtin_popcountll(pat[i]) >= 5 && __builtin_popcountll(pat[i]) <= 35);
	f.seed = 0;
	id = inject(&f);
	CHECK(fail_pattern(q, r, 60) == pat[3]);
	CHECK(pc_fault_remove(cache, id) == 0);
	free(r);
}

/* Rules the header calls bad; the table's size; removing unknown ids. */
static void test_rule_checks(void)
{
	struct pc_fault ok = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	ok.error = EIO;
	struct pc_fault bad[12];
	for (int i = 0; i < 12; i++)
		bad[i] = ok;
	bad[0].ops = 0;
	bad[1].ops = 0x100;
	bad[2].action = 7;
	bad[3].error = 0;
	bad[4].error = -EIO;
	bad[5] = rule_of(PC_FAULT_READ | PC_FAULT_SYNC, PC_FAULT_SHORT);
	bad[6] = rule_of(PC_FAULT_READ, PC_FAULT_DELAY); /* delay_ms 0 */
	bad[7].start = -1;
	bad[8].start = 8192;
	bad[8].end = 4096;
	bad[9].start = 4096;
	bad[9].end = 4096;
	bad[10] = rule_of(PC_FAULT_ALLOC, PC_FAULT_SHORT);
	bad[11].end = -5;
	for (int i = 0; i < 12; i++) {
		errno = 0;
		CHECK(pc_fault_inject(cache, &bad[i]) == -1 && errno == EINVAL);
	}
	errno = 0;
	CHECK(pc_fault_inject(NULL, &ok) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pc_fault_inject(cache, NULL) == -1 && errno == EINVAL);
	CHECK(pc_fault_remove(NULL, -1) == -1 && errno == EINVAL);
	CHECK(pc_fault_count(NULL, -1) == 0);

	/* At most 16 rules; ids are not reused. */
	ok.start = 1 << 30; /* never matches what the other tests do */
	int ids[16];
	for (int i = 0; i < 16; i++)
		ids[i] = inject(&ok);
	errno = 0;
	CHECK(pc_fault_inject(cache, &ok) == -1 && errno == ENOSPC);
	CHECK(pc_fault_remove(cache, ids[3]) == 0);
	int again = inject(&ok);
	for (int i = 0; i < 16; i++)
		CHECK(again != ids[i]);
	CHECK(pc_fault_remove(cache, 123456) == -1 && errno == EINVAL);
	CHECK(pc_fault_remove(cache, -2) == -1 && errno == EINVAL);
	CHECK(pc_fault_remove(cache, -1) == 0);
	CHECK(pc_fault_remove(cache, -1) == 0); /* none left: still fine */
	CHECK(pc_fault_remove(cache, again) == -1 && errno == EINVAL);
}

/*
 * A failed io_uring submission (PC_FAULT_SUBMIT) ends in exactly one
 * completion, on the submitting thread before ioq_submit returns, with the
 * I/O done; inflight is released (twice the depth in a row would block for
 * ever otherwise) and the ring goes on working; the rewritten SQEs reach
 * the kernel as NOPs whose completions are dropped.
 */
static void test_submit_fault(struct pc_ioq *q, unsigned depth)
{
	const int n = (int)(2 * depth);
	uint8_t *buf = abuf((size_t)n * 4096), *r = abuf((size_t)n * 4096);
	REQUIRE(ftruncate(fd, 0) == 0);
	fill(buf, (size_t)n * 4096, 0, 21);
	struct treq *t = calloc((size_t)(3 * n + 2), sizeof(*t));
	REQUIRE(t);
	struct group g;
	group_init(&g);

	struct pc_fault f = rule_of(PC_FAULT_SUBMIT, PC_FAULT_FAIL);
	f.error = EIO;
	int id = inject(&f);
	int k = 0;
	bool inline_ok = true;
	for (int i = 0; i < n; i++, k++) {
		treq_prep(&t[k], &g, IO_WRITE, buf + i * 4096, 4096, (off_t)i * 4096);
		submit(q, &t[k]);
		inline_ok &= atomic_load(&t[k].done) && pthread_equal(t[k].done_thread, pthread_self()) &&
			     t[k].res == 4096;
	}
	CHECK(inline_ok);
	CHECK(pc_fault_count(cache, id) == (uint64_t)n);

	/* A posted error (a FAIL rule on writes) and a cut transfer whose
	 * submission fails: delivered / done in line too. */
	struct pc_fault wf = rule_of(PC_FAULT_WRITE, PC_FAULT_FAIL);
	wf.error = ENOSPC;
	wf.count = 1;
	inject(&wf);
	treq_prep(&t[k], &g, IO_WRITE, buf, 4096, 0);
	submit(q, &t[k]);
	CHECK(atomic_load(&t[k].done) && t[k].res == -ENOSPC);
	k++;
	struct pc_fault sf = rule_of(PC_FAULT_READ, PC_FAULT_SHORT);
	int sid = inject(&sf);
	treq_prep(&t[k], &g, IO_READ, r, (size_t)n * 4096, 0);
	submit(q, &t[k]);
	CHECK(atomic_load(&t[k].done) && t[k].res == n * 4096);
	CHECK(same(r, (size_t)n * 4096, 0, 21));
	CHECK(pc_fault_count(cache, sid) == 1);
	k++;
	CHECK(pc_fault_remove(cache, -1) == 0);

	/* Through the ring again: twice the depth of reads, on the
	 * completion thread. */
	bool ring_ok = true;
	int first = k;
	for (int i = 0; i < n; i++, k++) {
		treq_prep(&t[k], &g, IO_READ, r + i * 4096, 4096, (off_t)i * 4096);
		submit(q, &t[k]);
	}
	group_wait(&g);
	for (int i = first; i < k; i++)
		ring_ok &= t[i].res == 4096 && !pthread_equal(t[i].done_thread, pthread_self());
	CHECK(ring_ok);
	CHECK(same(r, (size_t)n * 4096, 0, 21));
	bool once = true;
	for (int i = 0; i < k; i++)
		once &= atomic_load(&t[i].ndone) == 1;
	CHECK(once);
	group_destroy(&g);
	free(t);
	free(buf);
	free(r);
}

/* ioq_destroy right after a burst where every other submission fails:
 * nothing is left pending, everything completed once. */
static void test_submit_fault_destroy(struct pc_cache *c)
{
	struct pc_ioq *q;
	REQUIRE(ioq_create(c, 4, true, &q) == 0);
	if (!ioq_is_uring(q)) {
		ioq_destroy(q);
		return;
	}
	struct pc_fault f = rule_of(PC_FAULT_SUBMIT, PC_FAULT_FAIL);
	f.error = EBADF;
	f.one_in = 2;
	f.seed = 7;
	int id = inject(&f);
	uint8_t *buf;
	struct group g;
	struct treq *t = submit_64_mixed(q, &g, &buf);
	ioq_destroy(q);
	bool once = true;
	for (int i = 0; i < 64; i++)
		once &= atomic_load(&t[i].ndone) == 1;
	CHECK(once);
	CHECK(pc_fault_count(c, id) > 0 && pc_fault_count(c, id) < 64);
	CHECK(pc_fault_remove(c, id) == 0);
	group_wait(&g);
	group_destroy(&g);
	free(t);
	free(buf);
}

/* Many requests, from several threads, far more than the depth. */
#define MANY 256
#define MANY_THREADS 4

struct many_ctx {
	struct pc_ioq *q;
	struct treq *t;
	uint8_t *buf;
	struct group *g;
	int first, count, op;
};

static void *many_thread(void *arg)
{
	struct many_ctx *m = arg;
	for (int i = m->first; i < m->first + m->count; i++) {
		treq_prep(&m->t[i], m->g, m->op, m->buf + (size_t)i * 4096, 4096, (off_t)i * 4096);
		submit(m->q, &m->t[i]);
	}
	return NULL;
}

static void test_many(struct pc_ioq *q)
{
	uint8_t *buf = abuf(MANY * 4096);
	struct treq *t = calloc(MANY, sizeof(*t));
	REQUIRE(t);
	REQUIRE(ftruncate(fd, 0) == 0);
	fill(buf, MANY * 4096, 0, 5);
	struct counters k0 = counters_now();

	for (int pass = 0; pass < 2; pass++) {
		int op = pass == 0 ? IO_WRITE : IO_READ;
		if (op == IO_READ)
			memset(buf, 0, MANY * 4096);
		struct group g;
		group_init(&g);
		pthread_t th[MANY_THREADS];
		struct many_ctx ctx[MANY_THREADS];
		for (int k = 0; k < MANY_THREADS; k++) {
			ctx[k] = (struct many_ctx){q, t, buf, &g, k * (MANY / MANY_THREADS), MANY / MANY_THREADS, op};
			REQUIRE(pthread_create(&th[k], NULL, many_thread, &ctx[k]) == 0);
		}
		for (int k = 0; k < MANY_THREADS; k++)
			pthread_join(th[k], NULL);
		group_wait(&g);
		group_destroy(&g);
		int ok = 1;
		for (int i = 0; i < MANY; i++)
			ok &= atomic_load(&t[i].done) && t[i].res == 4096;
		CHECK(ok);
	}
	CHECK(same(buf, MANY * 4096, 0, 5));
	struct counters k1 = counters_now();
	CHECK(k1.wios == k0.wios + MANY && k1.wbytes == k0.wbytes + MANY * 4096);
	CHECK(k1.rios == k0.rios + MANY && k1.rbytes == k0.rbytes + MANY * 4096);
	free(t);
	free(buf);
}

/* io_uring only: the depth limit holds while completions are stalled. */
static pthread_mutex_t gate_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static _Atomic int gate_blocked;

static void gated_done(struct pc_ioreq *req, ssize_t res)
{
	pthread_mutex_lock(&gate_m);
	atomic_fetch_add(&gate_blocked, 1);
	while (!gate_open)
		pthread_cond_wait(&gate_cv, &gate_m);
	pthread_mutex_unlock(&gate_m);
	treq_done(req, res);
}

struct depth_ctx {
	struct pc_ioq *q;
	struct treq *t;
	struct group *g;
	int n;
	_Atomic int submitted;
};

static void *depth_thread(void *arg)
{
	struct depth_ctx *d = arg;
	for (int i = 0; i < d->n; i++) {
		treq_prep(&d->t[i], d->g, IO_NOP, NULL, 0, 0);
		d->t[i].req.done = gated_done;
		submit(d->q, &d->t[i]);
		atomic_fetch_add(&d->submitted, 1);
	}
	return NULL;
}

static void test_depth(struct pc_cache *c)
{
	const unsigned depth = 8;
	struct pc_ioq *q;
	REQUIRE(ioq_create(c, depth, true, &q) == 0);
	if (!ioq_is_uring(q)) {
		ioq_destroy(q);
		return;
	}
	struct group g;
	group_init(&g);
	struct depth_ctx d = {.q = q, .g = &g, .n = 64};
	d.t = calloc(64, sizeof(struct treq));
	REQUIRE(d.t);
	gate_open = false;
	atomic_store(&gate_blocked, 0);
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, depth_thread, &d) == 0);
	/* Let the submitter run into the limit: the completion thread is
	 * stuck in the first done(), `depth` more are in flight, the next
	 * submission waits. */
	CHECK(TU_POLL(atomic_load(&gate_blocked) != 0 && atomic_load(&d.submitted) >= (int)depth, 200));
	usleep(50000);
	int sub = atomic_load(&d.submitted);
	CHECK(atomic_load(&gate_blocked) == 1);
	/* the stalled batch (at most `depth`) plus `depth` in flight */
	CHECK(sub >= (int)depth && sub <= 2 * (int)depth);
	pthread_mutex_lock(&gate_m);
	gate_open = true;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_m);
	pthread_join(th, NULL);
	group_wait(&g);
	CHECK(atomic_load(&d.submitted) == 64);
	int ok = 1;
	for (int i = 0; i < 64; i++)
		ok &= d.t[i].res == 0;
	CHECK(ok);
	group_destroy(&g);
	free(d.t);
	ioq_destroy(q);
}

/* done() submitting again from the completion thread, with the queue
 * full: must not deadlock. */
struct chain {
	struct treq t;
	struct pc_ioq *q;
	_Atomic int left;
	_Atomic int ran;
	uint8_t *buf;
};

static void chain_done(struct pc_ioreq *req, ssize_t res)
{
	struct chain *ch = (struct chain *)req;
	CHECK(res == 4096);
	atomic_fetch_add(&ch->ran, 1);
	if (atomic_fetch_sub(&ch->left, 1) > 1) {
		treq_prep(&ch->t, ch->t.g, IO_READ, ch->buf, 4096, 0);
		ch->t.req.done = chain_done;
		ioq_submit(ch->q, &ch->t.req);
	} else {
		treq_done(req, res);
	}
}

static void test_chain(struct pc_ioq *q)
{
	uint8_t *w = abuf(4096);
	memset(w, 7, 4096);
	REQUIRE(pwrite(fd, w, 4096, 0) == 4096);
	const int nch = 32; /* more chains than the depth of 16 */
	struct chain *ch = calloc((size_t)nch, sizeof(*ch));
	REQUIRE(ch);
	struct group g;
	group_init(&g);
	for (int i = 0; i < nch; i++) {
		ch[i].q = q;
		ch[i].buf = abuf(4096);
		atomic_store(&ch[i].left, 20);
		treq_prep(&ch[i].t, &g, IO_READ, ch[i].buf, 4096, 0);
		ch[i].t.req.done = chain_done;
		submit(q, &ch[i].t);
	}
	group_wait(&g);
	int ok = 1;
	for (int i = 0; i < nch; i++) {
		ok &= atomic_load(&ch[i].ran) == 20 && ch[i].buf[4095] == 7;
		free(ch[i].buf);
	}
	CHECK(ok);
	group_destroy(&g);
	free(ch);
	free(w);
}

/* ioq_destroy right after submitting chains: every follow-up I/O that a
 * done() submits still completes before destroy returns. */
static void test_destroy_chain(struct pc_cache *c, bool uring)
{
	struct pc_ioq *q;
	REQUIRE(ioq_create(c, 4, uring, &q) == 0);
	uint8_t *w = abuf(4096);
	memset(w, 7, 4096);
	REQUIRE(pwrite(fd, w, 4096, 0) == 4096);
	const int nch = 8;
	struct chain *ch = calloc((size_t)nch, sizeof(*ch));
	REQUIRE(ch);
	struct group g;
	group_init(&g);
	for (int i = 0; i < nch; i++) {
		ch[i].q = q;
		ch[i].buf = abuf(4096);
		atomic_store(&ch[i].left, 10);
		treq_prep(&ch[i].t, &g, IO_READ, ch[i].buf, 4096, 0);
		ch[i].t.req.done = chain_done;
		submit(q, &ch[i].t);
	}
	ioq_destroy(q);
	int ok = 1;
	for (int i = 0; i < nch; i++) {
		ok &= atomic_load(&ch[i].ran) == 10;
		free(ch[i].buf);
	}
	CHECK(ok);
	group_wait(&g);
	group_destroy(&g);
	free(ch);
	free(w);
}

/* ioq_destroy waits for everything in flight. */
static void test_destroy_waits(struct pc_cache *c, bool uring)
{
	struct pc_ioq *q;
	REQUIRE(ioq_create(c, 4, uring, &q) == 0);
	uint8_t *buf;
	struct group g;
	struct treq *t = submit_64_mixed(q, &g, &buf);
	ioq_destroy(q);
	int ok = 1;
	for (int i = 0; i < 64; i++)
		ok &= atomic_load(&t[i].done);
	CHECK(ok);
	group_wait(&g);
	group_destroy(&g);
	free(t);
	free(buf);
}

/* Synchronous vector I/O: iovec walking, EOF, partial writes. */
static void test_sync_vectors(void)
{
	char p2[4300];
	test_path(p2, sizeof(p2), dir, "vec");
	int bfd = open(p2, O_RDWR | O_CREAT | O_TRUNC, 0644); /* buffered: any alignment */
	REQUIRE(bfd >= 0);
	uint8_t *w = abuf(65536), *r = abuf(65536);
	fill(w, 65536, 0, 9);

	struct iovec wv[3] = {{w, 100}, {w + 100, 0}, {w + 100, 20000}};
	struct iovec wv_copy[3];
	memcpy(wv_copy, wv, sizeof(wv));
	CHECK(sync_io_pwritev(NULL, bfd, wv, 3, 0, 0) == 20100);
	CHECK(memcmp(wv, wv_copy, sizeof(wv)) == 0);

	/* Read across EOF mid-iovec: total up to EOF, array untouched. */
	memset(r, 0, 65536);
	struct iovec rv[3] = {{r, 4096}, {r + 4096, 4096}, {r + 8192, 20000}};
	struct iovec rv_copy[3];
	memcpy(rv_copy, rv, sizeof(rv));
	CHECK(sync_io_preadv(NULL, bfd, rv, 3, 0) == 20100);
	CHECK(same(r, 20100, 0, 9));
	CHECK(memcmp(rv, rv_copy, sizeof(rv)) == 0);
	CHECK(sync_io_preadv(NULL, bfd, rv, 3, 20100) == 0);
	CHECK(sync_io_preadv(NULL, bfd, rv, 0, 0) == 0);
	CHECK(sync_io_preadv(NULL, bfd, rv, -1, 0) == -EINVAL);
	CHECK(sync_io_preadv(NULL, bfd, rv, IOV_MAX + 1, 0) == -EINVAL);

	/* Counters with a cache, requested bytes. */
	struct counters k0 = counters_now();
	CHECK(sync_io_preadv(cache, bfd, rv, 3, 10000) == 10100);
	struct counters k1 = counters_now();
	CHECK(k1.rios == k0.rios + 1 && k1.rbytes == k0.rbytes + 28192);

	/* A short write (file size limit) is continued, and the error that
	 * stops it is reported, not a short count. */
	struct sigaction sa = {.sa_handler = SIG_IGN}, old_sa;
	sigaction(SIGXFSZ, &sa, &old_sa);
	struct rlimit old_rl, rl;
	getrlimit(RLIMIT_FSIZE, &old_rl);
	rl = old_rl;
	rl.rlim_cur = 30000;
	if (setrlimit(RLIMIT_FSIZE, &rl) == 0) {
		struct iovec big[2] = {{w, 5000}, {w + 5000, 20000}};
		CHECK(sync_io_pwritev(NULL, bfd, big, 2, 10000, 0) == -EFBIG);
		/* the part below the limit was written */
		CHECK(pread(bfd, r, 20000, 10000) == 20000);
		CHECK(memcmp(r, w, 20000) == 0);
		struct iovec fits = {w, 9000};
		CHECK(sync_io_pwritev(NULL, bfd, &fits, 1, 20000, RWF_DSYNC) == 9000);
		setrlimit(RLIMIT_FSIZE, &old_rl);
	}
	sigaction(SIGXFSZ, &old_sa, NULL);

	/* Many iovecs (IOV_MAX), each of 16 bytes. */
	struct iovec *many = calloc(IOV_MAX, sizeof(*many));
	REQUIRE(many);
	for (int i = 0; i < IOV_MAX; i++)
		many[i] = (struct iovec){w + i * 16, 16};
	CHECK(sync_io_pwritev(NULL, bfd, many, IOV_MAX, 0, 0) == IOV_MAX * 16);
	memset(r, 0, 65536);
	CHECK(pread(bfd, r, IOV_MAX * 16, 0) == IOV_MAX * 16);
	CHECK(memcmp(r, w, IOV_MAX * 16) == 0);
	free(many);

	/* The queue on a buffered descriptor: unaligned short read at EOF. */
	for (int mode = 0; mode < 2; mode++) {
		struct pc_ioq *q;
		REQUIRE(ioq_create(NULL, 4, mode == 1, &q) == 0);
		int saved = fd;
		fd = bfd;
		REQUIRE(ftruncate(bfd, 5000) == 0);
		CHECK(do_io(q, IO_READ, r + 1, 8000, 3, 0) == 4997);
		CHECK(memcmp(r + 1, w + 3, 4997) == 0);
		fd = saved;
		ioq_destroy(q);
	}

	close(bfd);
	unlink(p2);
	free(w);
	free(r);
}

static bool pow2(unsigned x) { return x && !(x & (x - 1)); }

static void test_dio_align(void)
{
	unsigned oa = 1, ma = 1;
	CHECK(probe_dio_align(fd, &oa, &ma) == 0);
	printf("dio_align: offset %u, memory %u (%s descriptor)\n", oa, ma, direct ? "O_DIRECT" : "buffered");
	if (direct) {
		CHECK(pow2(oa) && oa >= 512 && oa <= 65536);
		CHECK(pow2(ma) && ma <= 65536);
		/* The answer works: an I/O with exactly that alignment. */
		uint8_t *b = abuf(2 * 65536);
		memset(b, 1, 2 * 65536);
		REQUIRE(pwrite(fd, b, 2 * 65536, 0) == 2 * 65536);
		CHECK(pread(fd, b + ma, oa, oa) == (ssize_t)oa);
		free(b);
	} else {
		CHECK(oa == 0 || pow2(oa));
	}
	CHECK(probe_dio_align(-1, &oa, &ma) == -EBADF);
}

static void test_holes(void)
{
	char p2[4300];
	test_path(p2, sizeof(p2), dir, "sparse");
	int sfd = open(p2, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(sfd >= 0);
	REQUIRE(ftruncate(sfd, 1 << 20) == 0);
	char b[4096];
	memset(b, 1, sizeof(b));
	REQUIRE(pwrite(sfd, b, 4096, 512 * 1024) == 4096);
	REQUIRE(fsync(sfd) == 0);

	/* SEEK_DATA may be unsupported: then everything "might be data". */
	off_t probe = lseek(sfd, 0, SEEK_DATA);
	bool seek_data = probe == 512 * 1024;
	if (!seek_data)
		printf("is_hole: SEEK_DATA does not report holes here (%lld); checking the safe answer\n",
		       (long long)probe);
	CHECK(probe_is_hole(sfd, 0, 64 * 1024) == seek_data);
	CHECK(probe_is_hole(sfd, 0, 512 * 1024) == seek_data);
	CHECK(!probe_is_hole(sfd, 0, 512 * 1024 + 1));
	CHECK(!probe_is_hole(sfd, 512 * 1024, 4096));
	CHECK(!probe_is_hole(sfd, 500 * 1024, 16 * 1024));
	CHECK(!probe_is_hole(sfd, 512 * 1024 + 4095, 1));
	CHECK(probe_is_hole(sfd, 600 * 1024, 64 * 1024) == seek_data);
	CHECK(probe_is_hole(sfd, 516 * 1024, 1 << 20) == seek_data); /* hole to EOF and past */
	CHECK(probe_is_hole(sfd, 2 << 20, 4096));                  /* past EOF */
	CHECK(!probe_is_hole(-1, 0, 4096));                         /* error: "might be data" */
	close(sfd);
	unlink(p2);
}

static void run_queue_tests(bool uring)
{
	struct pc_ioq *q = NULL;
	REQUIRE(ioq_create(cache, 16, uring, &q) == 0);
	REQUIRE(q);
	printf("queue %s: io_uring %s\n", uring ? "wanting io_uring" : "synchronous",
	       ioq_is_uring(q) ? "yes" : "no");
	if (!uring)
		CHECK(!ioq_is_uring(q));
	test_rw(q);
	test_faults(q);
	test_rule_fail(q);
	test_rule_short(q);
	test_rule_delay(q);
	test_rule_selection(q);
	if (ioq_is_uring(q))
		test_submit_fault(q, 16);
	test_many(q);
	test_chain(q);
	ioq_destroy(q);
	if (uring)
		test_submit_fault_destroy(cache);
	test_destroy_waits(cache, uring);
	for (int i = 0; i < 20; i++)
		test_destroy_chain(cache, uring);
	if (uring)
		test_depth(cache);
}

int main(void)
{
	dir = test_dir("test_backend");
	test_path(path, sizeof(path), dir, "data");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	direct = fd >= 0;
	if (!direct) {
		printf("O_DIRECT refused here (%s); testing with a buffered descriptor\n", strerror(errno));
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	}
	REQUIRE(fd >= 0);
	cache = calloc(1, sizeof(*cache));
	REQUIRE(cache);

	alarm(120); /* a lost completion hangs: fail instead */
	test_rule_checks();
	run_queue_tests(true);
	run_queue_tests(false);
	test_sync_vectors();
	test_dio_align();
	test_holes();

	close(fd);
	fault_rules_destroy(cache);
	free(cache);
	test_rmdir(dir);
	return test_done();
}
