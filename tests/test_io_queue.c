/*
 * test_io_queue.c - the I/O queue (src/io/ioq.c), with io_uring and in
 * synchronous mode: reads, writes, vectors, flushes and NOPs move the
 * data, are counted and end at EOF; errors come back as negative errno;
 * many submitters far beyond the depth; a done() that submits again; the
 * depth limit while completions stall; ioq_destroy waiting for everything
 * in flight; failed io_uring submissions (PC_FAULT_SUBMIT) completed
 * exactly once.  A case named _uring wants io_uring and runs on the
 * synchronous fallback where io_uring is not available (it says which);
 * the cases only io_uring has are skipped there.  (test_io_faults.c
 * checks the fault hook and rules at this layer, test_io_sync.c the
 * synchronous vector calls, test_io_probe.c the file system probes.)
 */
#include "io_util.h"

#include <signal.h>
#include <sys/resource.h>

IO_FIXTURE("io_queue")

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

/* A queue that must have io_uring, or the case is skipped. */
static struct pc_ioq *uring_queue_or_skip(unsigned depth)
{
	struct pc_ioq *q;
	REQUIRE(ioq_create(cache, depth, true, &q) == 0);
	if (!ioq_is_uring(q)) {
		ioq_destroy(q);
		TEST_SKIP_UNSUPPORTED("io_uring is not available here");
	}
	return q;
}

/* ------------------------------------------------------------- cases */

TEST_CASE(synchronous_queue_never_uses_uring)
{
	struct pc_ioq *q = queue_new(false);
	CHECK(!ioq_is_uring(q));
	ioq_destroy(q);
}

/* Writes, reads, vectors, RWF_DSYNC, EOF (aligned or not), a short write
 * continued, flushes and NOPs (not counted), errors as negative errno. */
static void read_write_eof_and_errors(struct pc_ioq *q)
{
	const size_t len = 64 * 1024;
	uint8_t *w = abuf(len), *r = abuf(len);
	REQUIRE(ftruncate(fd, 0) == 0);

	/* Write, counted. */
	struct counters k0 = counters_now();
	tu_fill_pattern(w, len, 1, 0);
	CHECK(do_io(q, IO_WRITE, w, len, 0, 0) == (ssize_t)len);
	struct counters k1 = counters_now();
	CHECK(k1.wios == k0.wios + 1 && k1.wbytes == k0.wbytes + len);
	CHECK(k1.rios == k0.rios && k1.rbytes == k0.rbytes);

	/* Read back, one iovec. */
	memset(r, 0, len);
	CHECK(do_io(q, IO_READ, r, len, 0, 0) == (ssize_t)len);
	CHECK(tu_is_pattern(r, len, 1, 0));
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
	CHECK(tu_is_pattern(r, t.req.len, 1, 4096));

	/* Write in two iovecs (WRITEV) with RWF_DSYNC, read back. */
	tu_fill_pattern(w, len, 2, 0);
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
	CHECK(tu_is_pattern(r, 4096, 1, len - 4096));

	/* A short write (file size limit) is continued synchronously; the
	 * error that stops it is the result, not a short count. */
	struct sigaction sa = {.sa_handler = SIG_IGN}, old_sa;
	sigaction(SIGXFSZ, &sa, &old_sa);
	struct rlimit old_rl, rl;
	getrlimit(RLIMIT_FSIZE, &old_rl);
	rl = old_rl;
	rl.rlim_cur = len + 8192;
	if (setrlimit(RLIMIT_FSIZE, &rl) == 0) {
		tu_fill_pattern(w, len, 6, 0);
		CHECK(do_io(q, IO_WRITE, w, 16384, (off_t)len, 0) == -EFBIG);
		setrlimit(RLIMIT_FSIZE, &old_rl);
		CHECK(do_io(q, IO_READ, r, 16384, (off_t)len, 0) == 8192);
		CHECK(tu_is_pattern(r, 8192, 6, 0));
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

TEST_CASE(read_write_eof_and_errors_uring)
{
	run_on_queue(true, read_write_eof_and_errors);
}

TEST_CASE(read_write_eof_and_errors_sync)
{
	run_on_queue(false, read_write_eof_and_errors);
}

/*
 * A failed io_uring submission (PC_FAULT_SUBMIT) ends in exactly one
 * completion, on the submitting thread before ioq_submit returns, with the
 * I/O done; inflight is released (twice the depth in a row would block for
 * ever otherwise) and the ring goes on working; the rewritten SQEs reach
 * the kernel as NOPs whose completions are dropped.
 */
TEST_CASE(failed_submission_completes_once_in_line)
{
	const unsigned depth = 16;
	struct pc_ioq *q = uring_queue_or_skip(depth);
	const int n = (int)(2 * depth);
	uint8_t *buf = abuf((size_t)n * 4096), *r = abuf((size_t)n * 4096);
	REQUIRE(ftruncate(fd, 0) == 0);
	tu_fill_pattern(buf, (size_t)n * 4096, 21, 0);
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
	CHECK(tu_is_pattern(r, (size_t)n * 4096, 21, 0));
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
	CHECK(tu_is_pattern(r, (size_t)n * 4096, 21, 0));
	bool once = true;
	for (int i = 0; i < k; i++)
		once &= atomic_load(&t[i].ndone) == 1;
	CHECK(once);
	group_destroy(&g);
	ioq_destroy(q);
	free(t);
	free(buf);
	free(r);
}

/* ioq_destroy right after a burst where every other submission fails:
 * nothing is left pending, everything completed once. */
TEST_CASE(destroy_after_failed_submissions_leaves_none_pending)
{
	struct pc_ioq *q = uring_queue_or_skip(4);
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
	CHECK(pc_fault_count(cache, id) > 0 && pc_fault_count(cache, id) < 64);
	CHECK(pc_fault_remove(cache, id) == 0);
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

static void many_submitters(struct pc_ioq *q)
{
	uint8_t *buf = abuf(MANY * 4096);
	struct treq *t = calloc(MANY, sizeof(*t));
	REQUIRE(t);
	REQUIRE(ftruncate(fd, 0) == 0);
	tu_fill_pattern(buf, MANY * 4096, 5, 0);
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
	CHECK(tu_is_pattern(buf, MANY * 4096, 5, 0));
	struct counters k1 = counters_now();
	CHECK(k1.wios == k0.wios + MANY && k1.wbytes == k0.wbytes + MANY * 4096);
	CHECK(k1.rios == k0.rios + MANY && k1.rbytes == k0.rbytes + MANY * 4096);
	free(t);
	free(buf);
}

TEST_CASE(many_submitters_beyond_depth_uring)
{
	run_on_queue(true, many_submitters);
}

TEST_CASE(many_submitters_beyond_depth_sync)
{
	run_on_queue(false, many_submitters);
}

/* The depth limit holds while completions are stalled (io_uring only). */
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

TEST_CASE(depth_limit_holds_while_completions_stall)
{
	const unsigned depth = 8;
	struct pc_ioq *q = uring_queue_or_skip(depth);
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

static void resubmit_from_done(struct pc_ioq *q)
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

TEST_CASE(done_resubmits_with_queue_full_uring)
{
	run_on_queue(true, resubmit_from_done);
}

TEST_CASE(done_resubmits_with_queue_full_sync)
{
	run_on_queue(false, resubmit_from_done);
}

/* ioq_destroy right after submitting chains: every follow-up I/O that a
 * done() submits still completes before destroy returns. */
static void destroy_chain(bool uring)
{
	struct pc_ioq *q;
	REQUIRE(ioq_create(cache, 4, uring, &q) == 0);
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
static void destroy_waits(bool uring)
{
	struct pc_ioq *q;
	REQUIRE(ioq_create(cache, 4, uring, &q) == 0);
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

TEST_CASE(destroy_waits_for_inflight_uring)
{
	destroy_waits(true);
}

TEST_CASE(destroy_waits_for_inflight_sync)
{
	destroy_waits(false);
}

/* Twenty rounds each. */
TEST_CASE(destroy_completes_resubmitted_io_uring)
{
	for (int i = 0; i < 20; i++)
		destroy_chain(true);
}

TEST_CASE(destroy_completes_resubmitted_io_sync)
{
	for (int i = 0; i < 20; i++)
		destroy_chain(false);
}

/* A queue (with no cache) on a buffered descriptor: an unaligned short
 * read at EOF. */
static void unaligned_read_on_buffered_fd(bool uring)
{
	char p2[4300];
	test_path(p2, sizeof(p2), dir, "buffered");
	int bfd = open(p2, O_RDWR | O_CREAT | O_TRUNC, 0644); /* buffered: any alignment */
	REQUIRE(bfd >= 0);
	uint8_t *w = abuf(8192), *r = abuf(8192);
	tu_fill_pattern(w, 8192, 9, 0);
	REQUIRE(pwrite(bfd, w, 5000, 0) == 5000);
	struct pc_ioq *q;
	REQUIRE(ioq_create(NULL, 4, uring, &q) == 0);
	int saved = fd;
	fd = bfd;
	CHECK(do_io(q, IO_READ, r + 1, 8000, 3, 0) == 4997);
	CHECK(memcmp(r + 1, w + 3, 4997) == 0);
	fd = saved;
	ioq_destroy(q);
	close(bfd);
	unlink(p2);
	free(w);
	free(r);
}

TEST_CASE(unaligned_read_to_eof_on_buffered_fd_uring)
{
	unaligned_read_on_buffered_fd(true);
}

TEST_CASE(unaligned_read_to_eof_on_buffered_fd_sync)
{
	unaligned_read_on_buffered_fd(false);
}
