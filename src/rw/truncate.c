/*
 * truncate.c - truncate, hole punching and zeroing, invalidation of cached
 * ranges, and POSIX_FADV_DONTNEED.
 *
 * All of these hold the file's inval_lock exclusively, which keeps writers
 * and folio-creating readers out while cached data and the backing file
 * change together.  Partly covered folios are handled at block granularity:
 * the blocks removed lose their dirty bits (so writeback never writes data
 * that is no longer part of the file) and are zeroed in memory; a partly
 * covered *block* is zeroed through the write path, like any write.
 */
#include "rw/truncate.h"

#include "mem/arena.h"
#include "wb/backing.h"
#include "mem/block_state.h"
#include "wb/dirty.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "mem/folio.h"
#include "mem/mapping.h"
#include "mem/reclaim.h"
#include "lib/util.h"
#include "rw/write.h"
#include "wb/writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <unistd.h>

/* Does any dirty block overlap [s, e) of the folio? */
static bool truncate_range_dirty(struct pc_mapping *m, struct pc_folio *f, size_t s, size_t e)
{
	unsigned first, count;
	return bs_next_dirty_run(m, f, (unsigned)(s >> m->block_shift), &first, &count) &&
	       ((size_t)first << m->block_shift) < e;
}

/* Apply invalidation to one locked, stable folio overlapping [start, end). */
static void invalidate_folio(struct pc_mapping *m, struct pc_folio *f, uint64_t start, uint64_t end, int how)
{
	uint64_t fs = folio_pos(f), fe = fs + folio_size(f);
	if (start <= fs && end >= fe) {
		if (how == INVAL_STALE && folio_test(f, PF_DIRTY))
			return;
		size_t d = bs_invalidate_blocks(m, f, 0, folio_size(f), false);
		account_dirty(m, f, -(int64_t)d);
		mapping_remove_folio(m, f);
		return;
	}
	size_t s = (size_t)(u64_max(start, fs) - fs), e = (size_t)(u64_min(end, fe) - fs);
	if (how == INVAL_STALE && truncate_range_dirty(m, f, s, e - s))
		return; /* written after our device write: newer than it */
	if (how == INVAL_ZERO)
		memset(arena_data(m->c, f) + s, 0, e - s);
	bool was_dirty = folio_test(f, PF_DIRTY);
	size_t d = bs_invalidate_blocks(m, f, s, e - s, how == INVAL_ZERO);
	account_dirty(m, f, -(int64_t)d);
	if (was_dirty && !folio_test(f, PF_DIRTY))
		mapping_untag_dirty(m, f);
}

void invalidate_range(struct pc_mapping *m, uint64_t start, uint64_t end, int how)
{
	uint64_t idx = start >> PC_PAGE_SHIFT;
	uint64_t end_idx = end >= UINT64_MAX - PC_PAGE_SIZE ? UINT64_MAX : (end + PC_PAGE_SIZE - 1) >> PC_PAGE_SHIFT;
	struct pc_folio *batch[32];
	unsigned n;
	while (idx < end_idx && (n = mapping_gather(m, &idx, end_idx, -1, batch, 32))) {
		for (unsigned i = 0; i < n; i++) {
			struct pc_folio *f = batch[i];
			folio_lock(f);
			folio_wait_clear(f, PF_WRITEBACK);
			if (folio_test(f, PF_INDEXED) && f->mapping == m)
				invalidate_folio(m, f, start, end, how);
			folio_unlock(f);
			reclaim_release_folio(m->c, f);
		}
	}
}

/* Set the backing file's size now (under size_lock). */
int truncate_mapping(struct pc_mapping *m, uint64_t size)
{
	int err = 0;
	inval_lock_excl(m);
	uint64_t old = (uint64_t)atomic_load(&m->i_size);
	atomic_store(&m->i_size, (int64_t)size);
	if (size < old) {
		/* The block holding the new end keeps its head (and its dirty
		 * bit); its tail is zeroed and everything after it goes, dirty
		 * or not. */
		invalidate_range(m, size, UINT64_MAX, INVAL_ZERO);
		err = backing_set_size(m, size);
	}
	/* After the writeback of what went has ended: the caller may have
	 * made room, so writes may try again (see failing_set). */
	failing_clear(m);
	inval_unlock(m);
	return err;
}

/* Deallocate or zero whole blocks [start, end) on the device. */
static int backing_zero(struct pc_mapping *m, uint64_t start, uint64_t end, int mode)
{
	uint64_t disk = (uint64_t)atomic_load(&m->data_end);
	/* A hole punched on purpose is not ours to allocate ahead later. */
	if (!(mode & FALLOC_FL_ZERO_RANGE))
		atomic_raise_i64(&m->alloc_end, (int64_t)end);
	if (start >= disk)
		return 0; /* past the written data: holes already */
	if (end > disk)
		end = disk;
	int bmode = (mode & FALLOC_FL_ZERO_RANGE) ? FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE
						   : FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	if (fallocate(mproc(m)->fd, bmode, (off_t)start, (off_t)(end - start)) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	/* The file system can't: write the zeros through the cache. */
	return write_zeroes(m, start, end - start);
}

int punch_range(struct pc_mapping *m, uint64_t off, uint64_t len, int mode)
{
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	uint64_t end = off + len;
	int err = 0;
	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		/* Plain allocation: the device's business; data is unchanged. */
		inval_lock_excl(m);
		if (fallocate(mproc(m)->fd, mode, (off_t)off, (off_t)len) != 0) {
			err = -errno;
		} else if (!keep) {
			atomic_raise_i64(&m->disk_size, (int64_t)end);
			atomic_raise_i64(&m->i_size, (int64_t)end);
		}
		inval_unlock(m);
		return err;
	}
	inval_lock_excl(m);
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	if (keep && end > size)
		end = size;
	if (off < end) {
		uint64_t bs = m->block_size;
		uint64_t astart = round_up(off, bs), aend = round_down(end, bs);
		if (astart < aend) {
			invalidate_range(m, astart, aend, INVAL_ZERO);
			err = backing_zero(m, astart, aend, mode);
			if (!err && off < astart)
				err = write_zeroes(m, off, astart - off);
			if (!err && aend < end)
				err = write_zeroes(m, aend, end - aend);
		} else {
			err = write_zeroes(m, off, end - off);
		}
	}
	if (!err && !keep)
		atomic_raise_i64(&m->i_size, (int64_t)(off + len));
	failing_clear(m); /* room may have been made, as at truncate */
	inval_unlock(m);
	return err;
}

void fadvise_dontneed(struct pc_mapping *m, uint64_t start, uint64_t end)
{
	/* Dirty folios: written back now, dropped when clean. */
	writeback_range(m, start, end, WB_ALL, NULL);
	uint64_t idx = start >> PC_PAGE_SHIFT;
	uint64_t end_idx = end >= UINT64_MAX - PC_PAGE_SIZE ? UINT64_MAX : end >> PC_PAGE_SHIFT;
	struct pc_folio *batch[32];
	unsigned n;
	while (idx < end_idx && (n = mapping_gather(m, &idx, end_idx, -1, batch, 32))) {
		for (unsigned i = 0; i < n; i++) {
			struct pc_folio *f = batch[i];
			bool inside = folio_pos(f) >= start && folio_pos(f) + folio_size(f) <= end;
			if (inside && folio_trylock(f)) {
				if (folio_test(f, PF_INDEXED))
					mapping_remove_if_unused(m, f, 2);
				folio_unlock(f);
			}
			reclaim_release_folio(m->c, f);
		}
	}
}
