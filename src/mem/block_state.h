/*
 * block_state.h - per-block uptodate and dirty state of a folio
 * (block_state.c: the iomap rules, and deferred partial writes).
 *
 * Callers hold the folio lock, except bs_redirty_blocks (a failed
 * device write's completion, which may not sleep for it); the state
 * spinlock (PF_STATELOCK) is taken inside.  The folio descriptor points at
 * struct pc_blockx (folio.h), which only this layer looks into.
 */
#ifndef PC_BLOCK_STATE_H
#define PC_BLOCK_STATE_H

#include "lib/util.h"

/* Bytes written into a block that is not uptodate (deferred read-modify-
 * write); end == 0: none. */
struct pc_valid {
	uint32_t start, end;
};

/*
 * Out-of-line block state: the bitmaps of folios with more than 64 blocks,
 * and the valid ranges of blocks holding deferred partial writes.  Folios
 * with up to 64 blocks keep their bitmaps inline (ubits/dbits) and need
 * none of this unless a partial write is deferred.
 */
struct pc_blockx {
	struct pc_valid *valid;  /* nblocks entries, or NULL */
	uint32_t nr_partial;     /* entries in use */
	uint32_t words;          /* bitmap words per map (0: inline) */
	uint64_t bits[];         /* uptodate words, then dirty words */
};

struct pc_mapping;
struct pc_folio;

/* Set up a new folio's block state (all blocks not uptodate, clean). */
HIDDEN int bs_init(struct pc_mapping *m, struct pc_folio *f);
/* Make room for deferred partial ranges (before bs_write_end). */
HIDDEN int bs_prepare_partial(struct pc_mapping *m, struct pc_folio *f);
HIDDEN void bs_free(struct pc_cache *c, struct pc_folio *f);
HIDDEN unsigned bs_nblocks(const struct pc_mapping *m, const struct pc_folio *f);
/* Are all blocks overlapping [off, off+len) (folio offsets) uptodate? */
HIDDEN bool bs_range_uptodate(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len);
HIDDEN bool bs_block_uptodate(struct pc_mapping *m, struct pc_folio *f, unsigned blk);
HIDDEN bool bs_block_dirty(struct pc_mapping *m, struct pc_folio *f, unsigned blk);
/* Mark blocks lying wholly inside [off, off+len) uptodate (reads, zeroing of
 * whole blocks).  Partly covered blocks are not marked. */
HIDDEN void bs_set_range_uptodate(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len);
/*
 * The end of a write of [off, off+len), in one state-lock round.  Blocks
 * wholly covered become uptodate and dirty.  A partly covered first/last
 * block becomes uptodate when `head_full`/`tail_full` says its uncovered
 * bytes are valid (read or zeroed at write begin) or when the write
 * completes its valid range; otherwise the written bytes are remembered as
 * its valid range (deferred read-modify-write).  Already-uptodate folios
 * skip the uptodate bookkeeping.  Returns the bytes newly dirty (block
 * granularity).  Requires bs_prepare_partial() first if a partial range may be kept.
 */
HIDDEN size_t bs_write_end(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len,
			   bool head_full, bool tail_full);
/* Clear dirty on [off, off+len): the first block rounded up, the last down,
 * so a partly cleared block stays dirty.  Returns bytes cleared. */
HIDDEN size_t bs_clear_range_dirty(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len);
/* Forget blocks wholly inside [off, off+len) (truncate, punch): not dirty,
 * their valid ranges dropped; `zeroed` marks them uptodate (their bytes were
 * zeroed and the device holds zeros), else not uptodate.  Returns dirty
 * bytes cleared. */
HIDDEN size_t bs_invalidate_blocks(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len,
				   bool zeroed);
/* Dirty runs for writeback: find the next run of dirty blocks at or after
 * block `from`; returns false when none.  Block units. */
HIDDEN bool bs_next_dirty_run(struct pc_mapping *m, struct pc_folio *f, unsigned from,
			      unsigned *first, unsigned *count);
/* Set the run's dirty bits back (a failed device write). */
HIDDEN void bs_redirty_blocks(struct pc_mapping *m, struct pc_folio *f, unsigned first, unsigned count);
/* Valid range of a partly written block, false if none. */
HIDDEN bool bs_block_valid(struct pc_mapping *m, struct pc_folio *f, unsigned blk,
			   uint32_t *start, uint32_t *end);
/* After merging device data around the valid range: uptodate, range gone. */
HIDDEN void bs_block_merged(struct pc_mapping *m, struct pc_folio *f, unsigned blk);
HIDDEN size_t bs_dirty_bytes(struct pc_mapping *m, struct pc_folio *f);
HIDDEN bool bs_has_partial(struct pc_folio *f);
/* Mark every block uptodate (whole folio read or zeroed). */
HIDDEN void bs_mark_all_uptodate(struct pc_mapping *m, struct pc_folio *f);

#endif
