/*
 * ioq.c - the I/O queue: device I/O through io_uring with a completion
 * thread, or synchronously on the submitter's thread when io_uring is not
 * built in, not wanted or cannot be set up.
 *
 * Why a file of its own (it was part of backend.c): the ring, its locking,
 * the completion thread and the recovery from failed submissions are one
 * concern, and the subtlest code of the layer.  What a request does when
 * it does not go through the ring (the synchronous fallback, a short
 * transfer's continuation, a failed submission) is sync_exec, and the
 * fault hooks and counters every request passes first are io_account:
 * both sync_io.c's, shared with the synchronous calls, whose header
 * comment also says what done() gets ("Results") and how I/O is counted
 * and fault-injected.
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
 */
#include "io/ioq.h"

#include "io/backend.h"
#include "io/fault.h"
#include "io/sync_io.h"
#include "pagecache.h"
#include "lib/check.h"
#include "lib/util.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* The build defines PC_NO_URING=1 when liburing is missing. */
#if defined(PC_NO_URING) && PC_NO_URING
#define PC_HAVE_URING 0
#else
#define PC_HAVE_URING 1
#include <liburing.h>
#endif

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
/* SQEs ioq_submit_defer leaves in the ring before it sends them. */
#define IOQ_DEFER_MAX 32
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
				PC_WARN_ONCE(true, "io_uring_wait_cqe: %s", strerror(-ret));
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
	case IO_WRITE: {
		bool write = req->op == IO_WRITE;
		if (iovcnt == 1 && q->rw_single && iov[0].iov_len <= UINT_MAX) {
			if (write)
				io_uring_prep_write(sqe, req->fd, iov[0].iov_base, (unsigned)iov[0].iov_len,
						    (uint64_t)req->off);
			else
				io_uring_prep_read(sqe, req->fd, iov[0].iov_base, (unsigned)iov[0].iov_len,
						   (uint64_t)req->off);
		} else if (write) {
			io_uring_prep_writev(sqe, req->fd, iov, (unsigned)iovcnt, (uint64_t)req->off);
		} else {
			io_uring_prep_readv(sqe, req->fd, iov, (unsigned)iovcnt, (uint64_t)req->off);
		}
		sqe->rw_flags = req->rw_flags;
		break;
	}
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

/* Send the SQEs that ioq_submit_defer left in the ring (under q->lock). */
static void ring_send_deferred(struct pc_ioq *q)
{
	if (io_uring_sq_ready(&q->ring) && ring_submit(q) < 0)
		ring_fail_unconsumed(q);
}

/* err: a fault hook's result (then a NOP posts it); cut: an injected short
 * transfer's first part (0: none); defer: the SQE may stay in the ring
 * (not yet seen by the kernel) until ioq_flush or another submission. */
static void ioq_submit_uring(struct pc_ioq *q, struct pc_ioreq *req, int err, size_t cut, bool defer)
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
		/* Deferred SQEs hold slots: sent before waiting for one. */
		if (q->inflight >= q->depth)
			ring_send_deferred(q);
		while (q->inflight >= q->depth) {
			q->waiters++;
			pthread_cond_wait(&q->cv, &q->lock);
			q->waiters--;
		}
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	if (!sqe && ring_submit(q) == 0)
		sqe = io_uring_get_sqe(&q->ring);
	if (PC_WARN_ONCE(!sqe, "no free SQE within the depth limit: a request runs in line")) {
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
	if (submit_err < 0)
		ring_fail_unconsumed(q);
	else if (!defer || io_uring_sq_ready(&q->ring) >= IOQ_DEFER_MAX)
		ring_send_deferred(q);
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

static void submit(struct pc_ioq *q, struct pc_ioreq *req, bool defer)
{
	size_t cut;
	int e = io_account(q->c, req->op, req->fd, req->off, req->len, &cut);
#if PC_HAVE_URING
	if (q->uring) {
		ioq_submit_uring(q, req, e, cut, defer);
		return;
	}
#endif
	(void)defer;
	req->done(req, e < 0 ? e : sync_exec(req, 0, cut));
}

void ioq_submit(struct pc_ioq *q, struct pc_ioreq *req)
{
	submit(q, req, false);
}

void ioq_submit_defer(struct pc_ioq *q, struct pc_ioreq *req)
{
	submit(q, req, true);
}

void ioq_flush(struct pc_ioq *q)
{
#if PC_HAVE_URING
	if (q->uring) {
		pthread_mutex_lock(&q->lock);
		ring_send_deferred(q);
		pthread_mutex_unlock(&q->lock);
	}
#else
	(void)q;
#endif
}

void ioq_destroy(struct pc_ioq *q)
{
	if (!q)
		return;
#if PC_HAVE_URING
	if (q->uring) {
		pthread_mutex_lock(&q->lock);
		ring_send_deferred(q); /* none should be left: a caller's flush sent them */
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
