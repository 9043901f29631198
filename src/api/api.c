/*
 * api.c - the public calls: argument checks, handles, and flags turned into
 * the read, write, direct and truncate paths.  Internal calls return a
 * negative errno; only this file sets errno.
 *
 * Handles: a closed handle is kept in a quarantine (the last
 * HANDLE_QUARANTINE closed ones) with its magic number cleared, so that a
 * call on a handle that was just closed fails with EBADF instead of using
 * freed memory.
 */
#include "api/handle.h"

#include "io/backend.h"
#include "api/cache.h"
#include "api/closed.h"
#include "rw/direct.h"
#include "wb/edges.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "api/file.h"
#include "wb/flusher.h"
#include "mem/folio.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "api/process.h"
#include "rw/read.h"
#include "rw/read_hit.h"
#include "rw/read_io.h"
#include "rw/readahead.h"
#include "rw/span.h"
#include "rw/truncate.h"
#include "lib/util.h"
#include "rw/write.h"
#include "wb/writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HANDLE_QUARANTINE 1024
#define PC_MAX_FILE_OFFSET ((uint64_t)INT64_MAX)

static ssize_t fail(int err)
{
	errno = -err;
	return -1;
}

/*
 * 0, or the error of pc_open arguments that are bad before any file is
 * looked at: NULL, unknown flags, O_TRUNC without write access (left
 * undefined by POSIX).  A path naming something other than a regular file
 * is refused by file_open, which stats it before open(2).
 */
static int open_args_check(struct pc_cache *c, const char *path, int flags)
{
	const int allowed = O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_DSYNC | O_SYNC | O_DIRECT | O_CLOEXEC |
			    O_NOATIME | O_LARGEFILE | O_NOFOLLOW;
	int acc = flags & O_ACCMODE;
	if (!c || !path || (flags & ~allowed) || acc == O_ACCMODE || ((flags & O_TRUNC) && acc == O_RDONLY))
		return -EINVAL;
	return 0; /* non-regular files: file_open, before open(2) */
}

static bool handle_ok(struct pc_file *h)
{
	return h && h->magic == PC_FILE_MAGIC;
}

/* 0, -EBADF (not an open handle) or -EPERM (inherited through fork). */
static int handle_check(struct pc_file *h)
{
	if (!handle_ok(h))
		return -EBADF;
	return handle_inherited(h) ? -EPERM : 0;
}

/* handle_check, and the handle must be open for writing. */
static int handle_check_writable(struct pc_file *h)
{
	int err = handle_check(h);
	if (!err && h->accmode == O_RDONLY)
		err = -EBADF;
	return err;
}

struct pc_file *pc_open(struct pc_cache *c, const char *path, int flags, mode_t mode)
{
	if (flags & O_NOFOLLOW) { /* pc_openat's alone */
		errno = EINVAL;
		return NULL;
	}
	return pc_openat(c, AT_FDCWD, path, flags, mode);
}

struct pc_file *pc_openat(struct pc_cache *c, int dirfd, const char *path, int flags, mode_t mode)
{
	int bad = open_args_check(c, path, flags);
	if (bad) {
		errno = -bad;
		return NULL;
	}
	if (cache_inherited(c)) {
		errno = EPERM;
		return NULL;
	}
	struct pc_file *h = calloc(1, sizeof(*h));
	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	struct pc_mapping *m;
	int err = file_open(c, dirfd, path, flags, mode, &m);
	if (err) {
		free(h);
		errno = -err;
		return NULL;
	}
	h->magic = PC_FILE_MAGIC;
	h->owner_generation = forkgen_now();
	h->accmode = flags & O_ACCMODE;
	h->oflags = flags & (O_DSYNC | O_SYNC | O_DIRECT);
	h->c = c;
	h->m = m;
	h->wb_err_seen = errseq_open_sample(&m->wb_err);
	for (int i = 0; i < PC_RA_HINTS; i++)
		h->ra_ends[i] = -1;
	struct pc_proc *p = cache_proc(c);
	files_lock(c);
	h->open_next = p->open_head;
	if (p->open_head)
		p->open_head->open_prev = h;
	p->open_head = h;
	files_unlock(c);
	if ((flags & O_TRUNC) && h->accmode != O_RDONLY) {
		err = truncate_mapping(m, 0);
		if (err) {
			pc_close(h);
			errno = -err;
			return NULL;
		}
	}
	return h;
}

/* Unlink from the open list and park in the quarantine (files_lock held). */
static void handle_retire(struct pc_cache *c, struct pc_file *h)
{
	struct pc_proc *p = cache_proc(c);
	assert_held(&c->files_lock);
	if (h->open_prev)
		h->open_prev->open_next = h->open_next;
	else
		p->open_head = h->open_next;
	if (h->open_next)
		h->open_next->open_prev = h->open_prev;
	h->magic = PC_FILE_CLOSED;
	h->m = NULL;
	h->next_closed = NULL;
	if (p->closed_tail)
		p->closed_tail->next_closed = h;
	else
		p->closed_head = h;
	p->closed_tail = h;
	if (++p->nr_closed > HANDLE_QUARANTINE) {
		struct pc_file *old = p->closed_head;
		p->closed_head = old->next_closed;
		if (!p->closed_head)
			p->closed_tail = NULL;
		p->nr_closed--;
		free(old);
	}
}

int handles_close_all(struct pc_cache *c)
{
	struct pc_proc *p = cache_proc(c);
	int first_err = 0;
	for (;;) {
		files_lock(c);
		struct pc_file *h = p->open_head;
		if (!h) {
			files_unlock(c);
			return first_err;
		}
		struct pc_mapping *m = h->m;
		int err = errseq_check_and_advance(&m->wb_err, &h->wb_err_seen);
		if (err && !first_err)
			first_err = err;
		handle_retire(c, h);
		files_unlock(c);
		file_release(m);
	}
}

void handles_free_all(struct pc_cache *c)
{
	struct pc_proc *p = cache_proc(c);
	while (p->open_head) {
		struct pc_file *h = p->open_head;
		p->open_head = h->open_next;
		free(h);
	}
	while (p->closed_head) {
		struct pc_file *h = p->closed_head;
		p->closed_head = h->next_closed;
		free(h);
	}
	p->closed_tail = NULL;
}

/* Write back, wait, flush the device, report an unseen error once. */
static int sync_handle(struct pc_file *h, bool datasync)
{
	struct pc_mapping *m = h->m;
	/* A retried fsync retries everything: space may be back. */
	failing_clear(m);
	int err = writeback_file(m);
	/* Read-only too: a closed file's end may have gone through the
	 * kernel's page cache (pc_close), and fsync is allowed on any
	 * descriptor. */
	int serr = mproc(m)->fd >= 0 ? sync_io_fsync(m->c, mproc(m)->fd, datasync) : 0;
	if (serr && !err)
		err = serr;
	/* Edges no neighbour completed by now go, as at close. */
	drop_edges(m);
	int seen = errseq_check_and_advance(&m->wb_err, &h->wb_err_seen);
	return seen ? seen : err;
}

int pc_close(struct pc_file *h)
{
	if (!handle_ok(h))
		return (int)fail(-EBADF);
	if (handle_inherited(h)) {
		/* The child's copy: no writeback, no lock.  Its memory goes
		 * with the cache's copy (pc_cache_destroy). */
		h->magic = PC_FILE_CLOSED;
		return 0;
	}
	struct pc_mapping *m = h->m;
	struct pc_cache *c = h->c;
	/* Dirty data is left to the flusher (closed.c), unless the caller
	 * wants close-to-open or too many closed files wait already. */
	int err = closed_must_wait(c) ? writeback_file(m) : 0;
	int seen = errseq_check_and_advance(&m->wb_err, &h->wb_err_seen);
	if (seen)
		err = seen;
	/* Lone edges of uncached writes go with the file's last close. */
	drop_edges(m);
	files_lock(c);
	handle_retire(c, h);
	files_unlock(c);
	file_release(m);
	return err ? (int)fail(err) : 0;
}

/* pc_flush without wait: the whole blocks of a file larger than a small
 * one are written now (not waited for); its partial last block, and all
 * of a small file, are left to the flusher for a moment.  A close usually
 * follows at once (a FUSE FLUSH is the close of a descriptor), and a
 * closed file's end goes through the kernel, exactly (a small file in one
 * write): written directly now, the block would be whole on the backing
 * file and cut back later, a read and a second write. */
static void flush_start(struct pc_mapping *m)
{
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	uint64_t whole = round_down(size, m->block_size);
	if (size > PC_SMALL_FILE_BYTES && whole > 0)
		writeback_range(m, 0, whole, WB_ALL, NULL); /* started, not waited for */
	flusher_write_soon(m);
}

int pc_flush(struct pc_file *h, int wait)
{
	int err = handle_check(h);
	if (err)
		return (int)fail(err);
	struct pc_mapping *m = h->m;
	if (mproc(m)->writable) {
		if (wait)
			err = writeback_file(m);
		else
			flush_start(m);
	}
	int seen = errseq_check_and_advance(&m->wb_err, &h->wb_err_seen);
	if (seen)
		err = seen;
	return err ? (int)fail(err) : 0;
}

/* handle_check, and the handle must be open for reading or writing. */
static int handle_check_access(struct pc_file *h, bool write)
{
	int err = handle_check(h);
	if (!err && (write ? h->accmode == O_RDONLY : h->accmode == O_WRONLY))
		err = -EBADF;
	return err;
}

/* Common checks of the read/write calls; sets *len to the total. */
static int check_io(struct pc_file *h, const struct iovec *iov, int iovcnt, off_t off, int flags, bool write,
		    size_t *len)
{
	int err = handle_check_access(h, write);
	if (err)
		return err;
	if (flags & ~(PC_DSYNC | PC_NOWAIT | PC_DONTCACHE | PC_DIRECT))
		return -EINVAL;
	if (off < 0 || iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return -EINVAL;
	size_t total = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		if (iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	if (write && total && (uint64_t)off + total > (uint64_t)h->m->max_bytes)
		return -EFBIG;
	if (!write && (uint64_t)off + total > PC_MAX_FILE_OFFSET)
		total = PC_MAX_FILE_OFFSET - (uint64_t)off;
	*len = total;
	return 0;
}

/* Apply the handle's open flags and the NOREUSE advice to a call. */
static int effective_flags(struct pc_file *h, uint64_t off, size_t len, int flags)
{
	if (h->oflags & (O_DSYNC | O_SYNC))
		flags |= PC_DSYNC;
	if (h->oflags & O_DIRECT)
		flags |= PC_DIRECT;
	struct pc_mapping *m = h->m;
	if (!(flags & PC_DONTCACHE) && __atomic_load_n(&m->noreuse, __ATOMIC_ACQUIRE)) {
		cache_lock(m->c, &m->advice_lock, LOCK_LEAF);
		uint64_t s = (uint64_t)m->noreuse_off;
		uint64_t e = m->noreuse_len ? s + (uint64_t)m->noreuse_len : UINT64_MAX;
		if (m->noreuse && off < e && off + len > s)
			flags |= PC_DONTCACHE;
		cache_unlock(m->c, &m->advice_lock);
	}
	return flags;
}

/* The body of every read and write call. */
static ssize_t do_io(struct pc_file *h, const struct iovec *iov, int iovcnt, off_t off, int flags, bool write)
{
	size_t len;
	int err = check_io(h, iov, iovcnt, off, flags, write, &len);
	if (err)
		return fail(err);
	if (!len)
		return 0;
	flags = effective_flags(h, (uint64_t)off, len, flags);
	uint64_t pos = (uint64_t)off;
	ssize_t r;
	/* A cache hit first: no lock, no write to shared memory (read_hit.h). */
	if (!write && iovcnt == 1 && !(flags & (PC_DIRECT | PC_DONTCACHE)) &&
	    (r = read_hit(h->m, iov[0].iov_base, len, pos)) > 0)
		return r;
	if (write)
		r = (flags & PC_DIRECT) ? direct_write(h, iov, iovcnt, pos, len, flags)
					: write_iter(h, iov, iovcnt, pos, len, flags);
	else
		r = (flags & PC_DIRECT) ? direct_read(h, iov, iovcnt, pos, len)
					: read_iter(h, iov, iovcnt, pos, len, flags);
	return r < 0 ? fail((int)r) : r;
}

ssize_t pc_preadv(struct pc_file *h, const struct iovec *iov, int iovcnt, off_t off, int flags)
{
	return do_io(h, iov, iovcnt, off, flags, false);
}

ssize_t pc_pwritev(struct pc_file *h, const struct iovec *iov, int iovcnt, off_t off, int flags)
{
	return do_io(h, iov, iovcnt, off, flags, true);
}

/* The largest read pc_pread tries as a hit first: one largest folio. */
#define HIT_MAX_LEN ((size_t)PC_PAGE_SIZE << PC_MAX_ORDER)

/* pc_pread when it is not a hit.  Out of line, and reached by a tail call:
 * the iovec it builds on the stack, and the call, are then no part of the
 * hit's own code (read_hit.h says why that matters). */
__attribute__((noinline)) static ssize_t pc_pread_full(struct pc_file *h, void *buf, size_t len, off_t off,
						       int flags)
{
	struct iovec v = { buf, len };
	return pc_preadv(h, &v, 1, off, flags);
}

ssize_t pc_pread(struct pc_file *h, void *buf, size_t len, off_t off, int flags)
{
	/*
	 * A cache hit without do_io's generic work (iovec, flag mapping):
	 * a hit is a copy at memory speed, and every instruction between two
	 * hits' copies delays the next copy's first loads, which the CPU
	 * otherwise overlaps with the previous copy (read_hit.h).  The
	 * tests are those of check_io and effective_flags that a hit must
	 * pass (an open handle of this process readable, flags a hit may
	 * serve, no O_DIRECT, no NOREUSE range), the process's first: in a
	 * child of fork() the file's mapping is not mapped (the cache's
	 * segment is not inherited); anything else, and any
	 * read the hit declines, goes the full way, which reports errors.
	 * off + len cannot pass the largest offset: read_hit reads below
	 * i_size.
	 */
	if (h && h->magic == PC_FILE_MAGIC && !(flags & ~(PC_DSYNC | PC_NOWAIT)) && off >= 0 && buf &&
	    len - 1 < HIT_MAX_LEN && h->accmode != O_WRONLY && !(h->oflags & O_DIRECT) && !handle_inherited(h) &&
	    !__atomic_load_n(&h->m->noreuse, __ATOMIC_ACQUIRE)) {
		ssize_t r = read_hit(h->m, buf, len, (uint64_t)off);
		if (r > 0)
			return r;
	}
	return pc_pread_full(h, buf, len, off, flags);
}

ssize_t pc_pwrite(struct pc_file *h, const void *buf, size_t len, off_t off, int flags)
{
	struct iovec v = { (void *)buf, len };
	return pc_pwritev(h, &v, 1, off, flags);
}

int pc_fsync(struct pc_file *h)
{
	int err = handle_check(h);
	if (!err)
		err = sync_handle(h, false);
	return err ? (int)fail(err) : 0;
}

int pc_fdatasync(struct pc_file *h)
{
	int err = handle_check(h);
	if (!err)
		err = sync_handle(h, true);
	return err ? (int)fail(err) : 0;
}

int pc_ftruncate(struct pc_file *h, off_t len)
{
	int err = handle_check_writable(h);
	if (err)
		return (int)fail(err);
	if (len < 0)
		return (int)fail(-EINVAL);
	if (len > h->m->max_bytes)
		return (int)fail(-EFBIG);
	err = truncate_mapping(h->m, (uint64_t)len);
	return err ? (int)fail(err) : 0;
}

int pc_fallocate(struct pc_file *h, int mode, off_t off, off_t len)
{
	int err = handle_check_writable(h);
	if (err)
		return (int)fail(err);
	if (off < 0 || len <= 0)
		return (int)fail(-EINVAL);
	if ((uint64_t)off + (uint64_t)len > (uint64_t)h->m->max_bytes)
		return (int)fail(-EFBIG);
	const int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE && mode != punch && mode != FALLOC_FL_ZERO_RANGE &&
	    mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE))
		return (int)fail(-EOPNOTSUPP);
	err = punch_range(h->m, (uint64_t)off, (uint64_t)len, mode);
	return err ? (int)fail(err) : 0;
}

off_t pc_size(struct pc_file *h)
{
	int err = handle_check(h);
	if (err)
		return (off_t)fail(err);
	return (off_t)atomic_load(&h->m->i_size);
}

int pc_fadvise(struct pc_file *h, off_t off, off_t len, int advice)
{
	int err = handle_check(h);
	if (err)
		return (int)fail(err);
	if (off < 0 || len < 0)
		return (int)fail(-EINVAL);
	struct pc_mapping *m = h->m;
	uint64_t start = (uint64_t)off;
	uint64_t end = len ? (uint64_t)off + (uint64_t)len : UINT64_MAX;
	if (end < start)
		end = UINT64_MAX;
	switch (advice) {
	case POSIX_FADV_DONTNEED:
		fadvise_dontneed(m, start, end);
		return 0;
	case POSIX_FADV_WILLNEED: {
		uint64_t size = (uint64_t)atomic_load(&m->i_size);
		if (start < size)
			read_io_range(m, start, end < size ? end : size, 0, NULL);
		return 0;
	}
	case POSIX_FADV_NOREUSE:
		cache_lock(m->c, &m->advice_lock, LOCK_LEAF);
		m->noreuse_off = off;
		m->noreuse_len = len;
		__atomic_store_n(&m->noreuse, true, __ATOMIC_RELEASE);
		cache_unlock(m->c, &m->advice_lock);
		return 0;
	case POSIX_FADV_NORMAL:
		cache_lock(m->c, &m->advice_lock, LOCK_LEAF);
		__atomic_store_n(&m->noreuse, false, __ATOMIC_RELEASE);
		cache_unlock(m->c, &m->advice_lock);
		atomic_store_explicit(&h->ra_advice, PC_RA_NORMAL, memory_order_relaxed);
		return 0;
	case POSIX_FADV_SEQUENTIAL:
		atomic_store_explicit(&h->ra_advice, PC_RA_SEQUENTIAL, memory_order_relaxed);
		return 0;
	case POSIX_FADV_RANDOM:
		atomic_store_explicit(&h->ra_advice, PC_RA_RANDOM, memory_order_relaxed);
		return 0;
	default:
		return (int)fail(-EINVAL);
	}
}

/* ------------------------------------------------------------------ spans */

/* Checks of the span begin calls (span.c does the rest). */
static int check_span(struct pc_file *h, off_t off, size_t len, int flags, bool write, const struct pc_span *s)
{
	int err = handle_check_access(h, write);
	if (err)
		return err;
	/* A pointer into the cache is the opposite of direct I/O. */
	if ((flags & ~(PC_DSYNC | PC_NOWAIT | PC_DONTCACHE)) || (h->oflags & O_DIRECT))
		return -EINVAL;
	if (!s || off < 0 || len > SSIZE_MAX)
		return -EINVAL;
	if (write && len && off >= h->m->max_bytes)
		return -EFBIG;
	return 0;
}

/* Nothing to end (any more): a later end call is caught. */
static void span_mark_ended(struct pc_span *s)
{
	s->data = NULL;
	s->len = 0;
	s->priv.state = SPAN_ENDED;
}

static ssize_t span_begin(struct pc_file *h, off_t off, size_t len, int flags, struct pc_span *s, bool write)
{
	int err = check_span(h, off, len, flags, write, s);
	ssize_t r = err;
	if (!err) {
		flags = effective_flags(h, (uint64_t)off, len, flags);
		r = write ? span_write_begin(h, (uint64_t)off, len, flags, s)
			  : span_read_begin(h, (uint64_t)off, len, flags, s);
	}
	if (r >= 0)
		return r;
	if (s)
		span_mark_ended(s);
	return fail((int)r);
}

ssize_t pc_read_begin(struct pc_file *h, off_t off, size_t len, int flags, struct pc_span *s)
{
	return span_begin(h, off, len, flags, s, false);
}

ssize_t pc_write_begin(struct pc_file *h, off_t off, size_t len, int flags, struct pc_span *s)
{
	return span_begin(h, off, len, flags, s, true);
}

/* A span begun before fork(), in the child: the folio is the parent's.
 * Told by the span alone (a shared cache is not mapped in the child). */
static bool span_inherited(const struct pc_span *s)
{
	return s->priv.owner_generation != forkgen_now();
}

void pc_read_end(struct pc_span *s)
{
	if (!s || (s->priv.state != SPAN_READ && s->priv.state != SPAN_EMPTY))
		return;
	/* In a child of fork() the folio is the parent's: nothing to drop. */
	if (s->priv.state == SPAN_READ && !span_inherited(s))
		span_read_end(s);
	span_mark_ended(s);
}

int pc_write_end(struct pc_span *s, size_t copied)
{
	if (!s)
		return (int)fail(-EINVAL);
	unsigned state = s->priv.state;
	size_t len = state == SPAN_WRITE ? s->priv.len : 0;
	if ((state != SPAN_WRITE && state != SPAN_EMPTY) || copied > len)
		return (int)fail(-EINVAL); /* still open, if it was */
	int err = 0;
	if (state == SPAN_WRITE)
		err = span_inherited(s) ? -EPERM : span_write_end(s, copied);
	span_mark_ended(s);
	return err ? (int)fail(err) : 0;
}
