/*
 * block_state.c - per-block uptodate and dirty state of a folio.
 *
 * When a folio holds more than one file system block, each block has an
 * uptodate bit and a dirty bit (the kernel's iomap_folio_state).  The rules,
 * each of which guards against a known bug:
 *   - clearing dirty on a byte range rounds the first block up and the last
 *     block down: a block only partly cleared still holds dirty bytes;
 *   - truncate and punch clear the dirty bits of the blocks they remove, so
 *     writeback never writes blocks that are no longer part of the file;
 *   - a block becomes uptodate only when all its bytes are valid: the write
 *     path zeroes the uncovered part of a new block at write begin but marks
 *     it uptodate only at write end, after the copy, so a concurrent reader
 *     never sees bytes that were not written;
 *   - the end of a write sets uptodate and dirty in one lock round, and does
 *     no uptodate bookkeeping at all when the folio is already uptodate.
 * Beyond the kernel, a block written only partly without reading the rest
 * (deferred read-modify-write) remembers its written byte range; it is dirty
 * but not uptodate until a reader or the flusher merges device data around
 * that range, or neighbouring writes complete it.
 *
 * The bitmaps of folios with up to 64 blocks live inline in the folio;
 * larger folios and partial ranges use struct pc_blockx.  All changes are
 * made under the folio's state spinlock (PF_STATELOCK) with the folio lock
 * held, except redirtying after a failed write, which only needs the spin.
 */
#include "mem/block_state.h"
#include "mem/cache_mem.h"

#include "mem/folio.h"
#include "mem/mapping.h"
#include "lib/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void state_lock(struct pc_folio *f)
{
	lock_note_take(&f->flags, LOCK_STATE, TAKE_WAITS | TAKE_EXCL);
	while (atomic_fetch_or_explicit(&f->flags, PF_STATELOCK, memory_order_acquire) & PF_STATELOCK)
		__builtin_ia32_pause();
}

static void state_unlock(struct pc_folio *f)
{
	lock_note_give(&f->flags);
	atomic_fetch_and_explicit(&f->flags, ~PF_STATELOCK, memory_order_release);
}

unsigned bs_nblocks(const struct pc_mapping *m, const struct pc_folio *f)
{
	return (unsigned)(folio_size(f) >> m->block_shift);
}

static uint64_t *ubits(struct pc_folio *f)
{
	return f->bx && f->bx->words ? f->bx->bits : &f->ubits;
}

static uint64_t *dbits(struct pc_folio *f)
{
	return f->bx && f->bx->words ? f->bx->bits + f->bx->words : &f->dbits;
}

static bool bit_test(const uint64_t *w, unsigned b)
{
	return w[b >> 6] >> (b & 63) & 1;
}

/* Set or clear bits [first, first+n); returns how many changed. */
static unsigned bits_assign(uint64_t *w, unsigned first, unsigned n, bool set)
{
	unsigned changed = 0;
	for (unsigned b = first; b < first + n;) {
		unsigned bit = b & 63, k = 64 - bit;
		if (k > first + n - b)
			k = first + n - b;
		uint64_t mask = (k == 64 ? ~0ull : ((1ull << k) - 1)) << bit;
		uint64_t old = w[b >> 6];
		uint64_t nw = set ? old | mask : old & ~mask;
		changed += (unsigned)__builtin_popcountll(old ^ nw);
		w[b >> 6] = nw;
		b += k;
	}
	return changed;
}

static bool bits_all(const uint64_t *w, unsigned first, unsigned n)
{
	for (unsigned b = first; b < first + n; b++)
		if (!bit_test(w, b))
			return false;
	return true;
}

static bool bits_any(const uint64_t *w, unsigned nblocks)
{
	for (unsigned i = 0; i < (nblocks + 63) / 64; i++)
		if (w[i])
			return true;
	return false;
}

/* Bring the folio flags in line with the bitmaps (state lock held). */
static void sync_folio_flags(struct pc_mapping *m, struct pc_folio *f)
{
	PC_ASSERT_HELD(&f->flags); /* the state lock */
	unsigned n = bs_nblocks(m, f);
	if (bits_all(ubits(f), 0, n))
		folio_set(f, PF_UPTODATE);
	else
		folio_clear(f, PF_UPTODATE);
	if (bits_any(dbits(f), n))
		folio_set(f, PF_DIRTY);
	else
		folio_clear(f, PF_DIRTY);
}

int bs_init(struct pc_mapping *m, struct pc_folio *f)
{
	unsigned n = bs_nblocks(m, f);
	f->ubits = f->dbits = 0;
	f->bx = NULL;
	if (n <= 64)
		return 0;
	unsigned words = (n + 63) / 64;
	struct pc_blockx *x = cache_zalloc(m->c, sizeof(*x) + 2 * words * sizeof(uint64_t));
	if (!x)
		return -ENOMEM;
	x->words = words;
	f->bx = x;
	return 0;
}

int bs_prepare_partial(struct pc_mapping *m, struct pc_folio *f)
{
	assert_folio_locked(f);
	if (f->bx && f->bx->valid)
		return 0;
	struct pc_valid *v = cache_zalloc(m->c, bs_nblocks(m, f) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	struct pc_blockx *x = f->bx ? NULL : cache_zalloc(m->c, sizeof(*f->bx));
	if (!f->bx && !x) {
		cache_free(m->c, v);
		return -ENOMEM;
	}
	/* Published under the state lock: lock-free readers (ubits) look. */
	state_lock(f);
	if (x)
		f->bx = x;
	f->bx->valid = v;
	state_unlock(f);
	return 0;
}

void bs_free(struct pc_cache *c, struct pc_folio *f)
{
	if (f->bx) {
		cache_free(c, f->bx->valid);
		cache_free(c, f->bx);
		f->bx = NULL;
	}
}

bool bs_block_uptodate(struct pc_mapping *m, struct pc_folio *f, unsigned blk)
{
	(void)m;
	if (folio_test(f, PF_UPTODATE))
		return true;
	state_lock(f);
	bool r = bit_test(ubits(f), blk);
	state_unlock(f);
	return r;
}

bool bs_block_dirty(struct pc_mapping *m, struct pc_folio *f, unsigned blk)
{
	(void)m;
	state_lock(f);
	bool r = bit_test(dbits(f), blk);
	state_unlock(f);
	return r;
}

bool bs_range_uptodate(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len)
{
	if (folio_test(f, PF_UPTODATE))
		return true;
	if (!len)
		return true;
	unsigned first = (unsigned)(off >> m->block_shift);
	unsigned last = (unsigned)((off + len - 1) >> m->block_shift);
	state_lock(f);
	bool r = bits_all(ubits(f), first, last - first + 1);
	state_unlock(f);
	return r;
}

/* Blocks lying wholly inside [off, off+len): the first rounded up, the end
 * rounded down.  False if there are none. */
static bool whole_blocks(const struct pc_mapping *m, size_t off, size_t len, unsigned *first, unsigned *end)
{
	size_t bs = m->block_size;
	*first = (unsigned)(round_up(off, bs) >> m->block_shift);
	*end = (unsigned)(round_down(off + len, bs) >> m->block_shift);
	return *end > *first;
}

void bs_set_range_uptodate(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len)
{
	unsigned first, end;

	assert_folio_locked(f);
	if (!whole_blocks(m, off, len, &first, &end))
		return;
	state_lock(f);
	bits_assign(ubits(f), first, end - first, true);
	sync_folio_flags(m, f);
	state_unlock(f);
}

void bs_mark_all_uptodate(struct pc_mapping *m, struct pc_folio *f)
{
	assert_folio_locked(f);
	bs_set_range_uptodate(m, f, 0, folio_size(f));
}

/* Drop block blk's valid range (state lock held). */
static void valid_forget(struct pc_folio *f, unsigned blk)
{
	PC_ASSERT_HELD(&f->flags); /* the state lock */
	if (f->bx && f->bx->valid && f->bx->valid[blk].end) {
		f->bx->valid[blk].start = f->bx->valid[blk].end = 0;
		f->bx->nr_partial--;
	}
}

/*
 * A partial write of [s, e) into block blk that is not uptodate: extend its
 * valid range.  Returns true when the block is now wholly valid.  The write
 * path never lets two disjoint ranges meet here: it merges device data
 * first (see write.c), so the union is always one range.
 */
static bool valid_add(struct pc_mapping *m, struct pc_folio *f, unsigned blk, uint32_t s, uint32_t e)
{
	struct pc_valid *v = &f->bx->valid[blk];
	if (v->end) {
		if (v->start < s)
			s = v->start;
		if (v->end > e)
			e = v->end;
	} else {
		f->bx->nr_partial++;
	}
	v->start = s;
	v->end = e;
	if (s == 0 && e == m->block_size) {
		valid_forget(f, blk);
		return true;
	}
	return false;
}

size_t bs_write_end(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len, bool head_full,
		    bool tail_full)
{
	size_t bs = m->block_size;
	unsigned first = (unsigned)(off >> m->block_shift);
	unsigned last = (unsigned)((off + len - 1) >> m->block_shift);
	size_t end = off + len;

	assert_folio_locked(f);
	state_lock(f);
	if (folio_test(f, PF_UPTODATE)) {
		/* Fully uptodate already: only the dirty bits change. */
		unsigned newly = bits_assign(dbits(f), first, last - first + 1, true);
		folio_set(f, PF_DIRTY);
		state_unlock(f);
		return (size_t)newly << m->block_shift;
	}
	{
		uint64_t *u = ubits(f);
		for (unsigned b = first; b <= last; b++) {
			size_t bstart = (size_t)b * bs, bend = bstart + bs;
			bool head_gap = b == first && off > bstart;
			bool tail_gap = b == last && end < bend;
			if (bit_test(u, b))
				continue;
			if ((!head_gap || head_full) && (!tail_gap || tail_full)) {
				valid_forget(f, b);
				bits_assign(u, b, 1, true);
				continue;
			}
			uint32_t s = (uint32_t)(u64_max(off, bstart) - bstart);
			uint32_t e = (uint32_t)(u64_min(end, bend) - bstart);
			if (valid_add(m, f, b, s, e))
				bits_assign(u, b, 1, true);
		}
	}
	unsigned newly = bits_assign(dbits(f), first, last - first + 1, true);
	sync_folio_flags(m, f);
	state_unlock(f);
	return (size_t)newly << m->block_shift;
}

size_t bs_clear_range_dirty(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len)
{
	unsigned first, end;

	assert_folio_locked(f);
	if (!whole_blocks(m, off, len, &first, &end))
		return 0;
	state_lock(f);
	unsigned n = bits_assign(dbits(f), first, end - first, false);
	sync_folio_flags(m, f);
	state_unlock(f);
	return (size_t)n << m->block_shift;
}

size_t bs_invalidate_blocks(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len, bool zeroed)
{
	unsigned first, end;

	assert_folio_locked(f);
	if (!whole_blocks(m, off, len, &first, &end))
		return 0;
	state_lock(f);
	unsigned n = bits_assign(dbits(f), first, end - first, false);
	bits_assign(ubits(f), first, end - first, zeroed);
	for (unsigned b = first; b < end; b++)
		valid_forget(f, b);
	sync_folio_flags(m, f);
	state_unlock(f);
	return (size_t)n << m->block_shift;
}

bool bs_next_dirty_run(struct pc_mapping *m, struct pc_folio *f, unsigned from, unsigned *first,
		       unsigned *count)
{
	unsigned n = bs_nblocks(m, f);
	state_lock(f);
	const uint64_t *d = dbits(f);
	unsigned b = from;
	while (b < n && !bit_test(d, b))
		b++;
	unsigned e = b;
	while (e < n && bit_test(d, e))
		e++;
	state_unlock(f);
	*first = b;
	*count = e - b;
	return e > b;
}

void bs_redirty_blocks(struct pc_mapping *m, struct pc_folio *f, unsigned first, unsigned count)
{
	state_lock(f);
	bits_assign(dbits(f), first, count, true);
	sync_folio_flags(m, f);
	state_unlock(f);
}

bool bs_block_valid(struct pc_mapping *m, struct pc_folio *f, unsigned blk, uint32_t *start,
		    uint32_t *end)
{
	(void)m;
	bool r = false;
	state_lock(f);
	if (f->bx && f->bx->valid && f->bx->valid[blk].end) {
		*start = f->bx->valid[blk].start;
		*end = f->bx->valid[blk].end;
		r = true;
	}
	state_unlock(f);
	return r;
}

void bs_block_merged(struct pc_mapping *m, struct pc_folio *f, unsigned blk)
{
	assert_folio_locked(f);
	state_lock(f);
	valid_forget(f, blk);
	bits_assign(ubits(f), blk, 1, true);
	sync_folio_flags(m, f);
	state_unlock(f);
}

size_t bs_dirty_bytes(struct pc_mapping *m, struct pc_folio *f)
{
	unsigned n = bs_nblocks(m, f), count = 0;
	state_lock(f);
	const uint64_t *d = dbits(f);
	for (unsigned i = 0; i < (n + 63) / 64; i++)
		count += (unsigned)__builtin_popcountll(d[i]);
	state_unlock(f);
	return (size_t)count << m->block_shift;
}

bool bs_has_partial(struct pc_folio *f)
{
	state_lock(f);
	bool r = f->bx && f->bx->nr_partial;
	state_unlock(f);
	return r;
}
