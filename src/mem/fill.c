/*
 * fill.c - bring blocks of a locked folio uptodate synchronously: read the
 * blocks that have no valid data (contiguous ones with one device read), and
 * merge device data around the valid range of a block that a deferred
 * partial write left (read-modify-write at last).
 *
 * It sits below both the read path (a reader of a block that is not
 * uptodate) and writeback (which must merge a partial block before writing
 * it), so neither calls into the other.
 */
#include "mem/fill.h"

#include "mem/arena.h"
#include "io/backend.h"
#include "mem/block_state.h"
#include "mem/folio.h"
#include "io/io_fd.h"
#include "mem/mapping.h"
#include "lib/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int fill_read_blocks(struct pc_mapping *m, uint8_t *buf, uint64_t off, size_t len)
{
	uint64_t disk_end = round_up((uint64_t)atomic_load(&m->data_end), m->block_size);
	size_t want = off >= disk_end ? 0 : (size_t)u64_min(len, disk_end - off);
	ssize_t got = 0;
	if (want) {
		struct iovec v = { buf, want };
		atomic_fetch_add_explicit(&m->st_read_ios, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&m->st_read_bytes, want, memory_order_relaxed);
		got = sync_io_preadv(m->c, io_fd(m), &v, 1, (off_t)off);
		if (got < 0)
			return (int)got;
	}
	if ((size_t)got < len)
		memset(buf + got, 0, len - (size_t)got);
	return 0;
}

/* Merge device data around the valid range of block blk (folio locked). */
static int merge_partial_block(struct pc_mapping *m, struct pc_folio *f, unsigned blk, uint32_t vs,
			       uint32_t ve)
{
	size_t bs = m->block_size;
	uint8_t *tmp = aligned_alloc(m->mem_align > 512 ? m->mem_align : 512, bs);
	if (!tmp)
		return -ENOMEM;
	uint8_t *dst = arena_data(m->c, f) + (size_t)blk * bs;
	int err = fill_read_blocks(m, tmp, folio_pos(f) + (uint64_t)blk * bs, bs);
	if (!err) {
		memcpy(dst, tmp, vs);
		memcpy(dst + ve, tmp + ve, bs - ve);
		bs_block_merged(m, f, blk);
		atomic_fetch_add_explicit(&m->st_rmw_reads, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&m->c->st_rmw_reads, 1, memory_order_relaxed);
	}
	free(tmp);
	return err;
}

/* Fill blocks [first, first+count) of a locked folio: each not-uptodate
 * block is read (contiguous ones with one I/O) or merged. */
static int fill_blocks(struct pc_mapping *m, struct pc_folio *f, unsigned first, unsigned count, bool only_partial)
{
	size_t bs = m->block_size;
	unsigned b = first, end = first + count;
	while (b < end) {
		uint32_t vs, ve;
		if (bs_block_uptodate(m, f, b)) {
			b++;
			continue;
		}
		if (bs_block_valid(m, f, b, &vs, &ve)) {
			int err = merge_partial_block(m, f, b, vs, ve);
			if (err)
				return err;
			b++;
			continue;
		}
		if (only_partial) {
			b++;
			continue;
		}
		unsigned e = b + 1;
		while (e < end && !bs_block_uptodate(m, f, e) && !bs_block_valid(m, f, e, &vs, &ve))
			e++;
		size_t off = (size_t)b * bs, len = (size_t)(e - b) * bs;
		int err = fill_read_blocks(m, arena_data(m->c, f) + off, folio_pos(f) + off, len);
		if (err)
			return err;
		bs_set_range_uptodate(m, f, off, len);
		b = e;
	}
	return 0;
}

int fill_range(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len)
{
	assert_folio_locked(f);
	if (folio_test(f, PF_UPTODATE) || !len)
		return 0;
	unsigned first = (unsigned)(off >> m->block_shift);
	unsigned last = (unsigned)((off + len - 1) >> m->block_shift);
	int err = fill_blocks(m, f, first, last - first + 1, false);
	if (!err)
		folio_clear(f, PF_READ_ERROR);
	return err;
}

int fill_merge_partials(struct pc_mapping *m, struct pc_folio *f)
{
	assert_folio_locked(f);
	return fill_blocks(m, f, 0, bs_nblocks(m, f), true);
}
