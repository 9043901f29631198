/*
 * mapping.h - a file as the cache holds it (struct pc_mapping: shared by
 * every handle of the file, outliving them while it holds cached data) and
 * the calls of mapping.c: the file's folio index (find, create, remove
 * folios, tags), built on radix.h.
 *
 * Lock order (outer first; lib/check.h has the levels):
 *   mapping->inval_lock (rwlock; writers, readers creating folios and
 *                        direct I/O: shared; truncate, punch: exclusive)
 *   cache->throttle_lock (the dirty throttle's queue; it asks the file
 *                         table how much dirty data is failing)
 *   cache->files_lock (opens, closes, the file table: an open revalidates,
 *                      and may discard, a file's folios under it)
 *   mapping->size_lock (the backing file's size and reservations)
 *   folio lock (PF_LOCKED bit, sleeps on a futex)
 *   mapping->tree_lock (rwlock; index and tags, never held across I/O)
 *   folio block-state spinlock
 *   leaves: cache->lru_lock, arena_lock, edge_lock, pace_lock, domain->lock
 * Nothing waits for I/O, memory or the throttle while holding tree_lock or
 * any lock after it.  Completion callbacks only trylock folios.  Checking
 * builds check this order, per thread, on every lock taken (lib/check.h).
 */
#ifndef PC_MAPPING_H
#define PC_MAPPING_H

#include "lib/check.h"
#include "lib/counter.h"
#include "lib/errseq.h"
#include "lib/radix.h"
#include "lib/shlock.h"
#include "lib/util.h"
#include "lib/written.h"

struct pc_cache;
struct pc_domain;
struct pc_folio;

/* errseq: a counter of errors and the last errno (errseq.h has its calls;
 * the type is here because every mapping holds one). */

/* pc_mapping_proc.fd_mode */
enum { FD_AS_OPENED, FD_DIRECT_LATER, FD_DIRECT_SWITCHING, FD_DIRECT_REFUSED };

/*
 * What one process keeps of a file: its descriptors of the backing file
 * and what they are.  Descriptors mean something in one process only, so
 * they are not in the mapping (which a shared cache's processes share)
 * but in the process's part of the cache (struct pc_proc's file table),
 * at the file's slot (docs/shared.md, section 4): mproc(m).
 */
struct pc_mapping_proc {
	int fd;            /* backing descriptor, O_DIRECT unless !direct */
	int old_fd;        /* read-only descriptor replaced by a writable one */
	/* A file this cache created gets its descriptor without O_DIRECT,
	 * which it is given (F_SETFL) before the first I/O the cache issues
	 * on it (io_fd): a small file created, written and closed is
	 * then written whole through the kernel's page cache on that
	 * descriptor (backing_write_tail), with no second open.  FD_AS_OPENED:
	 * nothing pending (O_DIRECT, or a buffered backend). */
	_Atomic int fd_mode;
	bool writable;     /* fd is open for writing */
	bool wrlocked;     /* our OFD lock is a write lock (files_lock) */
	bool direct;       /* fd is O_DIRECT */
	bool noatime;      /* fd is O_NOATIME */
	/* The mapping this entry is for (its gen): an entry whose gen is not
	 * the mapping's is another file's that held the slot before, or
	 * none (0): mproc answers "no descriptor here" for it. */
	uint32_t gen;
	int nhandles;      /* this process's handles of the file (files_lock) */
};

/* The file table of a process: slots in chunks, made on first use and
 * never moved, so that lookups take no lock.  FILE_SLOTS files may be
 * held at once (cached, open or not); past that, opens fail with
 * ENFILE. */
#define FILE_CHUNK 1024u
#define FILE_SLOTS (1u << 20)
struct pc_file_procs {
	struct pc_mapping_proc *_Atomic chunk[FILE_SLOTS / FILE_CHUNK];
};

struct pc_mapping {
	struct pc_cache *c;
	/* The cache's locker, cache_lockcx(c) (api/cache.h): this process's
	 * slot, at one address in every process. */
	const struct pc_shlock_ctx *lockcx;
	struct pc_domain *dom;
	struct pc_mapping *hash_next;
	dev_t dev;
	ino_t ino;
	/* Its slot in the cache (file_slots.c) and the process's file table
	 * (in struct pc_proc: one address in every process, each process's
	 * own descriptors): mproc(m). */
	struct pc_file_procs *procs;
	uint32_t slot;
	/* Which mapping of the slot this is (never 0), so that a process's
	 * entry of an earlier file of the slot is not taken for this one's. */
	uint32_t gen;
	/* A shared cache: the processes (bits by process slot) that hold a
	 * descriptor of the file's one open file description, each with a
	 * reference to the mapping (file.c, "Shared caches").  0 in a
	 * private cache. */
	_Atomic uint64_t holders;
	/* A shared cache: the description's OFD lock is a write lock (a
	 * private cache keeps this in its entry, wrlocked); files_lock. */
	bool desc_wrlocked;
	_Atomic bool kernel_written; /* data went through the kernel's page cache */
	unsigned block_size, block_shift;
	unsigned min_order;    /* smallest folio: max(page, block) */
	unsigned mem_align;    /* direct-I/O memory alignment */
	/* A closed file's last partial block may go through the kernel's
	 * page cache (backing_write_tail): only when a block covers whole
	 * kernel pages and file-system blocks, so that no direct write of
	 * ours ever shares a kernel page (or a block the kernel reads and
	 * writes back whole) with that buffered write. */
	bool tail_via_kernel;
	int nhandles;          /* under cache->files_lock */
	/* After the last close (closed.c, under files_lock): closed_dirty while
	 * dirty data holds the descriptor and lock until written (on the
	 * cache's closed_dirty list); else on the closed list with the
	 * descriptor kept for a reopen, until too many are (fd then -1). */
	_Atomic bool closed_dirty;
	bool on_closed_list;
	struct pc_mapping *closed_prev, *closed_next;
	/* Written (or truncated) since the attributes were saved. */
	_Atomic bool changed;
	_Atomic int wb_inflight;    /* write-back requests being built or in flight */
	/* Write-back completions of this file running now (low 32 bits) and
	 * the times that count fell to 0 (high 32 bits): writeback.c. */
	_Atomic uint64_t wb_completing;
	_Atomic int refs;      /* handles + users (flusher, etc.) */
	_Atomic int64_t i_size;     /* logical size */
	_Atomic int64_t disk_size;  /* backing file size as last set/seen */
	/* Where data written to the device ends: past it the backing file holds
	 * only holes (we never wrote there), so nothing needs reading. */
	_Atomic int64_t data_end;
	/* Below data_end: which blocks past the size at open we wrote. */
	struct pc_written written;
	/* Allocated ahead of writeback (backing_extend) up to alloc_end, from
	 * alloc_base (the size at open); dirtied_total bytes justify it. */
	_Atomic int64_t alloc_end;
	uint64_t alloc_base;
	/* Space up to here is allocated or reserved (backing_reserve). */
	_Atomic int64_t reserve_end;
	_Atomic bool no_reserve;    /* the file system has no fallocate */
	/* A write ended here and wants the flusher to reserve ahead of it
	 * (0: nothing asked); the flusher's last attempt failed (ENOSPC:
	 * writers reserve inline, and report it, until one succeeds). */
	_Atomic int64_t reserve_want;
	_Atomic bool reserve_bg_failed;
	_Atomic uint64_t dirtied_total;
	int64_t max_bytes;          /* largest size the file system allows */
	struct pc_shmutex size_lock;  /* serialises backing size changes */
	struct pc_shrwlock inval_lock;
	struct pc_shrwlock tree_lock;
	struct rt_root tree;
	pc_errseq_t wb_err;
	/* Writeback of this file keeps failing (negative errno, 0: not):
	 * new writes fail up front until it succeeds again, or the caller
	 * truncates, punches or retries fsync (see failing_set). */
	_Atomic int wb_failing;
	/* on the writeback domain's list of dirty files (dirty.c), under
	 * dom->lock */
	struct pc_mapping *dirty_prev, *dirty_next;
	_Atomic bool on_dirty_list;
	_Atomic uint64_t dirtied_when_ms; /* oldest dirty data, 0: clean */
	_Atomic int64_t nr_dirty, nr_uncached, nr_edges;
	/* edges of this file completed, and now_ms of the latest (edges.c) */
	_Atomic uint64_t edges_completed, edge_completed_ms;
	_Atomic uint64_t last_error_ms; /* back off retries after errors */
	/* POSIX_FADV_NOREUSE range; len 0 with set: to EOF */
	struct pc_shmutex advice_lock;
	bool noreuse;
	int64_t noreuse_off, noreuse_len;
	/* counters (pc_stats subset) */
	_Atomic uint64_t st_read_ios, st_read_bytes, st_write_ios, st_write_bytes;
	_Atomic uint64_t st_miss, st_deferred, st_rmw_reads;
	_Atomic uint64_t st_ra_sync, st_ra_async, st_ra_bytes, st_ra_random; /* readahead.c */
	struct pc_counter hits; /* bytes read without waiting (count_hit_bytes) */
	_Atomic int64_t st_cached; /* bytes of folio memory */
	/* the backing file when it was last left alone (last close, or its
	 * write-back after it), to detect changes by others at reopen */
	off_t saved_size;
	struct timespec saved_mtime, saved_ctime;
	/* mode and owner at the last open(2) (a reopen without one checks
	 * them: a chmod or chown since then means open(2) again) */
	mode_t open_mode;
	uid_t open_uid;
	gid_t open_gid;
};

/* This process's descriptors of m: its entry at m's slot when the entry is
 * m's (its gen), else an entry with no descriptor (fd -1, gen 0: not m's
 * either), which nobody writes: a process of a shared cache may not hold
 * this file, or may not have made the chunk.  A private cache's entries
 * are always its mappings' (file_slot_get makes them).  mproc_is_mine
 * tells the two apart. */
static inline struct pc_mapping_proc *mproc(const struct pc_mapping *m)
{
	static struct pc_mapping_proc none = { .fd = -1, .old_fd = -1 };
	struct pc_mapping_proc *chunk =
		atomic_load_explicit(&m->procs->chunk[m->slot / FILE_CHUNK], memory_order_acquire);
	struct pc_mapping_proc *mp = chunk ? &chunk[m->slot % FILE_CHUNK] : &none;
	return mp->gen == m->gen ? mp : &none;
}

static inline bool mproc_is_mine(const struct pc_mapping *m, const struct pc_mapping_proc *mp)
{
	return mp->gen == m->gen;
}

/*
 * The file's two counted shared locks (lib/shlock.h), taken only through
 * these so that checking builds record them and check the order above
 * (lib/check.h).  inval_lock lets readers pass a waiting writer
 * (shrwlock_init_prefer_readers, as glibc's rwlock did): a write span
 * holds it for reading across its thread's other calls, which may read
 * or write the same file while a truncate waits for the span.  tree_lock
 * favours writers (a reader waits behind a waiting writer): it is never
 * held across a call or a wait, and no thread takes it twice (the
 * checking builds' record refuses that).  One unlock for both kinds: this thread
 * holds the lock for writing exactly when the writer word names its slot
 * and thread (shrwlock_wrheld).  A dead writer (-EOWNERDEAD) fails a
 * check until the recovery exists (shlock_owner_lives).
 */
static inline const struct pc_shlock_ctx *mapping_lockcx(const struct pc_mapping *m)
{
	return m->lockcx;
}
static inline void rw_lock_shared_at(struct pc_mapping *m, struct pc_shrwlock *rw, enum pc_lock_level level,
				     const char *file, int line)
{
	shlock_owner_lives(noted_shrwlock_rdlock_at(rw, mapping_lockcx(m), level, file, line));
}
static inline void rw_lock_excl_at(struct pc_mapping *m, struct pc_shrwlock *rw, enum pc_lock_level level,
				   const char *file, int line)
{
	shlock_owner_lives(noted_shrwlock_wrlock_at(rw, mapping_lockcx(m), level, file, line));
}
static inline void rw_unlock_at(struct pc_mapping *m, struct pc_shrwlock *rw, const char *file, int line)
{
	if (shrwlock_wrheld(rw, mapping_lockcx(m)))
		noted_shrwlock_wrunlock_at(rw, mapping_lockcx(m), file, line);
	else
		noted_shrwlock_rdunlock_at(rw, mapping_lockcx(m), file, line);
}
static inline void inval_lock_shared_at(struct pc_mapping *m, const char *file, int line)
{
	rw_lock_shared_at(m, &m->inval_lock, LOCK_INVAL, file, line);
}
static inline bool inval_trylock_shared_at(struct pc_mapping *m, const char *file, int line)
{
	return noted_shrwlock_tryrdlock_at(&m->inval_lock, mapping_lockcx(m), LOCK_INVAL, file, line) == 0;
}
static inline void inval_lock_excl_at(struct pc_mapping *m, const char *file, int line)
{
	rw_lock_excl_at(m, &m->inval_lock, LOCK_INVAL, file, line);
}
static inline void inval_unlock_at(struct pc_mapping *m, const char *file, int line)
{
	rw_unlock_at(m, &m->inval_lock, file, line);
}
static inline void tree_lock_shared_at(struct pc_mapping *m, const char *file, int line)
{
	rw_lock_shared_at(m, &m->tree_lock, LOCK_TREE, file, line);
}
static inline void tree_lock_excl_at(struct pc_mapping *m, const char *file, int line)
{
	rw_lock_excl_at(m, &m->tree_lock, LOCK_TREE, file, line);
}
static inline void tree_unlock_at(struct pc_mapping *m, const char *file, int line)
{
	rw_unlock_at(m, &m->tree_lock, file, line);
}
#define inval_lock_shared(m) inval_lock_shared_at((m), __FILE__, __LINE__)
#define inval_trylock_shared(m) inval_trylock_shared_at((m), __FILE__, __LINE__)
#define inval_lock_excl(m) inval_lock_excl_at((m), __FILE__, __LINE__)
#define inval_unlock(m) inval_unlock_at((m), __FILE__, __LINE__)
#define tree_lock_shared(m) tree_lock_shared_at((m), __FILE__, __LINE__)
#define tree_lock_excl(m) tree_lock_excl_at((m), __FILE__, __LINE__)
#define tree_unlock(m) tree_unlock_at((m), __FILE__, __LINE__)
#define assert_inval_locked(m) PC_ASSERT_HELD(&(m)->inval_lock)
#define assert_inval_locked_excl(m) PC_ASSERT_HELD_EXCL(&(m)->inval_lock)
#define assert_tree_locked(m) PC_ASSERT_HELD(&(m)->tree_lock)
#define assert_tree_locked_excl(m) PC_ASSERT_HELD_EXCL(&(m)->tree_lock)

/* Find the folio holding byte `pos`, with a reference, or NULL. */
HIDDEN struct pc_folio *mapping_lookup(struct pc_mapping *m, uint64_t pos);
/* Up to `max` folios at or after page `index` (tag: RT_TAG_* or -1), with
 * references, in index order.  Returns the count and the next index. */
HIDDEN unsigned mapping_gather(struct pc_mapping *m, uint64_t *index, uint64_t end_index, int tag,
			       struct pc_folio **out, unsigned max);
/* Get-folio flags, as the kernel's FGP_*. */
enum {
	GF_CREATE = 1 << 0,   /* create when missing */
	GF_LOCK = 1 << 1,     /* return it locked */
	GF_NOWAIT = 1 << 2,   /* -EAGAIN rather than sleep */
	GF_STABLE = 1 << 3,   /* wait until not under writeback */
	GF_NEW_LOCKED = 1 << 4, /* only lock it if this call created it */
};
/*
 * Find or create the folio holding byte `pos`.  A created folio gets the
 * largest order up to `order` that is naturally aligned at its page and
 * does not overlap cached folios, falling back to smaller orders when
 * memory is fragmented.  *created tells which.  Returns a referenced folio
 * or an ERR (use IS_ERR_FOLIO).
 */
HIDDEN struct pc_folio *mapping_get_folio(struct pc_mapping *m, uint64_t pos, unsigned order,
					  unsigned gf, bool *created);
/* Tests only (test_mt_release.c): called with a folio just allocated for
 * the index, before it is inserted (a lookup that walked a stale tree may
 * take a reference on it then). */
HIDDEN extern void (*mapping_test_after_alloc)(struct pc_folio *f);
#define ERR_FOLIO(e) ((struct pc_folio *)(intptr_t)(e))
#define IS_ERR_FOLIO(p) ((uintptr_t)(p) >= (uintptr_t)-4095)
#define FOLIO_ERR(p) ((int)(intptr_t)(p))
/* Remove a locked folio from the index (truncate, drop-behind, eviction);
 * the index's reference is dropped.  Accounting of dirty data is the
 * caller's. */
HIDDEN void mapping_remove_folio(struct pc_mapping *m, struct pc_folio *f);
/* Drop a reference to m (a handle's, a list's, a user's, an I/O's); the
 * last one discards its folios and frees it, a write error no handle
 * reported going to the cache for pc_cache_destroy to report (the file
 * layer's part, through the process's mapping_teardown). */
HIDDEN void mapping_put(struct pc_mapping *m);
/* Remove f only if it is clean, not under writeback and holds exactly
 * `refs` references (the index's included); the caller holds one of them
 * and, usually, the folio lock.  Never sleeps. */
HIDDEN bool mapping_remove_if_unused(struct pc_mapping *m, struct pc_folio *f, int refs);
/* Choose the folio order for `len` bytes at `pos`. */
HIDDEN unsigned mapping_order_for(struct pc_mapping *m, uint64_t pos, uint64_t len);
HIDDEN void mapping_tag_dirty(struct pc_mapping *m, struct pc_folio *f);
HIDDEN void mapping_untag_dirty(struct pc_mapping *m, struct pc_folio *f);
HIDDEN void mapping_set_edge(struct pc_mapping *m, struct pc_folio *f);
HIDDEN void mapping_clear_edge(struct pc_mapping *m, struct pc_folio *f);
/* Data is about to be sent to [start, end) of the backing file: recorded
 * in m->written (lib/written.h), its array from the cache's heap. */
HIDDEN void mapping_written_add(struct pc_mapping *m, uint64_t start, uint64_t end);

#endif
