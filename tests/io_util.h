/*
 * io_util.h - what the tests of the I/O layer (src/io: test_io_queue.c,
 * test_io_faults.c, test_io_sync.c, test_io_probe.c) share: a scratch file
 * opened O_DIRECT when the file system allows it, a zeroed struct pc_cache,
 * requests submitted to a queue and waited for, the device counters and
 * the public fault rules.
 *
 * The I/O layer needs a struct pc_cache only for the fault hook, the fault
 * rules and the counters: a zeroed one is enough (the layer must not
 * depend on anything else), with its zeroed process part below it as
 * pc_cache_new lays them out (cache_proc, api/cache.h).
 */
#ifndef PC_IO_UTIL_H
#define PC_IO_UTIL_H

#include "testutil.h"

#include "api/internal.h"

#include <pthread.h>
#include <stdatomic.h>

#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif

static const char *dir;
static char path[4200];
static int fd; /* O_DIRECT when the file system allows it */
static bool direct;
static struct pc_cache *cache;

/* The fixture: the scratch directory `name`, its file "data" open in fd,
 * and the zeroed cache. */
static inline void io_setup(const char *name)
{
	dir = test_dir(name);
	test_path(path, sizeof(path), dir, "data");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	direct = fd >= 0;
	if (!direct) {
		printf("O_DIRECT refused here (%s); testing with a buffered descriptor\n", strerror(errno));
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	}
	REQUIRE(fd >= 0);
	uint8_t *mem = calloc(1, CACHE_PROC_BYTES + sizeof(*cache));
	REQUIRE(mem);
	cache = (struct pc_cache *)(mem + CACHE_PROC_BYTES);
}

static inline void io_teardown(void)
{
	close(fd);
	fault_rules_destroy(cache);
	free(cache_proc(cache));
	test_rmdir(dir);
}

/* IO_FIXTURE("name"): the file's fixture is io_setup(name)/io_teardown. */
#define IO_FIXTURE(name)                               \
	static void io_fixture_setup(void)             \
	{                                              \
		io_setup(name);                        \
	}                                              \
	TEST_FIXTURE(io_fixture_setup, io_teardown)

/* ------------------------------------------------------ requests */

/* Requests in flight, counted down by their done(). */
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

static inline void group_init(struct group *g)
{
	pthread_mutex_init(&g->m, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->pending = 0;
}

static inline void group_wait(struct group *g)
{
	pthread_mutex_lock(&g->m);
	while (g->pending > 0)
		pthread_cond_wait(&g->cv, &g->m);
	pthread_mutex_unlock(&g->m);
}

static inline void group_destroy(struct group *g)
{
	pthread_mutex_destroy(&g->m);
	pthread_cond_destroy(&g->cv);
}

static inline void treq_done(struct pc_ioreq *req, ssize_t res)
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

static inline void treq_prep(struct treq *t, struct group *g, int op, void *buf, size_t len, off_t off)
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

static inline void submit(struct pc_ioq *q, struct treq *t)
{
	pthread_mutex_lock(&t->g->m);
	t->g->pending++;
	pthread_mutex_unlock(&t->g->m);
	ioq_submit(q, &t->req);
}

/* One request, waited for; returns its result.  Checks it completed where
 * it should: in line on a synchronous queue, on the completion thread
 * with io_uring. */
static inline ssize_t do_io(struct pc_ioq *q, int op, void *buf, size_t len, off_t off, int rw_flags)
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

/* A 4 KiB-aligned buffer (direct I/O). */
static inline void *abuf(size_t len)
{
	void *p = NULL;
	REQUIRE(posix_memalign(&p, 4096, len) == 0);
	return p;
}

/* A queue of depth 16 on the test's cache, wanting io_uring or not; says
 * which it got. */
static inline struct pc_ioq *queue_new(bool uring)
{
	struct pc_ioq *q = NULL;
	REQUIRE(ioq_create(cache, 16, uring, &q) == 0);
	REQUIRE(q);
	printf("queue %s: io_uring %s\n", uring ? "wanting io_uring" : "synchronous", ioq_is_uring(q) ? "yes" : "no");
	return q;
}

/* fn on a queue_new(uring). */
static inline void run_on_queue(bool uring, void (*fn)(struct pc_ioq *q))
{
	struct pc_ioq *q = queue_new(uring);
	fn(q);
	ioq_destroy(q);
}

/* ------------------------------------------------------ counters */

struct counters {
	uint64_t rios, rbytes, wios, wbytes;
};

static inline struct counters counters_now(void)
{
	struct counters k = {atomic_load(&cache->st_read_ios), atomic_load(&cache->st_read_bytes),
			     atomic_load(&cache->st_write_ios), atomic_load(&cache->st_write_bytes)};
	return k;
}

/* ------------------------------------------------------ fault rules */

static inline struct pc_fault rule_of(unsigned ops, int action)
{
	struct pc_fault f;
	memset(&f, 0, sizeof(f));
	f.ops = ops;
	f.action = action;
	return f;
}

/* Add a rule that must be accepted; its id. */
static inline int inject(const struct pc_fault *f)
{
	int id = pc_fault_inject(cache, f);
	CHECK(id >= 0);
	return id;
}

#endif
