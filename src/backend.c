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
 *   overflowing completions (IORING_FEAT_NODROP) anyway.  In io_uring mode
 *   done() always runs on the completion thread (only if memory for a
 *   fault-hook result cannot be had is it called in line).
 *   Without io_uring (not built in, not wanted, or the ring cannot be set
 *   up) every request runs synchronously on the submitter's thread and
 *   done() is called before ioq_submit() returns.
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
 *   fault hook when one is set; a negative return fails the I/O with that
 *   errno without doing it; in io_uring mode that result still travels
 *   through the ring (a NOP), so done() runs on the completion thread like
 *   a real device error would.  I/Os that pass are counted in c->st_read_ios /
 *   st_read_bytes / st_write_ios / st_write_bytes when submitted, with the
 *   *requested* length: a read cut short by EOF still counts its whole
 *   length, and the synchronous continuation of a short transfer is part of
 *   the same I/O (neither hooked nor counted again).  fsync and NOP are not
 *   counted.  Everything here tolerates c == NULL (no hook, no counters).
 */
#include "internal.h"

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

/* Hook, then counters.  Returns 0 or the hook's negative errno. */
static int io_account(struct pc_cache *c, int op, int fd, off_t off, size_t len)
{
	if (!c || op == IO_NOP)
		return 0;
	if (c->fault_hook) {
		int e = c->fault_hook(c->fault_arg, op, fd, off, len);
		if (e < 0)
			return e;
	}
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
static ssize_t rw_loop(bool write, int fd, const struct iovec *iov, int iovcnt, off_t off, int rw_flags,
		       size_t total, size_t done_bytes)
{
	struct iovec local[IOV_MAX];
	const struct iovec *v = iov;
	bool in_local = false;
	int cnt = iovcnt;
	size_t skip = done_bytes;
	bool short_read = !write && done_bytes > 0; /* continuing a short read */

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

ssize_t backend_preadv(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off)
{
	ssize_t total = iov_total(iov, iovcnt);
	if (total < 0)
		return total;
	int e = io_account(c, IO_READ, fd, off, (size_t)total);
	if (e < 0)
		return e;
	return rw_loop(false, fd, iov, iovcnt, off, 0, (size_t)total, 0);
}

ssize_t backend_pwritev(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off,
			int rw_flags)
{
	ssize_t total = iov_total(iov, iovcnt);
	if (total < 0)
		return total;
	int e = io_account(c, IO_WRITE, fd, off, (size_t)total);
	if (e < 0)
		return e;
	return rw_loop(true, fd, iov, iovcnt, off, rw_flags, (size_t)total, 0);
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

/*
 * Do (or finish) a request synchronously, `done_bytes` of it already done.
 * No hook, no accounting: the caller did those.
 */
static ssize_t sync_exec(struct pc_ioreq *req, size_t done_bytes)
{
	switch (req->op) {
	case IO_READ:
	case IO_WRITE: {
		ssize_t total = iov_total(req->iov, req->iovcnt);
		if (total < 0)
			return total;
		return rw_loop(req->op == IO_WRITE, req->fd, req->iov, req->iovcnt, req->off, req->rw_flags,
			       (size_t)total, done_bytes);
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

#define IOQ_STOP_TAG UINT64_MAX /* user_data of the NOP that stops the thread */
#define IOQ_BATCH 64

/* The queue whose completion thread this is (NULL on other threads). */
static __thread struct pc_ioq *tls_completion_q;

/*
 * A result decided at submission (the fault hook failed the I/O), delivered
 * through the ring as a NOP so that done() runs on the completion thread as
 * for any other io_uring request.  user_data is the record's address with
 * bit 0 set.
 */
struct ioq_posted {
	struct pc_ioreq *req;
	ssize_t res;
};

/* Finish a completed request: continue short transfers, redo transient
 * failures synchronously. */
static ssize_t ioq_finish(struct pc_ioreq *req, ssize_t res)
{
	if (res == -EAGAIN || res == -EINTR || res == -ECANCELED)
		return sync_exec(req, 0);
	if ((req->op == IO_READ || req->op == IO_WRITE) && res > 0 && (size_t)res < req->len)
		return sync_exec(req, (size_t)res);
	return res;
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
			if (ret != -EINTR && ret != -EAGAIN)
				sched_yield(); /* unexpected; do not spin hot */
			continue;
		}
		unsigned n = io_uring_peek_batch_cqe(&q->ring, cqes, IOQ_BATCH);
		unsigned nreq = 0;
		for (unsigned i = 0; i < n; i++) {
			got[i].data = cqes[i]->user_data;
			got[i].res = cqes[i]->res;
			if (got[i].data == IOQ_STOP_TAG)
				stop = true;
			else
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

		for (unsigned i = 0; i < n; i++) {
			uint64_t data = got[i].data;
			struct pc_ioreq *req;
			ssize_t res;
			if (data == IOQ_STOP_TAG)
				continue;
			if (data & 1) {
				struct ioq_posted *posted = (struct ioq_posted *)(uintptr_t)(data & ~(uint64_t)1);
				req = posted->req;
				res = posted->res;
				free(posted);
			} else {
				req = (struct pc_ioreq *)(uintptr_t)data;
				res = ioq_finish(req, got[i].res);
			}
			req->done(req, res); /* req may be gone after this */
		}

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
 * io_uring_submit, retrying transient refusals.  Under q->lock.  On any
 * other error the SQE stays in the ring and goes with the next submission
 * (io_uring_enter fails that way only on a broken ring: EBADF, EFAULT).
 */
static void ring_submit(struct pc_ioq *q)
{
	for (int tries = 0;; tries++) {
		int r = io_uring_submit(&q->ring);
		if (r >= 0)
			return;
		if (r != -EINTR && r != -EAGAIN && r != -EBUSY)
			return; /* the SQE stays queued; the next submit flushes it */
		if (tries > 2)
			sched_yield(); /* -EBUSY: let the completion thread reap */
	}
}

static void prep_sqe(struct pc_ioq *q, struct io_uring_sqe *sqe, struct pc_ioreq *req)
{
	switch (req->op) {
	case IO_READ:
		if (req->iovcnt == 1 && q->rw_single && req->iov[0].iov_len <= UINT_MAX)
			io_uring_prep_read(sqe, req->fd, req->iov[0].iov_base, (unsigned)req->iov[0].iov_len,
					   (uint64_t)req->off);
		else
			io_uring_prep_readv(sqe, req->fd, req->iov, (unsigned)req->iovcnt, (uint64_t)req->off);
		sqe->rw_flags = req->rw_flags;
		break;
	case IO_WRITE:
		if (req->iovcnt == 1 && q->rw_single && req->iov[0].iov_len <= UINT_MAX)
			io_uring_prep_write(sqe, req->fd, req->iov[0].iov_base, (unsigned)req->iov[0].iov_len,
					    (uint64_t)req->off);
		else
			io_uring_prep_writev(sqe, req->fd, req->iov, (unsigned)req->iovcnt, (uint64_t)req->off);
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
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req);
}

static void ioq_submit_uring(struct pc_ioq *q, struct pc_ioreq *req, int err)
{
	struct ioq_posted *posted = NULL;
	if (err < 0) {
		posted = malloc(sizeof(*posted));
		if (!posted) {
			req->done(req, err); /* no memory: report it in line */
			return;
		}
		posted->req = req;
		posted->res = err;
	}

	pthread_mutex_lock(&q->lock);
	if (tls_completion_q != q) {
		while (q->inflight >= q->depth) {
			q->waiters++;
			pthread_cond_wait(&q->cv, &q->lock);
			q->waiters--;
		}
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	if (!sqe) {
		ring_submit(q);
		sqe = io_uring_get_sqe(&q->ring);
	}
	if (!sqe) {
		/* Cannot happen with the depth limit; do it here, in line. */
		pthread_mutex_unlock(&q->lock);
		free(posted);
		req->done(req, err < 0 ? err : sync_exec(req, 0));
		return;
	}
	if (posted) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)posted | 1);
	} else {
		prep_sqe(q, sqe, req);
	}
	q->inflight++;
	q->pending++;
	ring_submit(q);
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
	int e = io_account(q->c, req->op, req->fd, req->off, req->len);
#if PC_HAVE_URING
	if (q->uring) {
		ioq_submit_uring(q, req, e);
		return;
	}
#endif
	req->done(req, e < 0 ? e : sync_exec(req, 0));
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
		/* Wake the completion thread with the stop sentinel. */
		struct io_uring_sqe *sqe;
		while (!(sqe = io_uring_get_sqe(&q->ring))) {
			ring_submit(q); /* nothing is in flight: room comes */
			sched_yield();
		}
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, IOQ_STOP_TAG);
		ring_submit(q);
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
	/* Unmaps the child's view of the rings and closes its descriptor;
	 * nothing is submitted, reaped or unregistered. */
	if (q->uring)
		io_uring_queue_exit(&q->ring);
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
