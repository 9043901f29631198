/*
 * backend.c - device I/O on the backing files: an I/O queue (io_uring with
 * a completion thread, or synchronous calls), synchronous vector I/O, and
 * the questions asked of the backing file system (direct-I/O alignment,
 * holes).
 *
 * The I/O queue
 *   With io_uring, any thread submits: the submission queue is guarded by
 *   q->lock, and at most `depth` requests are in flight (a submitter sleeps
 *   on q->cv while the queue is full).  One completion thread per queue
 *   reaps completions and calls req->done(req, res) on that thread, never
 *   holding q->lock.  A done() callback may submit more I/O to the same
 *   queue: the completion thread is never made to wait for room (it is the
 *   one that makes room), so it may briefly exceed `depth`; the completion
 *   ring has twice the submission ring's entries and the kernel keeps
 *   overflowing completions (IORING_FEAT_NODROP) anyway.
 *   Without io_uring (not built in, not wanted, or the ring cannot be set
 *   up) every request runs synchronously on the submitter's thread and
 *   done() is called before ioq_submit() returns.
 *
 * Where done() runs in io_uring mode
 *   On the completion thread, except when a request cannot go through the
 *   ring; then it is finished on the submitting thread, inside ioq_submit()
 *   and without q->lock held, exactly as in synchronous mode:
 *     - no memory for a fault-hook result: done() gets that error;
 *     - no free SQE (cannot happen with the depth limit): run synchronously;
 *     - a failed submission: io_uring_enter failed for good (anything but
 *       EINTR/EAGAIN/EBUSY, or those past a bounded number of retries), or
 *       a PC_FAULT_SUBMIT rule failed it.  See "Failed submissions".
 *   So a caller of ioq_submit() must not hold a lock that its done() takes,
 *   which synchronous mode requires anyway.
 *
 * Failed submissions
 *   A request whose SQE the kernel did not consume is never left in the
 *   ring for "the next submit" (there may be none: a waiter, a reader and
 *   ioq_destroy would wait for ever).  Under q->lock, every SQE between the
 *   kernel's SQ head and our tail that is not yet consumed is rewritten as a
 *   NOP whose completion is ignored (IOQ_IGNORE_TAG), it leaves `inflight`,
 *   and its request is run synchronously on this thread (a posted result is
 *   delivered as it is); it stays in `pending` until its done() returns.
 *   No double execution: without SQPOLL the kernel reads SQEs only inside
 *   io_uring_enter with to_submit > 0, which happens only under q->lock
 *   (the completion thread's waits submit nothing), so an SQE is either
 *   consumed by the kernel (and completes through the ring) or rewritten
 *   by us while we hold the lock, never both.  The rewritten NOPs go to the
 *   kernel with the next submission; their completions are dropped.
 *
 * Results
 *   done() gets the bytes transferred or a negative errno.  A read that
 *   comes back short is continued synchronously until the whole length is
 *   read or EOF is reached (then the bytes before EOF are the result); a
 *   short write is continued until all is written.  An error after a
 *   partial transfer is reported as the error, never as a short count: a
 *   caller must be able to tell a failed read from end of file.  -EAGAIN,
 *   -EINTR and -ECANCELED from io_uring are redone synchronously.
 *
 * Accounting and fault injection
 *   Every device I/O (read, write, fsync; not NOP) first calls the cache's
 *   internal fault hook when one is set, then the public fault rules
 *   (pc_fault_inject's, matched by io/fault.c).  A failure fails the I/O
 *   with that errno without doing it; in io_uring mode that result still
 *   travels through the ring (a NOP), so done() runs on the completion
 *   thread like a real device error would.  A PC_FAULT_SHORT rule makes the
 *   device move only the first part of the I/O (backend_short_len: about
 *   half, aligned for O_DIRECT): io_uring gets an SQE for that part (its
 *   shortened iovec kept in a struct ioq_cut until completion) and
 *   ioq_finish continues the rest; synchronously rw_head moves the part and
 *   rw_loop continues.  A PC_FAULT_DELAY rule sleeps on the submitting
 *   thread before the I/O is issued.  PC_FAULT_SUBMIT rules are asked in
 *   ioq_submit_uring, just before io_uring_submit.  I/Os that pass are
 *   counted in c->st_read_ios / st_read_bytes / st_write_ios /
 *   st_write_bytes when submitted, with the *requested* length: a read cut
 *   short by EOF still counts its whole length, and the synchronous
 *   continuation of a short transfer is part of the same I/O (neither hooked
 *   nor counted again).  fsync and NOP are not counted.  Everything here
 *   tolerates c == NULL (no hook, no counters).
 */
#include "io/backend.h"

#include "api/cache.h"
#include "io/fault.h"
#include "pagecache.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The build defines PC_NO_URING=1 when liburing is missing. */
#if defined(PC_NO_URING) && PC_NO_URING
#define PC_HAVE_URING 0
#else
#define PC_HAVE_URING 1
#include <liburing.h>
#endif

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* ------------------------------------------------------------ accounting */

static unsigned fault_op(int op)
{
	switch (op) {
	case IO_READ:
		return PC_FAULT_READ;
	case IO_WRITE:
		return PC_FAULT_WRITE;
	default:
		return PC_FAULT_SYNC; /* IO_FSYNC, IO_FDATASYNC */
	}
}

/*
 * Hooks, then counters.  Returns 0 or a hook's negative errno.  *cut: 0, or
 * the bytes the device is to move first (an injected short transfer).
 */
static int io_account(struct pc_cache *c, int op, int fd, off_t off, size_t len, size_t *cut)
{
	*cut = 0;
	if (!c || op == IO_NOP)
		return 0;
	if (c->fault_hook) {
		int e = c->fault_hook(c->fault_arg, op, fd, off, len);
		if (e < 0)
			return e;
	}
	int e = fault_check_io(c, fault_op(op), fd, off, len, op == IO_READ || op == IO_WRITE ? cut : NULL);
	if (e < 0)
		return e;
	if (op == IO_READ) {
		atomic_fetch_add_explicit(&c->st_read_ios, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->st_read_bytes, len, memory_order_relaxed);
	} else if (op == IO_WRITE) {
		atomic_fetch_add_explicit(&c->st_write_ios, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->st_write_bytes, len, memory_order_relaxed);
	}
	return 0;
}

/* ----------------------------------------------------- synchronous vector I/O */

/*
 * Read or write the iovecs at `off`, starting `done_bytes` into them (those
 * bytes are already transferred), until all `total` bytes are moved, EOF
 * (reads), or an error.  The caller's array is never modified: when a
 * transfer ends inside an iovec the remaining ones are copied to a local
 * array once and adjusted there.  No hook, no accounting.
 */
/* Test hook: how many short transfers were continued (test_fault.c proves
 * with it that an injected short transfer really was continued). */
HIDDEN _Atomic long backend_test_continued;

static ssize_t rw_loop(bool write, int fd, const struct iovec *iov, int iovcnt, off_t off, int rw_flags,
		       size_t total, size_t done_bytes)
{
	struct iovec local[IOV_MAX];
	const struct iovec *v = iov;
	bool in_local = false;
	int cnt = iovcnt;
	size_t skip = done_bytes;
	bool short_read = !write && done_bytes > 0; /* continuing a short read */
	bool continued = false; /* reading on past a short read */

	if (done_bytes > 0)
		atomic_fetch_add_explicit(&backend_test_continued, 1, memory_order_relaxed);

	while (done_bytes < total) {
		if (short_read) {
			/*
			 * A short read: EOF, or a real partial transfer.  Ask
			 * the file size rather than reading on: with O_DIRECT
			 * the next read would start at an unaligned offset at
			 * EOF, which some file systems refuse with EINVAL
			 * instead of returning 0.
			 */
			struct stat st;
			if (fstat(fd, &st) == 0 && off + (off_t)done_bytes >= st.st_size)
				break;
			short_read = false;
			continued = true;
		}
		/* Advance past `skip` bytes of v. */
		while (cnt > 0 && skip >= v->iov_len) {
			skip -= v->iov_len;
			v++;
			cnt--;
		}
		if (cnt <= 0)
			break; /* cannot happen when total is the iovecs' sum */
		if (skip) {
			if (!in_local) {
				/* still the caller's array: copy the rest once */
				memcpy(local, v, (size_t)cnt * sizeof(*v));
				v = local;
				in_local = true;
			}
			struct iovec *w = &local[v - local];
			w->iov_base = (char *)w->iov_base + skip;
			w->iov_len -= skip;
			skip = 0;
		}

		ssize_t n = write ? pwritev2(fd, v, cnt, off + (off_t)done_bytes, rw_flags)
				  : preadv2(fd, v, cnt, off + (off_t)done_bytes, rw_flags);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* The file grew between the short read and the fstat:
			 * reading on from the old, unaligned end of file is
			 * EINVAL with O_DIRECT.  The short read stands, as if
			 * the fstat had come first. */
			if (continued && errno == EINVAL)
				break;
			return -errno;
		}
		if (n == 0) {
			if (!write)
				break; /* EOF */
			return -EIO; /* a write that makes no progress */
		}
		done_bytes += (size_t)n;
		skip = (size_t)n;
		short_read = !write;
	}
	return (ssize_t)done_bytes;
}

/* Sum of iovec lengths, or -EINVAL (bad count, overflow past SSIZE_MAX). */
static ssize_t iov_total(const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return -EINVAL;
	size_t sum = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - sum)
			return -EINVAL;
		sum += iov[i].iov_len;
	}
	return (ssize_t)sum;
}

/* The first `n` bytes of iov as iovecs in out (IOV_MAX entries); their count. */
static int iov_head(const struct iovec *iov, int iovcnt, size_t n, struct iovec *out)
{
	int k = 0;
	for (int i = 0; i < iovcnt && n; i++) {
		size_t l = iov[i].iov_len < n ? iov[i].iov_len : n;
		out[k++] = (struct iovec){ iov[i].iov_base, l };
		n -= l;
	}
	return k;
}

/* One transfer of the first `n` bytes only (an injected short transfer);
 * retries EINTR.  Bytes moved or negative errno. */
static ssize_t rw_head(bool write, int fd, const struct iovec *iov, int iovcnt, off_t off, int rw_flags, size_t n)
{
	struct iovec part[IOV_MAX];
	int k = iov_head(iov, iovcnt, n, part);
	for (;;) {
		ssize_t r = write ? pwritev2(fd, part, k, off, rw_flags) : preadv2(fd, part, k, off, rw_flags);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

/* rw_loop from the start, the first `cut` bytes (0: no cut) moved alone
 * first so that rw_loop continues a short transfer. */
static ssize_t rw_cut(bool write, int fd, const struct iovec *iov, int iovcnt, off_t off, int rw_flags,
		      size_t total, size_t cut)
{
	size_t done = 0;
	if (cut) {
		ssize_t n = rw_head(write, fd, iov, iovcnt, off, rw_flags, cut);
		if (n < 0)
			return n;
		if (n == 0 && !write)
			return 0; /* EOF */
		done = (size_t)n;
	}
	return rw_loop(write, fd, iov, iovcnt, off, rw_flags, total, done);
}

size_t backend_short_len(int fd, size_t len)
{
	size_t unit = 1;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return 0;
	if (fl & O_DIRECT) {
		unsigned oa = 0, ma = 0;
		if (backend_dio_align(fd, &oa, &ma) < 0)
			return 0;
		unit = oa > ma ? oa : ma;
		if (!unit)
			unit = 4096;
	}
	return len / 2 / unit * unit;
}

ssize_t backend_preadv(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off)
{
	ssize_t total = iov_total(iov, iovcnt);
	if (total < 0)
		return total;
	size_t cut;
	int e = io_account(c, IO_READ, fd, off, (size_t)total, &cut);
	if (e < 0)
		return e;
	return rw_cut(false, fd, iov, iovcnt, off, 0, (size_t)total, cut);
}

ssize_t backend_pwritev_alias(struct pc_cache *c, int fd, int alias_fd, const struct iovec *iov, int iovcnt,
			      off_t off, int rw_flags)
{
	ssize_t total = iov_total(iov, iovcnt);
	if (total < 0)
		return total;
	size_t cut;
	int e = io_account(c, IO_WRITE, fd, off, (size_t)total, &cut);
	if (e < 0)
		return e;
	return rw_cut(true, alias_fd, iov, iovcnt, off, rw_flags, (size_t)total, cut);
}

ssize_t backend_pwritev(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off,
			int rw_flags)
{
	return backend_pwritev_alias(c, fd, fd, iov, iovcnt, off, rw_flags);
}

static int sync_flush(int fd, bool datasync)
{
	for (;;) {
		int r = datasync ? fdatasync(fd) : fsync(fd);
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

int backend_fsync(struct pc_cache *c, int fd, bool datasync)
{
	size_t cut;
	int e = io_account(c, datasync ? IO_FDATASYNC : IO_FSYNC, fd, 0, 0, &cut);
	return e < 0 ? e : sync_flush(fd, datasync);
}

/*
 * Do (or finish) a request synchronously, `done_bytes` of it already done;
 * from the start, `cut` (0: none) are the bytes to move alone first.  No
 * hook, no accounting: the caller did those.
 */
static ssize_t sync_exec(struct pc_ioreq *req, size_t done_bytes, size_t cut)
{
	switch (req->op) {
	case IO_READ:
	case IO_WRITE: {
		ssize_t total = iov_total(req->iov, req->iovcnt);
		if (total < 0)
			return total;
		bool write = req->op == IO_WRITE;
		if (!done_bytes)
			return rw_cut(write, req->fd, req->iov, req->iovcnt, req->off, req->rw_flags, (size_t)total,
				      cut);
		return rw_loop(write, req->fd, req->iov, req->iovcnt, req->off, req->rw_flags, (size_t)total,
			       done_bytes);
	}
	case IO_FSYNC:
		return sync_flush(req->fd, false);
	case IO_FDATASYNC:
		return sync_flush(req->fd, true);
	case IO_NOP:
		return 0;
	default:
		return -EINVAL;
	}
}

/* ------------------------------------------------------------- the queue */

struct pc_ioq {
	struct pc_cache *c;
	bool uring;
#if PC_HAVE_URING
	bool rw_single;          /* IORING_OP_READ/WRITE supported */
	unsigned depth;
	unsigned inflight;       /* in the ring: released before done() runs */
	unsigned pending;        /* submitted, done() not yet returned */
	unsigned waiters;        /* threads sleeping on cv */
	_Atomic bool stopping;   /* ioq_destroy is sending the stop NOP */
	pthread_mutex_t lock;    /* the submission queue */
	pthread_cond_t cv;       /* room in the queue / queue drained */
	pthread_t thread;
	struct io_uring ring;
#endif
};

bool ioq_is_uring(const struct pc_ioq *q)
{
	return q && q->uring;
}

#if PC_HAVE_URING

/*
 * user_data of an SQE: a struct pc_ioreq *, a record below with a tag in
 * its low bits (requests and malloc'd records are at least 8-byte aligned),
 * or one of the two sentinels (compared before the tag bits are looked at).
 */
#define IOQ_STOP_TAG UINT64_MAX          /* the NOP that stops the thread */
#define IOQ_IGNORE_TAG (UINT64_MAX - 1)  /* a failed submission's rewritten SQE */
#define IOQ_TAG_POSTED 1u
#define IOQ_TAG_CUT 2u
#define IOQ_TAG_MASK 3u
#define IOQ_BATCH 64
/* Transient refusals of io_uring_enter retried before the submission is
 * taken as failed (the completion thread may itself be the submitter, so
 * waiting for it to reap could wait for ever). */
#define IOQ_SUBMIT_TRIES 1000

/* The queue whose completion thread this is (NULL on other threads). */
static __thread struct pc_ioq *tls_completion_q;

/*
 * A result decided at submission (a fault hook failed the I/O), delivered
 * through the ring as a NOP so that done() runs on the completion thread as
 * for any other io_uring request.
 */
struct ioq_posted {
	struct pc_ioreq *req;
	ssize_t res;
};

/* An injected short transfer: the SQE moves only iov[0, iovcnt), the
 * request's first `cut` bytes; ioq_finish continues the rest. */
struct ioq_cut {
	struct pc_ioreq *req;
	size_t cut;
	int iovcnt;
	struct iovec iov[];
};

static void *untag(uint64_t data)
{
	return (void *)(uintptr_t)(data & ~(uint64_t)IOQ_TAG_MASK);
}

static struct ioq_cut *cut_new(struct pc_ioreq *req, size_t cut)
{
	struct ioq_cut *k = malloc(sizeof(*k) + (size_t)req->iovcnt * sizeof(struct iovec));
	if (!k)
		return NULL;
	k->req = req;
	k->cut = cut;
	k->iovcnt = iov_head(req->iov, req->iovcnt, cut, k->iov);
	return k;
}

/* Finish a completed request: continue short transfers, redo transient
 * failures synchronously. */
static ssize_t ioq_finish(struct pc_ioreq *req, ssize_t res)
{
	if (res == -EAGAIN || res == -EINTR || res == -ECANCELED)
		return sync_exec(req, 0, 0);
	if ((req->op == IO_READ || req->op == IO_WRITE) && res > 0 && (size_t)res < req->len)
		return sync_exec(req, (size_t)res, 0);
	return res;
}

/*
 * Call done() for the request of user_data `data`.  ran: the ring ran it
 * and `res` is its completion; else it never reached the kernel (a failed
 * submission, no SQE) and is done here, synchronously.
 */
static void ioq_complete(uint64_t data, ssize_t res, bool ran)
{
	struct pc_ioreq *req;
	if (data & IOQ_TAG_POSTED) {
		struct ioq_posted *posted = untag(data);
		req = posted->req;
		res = posted->res;
		free(posted);
	} else {
		size_t cut = 0;
		if (data & IOQ_TAG_CUT) {
			struct ioq_cut *k = untag(data);
			req = k->req;
			cut = k->cut;
			free(k);
		} else {
			req = (struct pc_ioreq *)(uintptr_t)data;
		}
		res = ran ? ioq_finish(req, res) : sync_exec(req, 0, cut);
	}
	req->done(req, res); /* req may be gone after this */
}

static void *ioq_thread(void *arg)
{
	struct pc_ioq *q = arg;
	struct io_uring_cqe *cqes[IOQ_BATCH];
	struct {
		uint64_t data;
		int32_t res;
	} got[IOQ_BATCH];
	bool stop = false;

	tls_completion_q = q;
	while (!stop) {
		struct io_uring_cqe *cqe;
		int ret = io_uring_wait_cqe(&q->ring, &cqe);
		if (ret < 0) {
			if (ret != -EINTR && ret != -EAGAIN) {
				/* A broken ring: the stop NOP may never come,
				 * and nothing is pending once it is sent. */
				if (atomic_load(&q->stopping))
					break;
				sched_yield(); /* unexpected; do not spin hot */
			}
			continue;
		}
		unsigned n = io_uring_peek_batch_cqe(&q->ring, cqes, IOQ_BATCH);
		unsigned nreq = 0;
		for (unsigned i = 0; i < n; i++) {
			got[i].data = cqes[i]->user_data;
			got[i].res = cqes[i]->res;
			if (got[i].data == IOQ_STOP_TAG)
				stop = true;
			else if (got[i].data != IOQ_IGNORE_TAG)
				nreq++;
		}
		io_uring_cq_advance(&q->ring, n);

		/*
		 * Release the slots before the callbacks run: a waiting
		 * submitter may go on at once.  Taking the lock here also
		 * orders the submitter's writes to the requests before our
		 * reads of them.
		 */
		pthread_mutex_lock(&q->lock);
		q->inflight -= nreq;
		if (q->waiters)
			pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->lock);

		for (unsigned i = 0; i < n; i++)
			if (got[i].data != IOQ_STOP_TAG && got[i].data != IOQ_IGNORE_TAG)
				ioq_complete(got[i].data, got[i].res, true);

		/* Only now are they finished: ioq_destroy waits for this, so
		 * that a done() submitting a follow-up I/O is never cut off. */
		if (nreq) {
			pthread_mutex_lock(&q->lock);
			q->pending -= nreq;
			if (q->waiters && q->pending == 0)
				pthread_cond_broadcast(&q->cv);
			pthread_mutex_unlock(&q->lock);
		}
	}
	return NULL;
}

/*
 * io_uring_submit until the kernel consumed every queued SQE, retrying
 * transient refusals (EINTR, EAGAIN, EBUSY: the completion thread reaps
 * meanwhile) at most IOQ_SUBMIT_TRIES times.  Under q->lock.  Returns 0, or
 * the error of a failed submission: the caller then takes the unconsumed
 * requests back (ring_fail_unconsumed).
 */
static int ring_submit(struct pc_ioq *q)
{
	for (int tries = 0;; tries++) {
		int r = io_uring_submit(&q->ring);
		if (r >= 0 && io_uring_sq_ready(&q->ring) == 0)
			return 0;
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY)
			return r;
		if (tries >= IOQ_SUBMIT_TRIES)
			return r < 0 ? r : -EAGAIN;
		if (tries > 2)
			sched_yield(); /* -EBUSY: let the completion thread reap */
	}
}

/*
 * Under q->lock, after a failed submission: the first SQE the kernel has
 * not consumed (between its SQ head and our tail) that still carries a
 * request, rewritten as an ignored NOP.  Returns its user_data, 0 if none.
 * The position-to-SQE mapping is liburing's (_io_uring_get_sqe; the SQ
 * index array is the identity).
 */
static uint64_t ring_take_unconsumed(struct pc_ioq *q)
{
	struct io_uring_sq *sq = &q->ring.sq;
	unsigned shift = (q->ring.flags & IORING_SETUP_SQE128) ? 1 : 0;
	unsigned head = io_uring_smp_load_acquire(sq->khead);
	for (unsigned pos = head; pos != sq->sqe_tail; pos++) {
		struct io_uring_sqe *sqe = &sq->sqes[(pos & sq->ring_mask) << shift];
		uint64_t data = sqe->user_data;
		if (data == IOQ_IGNORE_TAG || data == IOQ_STOP_TAG)
			continue;
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, IOQ_IGNORE_TAG);
		return data;
	}
	return 0;
}

/*
 * A submission failed (q->lock held; released and retaken around each
 * done()): every request the kernel did not consume leaves the ring and is
 * done here, on this thread, synchronously.  It stays pending until its
 * done() has returned, as a completion from the ring would.
 */
static void ring_fail_unconsumed(struct pc_ioq *q)
{
	uint64_t data;
	while ((data = ring_take_unconsumed(q)) != 0) {
		q->inflight--;
		if (q->waiters)
			pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->lock);
		ioq_complete(data, 0, false);
		pthread_mutex_lock(&q->lock);
		q->pending--;
		if (q->waiters)
			pthread_cond_broadcast(&q->cv);
	}
}

/* Prepare the SQE of req moving iov[0, iovcnt) (the request's own, or the
 * first part of it for an injected short transfer). */
static void prep_sqe(struct pc_ioq *q, struct io_uring_sqe *sqe, struct pc_ioreq *req, const struct iovec *iov,
		     int iovcnt, uint64_t data)
{
	switch (req->op) {
	case IO_READ:
		if (iovcnt == 1 && q->rw_single && iov[0].iov_len <= UINT_MAX)
			io_uring_prep_read(sqe, req->fd, iov[0].iov_base, (unsigned)iov[0].iov_len,
					   (uint64_t)req->off);
		else
			io_uring_prep_readv(sqe, req->fd, iov, (unsigned)iovcnt, (uint64_t)req->off);
		sqe->rw_flags = req->rw_flags;
		break;
	case IO_WRITE:
		if (iovcnt == 1 && q->rw_single && iov[0].iov_len <= UINT_MAX)
			io_uring_prep_write(sqe, req->fd, iov[0].iov_base, (unsigned)iov[0].iov_len,
					    (uint64_t)req->off);
		else
			io_uring_prep_writev(sqe, req->fd, iov, (unsigned)iovcnt, (uint64_t)req->off);
		sqe->rw_flags = req->rw_flags;
		break;
	case IO_FSYNC:
		io_uring_prep_fsync(sqe, req->fd, 0);
		break;
	case IO_FDATASYNC:
		io_uring_prep_fsync(sqe, req->fd, IORING_FSYNC_DATASYNC);
		break;
	default:
		io_uring_prep_nop(sqe);
		break;
	}
	io_uring_sqe_set_data64(sqe, data);
}

/* err: a fault hook's result (then a NOP posts it); cut: an injected short
 * transfer's first part (0: none). */
static void ioq_submit_uring(struct pc_ioq *q, struct pc_ioreq *req, int err, size_t cut)
{
	uint64_t data = (uint64_t)(uintptr_t)req;
	if (err < 0) {
		struct ioq_posted *posted = malloc(sizeof(*posted));
		if (!posted) {
			req->done(req, err); /* no memory: report it in line */
			return;
		}
		posted->req = req;
		posted->res = err;
		data = (uint64_t)(uintptr_t)posted | IOQ_TAG_POSTED;
	} else if (cut) {
		struct ioq_cut *k = cut_new(req, cut);
		if (k) /* no memory: the whole I/O */
			data = (uint64_t)(uintptr_t)k | IOQ_TAG_CUT;
	}
	/* May sleep (PC_FAULT_DELAY): before the lock. */
	int submit_err = fault_check(q->c, PC_FAULT_SUBMIT, req->fd, req->off, req->len);

	pthread_mutex_lock(&q->lock);
	if (tls_completion_q != q) {
		while (q->inflight >= q->depth) {
			q->waiters++;
			pthread_cond_wait(&q->cv, &q->lock);
			q->waiters--;
		}
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	if (!sqe && ring_submit(q) == 0)
		sqe = io_uring_get_sqe(&q->ring);
	if (!sqe) {
		/* Cannot happen with the depth limit; do it here, in line. */
		pthread_mutex_unlock(&q->lock);
		ioq_complete(data, 0, false);
		return;
	}
	if (data & IOQ_TAG_POSTED) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, data);
	} else if (data & IOQ_TAG_CUT) {
		struct ioq_cut *k = untag(data);
		prep_sqe(q, sqe, req, k->iov, k->iovcnt, data);
	} else {
		prep_sqe(q, sqe, req, req->iov, req->iovcnt, data);
	}
	q->inflight++;
	q->pending++;
	/* An injected submission failure: as if io_uring_enter had refused
	 * the SQE (queued, not consumed). */
	if ((submit_err < 0 ? submit_err : ring_submit(q)) < 0)
		ring_fail_unconsumed(q);
	pthread_mutex_unlock(&q->lock);
}

#endif /* PC_HAVE_URING */

int ioq_create(struct pc_cache *c, unsigned depth, bool use_uring, struct pc_ioq **out)
{
	struct pc_ioq *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->c = c;
#if PC_HAVE_URING
	if (depth == 0)
		depth = 1;
	if (depth > 4096)
		depth = 4096;
	q->depth = depth;
	if (use_uring && io_uring_queue_init(depth, &q->ring, 0) == 0) {
		struct io_uring_probe *p = io_uring_get_probe_ring(&q->ring);
		if (p) {
			q->rw_single = io_uring_opcode_supported(p, IORING_OP_READ) &&
				       io_uring_opcode_supported(p, IORING_OP_WRITE);
			io_uring_free_probe(p);
		}
		if (pthread_mutex_init(&q->lock, NULL) == 0) {
			if (pthread_cond_init(&q->cv, NULL) == 0) {
				if (pthread_create(&q->thread, NULL, ioq_thread, q) == 0) {
					q->uring = true;
					*out = q;
					return 0;
				}
				pthread_cond_destroy(&q->cv);
			}
			pthread_mutex_destroy(&q->lock);
		}
		/* No thread: fall back to synchronous I/O. */
		io_uring_queue_exit(&q->ring);
	}
#else
	(void)depth;
	(void)use_uring;
#endif
	q->uring = false;
	*out = q;
	return 0;
}

void ioq_submit(struct pc_ioq *q, struct pc_ioreq *req)
{
	size_t cut;
	int e = io_account(q->c, req->op, req->fd, req->off, req->len, &cut);
#if PC_HAVE_URING
	if (q->uring) {
		ioq_submit_uring(q, req, e, cut);
		return;
	}
#endif
	req->done(req, e < 0 ? e : sync_exec(req, 0, cut));
}

void ioq_destroy(struct pc_ioq *q)
{
	if (!q)
		return;
#if PC_HAVE_URING
	if (q->uring) {
		pthread_mutex_lock(&q->lock);
		while (q->pending > 0) {
			q->waiters++;
			pthread_cond_wait(&q->cv, &q->lock);
			q->waiters--;
		}
		/*
		 * Wake the completion thread with the stop sentinel.  Nothing
		 * is pending, so the SQ holds at most ignored NOPs and a
		 * successful submit empties it.  If the ring is broken (the
		 * submit fails for good), so are the thread's waits: it sees
		 * `stopping` and ends.
		 */
		atomic_store(&q->stopping, true);
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
		if (!sqe && ring_submit(q) == 0)
			sqe = io_uring_get_sqe(&q->ring);
		if (sqe) {
			io_uring_prep_nop(sqe);
			io_uring_sqe_set_data64(sqe, IOQ_STOP_TAG);
			ring_submit(q);
		}
		pthread_mutex_unlock(&q->lock);
		pthread_join(q->thread, NULL);
		io_uring_queue_exit(&q->ring);
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->lock);
	}
#endif
	free(q);
}

void ioq_forget(struct pc_ioq *q)
{
	if (!q)
		return;
#if PC_HAVE_URING
	/* Nothing is submitted, reaped, unregistered or closed: the ring is
	 * the parent's, and its descriptor number may be another file's in
	 * the child by now (it goes at exit or exec: O_CLOEXEC). */
#endif
	free(q);
}

/* ------------------------------------------------------- file questions */

/*
 * Direct-I/O alignment of fd: statx(STATX_DIOALIGN) when the file system
 * reports it (Linux 6.1+; ext4, xfs, btrfs, f2fs, block devices...).
 * Otherwise, when fd is open with O_DIRECT (the open succeeded, so the file
 * system accepts it), a conservative guess: the file system's block size
 * (st_blksize) clamped to [512, 4096] for both offset and memory.  Aligning
 * to the file-system block is always enough where the device's logical
 * block is no larger, and 4 KiB covers 4Kn devices; it is coarser than
 * needed on 512-byte devices but never wrong.  Otherwise 0 for both: "no
 * direct I/O known to work on this descriptor".  Returns 0 or -errno (the
 * descriptor could not be queried).
 */
int backend_dio_align(int fd, unsigned *offset_align, unsigned *mem_align)
{
	unsigned oa = 0, ma = 0;
	struct statx stx;
	memset(&stx, 0, sizeof(stx));
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_SYNC_AS_STAT, STATX_DIOALIGN, &stx) == 0) {
		if (stx.stx_mask & STATX_DIOALIGN) {
			/* stx_dio_mem_align and stx_dio_offset_align, read by
			 * offset so that older headers without them work too */
			uint32_t v[2];
			memcpy(v, (const char *)&stx + 0x98, sizeof(v));
			ma = v[0];
			oa = v[1];
		}
	} else if (errno != ENOSYS && errno != EINVAL) {
		return -errno;
	}
	if (oa == 0 || ma == 0) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0)
			return -errno;
		oa = ma = 0;
		if (fl & O_DIRECT) {
			struct stat st;
			if (fstat(fd, &st) < 0)
				return -errno;
			unsigned bs = 512;
			while (bs < 4096 && bs < (unsigned)st.st_blksize)
				bs <<= 1;
			oa = ma = bs;
		}
	}
	if (offset_align)
		*offset_align = oa;
	if (mem_align)
		*mem_align = ma;
	return 0;
}

/*
 * Is [off, off+len) a hole?  SEEK_DATA finds the first data at or after
 * off: none (ENXIO: only a hole up to EOF, or off is past EOF) or none
 * before off+len means a hole.  Any other failure (EINVAL where the file
 * system does not support it, ...) answers false: "might be data", the
 * safe answer (the caller reads instead of assuming zeros).  Unwritten
 * (preallocated) extents count as holes on most file systems; they read
 * as zeros anyway.  lseek moves the descriptor's file position, which
 * nothing here uses (all I/O is positional).
 */
/* Test hook: how many times the file system was asked (see written.c). */
HIDDEN _Atomic long backend_test_hole_queries;

bool backend_is_hole(int fd, off_t off, size_t len)
{
	atomic_fetch_add_explicit(&backend_test_hole_queries, 1, memory_order_relaxed);
	if (off < 0)
		return false;
	if (len == 0)
		return true;
	off_t d = lseek(fd, off, SEEK_DATA);
	if (d < 0)
		return errno == ENXIO;
	return (uint64_t)d - (uint64_t)off >= len;
}
