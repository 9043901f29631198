/*
 * direct.c - PC_DIRECT: direct I/O that stays coherent with the cache.
 *
 * Before device I/O, dirty cached data of the range is written back (so the
 * device holds the newest data); after a direct write, cached blocks of the
 * range no longer match the device and are invalidated.  Any alignment is
 * accepted.  An unaligned write is split as an NFS server's "direct" WRITE
 * is: the block-aligned middle goes straight to the device, the misaligned
 * head and tail through the uncached buffered path (PC_DONTCACHE), where
 * the edge-block logic keeps a block shared with a neighbouring write until
 * that write completes it, so nothing is read back from the device.
 */
#include "rw/direct.h"

#include "io/backend.h"
#include "mem/fill.h"
#include "api/handle.h"
#include "io/io_fd.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "rw/truncate.h"
#include "lib/util.h"
#include "rw/write.h"
#include "wb/writeback.h"
#include "lib/written.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIRECT_CHUNK (4u << 20) /* bounce buffer size for unaligned memory */

/* Can the iovec bytes [skip, skip+len) go to O_DIRECT as they are? */
static bool iov_aligned(const struct pc_mapping *m, const struct iovec *iov, int iovcnt, size_t skip, size_t len)
{
	size_t bs = m->block_size, ma = m->mem_align;
	for (int i = 0; i < iovcnt && len; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		size_t n = u64_min(iov[i].iov_len - skip, len);
		uintptr_t p = (uintptr_t)iov[i].iov_base + skip;
		if (p % ma || n % bs)
			return false;
		len -= n;
		skip = 0;
	}
	return true;
}

/* Build an iovec array for bytes [skip, skip+len) of the caller's. */
static int iov_slice(const struct iovec *iov, int iovcnt, size_t skip, size_t len, struct iovec *out, int max)
{
	int k = 0;
	for (int i = 0; i < iovcnt && len; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		if (k == max)
			return -1;
		size_t n = u64_min(iov[i].iov_len - skip, len);
		out[k++] = (struct iovec){ (uint8_t *)iov[i].iov_base + skip, n };
		len -= n;
		skip = 0;
	}
	return k;
}

static void count_write(struct pc_mapping *m, size_t len)
{
	atomic_fetch_add_explicit(&m->st_write_ios, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->st_write_bytes, len, memory_order_relaxed);
}

/* Write block-aligned [off, off+len) from the iovecs (skip bytes in). */
static int device_write(struct pc_mapping *m, const struct iovec *iov, int iovcnt, size_t skip, uint64_t off,
			size_t len, int rw_flags)
{
	struct iovec local[64];
	mapping_written_add(m, off, off + len);
	if (iov_aligned(m, iov, iovcnt, skip, len)) {
		int k = iov_slice(iov, iovcnt, skip, len, local, 64);
		if (k > 0) {
			count_write(m, len);
			ssize_t r = sync_io_pwritev(m->c, io_fd(m), local, k, (off_t)off, rw_flags);
			return r < 0 ? (int)r : ((size_t)r == len ? 0 : -EIO);
		}
	}
	size_t chunk = u64_min(len, DIRECT_CHUNK);
	uint8_t *bounce = aligned_alloc(m->mem_align > 4096 ? m->mem_align : 4096, round_up(chunk, 4096));
	if (!bounce)
		return -ENOMEM;
	int err = 0;
	for (size_t done = 0; done < len && !err; done += chunk) {
		size_t n = u64_min(chunk, len - done);
		iov_copy_from(iov, iovcnt, skip + done, bounce, n);
		struct iovec v = { bounce, n };
		count_write(m, n);
		ssize_t r = sync_io_pwritev(m->c, io_fd(m), &v, 1, (off_t)(off + done), rw_flags);
		if (r < 0)
			err = (int)r;
		else if ((size_t)r != n)
			err = -EIO;
	}
	free(bounce);
	return err;
}

/* The aligned middle: write back, invalidate, write, invalidate. */
static int direct_write_middle(struct pc_mapping *m, const struct iovec *iov, int iovcnt, size_t skip, uint64_t off,
			       size_t len, int flags)
{
	inval_lock_shared(m);
	int err = writeback_and_wait(m, off, off + len, WB_ALL);
	if (!err) {
		invalidate_range(m, off, off + len, INVAL_STALE);
		/* The size first: a concurrent size sync (ftruncate to i_size)
		 * must never cut off what we are about to write.  If the write
		 * fails the range reads as zeros, as after a failed extending
		 * O_DIRECT write. */
		atomic_raise_i64(&m->i_size, (int64_t)(off + len));
		err = device_write(m, iov, iovcnt, skip, off, len, (flags & PC_DSYNC) && mproc(m)->direct ? RWF_DSYNC : 0);
	}
	if (!err) {
		atomic_raise_i64(&m->disk_size, (int64_t)(off + len));
		atomic_raise_i64(&m->data_end, (int64_t)(off + len));
		/* Readers may have cached the old data while we wrote. */
		invalidate_range(m, off, off + len, INVAL_STALE);
	}
	inval_unlock(m);
	return err;
}

/* A misaligned piece through the uncached buffered path: the bytes it
 * wrote (fewer than len only with PC_NOWAIT) or a negative errno. */
static ssize_t uncached_piece(struct pc_file *h, const struct iovec *iov, int iovcnt, size_t skip, uint64_t off,
			      size_t len, int flags)
{
	struct iovec local[64];
	int k = iov_slice(iov, iovcnt, skip, len, local, 64);
	if (k < 0) {
		/* Many tiny iovecs: gather them (a piece is under a block). */
		uint8_t *tmp = malloc(len);
		if (!tmp)
			return -ENOMEM;
		iov_copy_from(iov, iovcnt, skip, tmp, len);
		struct iovec v = { tmp, len };
		ssize_t r = write_iter(h, &v, 1, off, len, flags);
		free(tmp);
		return r;
	}
	return write_iter(h, local, k, off, len, flags);
}

/*
 * Head, aligned middle, tail, in file order.  With PC_NOWAIT a piece that
 * would block ends the call with the bytes written before it, as RWF_NOWAIT
 * does (-EAGAIN only when that is none): the pieces before it are in the
 * file already.
 */
ssize_t direct_write(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len, int flags)
{
	struct pc_mapping *m = h->m;
	uint64_t bs = m->block_size, end = off + len;
	uint64_t astart = round_up(off, bs), aend = round_down(end, bs);
	int piece_flags = (flags & ~PC_DIRECT) | PC_DONTCACHE;
	if (astart >= aend) /* no whole block: all of it is an edge */
		return uncached_piece(h, iov, iovcnt, 0, off, len, piece_flags);
	/* Pieces in file order; a short piece (PC_NOWAIT) ends the call. */
	size_t done = 0;
	ssize_t r = 0;
	write_edges_batch_begin();
	if (off < astart && (r = uncached_piece(h, iov, iovcnt, 0, off, astart - off, piece_flags)) > 0)
		done = (size_t)r;
	if (r >= 0 && done == astart - off &&
	    (r = direct_write_middle(m, iov, iovcnt, astart - off, astart, aend - astart, flags)) == 0)
		done = aend - off;
	if (r >= 0 && done == aend - off && aend < end &&
	    (r = uncached_piece(h, iov, iovcnt, aend - off, aend, end - aend, piece_flags)) > 0)
		done += (size_t)r;
	write_edges_batch_end(m, piece_flags);
	/* PC_NOWAIT: the bytes written before it would have blocked. */
	if (r == -EAGAIN && done)
		return (ssize_t)done;
	if (r < 0)
		return r;
	/* With PC_DSYNC the pieces synced themselves and the middle used
	 * RWF_DSYNC; a buffered backend still needs the flush. */
	if ((flags & PC_DSYNC) && !mproc(m)->direct) {
		int err = sync_io_fsync(m->c, mproc(m)->fd, true);
		if (err)
			return err;
	}
	return (ssize_t)done;
}

ssize_t direct_read(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len)
{
	struct pc_mapping *m = h->m;
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	if (off >= size)
		return 0;
	if (len > size - off)
		len = size - off;
	int err = writeback_and_wait(m, off, off + len, WB_ALL);
	if (err)
		return err;
	uint64_t bs = m->block_size;
	uint64_t astart = round_down(off, bs), aend = round_up(off + len, bs);
	size_t chunk = u64_min(aend - astart, DIRECT_CHUNK);
	uint8_t *bounce = aligned_alloc(m->mem_align > 4096 ? m->mem_align : 4096, round_up(chunk, 4096));
	if (!bounce)
		return -ENOMEM;
	size_t copied = 0;
	for (uint64_t pos = astart; pos < aend && !err; pos += chunk) {
		size_t n = u64_min(chunk, aend - pos);
		err = fill_read_blocks(m, bounce, pos, n);
		if (err)
			break;
		uint64_t s = u64_max(pos, off), e = u64_min(pos + n, off + len);
		iov_copy_to(iov, iovcnt, copied, bounce + (s - pos), e - s);
		copied += e - s;
	}
	free(bounce);
	if (copied)
		return (ssize_t)copied;
	return err;
}
