/*
 * folio.h - the folio descriptor (struct pc_folio), its flags, and the
 * calls of folio.c: the folio lock, waiting on flags, references.
 *
 * Everything else about a folio is another layer's: its blocks'
 * uptodate/dirty state (block_state.h), its place in the arena
 * (arena.h: arena_pfn, arena_data), in a file's index (mapping.h) and on
 * the reclaim queues (reclaim.h).
 */
#ifndef PC_FOLIO_H
#define PC_FOLIO_H

#include "lib/check.h"
#include "lib/util.h"

#define PC_MAX_ORDER 9 /* 2 MiB folios */
/* No page number: ends the LRU and buddy lists threaded through the
 * descriptors (lru_prev, lru_next, cache->free_head). */
#define PC_NONE UINT32_MAX

/* Folio flags (folio->flags, atomic). */
enum {
	PF_LOCKED = 1u << 0,     /* folio lock held */
	PF_WAITERS = 1u << 1,    /* someone sleeps on this flags word */
	PF_UPTODATE = 1u << 2,   /* every block uptodate */
	PF_DIRTY = 1u << 3,      /* some block dirty */
	PF_WRITEBACK = 1u << 4,  /* some block under device write */
	PF_DROPBEHIND = 1u << 5, /* drop once clean and unused (uncached I/O) */
	PF_REFERENCED = 1u << 6, /* accessed since it was last scanned */
	PF_EDGE = 1u << 7,       /* kept for a neighbouring uncached write */
	PF_INDEXED = 1u << 8,    /* in its mapping's index */
	PF_LRU = 1u << 9,        /* on an LRU queue */
	PF_MAINQ = 1u << 10,     /* on the main queue (else the small one) */
	PF_BUDDY = 1u << 11,     /* free block in the arena's buddy lists */
	PF_READ_ERROR = 1u << 12, /* last device read of it failed */
	PF_STATELOCK = 1u << 13,  /* block-state spinlock */
	PF_DROP_PENDING = 1u << 14, /* written back while drop-behind, but busy */
	PF_READAHEAD = 1u << 15, /* reaching it continues a read-ahead stream */
	PF_TOUCHED = 1u << 16    /* accessed once since it entered the cache */
};
/* Any cached access since the folio entered the cache (lru_mark_accessed):
 * one that keeps an uncached call's folio cached. */
#define PF_USED (PF_TOUCHED | PF_REFERENCED)

/* The flags word's bits from PF_GEN_SHIFT up count the times the folio was
 * freed, so that a lockless reader can tell that the memory it copied from
 * was not freed (and perhaps reused) meanwhile (read_hit.h; 15 bits, so
 * the reader also checks the cache's count of frees, cache->folio_frees,
 * for a wrap).  A reset of the flags (folio_reset_flags) keeps it. */
#define PF_GEN_SHIFT 17
#define PF_GEN_ONE (1u << PF_GEN_SHIFT)
#define PF_GEN_MASK (~0u << PF_GEN_SHIFT)

struct pc_mapping;
struct pc_cache;
struct pc_blockx;

/*
 * A folio: a naturally aligned run of 2^order pages of one file.  The
 * descriptor lives in cache->folios[], indexed by the page number of its
 * memory in the arena, so it is never freed: a stale pointer can be
 * detected by its flags, never crash.  64 bytes per folio plus about 8.5
 * per page in the index keeps the metadata of a 4 KiB folio at 1.8 % of its
 * size, with per-block state for up to 64 blocks inline.
 */
struct pc_folio {
	struct pc_mapping *mapping; /* NULL when free */
	uint64_t index;             /* first page of the file it holds */
	_Atomic uint32_t flags;
	_Atomic int32_t refcount;   /* the index holds one */
	uint8_t order;
	/* Two fields in one byte (see folio_ra_order, lru_mark_accessed):
	 * bits 0-4, with PF_READAHEAD: log2 of the pages of the read-ahead
	 * window that the mark belongs to (readahead.c doubles it for the next
	 * one); bits 5-7, with PF_TOUCHED: the eighth of the folio where the
	 * furthest access so far ended (reclaim's "first use" cursor). */
	_Atomic uint8_t ra_order;
	_Atomic uint16_t wb_pending; /* device writes in flight */
	_Atomic uint32_t stamp;     /* ms clock: became dirty, an edge, or got a
				     * partial block: since when it waits */
	uint32_t lru_prev, lru_next; /* arena page numbers, PC_NONE ends */
	struct pc_blockx *bx;       /* see struct pc_blockx, usually NULL */
	uint64_t ubits, dbits;      /* uptodate / dirty blocks, <= 64 blocks */
};

static inline size_t folio_size(const struct pc_folio *f)
{
	return (size_t)PC_PAGE_SIZE << f->order;
}
static inline uint64_t folio_pos(const struct pc_folio *f)
{
	return f->index << PC_PAGE_SHIFT;
}

/* Set the flags of a folio nobody else changes (free, or not yet indexed)
 * to `flags`, keeping the generation. */
static inline void folio_reset_flags(struct pc_folio *f, uint32_t flags)
{
	uint32_t gen = atomic_load_explicit(&f->flags, memory_order_relaxed) & PF_GEN_MASK;
	atomic_store_explicit(&f->flags, gen | flags, memory_order_release);
}
/* A reference to a folio found without the index lock, unless it was being
 * freed (refcount 0); the caller then checks that it is still the folio it
 * looked for. */
static inline bool folio_try_get(struct pc_folio *f)
{
	int32_t r = atomic_load_explicit(&f->refcount, memory_order_relaxed);
	do {
		if (r <= 0)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&f->refcount, &r, r + 1, memory_order_acquire,
							 memory_order_relaxed));
	return true;
}
static inline bool folio_test(const struct pc_folio *f, uint32_t flag)
{
	return atomic_load_explicit(&((struct pc_folio *)f)->flags, memory_order_acquire) & flag;
}
static inline void folio_set(struct pc_folio *f, uint32_t flag)
{
	atomic_fetch_or_explicit(&f->flags, flag, memory_order_acq_rel);
}
static inline void folio_clear(struct pc_folio *f, uint32_t flag)
{
	atomic_fetch_and_explicit(&f->flags, ~flag, memory_order_acq_rel);
}
HIDDEN void folio_lock(struct pc_folio *f);
HIDDEN bool folio_trylock(struct pc_folio *f);
HIDDEN void folio_unlock(struct pc_folio *f);
/* A "locked folio" rule: the lock bit, whoever took it (I/O completions
 * unlock folios their submitter locked, so no owner is kept). */
#define assert_folio_locked(f) PC_ASSERT(folio_test((f), PF_LOCKED))
/* Clear `flag` and wake everyone sleeping on the flags word. */
HIDDEN void folio_clear_and_wake(struct pc_folio *f, uint32_t flag);
/* Sleep until `flag` is clear. */
HIDDEN void folio_wait_clear(struct pc_folio *f, uint32_t flag);
static inline void folio_get(struct pc_folio *f)
{
	atomic_fetch_add_explicit(&f->refcount, 1, memory_order_relaxed);
}
/* Drop a reference; the last one returns the memory to the arena.  Nothing
 * else: the paths that use folios let go through reclaim_release_folio (reclaim.h),
 * which drops a drop-behind folio its last user leaves behind. */
HIDDEN void folio_put(struct pc_cache *c, struct pc_folio *f);
/* The read-ahead window order kept with a mark (struct pc_folio). */
#define RA_ORDER_MASK 0x1fu
#define RA_CURSOR_SHIFT 5
static inline unsigned folio_ra_order(struct pc_folio *f)
{
	return atomic_load_explicit(&f->ra_order, memory_order_relaxed) & RA_ORDER_MASK;
}

/* Replace the bits of ra_order under mask with val, keeping the others. */
static inline void folio_ra_byte_set(struct pc_folio *f, unsigned mask, unsigned val)
{
	uint8_t old = atomic_load_explicit(&f->ra_order, memory_order_relaxed), nw;
	do
		nw = (uint8_t)((old & ~mask) | (val & mask));
	while (!atomic_compare_exchange_weak_explicit(&f->ra_order, &old, nw, memory_order_release,
						      memory_order_relaxed));
}

/* The cache's own millisecond clock (since pc_cache_new), for folio stamps:
 * 32 bits, so that a stamp fits the 64-byte folio descriptor (ages are
 * taken modulo 2^32, see folio_age_ms). */
HIDDEN uint32_t folio_clock_ms(const struct pc_cache *c);
/* How long ago the folio's stamp was set (0 if it looks newer than now). */
HIDDEN uint64_t folio_age_ms(const struct pc_cache *c, const struct pc_folio *f);

#endif
