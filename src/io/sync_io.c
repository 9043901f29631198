/*
 * sync_io.c - synchronous device I/O on the backing files, and the
 * accounting (fault hooks, then counters) that every device I/O goes
 * through first.
 *
 * Why a file of its own (it was part of backend.c): synchronous I/O is
 * one concern with two kinds of callers.  The calls below
 * (sync_io_preadv, sync_io_pwritev, sync_io_fsync) serve callers that
 * wait for their I/O; and the I/O queue (ioq.c) runs here every request
 * that does not go through io_uring: all of them when io_uring is not
 * built in, not wanted or cannot be set up (the synchronous fallback),
 * and under io_uring a short transfer's continuation, a transient failure
 * redone, or a request whose submission failed (sync_exec).  So a request
 * is hooked, counted and continued the same way on every path.
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
 *   device move only the first part of the I/O (probe_short_len, probe.c:
 *   about half, aligned for O_DIRECT): io_uring gets an SQE for that part
 *   (its shortened iovec kept in a struct ioq_cut until completion) and
 *   ioq_finish (ioq.c) continues the rest; synchronously rw_head moves the
 *   part and rw_loop continues.  A PC_FAULT_DELAY rule sleeps on the
 *   submitting thread before the I/O is issued.  PC_FAULT_SUBMIT rules are
 *   asked in ioq_submit_uring (ioq.c), just before io_uring_submit.  I/Os
 *   that pass are counted in c->st_read_ios / st_read_bytes / st_write_ios /
 *   st_write_bytes when submitted, with the *requested* length: a read cut
 *   short by EOF still counts its whole length, and the synchronous
 *   continuation of a short transfer is part of the same I/O (neither hooked
 *   nor counted again).  fsync and NOP are not counted.  Everything here
 *   tolerates c == NULL (no hook, no counters).
 */
#include "io/sync_io.h"

#include "api/cache.h"
#include "io/backend.h"
#include "io/fault.h"
#include "pagecache.h"
#include "lib/check.h"
#include "lib/util.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
int io_account(struct pc_cache *c, int op, int fd, off_t off, size_t len, size_t *cut)
{
	*cut = 0;
	if (!c || op == IO_NOP)
		return 0;
	if (cache_proc(c)->fault_hook) {
		int e = cache_proc(c)->fault_hook(cache_proc(c)->fault_arg, op, fd, off, len);
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

/* Test hook: how many short transfers were continued (test_fault.c proves
 * with it that an injected short transfer really was continued). */
HIDDEN _Atomic long backend_test_continued;

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
		if (PC_WARN_ONCE(cnt <= 0, "a short transfer past the iovecs' sum"))
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
int iov_head(const struct iovec *iov, int iovcnt, size_t n, struct iovec *out)
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

/* sync_io_preadv and sync_io_pwritev_alias: hooked and counted as fd's
 * I/O, done through alias_fd (fd itself for a read). */
static ssize_t sync_rw(struct pc_cache *c, bool write, int fd, int alias_fd, const struct iovec *iov, int iovcnt,
		       off_t off, int rw_flags)
{
	ssize_t total = iov_total(iov, iovcnt);
	if (total < 0)
		return total;
	size_t cut;
	int e = io_account(c, write ? IO_WRITE : IO_READ, fd, off, (size_t)total, &cut);
	if (e < 0)
		return e;
	return rw_cut(write, alias_fd, iov, iovcnt, off, rw_flags, (size_t)total, cut);
}

ssize_t sync_io_preadv(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off)
{
	return sync_rw(c, false, fd, fd, iov, iovcnt, off, 0);
}

ssize_t sync_io_pwritev_alias(struct pc_cache *c, int fd, int alias_fd, const struct iovec *iov, int iovcnt,
			      off_t off, int rw_flags)
{
	return sync_rw(c, true, fd, alias_fd, iov, iovcnt, off, rw_flags);
}

ssize_t sync_io_pwritev(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off,
			int rw_flags)
{
	return sync_io_pwritev_alias(c, fd, fd, iov, iovcnt, off, rw_flags);
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

int sync_io_fsync(struct pc_cache *c, int fd, bool datasync)
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
ssize_t sync_exec(struct pc_ioreq *req, size_t done_bytes, size_t cut)
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
