/*
 * backing.c - the backing file's size and allocation: space reserved for
 * writes that extend the file, allocation ahead of writeback, and the exact
 * size at fsync and close.  (The descriptor's O_DIRECT: io_fd.c.)
 *
 * Sizes kept per mapping (all bytes):
 *   i_size       the file's size as callers see it;
 *   disk_size    the backing file's size as last set (whole blocks while
 *                the file is written: device writes are whole blocks);
 *   reserve_end  space up to here is allocated or reserved (fallocate
 *                KEEP_SIZE), so writeback below it cannot meet ENOSPC;
 *   alloc_end    allocated *and* inside the backing file's size
 *                (backing_extend), so direct writes below it allocate
 *                nothing and take the file system's shared lock.
 */
#include "wb/backing.h"

#include "io/backend.h"
#include "api/cache.h"
#include "mem/folio.h"
#include "io/fs_sync.h"
#include "mem/mapping.h"
#include "mem/reclaim.h"
#include "lib/util.h"
#include "lib/written.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

/*
 * Reserve the device space a write that extends the file will need, before
 * it dirties anything.  The kernel's buffered path allocates (or reserves,
 * with delayed allocation) at write time, so a full file system fails the
 * write() with ENOSPC; a cache that found out only at writeback could say
 * so only at fsync or close, after acknowledging data it cannot store.
 * fallocate(FALLOC_FL_KEEP_SIZE) reserves without changing the size or any
 * data, so it is safe against writes in flight.
 *
 * How much: a write past the reserved end reserves a few steps ahead, a
 * step being an eighth of what the file grew since open (RESERVE_AHEAD_MIN
 * to _MAX), and the flusher renews it a step at a time while the writer
 * goes on (backing_reserve_soon), so a sequential writer calls fallocate
 * only once itself; when the file system cannot give that much, exactly
 * what the write needs.  A write far past the reserved end
 * (a sparse file) reserves only its own blocks.  What is reserved past the
 * final size is released at last close (backing_release_reserve).  File
 * systems without fallocate are left to report ENOSPC at writeback.
 */
#define RESERVE_AHEAD_MIN (8ull << 20)
#define RESERVE_AHEAD_MAX (64ull << 20)
/* Files smaller than this reserve nothing: a small file's two fallocate
 * calls (reserve, and give back at close) would cost more than its data,
 * and ENOSPC for it comes at write-back (see pagecache.h). */
#define RESERVE_FROM (1ull << 20)

static int reserve_blocks(struct pc_mapping *m, uint64_t from, uint64_t to)
{
	if (fallocate(mproc(m)->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(to - from)) == 0)
		return 0;
	return -errno;
}

static bool reserve_unsupported(int err)
{
	return err == -EOPNOTSUPP || err == -ENOSYS || err == -EINVAL;
}

/* The step of reservations ahead of a write ending at `end`. */
static uint64_t reserve_ahead(const struct pc_mapping *m, uint64_t end)
{
	uint64_t grown = end > m->alloc_base ? end - m->alloc_base : 0;
	return u64_min(u64_max(grown / 8, RESERVE_AHEAD_MIN), RESERVE_AHEAD_MAX);
}

/* Where a reservation for a write ending at `end` ends: RESERVE_LEAD + 1
 * steps past it.  The flusher is asked for the next when RESERVE_LEAD are
 * left (backing_reserve_soon), so each fallocate reserves about one step
 * and the writer has RESERVE_LEAD steps of writes to go (the flusher may
 * be in the middle of a round) before it would have to reserve itself. */
#define RESERVE_LEAD 2u
static uint64_t reserve_target(const struct pc_mapping *m, uint64_t end)
{
	return round_up(end + (RESERVE_LEAD + 1) * reserve_ahead(m, end), m->block_size);
}

/*
 * A writer reserves inline at a file's first reservation, or when the
 * flusher fell behind.  It may then dirty up to the dirty limit at memory
 * speed before pacing slows it, so it reserves that much further (at most
 * RESERVE_AHEAD_MAX) than a renewal would: otherwise it reaches the end
 * of the reservation during that burst, while the flusher's renewal is
 * still in fallocate, which on ext4 and XFS first waits for all write-back
 * in flight to the file, and the writer stalls for it (several times a
 * write's time: docs/results.md, "Figures the code's comments used to
 * carry", Reservations).  On a file with no write-back in flight yet,
 * fallocate costs about as little for 80 MiB as for 8.
 */
static uint64_t inline_target(const struct pc_mapping *m, uint64_t end)
{
	uint64_t burst = u64_min(m->c->cfg.dirty_limit_bytes, RESERVE_AHEAD_MAX);
	return round_up(reserve_target(m, end) + burst, m->block_size);
}

static bool reserve_wanted(struct pc_mapping *m, uint64_t end)
{
	return end > (uint64_t)atomic_load_explicit(&m->reserve_end, memory_order_relaxed) && end >= RESERVE_FROM &&
	       !atomic_load_explicit(&m->no_reserve, memory_order_relaxed);
}

/* After a write ending at `end`: fewer than RESERVE_LEAD steps reserved
 * past it, so the next step is due (reserve_target). */
static bool renewal_due(struct pc_mapping *m, uint64_t end)
{
	return reserve_wanted(m, end + RESERVE_LEAD * reserve_ahead(m, end));
}

/* Reserve [from, to) (size_lock held); a file system without fallocate
 * reserves nothing, from now on. */
static int reserve_range(struct pc_mapping *m, uint64_t from, uint64_t to)
{
	assert_held(&m->size_lock);
	int err = reserve_blocks(m, from, to);
	if (reserve_unsupported(err)) {
		atomic_store(&m->no_reserve, true);
		return 0;
	}
	return err;
}

/* Reserve from the reserved end to `to`, which becomes the reserved end. */
static int reserve_to(struct pc_mapping *m, uint64_t have, uint64_t to)
{
	int err = reserve_range(m, have, to);
	if (!err && !atomic_load(&m->no_reserve))
		atomic_store(&m->reserve_end, (int64_t)to);
	return err;
}

int backing_reserve(struct pc_mapping *m, uint64_t off, uint64_t end)
{
	if (!reserve_wanted(m, end))
		return 0;
	uint64_t bs = m->block_size;
	int err = 0;
	cache_lock(m->c, &m->size_lock, LOCK_SIZE);
	uint64_t have = (uint64_t)atomic_load(&m->reserve_end);
	if (end > have && !atomic_load(&m->no_reserve)) {
		uint64_t need = round_up(end, bs);
		atomic_fetch_add_explicit(&m->c->st_reserve_inline, 1, memory_order_relaxed);
		if (off > have + RESERVE_AHEAD_MIN) {
			err = reserve_range(m, round_down(off, bs), need); /* sparse: its own blocks */
		} else {
			err = reserve_to(m, have, inline_target(m, end));
			if (err == -ENOSPC || err == -EDQUOT)
				err = reserve_to(m, have, need);
		}
		if (!err)
			atomic_store(&m->reserve_bg_failed, false);
	}
	cache_unlock(m->c, &m->size_lock);
	return err;
}

/*
 * The fallocate that reserves ahead takes milliseconds (ext4 and XFS
 * first wait for all direct I/O in flight to the file: our own
 * write-back), so a sequential writer that made it inline would stall
 * once every few writes.  The flusher makes it instead (or a write-back
 * walk behind the writer), while the writer still has RESERVE_LEAD steps
 * reserved before it; the writer reserves inline only when it gets there
 * first, or when the flusher's attempt failed (it then reports ENOSPC
 * itself).
 */
bool backing_reserve_soon(struct pc_mapping *m, uint64_t end)
{
	/* A write past the reserved end reserved only its own blocks (a
	 * sparse file): the gap before it is not to be reserved. */
	if (end > (uint64_t)atomic_load_explicit(&m->reserve_end, memory_order_relaxed) ||
	    atomic_load_explicit(&m->reserve_bg_failed, memory_order_relaxed) || !renewal_due(m, end))
		return false;
	/* Only the first request since the flusher took the last kicks it. */
	return atomic_raise_i64(&m->reserve_want, (int64_t)end) == 0;
}

void backing_reserve_background(struct pc_mapping *m)
{
	if (!atomic_load_explicit(&m->reserve_want, memory_order_relaxed) || !mproc(m)->writable)
		return;
	/* Taken under size_lock, which backing_release_reserve clears it
	 * under: a request of a file closed meanwhile reserves nothing past
	 * the end after its reservation was given back.  Never waited for:
	 * the caller may be a write-back walk holding folios under writeback
	 * it has not submitted yet; busy, the request stays for the next
	 * walk or round (the writer reserves itself if none comes). */
	if (!cache_trylock(m->c, &m->size_lock, LOCK_SIZE))
		return;
	uint64_t end = (uint64_t)atomic_exchange(&m->reserve_want, 0);
	/* Due still (under the lock, no one reserved meanwhile): the target,
	 * a step further, is then past the reserved end. */
	if (end && renewal_due(m, end) &&
	    reserve_to(m, (uint64_t)atomic_load(&m->reserve_end), reserve_target(m, end)))
		atomic_store(&m->reserve_bg_failed, true);
	cache_unlock(m->c, &m->size_lock);
}

/*
 * Give back what was reserved past the end.  Under inval_lock, exclusive:
 * no write can raise i_size meanwhile, and every byte written below it is
 * kept (a write in flight is below it).  Two calls, because file systems
 * differ: XFS punches preallocated blocks past the end of the file, ext4
 * ignores a punch there (nothing past i_size is punched) but frees them on
 * a truncate, even one to the size the file already has.  The truncate
 * goes through backing_set_size, which keeps the kernel's copy of a
 * partial last block from colliding with our direct writes.
 */
void backing_release_reserve(struct pc_mapping *m)
{
	if (!mproc(m)->writable)
		return;
	/* A reservation ahead asked for and not yet made: not to be made any
	 * more (no writer is left), see backing_reserve_background. */
	cache_lock(m->c, &m->size_lock, LOCK_SIZE);
	atomic_store(&m->reserve_want, 0);
	cache_unlock(m->c, &m->size_lock);
	/* (Not compared with disk_size: allocation ahead may have raised
	 * that past i_size until the size was made exact.) */
	if (
	    atomic_load(&m->reserve_end) <= (int64_t)round_up((uint64_t)atomic_load(&m->i_size), m->block_size))
		return;
	inval_lock_excl(m);
	cache_lock(m->c, &m->size_lock, LOCK_SIZE);
	uint64_t size = u64_max((uint64_t)atomic_load(&m->i_size), (uint64_t)atomic_load(&m->disk_size));
	uint64_t keep = round_up(size, m->block_size);
	uint64_t have = (uint64_t)atomic_load(&m->reserve_end);
	bool freed = have > keep && fallocate(mproc(m)->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)keep,
					      (off_t)(have - keep)) == 0;
	cache_unlock(m->c, &m->size_lock);
	if (have > keep && backing_set_size(m, size) == 0)
		freed = true;
	if (freed) {
		cache_lock(m->c, &m->size_lock, LOCK_SIZE);
		atomic_store(&m->reserve_end, (int64_t)keep);
		cache_unlock(m->c, &m->size_lock);
	}
	inval_unlock(m);
}

/*
 * Before writing back, allocate the backing file up to i_size (rounded up
 * to a block), holes below the end included.  Direct writes into allocated
 * space inside the file's size take the file system's shared lock (ext4
 * i_rwsem, XFS iolock) and allocate nothing at submission; into holes or
 * past the end, each allocates (and on XFS serialises) on its own, which
 * with many small writes (interleaved writers, whose data lands out of
 * order) costs more than the writes.  fallocate never changes data and
 * never shrinks the file, so it is safe against writes in flight.
 *
 * How far: what the data written since open justifies, at most
 * EXTEND_RATIO times the bytes dirtied past the size at open, so a sparse
 * write far past the end does not allocate the gap (it stays a hole, as
 * without us), while writers that fill the file out of order, and run up
 * to a few hundred MiB apart, find it allocated.  How often: in steps of
 * at least EXTEND_STEP, or up to i_size, since XFS drains all direct I/O
 * in flight for a fallocate.  See backing_sync_size() for the exact size.
 */
#define EXTEND_RATIO 4u
#define EXTEND_STEP (8ull << 20)
#define EXTEND_FROM (1ull << 20)
void backing_extend(struct pc_mapping *m)
{
	uint64_t bs = m->block_size;
	uint64_t want = round_up((uint64_t)atomic_load(&m->i_size), bs);
	uint64_t done = (uint64_t)atomic_load(&m->alloc_end);
	/* Small files: one fallocate more than their data is worth (and
	 * their last block goes as backing_write_tail wants it). */
	if (!mproc(m)->writable || !mproc(m)->direct || want <= done || want < EXTEND_FROM)
		return;
	uint64_t allowed = m->alloc_base + EXTEND_RATIO * atomic_load(&m->dirtied_total);
	uint64_t target = round_down(u64_min(want, allowed), bs);
	if (target <= done || (target < want && target - done < EXTEND_STEP))
		return;
	cache_lock(m->c, &m->size_lock, LOCK_SIZE);
	done = (uint64_t)atomic_load(&m->alloc_end);
	/* From a size inside a block the file system would zero that block's
	 * tail through its page cache: leave that to the writes themselves. */
	if (target > done && atomic_load(&m->disk_size) % (int64_t)bs == 0 &&
	    fallocate(mproc(m)->fd, 0, (off_t)done, (off_t)(target - done)) == 0) {
		atomic_raise_i64(&m->alloc_end, (int64_t)target);
		atomic_raise_i64(&m->disk_size, (int64_t)target);
	}
	cache_unlock(m->c, &m->size_lock);
}


int backing_set_size(struct pc_mapping *m, uint64_t size)
{
	uint64_t bs = m->block_size;
	bool partial = size % bs || (uint64_t)atomic_load(&m->disk_size) % bs;

	assert_inval_locked_excl(m);
	/* The block the file system will zero through its own page cache: no
	 * direct write of ours may be in flight to it meanwhile. */
	struct pc_folio *tail = partial ? mapping_lookup(m, round_down(size, bs)) : NULL;
	if (tail) {
		folio_lock(tail);
		folio_wait_clear(tail, PF_WRITEBACK);
	}
	int err = 0;
	cache_lock(m->c, &m->size_lock, LOCK_SIZE);
	uint64_t old = (uint64_t)atomic_load(&m->disk_size);
	if (ftruncate(mproc(m)->fd, (off_t)size) == 0) {
		atomic_store(&m->disk_size, (int64_t)size);
		if ((uint64_t)atomic_load(&m->data_end) > size)
			atomic_store(&m->data_end, (int64_t)size);
		written_truncate(&m->written, size);
		if ((uint64_t)atomic_load(&m->alloc_end) > size)
			atomic_store(&m->alloc_end, (int64_t)size);
		/* A file that really shrank lost its blocks past the end,
		 * reserved ones too (and a truncate at open must not leave the
		 * old file's reservation standing for the new data); growth,
		 * or the size the file already had, may free nothing:
		 * backing_release_reserve gives that back. */
		if (size < old && (uint64_t)atomic_load(&m->reserve_end) > round_up(size, bs))
			atomic_store(&m->reserve_end, (int64_t)round_up(size, bs));
	} else {
		err = -errno;
	}
	/* Write and drop the kernel's cached copy of the zeroed block(s), so
	 * later direct writes of them do not collide with it. */
	if (!err && partial && mproc(m)->direct) {
		uint64_t lo = round_down(u64_min(size, old), bs);
		uint64_t hi = round_up(u64_max(size, old), bs);
		sync_file_range(mproc(m)->fd, (off_t)lo, (off_t)(hi - lo),
				SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
		posix_fadvise(mproc(m)->fd, (off_t)lo, (off_t)(hi - lo), POSIX_FADV_DONTNEED);
	}
	cache_unlock(m->c, &m->size_lock);
	if (tail) {
		folio_unlock(tail);
		reclaim_release_folio(m->c, tail);
	}
	return err;
}

/*
 * The end of a closed file (its last, partial block; of a small file, its
 * last dirty blocks: writeback.c says which), written so that the backing
 * file ends exactly at i_size: a direct write is whole blocks, and cutting
 * the file back to i_size afterwards makes the file system read that block
 * (to zero its tail through its page cache) and write it again, which for
 * a small file costs more than its data.  So those bytes go through the
 * kernel's page cache instead, which sets the size exactly and reads
 * nothing, the blocks being past the end of the backing file.  It goes
 * through a second open file description of the file, without O_DIRECT
 * (opened through /proc/self/fd): turning O_DIRECT off on the shared
 * descriptor for the moment (F_SETFL) would make direct writes in flight
 * through it buffered, since io_uring takes a request's flags from the
 * file when it issues or retries it, and those buffered pages would then
 * collide with later direct writes.  The kernel writes the pages back;
 * fsync of the descriptor (pc_fsync) covers them (fsync is per inode),
 * and pc_cache_destroy syncs them and hears their errors (fs_sync.c).
 * Returns 0, or a negative errno (the caller then writes the block
 * directly as usual).
 */
int backing_write_tail(struct pc_mapping *m, const void *buf, uint64_t off, size_t len)
{
	/* A file created here whose descriptor has not yet needed O_DIRECT
	 * (mapping.h, fd_mode) is written through that descriptor: no
	 * second open, which would cost a small file more than its data.
	 * Should another thread give it O_DIRECT meanwhile, this write goes
	 * direct: it fails (EINVAL) where it ends inside a block, and the
	 * caller then writes the block directly; whole blocks land as a
	 * direct write would.  The descriptor never goes back to buffered. */
	struct pc_mapping_proc *mp = mproc(m);
	int fd = mp->fd;
	bool alias = atomic_load(&mp->fd_mode) != FD_DIRECT_LATER;
	if (alias) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", mp->fd);
		fd = open(path, O_WRONLY | O_CLOEXEC | (mp->noatime ? O_NOATIME : 0));
		if (fd < 0)
			return -errno;
	}
	struct iovec v = { (void *)buf, len };
	ssize_t n = sync_io_pwritev_alias(m->c, mp->fd, fd, &v, 1, (off_t)off, 0);
	if (alias)
		close(fd);
	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return -EIO;
	atomic_raise_i64(&m->disk_size, (int64_t)(off + len));
	atomic_raise_i64(&m->data_end, (int64_t)(off + len));
	mapping_written_add(m, off, off + len);
	fs_sync_note_kernel_write(m);
	atomic_fetch_add_explicit(&m->st_write_ios, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->st_write_bytes, len, memory_order_relaxed);
	return 0;
}

/*
 * Make the backing file's size exactly i_size.  Device writes are whole
 * blocks, so while the file is in use its backing size is i_size rounded
 * up to a block.  Shrinking to the exact size must not cut off data being
 * written past the i_size we read, so writers (who raise i_size under
 * inval_lock, shared) are held off meanwhile.
 */
int backing_sync_size(struct pc_mapping *m)
{
	int err = 0;
	if (atomic_load(&m->disk_size) == atomic_load(&m->i_size))
		return 0;
	inval_lock_excl(m);
	int64_t size = atomic_load(&m->i_size);
	if (mproc(m)->writable && atomic_load(&m->disk_size) != size)
		err = backing_set_size(m, (uint64_t)size);
	inval_unlock(m);
	return err;
}



