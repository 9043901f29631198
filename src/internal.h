/*
 * internal.h - structures and internal calls shared by the layers of
 * pagecache.  Internal calls return 0 or a negative errno; only api.c turns
 * that into -1/errno.
 *
 * Layering (data flows downward; docs/design.md has the map):
 *   api.c -> read_hit.h -> read.c / write.c / span.c / direct.c / truncate.c
 *         -> fill.c (blocks of a folio read or merged)
 *         -> writeback.c (device writes) / flusher.c / throttle.c
 *         -> dirty.c (accounting) / errseq.c (errors) / reclaim.c
 *         -> mapping.c (index) -> radix.c / folio.c / block_state.c
 *         -> arena.c / backend.c / counter.c / progress.c
 *
 * Lock order (outer first):
 *   mapping->inval_lock (rwlock; writers, readers creating folios: shared;
 *                        truncate/punch/direct invalidation: exclusive)
 *   folio lock (PF_LOCKED bit, sleeps on a futex)
 *   mapping->tree_lock (rwlock; index and tags, never held across I/O)
 *   folio block-state spinlock
 *   cache->lru_lock, cache->arena_lock, domain->lock, cache->files_lock
 * Nothing waits for I/O, memory or the throttle while holding tree_lock or
 * any lock after it.  Completion callbacks only trylock folios.
 */
#ifndef PC_INTERNAL_H
#define PC_INTERNAL_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "pagecache.h"

#define PC_PAGE_SHIFT 12
#define PC_PAGE_SIZE (1u << PC_PAGE_SHIFT)
#define PC_MAX_ORDER 9 /* 2 MiB folios */
#define PC_NONE UINT32_MAX

#define HIDDEN __attribute__((visibility("hidden")))

/* PC_TSAN: 1 when built with ThreadSanitizer (some lockless code has a
 * variant it can follow, see read_hit.h). */
#if defined(__SANITIZE_THREAD__)
#define PC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PC_TSAN 1
#endif
#endif
#ifndef PC_TSAN
#define PC_TSAN 0
#endif

static inline uint64_t pc_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t pc_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline int64_t pc_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline uint64_t pc_round_down(uint64_t x, uint64_t a) { return x & ~(a - 1); }
static inline uint64_t pc_round_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }
/* The smallest power of two >= x (1 for 0). */
static inline uint64_t pc_roundup_pow2(uint64_t x) { return x <= 1 ? 1 : (uint64_t)1 << (64 - __builtin_clzll(x - 1)); }
/* *v = max(*v, x), atomically. */
static inline void atomic_raise_i64(_Atomic int64_t *v, int64_t x)
{
	int64_t cur = atomic_load(v);
	while (x > cur && !atomic_compare_exchange_weak(v, &cur, x))
		;
}

/* ---------------------------------------------------------------- counters */

/*
 * A statistics counter that threads add to without sharing a cache line
 * (counter.c): each of the first PC_COUNTER_SLOTS threads that count gets
 * a slot of its own, which only it writes (plain loads and stores, no
 * locked instruction); further threads add to `shared` atomically.  The
 * value is the sum.  Slots are 64 bytes apart (and the block padded at
 * both ends), so no two slots, and no slot and a neighbouring field, share
 * a cache line whatever the block's alignment.
 */
#define PC_COUNTER_SLOTS 8
struct pc_counter {
	char pad_before[56];
	struct {
		_Atomic uint64_t v;
		char pad[56];
	} slot[PC_COUNTER_SLOTS];
	_Atomic uint64_t shared;
	char pad_after[56];
};
/* This thread's slot (0..PC_COUNTER_SLOTS-1), or -1 when all are taken. */
HIDDEN int counter_thread_slot(void);
HIDDEN uint64_t counter_sum(struct pc_counter *c);
/* fork() child: the slot table as this (only) thread has it. */
HIDDEN void counter_fork_child(void);
/* Once per process, before any fork (pc_cache_new): the thread-exit key. */
HIDDEN void counter_init(void);
HIDDEN extern __thread int pc_counter_slot_plus1; /* 0: not assigned yet, -1: none */
static inline void counter_add(struct pc_counter *c, uint64_t n)
{
	int s = pc_counter_slot_plus1 - 1;
	if (__builtin_expect(s == -1, 0))
		s = counter_thread_slot();
	if (s >= 0) {
		_Atomic uint64_t *v = &c->slot[s].v;
		atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&c->shared, n, memory_order_relaxed);
	}
}

/* ---------------------------------------------------------------- progress */

/* A count of events (writeback completed, memory freed) that threads wait
 * for without the code that signals knowing them (progress.c). */
struct pc_progress {
	_Atomic uint64_t count;
	_Atomic int waiters;
	pthread_mutex_t lock;
	pthread_cond_t cv;
};
HIDDEN void progress_init(struct pc_progress *p);
HIDDEN void progress_destroy(struct pc_progress *p);
/* After the state changed: wake whoever waits for a change. */
HIDDEN void progress_signal(struct pc_progress *p);
/* Register as a waiter; returns the count to give progress_wait.  Check
 * the state after this, then wait if it is not what is wanted. */
HIDDEN uint64_t progress_begin(struct pc_progress *p);
/* Sleep until the count is no longer `seen`, or timeout_ms pass. */
HIDDEN void progress_wait(struct pc_progress *p, uint64_t seen, unsigned timeout_ms);
HIDDEN void progress_end(struct pc_progress *p);

/* ------------------------------------------------------------------ folio */

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
/* Any cached access since the folio entered the cache (folio_mark_accessed):
 * one that keeps an uncached call's folio cached. */
#define PF_USED (PF_TOUCHED | PF_REFERENCED)

/* The flags word's bits from PF_GEN_SHIFT up count the times the folio was
 * freed, so that a lockless reader can tell that the memory it copied from
 * was not freed (and perhaps reused) meanwhile (read_hit.h).  A reset of
 * the flags (folio_reset_flags) keeps it. */
#define PF_GEN_SHIFT 17
#define PF_GEN_ONE (1u << PF_GEN_SHIFT)
#define PF_GEN_MASK (~0u << PF_GEN_SHIFT)

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
	/* Two fields in one byte (see folio_ra_order, folio_mark_accessed):
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

/* ------------------------------------------------------------------ index */

#define RT_SHIFT 6
#define RT_SLOTS (1u << RT_SHIFT)
#define RT_MASK ((uint64_t)RT_SLOTS - 1)
enum { RT_TAG_DIRTY, RT_TAG_EDGE, RT_NTAGS };

struct rt_node {
	uint8_t shift;   /* index bits below this node's slots */
	uint8_t offset;  /* slot in parent */
	uint16_t count;  /* slots in use */
	struct rt_node *parent;
	uint64_t tags[RT_NTAGS];
	void *slots[RT_SLOTS];
};

/* Spare nodes shared by the trees of one cache (see radix.c, "Lockless
 * lookups"): nodes are never returned to malloc while any tree of the cache
 * may be walked without its lock. */
struct rt_pool {
	pthread_mutex_t lock;
	struct rt_node *spare; /* linked through ->parent */
};

struct rt_root {
	struct rt_node *node;
	uint64_t nr_heads;    /* folios in the tree */
	_Atomic uint32_t seq; /* odd while the tree's shape changes */
	struct rt_pool *pool; /* NULL: nodes are malloc'd and freed */
};

/* -------------------------------------------------------------- backend */

enum { IO_READ, IO_WRITE, IO_FSYNC, IO_FDATASYNC, IO_NOP };

struct pc_ioq;
struct pc_ioreq;
typedef void (*pc_io_done_fn)(struct pc_ioreq *req, ssize_t res);

/* One device I/O.  Owned by the submitter until `done` is called. */
struct pc_ioreq {
	int op;          /* IO_* */
	int fd;
	int rw_flags;    /* RWF_DSYNC for durable writes */
	int iovcnt;
	const struct iovec *iov;
	off_t off;
	size_t len;      /* sum of iov lengths */
	pc_io_done_fn done;
	void *priv;
};

/* ------------------------------------------------------------ writeback */

struct pc_cache;

/* A writeback domain: one per backing device. */
struct pc_domain {
	struct pc_cache *c;
	dev_t dev;
	struct pc_domain *next;
	pthread_mutex_t lock;
	pthread_cond_t kick_cv;     /* wakes the flusher */
	pthread_cond_t io_cv;       /* a device write completed */
	_Atomic int64_t inflight;   /* bytes of device writes submitted, not done */
	int64_t inflight_cap;       /* keep at most this many in flight */
	_Atomic int io_waiters;     /* sleeping in wait_for_room() */
	/* Files with dirty data, edges, or a closed file's data to settle:
	 * each holds a reference while on it (writeback.c). */
	struct pc_mapping *dirty_head, *dirty_tail;
	_Atomic int64_t dirty, uncached, writeback;
	_Atomic bool kicked;        /* uncached writers want writeback */
	_Atomic int nospace;        /* -ENOSPC/-EDQUOT met: new writes refused */
	_Atomic bool want_free;     /* reclaim waits for clean memory */
	bool stop;
	/* What every file of the device shares, asked once (files_lock):
	 * the largest file size, the direct-I/O alignment. */
	bool probed;
	int64_t max_bytes;
	/* Its file system's mount point, opened when the domain was made
	 * (fs_sync.c), or -1; whether data went through the kernel since. */
	int fs_fd;
	_Atomic bool kernel_written;
	unsigned dio_off_align, dio_mem_align;
	unsigned nthreads;
	pthread_t *threads;
	struct pc_ioq *ioq;
};

/* Collects completions of writes one caller waits for (fsync, DSYNC). */
struct pc_wb_waiter {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int pending;
	int error; /* first negative errno */
};

/* ------------------------------------------------------------- mapping */

/* Byte ranges past the backing file's size at open that we wrote (written.c). */
struct pc_range {
	uint64_t start, end;
};
struct pc_written {
	pthread_mutex_t lock;
	uint64_t base_end;  /* before it: unknown, ask the file system */
	struct pc_range *r; /* sorted, disjoint, not touching */
	size_t n, cap;
};

/* errseq: a counter of errors and the last errno. */
typedef _Atomic uint64_t pc_errseq_t;

struct pc_mapping {
	struct pc_cache *c;
	struct pc_domain *dom;
	struct pc_mapping *hash_next;
	dev_t dev;
	ino_t ino;
	int fd;            /* backing descriptor, O_DIRECT unless !direct */
	int old_fd;        /* read-only descriptor replaced by a writable one */
	_Atomic bool kernel_written; /* data went through the kernel's page cache */
	bool writable;
	bool wrlocked;     /* our OFD lock is a write lock (files_lock) */
	bool direct;       /* backing descriptor is O_DIRECT */
	bool noatime;      /* backing descriptor is O_NOATIME */
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
	/* After the last close (file.c, under files_lock): closed_dirty while
	 * dirty data holds the descriptor and lock until written (on the
	 * cache's closed_dirty list); else on the closed list with the
	 * descriptor kept for a reopen, until too many are (fd then -1). */
	_Atomic bool closed_dirty;
	bool on_closed_list;
	struct pc_mapping *closed_prev, *closed_next;
	/* Written (or truncated) since the attributes were saved. */
	_Atomic bool changed;
	_Atomic int wb_inflight;    /* write-back requests being built or in flight */
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
	_Atomic uint64_t dirtied_total;
	int64_t max_bytes;          /* largest size the file system allows */
	pthread_mutex_t size_lock;  /* serialises backing size changes */
	pthread_rwlock_t inval_lock;
	pthread_rwlock_t tree_lock;
	struct rt_root tree;
	pc_errseq_t wb_err;
	/* Writeback of this file keeps failing (negative errno, 0: not):
	 * new writes fail up front until it succeeds again, or the caller
	 * truncates, punches or retries fsync (see mapping_set_failing). */
	_Atomic int wb_failing;
	/* writeback domain list, under dom->lock */
	struct pc_mapping *dirty_prev, *dirty_next;
	_Atomic bool on_dirty_list;
	_Atomic uint64_t dirtied_when_ms; /* oldest dirty data, 0: clean */
	_Atomic int64_t nr_dirty, nr_uncached, nr_edges;
	/* edges of this file completed, and pc_now_ms of the latest (edges.c) */
	_Atomic uint64_t edges_completed, edge_completed_ms;
	_Atomic uint64_t last_error_ms; /* back off retries after errors */
	/* POSIX_FADV_NOREUSE range; len 0 with set: to EOF */
	pthread_mutex_t advice_lock;
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

/* An edge folio in the cache's FIFO of edges: its descriptor and the
 * generation it had when it became an edge (edges.c). */
struct pc_edge_ref {
	uint32_t pfn, gen;
};

/* ------------------------------------------------------------- handles */

#define PC_RA_HINTS 4 /* read ends a handle remembers (readahead_hinted) */
struct pc_file {
	uint32_t magic;
	int accmode;       /* O_RDONLY / O_WRONLY / O_RDWR */
	int oflags;        /* O_DSYNC / O_DIRECT from open */
	struct pc_cache *c;
	struct pc_mapping *m;
	uint64_t wb_err_seen;
	/* Read-ahead (readahead.c): only a hint and the fadvise mode; a
	 * stream's state lives in the cache. */
	/* Where the last reads that the read path saw (not hits) ended, one
	 * slot per recent sequential reader (readahead_hinted), with the
	 * hint clock value of its last use: a hint, read and written without
	 * a lock. */
	_Atomic int64_t ra_ends[PC_RA_HINTS];
	_Atomic uint32_t ra_used[PC_RA_HINTS];
	_Atomic uint32_t ra_clock;
	_Atomic int ra_advice;       /* PC_RA_NORMAL / _SEQUENTIAL / _RANDOM */
	struct pc_file *next_closed; /* quarantine of closed handles */
	struct pc_file *open_prev, *open_next; /* cache->open_head, files_lock */
};
#define PC_FILE_MAGIC 0x70636631u  /* "pcf1" */
#define PC_FILE_CLOSED 0x70636630u

/* --------------------------------------------------------------- cache */

struct pc_cache {
	struct pc_config cfg;
	/* arena */
	uint8_t *arena;
	size_t arena_bytes;
	uint32_t npages;
	struct pc_folio *folios;
	pthread_mutex_t arena_lock;
	uint32_t free_head[PC_MAX_ORDER + 1];
	unsigned max_order;
	/* Pages from here on were never handed out: in no free list, their
	 * descriptors still calloc's zeros (arena.c).  Changed under
	 * arena_lock; atomic for the readers that take no lock. */
	_Atomic uint32_t fresh_pfn;
	/* Background fault-in of the arena (arena.c). */
	pthread_t populate_thread;
	bool populate_running;         /* started and not yet joined */
	_Atomic bool populate_stop;
	_Atomic size_t populated_bytes; /* [0, this) of the arena faulted in */
	_Atomic bool populate_ended;   /* the thread is done (or never ran) */
	/* Bytes from the arena's start that are handed out or faulted in:
	 * the rest is what this cache has yet to take from the machine. */
	_Atomic size_t taken_bytes;
	/* reclaim: S3-FIFO-like small + main queues, see reclaim.c */
	pthread_mutex_t lru_lock;
	struct rt_pool node_pool; /* spare index nodes of every file (radix.c) */
	uint32_t small_head, small_tail, main_head, main_tail;
	uint64_t small_pages, main_pages;
	/* Memory freed, or made freeable (writeback ended): what allocations
	 * waiting for memory wait for (reclaim.c). */
	struct pc_progress mem_progress;
	/* Device writes ended (dirty room): what the throttle waits for. */
	struct pc_progress wb_progress;
	/* dirty throttle (throttle.c) */
	pthread_mutex_t throttle_lock;
	struct throttle_waiter *throttle_head; /* fewest bytes dirtied first */
	uint64_t throttle_vclock;  /* virtual time of the last let through */
	_Atomic uint64_t throttle_head_vtime; /* of the first waiter; none: max */
	_Atomic int64_t dirty, writeback, uncached;
	_Atomic int nr_failing;     /* mappings whose writeback keeps failing */
	_Atomic int last_wb_error;  /* negative errno of the latest failed write */
	/* A write error of a file freed before any handle reported it: what
	 * pc_cache_destroy reports (negative errno, 0: none). */
	_Atomic int orphan_error;
	/* files */
	pthread_mutex_t files_lock;
	struct pc_mapping **file_hash;
	unsigned file_hash_size;
	unsigned nr_mappings;
	/* closed files (file.c): dirty ones waiting for write-back, and clean
	 * ones keeping their descriptor, oldest first */
	struct pc_mapping *closed_dirty_head, *closed_dirty_tail;
	unsigned nr_closed_dirty; /* changed under files_lock, read with __atomic loads */
	struct pc_mapping *closed_files_head, *closed_files_tail;
	unsigned nr_closed_fds;
	uint64_t last_sweep_ms;
	struct pc_domain *domains;
	struct pc_file *open_head;
	struct pc_file *closed_head, *closed_tail;
	unsigned nr_closed;
	bool use_uring;
	uint64_t start_ms;
	unsigned owner_generation; /* process.c: the process that owns it */
	/* counters */
	_Atomic uint64_t st_read_ios, st_read_bytes, st_write_ios, st_write_bytes;
	_Atomic uint64_t st_cached, st_folios, st_evictions, st_drops;
	_Atomic uint64_t st_edge_kept, st_edge_completed, st_edge_expired, st_edge_evicted;
	/* edges.c: the kept edges' bytes, and their FIFO, oldest first */
	_Atomic int64_t edge_bytes;
	_Atomic bool edge_trimming;
	pthread_mutex_t edge_lock;
	struct pc_edge_ref *edge_fifo;
	uint32_t edge_cap, edge_head, edge_count;
	_Atomic uint64_t st_deferred, st_rmw_reads, st_miss;
	_Atomic uint64_t st_ra_sync, st_ra_async, st_ra_bytes, st_ra_random; /* readahead.c */
	struct pc_counter hits; /* bytes read without waiting (count_hit_bytes) */
	_Atomic uint64_t st_throttle_waits, st_throttle_pauses, st_kicks, st_write_errors;
	/* pace.c: write-back completed and bytes dirtied (all writers), the
	 * last sample of both, and the estimates made from them (bytes/s) */
	_Atomic uint64_t wb_done_bytes, dirtied_bytes;
	pthread_mutex_t pace_lock;
	uint64_t pace_stamp_ns, pace_done, pace_dirtied;
	_Atomic uint64_t pace_bw, pace_ratelimit;
	_Atomic int64_t peak_dirty;
	/* tests: fail device I/O; returns 0 or a negative errno */
	int (*fault_hook)(void *arg, int op, int fd, off_t off, size_t len);
	void *fault_arg;
	/* pc_fault_inject rules (fault.c): created on first use; the count
	 * is the fast path's only load when there are none */
	struct fault_set *_Atomic faults;
	_Atomic unsigned fault_nrules;
};

/* ================================================================ calls */

/* util */
HIDDEN uint64_t pc_now_ms(void);
/* A condition variable that timed_wait_ms may wait on (CLOCK_MONOTONIC:
 * a change of the wall clock neither ends nor prolongs a wait). */
HIDDEN void cond_init_monotonic(pthread_cond_t *cv);
HIDDEN void timed_wait_ms(pthread_cond_t *cv, pthread_mutex_t *lock, unsigned ms);
/* *ts = CLOCK_MONOTONIC now + ms (for pthread_cond_timedwait on a cv made
 * by cond_init_monotonic). */
HIDDEN void deadline_after_ms(struct timespec *ts, unsigned ms);
/* The cache's own millisecond clock (since pc_cache_new), for folio stamps. */
HIDDEN uint32_t cache_clock_ms(const struct pc_cache *c);
/* How long ago the folio's stamp was set (0 if it looks newer than now). */
HIDDEN uint64_t folio_age_ms(const struct pc_cache *c, const struct pc_folio *f);

/* arena.c: buddy allocator of folio memory */
/* Map the arena, after the machine-memory check (-ENOMEM). */
HIDDEN int arena_init(struct pc_cache *c);
/* Start the background fault-in (not with PC_CFG_LAZY_MEMORY); stop it
 * and wait for it (at most one step). */
HIDDEN void arena_populate_start(struct pc_cache *c);
HIDDEN void arena_populate_stop(struct pc_cache *c);
/* Bytes from the arena's start faulted in so far by the background thread. */
HIDDEN size_t arena_populated_bytes(struct pc_cache *c);
/* What the background fault-in has yet to do: 0 once it has ended. */
HIDDEN size_t arena_prefault_pending(struct pc_cache *c);
/* Pages below this were handed out at some time; above, never (their
 * descriptors are all zero). */
HIDDEN uint32_t arena_used_pages(struct pc_cache *c);
/* In a child of fork(): the parent's caches are not this process's. */
HIDDEN void arena_forget_parent_caches(void);
HIDDEN void arena_destroy(struct pc_cache *c);
/* Unmap the folio descriptor table (arena_destroy does; also a fork
 * child's copy, process.c). */
HIDDEN void arena_free_table(struct pc_cache *c);
/* sysmem.c: bytes the machine can give this process now (MemAvailable,
 * and the room under its memory cgroup's limits); UINT64_MAX: unknown. */
HIDDEN uint64_t sysmem_available(void);
/* A free block of 2^order pages, or PC_NONE. */
HIDDEN uint32_t arena_alloc(struct pc_cache *c, unsigned order);
HIDDEN void arena_free(struct pc_cache *c, uint32_t pfn, unsigned order);
static inline uint32_t folio_pfn(const struct pc_cache *c, const struct pc_folio *f)
{
	return (uint32_t)(f - c->folios);
}
static inline uint8_t *folio_data(const struct pc_cache *c, const struct pc_folio *f)
{
	return c->arena + ((size_t)folio_pfn(c, f) << PC_PAGE_SHIFT);
}
static inline size_t folio_size(const struct pc_folio *f)
{
	return (size_t)PC_PAGE_SIZE << f->order;
}
static inline uint64_t folio_pos(const struct pc_folio *f)
{
	return f->index << PC_PAGE_SHIFT;
}

/* folio.c: flags, lock, refcount, waiting */
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
/* Clear `flag` and wake everyone sleeping on the flags word. */
HIDDEN void folio_clear_and_wake(struct pc_folio *f, uint32_t flag);
/* Sleep until `flag` is clear. */
HIDDEN void folio_wait_clear(struct pc_folio *f, uint32_t flag);
static inline void folio_get(struct pc_folio *f)
{
	atomic_fetch_add_explicit(&f->refcount, 1, memory_order_relaxed);
}
/* Drop a reference; the last one returns the memory to the arena. */
HIDDEN void folio_put(struct pc_cache *c, struct pc_folio *f);
/* Mark accessed (for reclaim), without a write when already marked. */
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

/* reclaim.c: an access of [foff, foff+n) of f, for reclaim (see there);
 * continues: it starts where an earlier access of the same reader ended. */
HIDDEN void folio_mark_accessed(struct pc_folio *f, size_t foff, size_t n, bool continues);

/* block_state.c: per-block uptodate/dirty state (the iomap rules).
 * Callers hold the folio lock; the state spinlock is taken inside. */
/* Set up a new folio's block state (all blocks not uptodate, clean). */
HIDDEN int bs_init(struct pc_mapping *m, struct pc_folio *f);
/* Make room for deferred partial ranges (before folio_write_end). */
HIDDEN int bs_prepare_partial(struct pc_mapping *m, struct pc_folio *f);
HIDDEN void bs_free(struct pc_folio *f);
HIDDEN unsigned folio_nblocks(const struct pc_mapping *m, const struct pc_folio *f);
/* Are all blocks overlapping [off, off+len) (folio offsets) uptodate? */
HIDDEN bool folio_range_uptodate(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len);
HIDDEN bool folio_block_uptodate(struct pc_mapping *m, struct pc_folio *f, unsigned blk);
HIDDEN bool folio_block_dirty(struct pc_mapping *m, struct pc_folio *f, unsigned blk);
/* Mark blocks lying wholly inside [off, off+len) uptodate (reads, zeroing of
 * whole blocks).  Partly covered blocks are not marked. */
HIDDEN void folio_set_range_uptodate(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len);
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
HIDDEN size_t folio_write_end(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len,
			      bool head_full, bool tail_full);
/* Clear dirty on [off, off+len): the first block rounded up, the last down,
 * so a partly cleared block stays dirty.  Returns bytes cleared. */
HIDDEN size_t folio_clear_range_dirty(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len);
/* Forget blocks wholly inside [off, off+len) (truncate, punch): not dirty,
 * their valid ranges dropped; `zeroed` marks them uptodate (their bytes were
 * zeroed and the device holds zeros), else not uptodate.  Returns dirty
 * bytes cleared. */
HIDDEN size_t folio_invalidate_blocks(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len,
				      bool zeroed);
/* Dirty runs for writeback: find the next run of dirty blocks at or after
 * block `from`; returns false when none.  Block units. */
HIDDEN bool folio_next_dirty_run(struct pc_mapping *m, struct pc_folio *f, unsigned from,
				 unsigned *first, unsigned *count);
/* Set the run's dirty bits back (a failed device write). */
HIDDEN void folio_redirty_blocks(struct pc_mapping *m, struct pc_folio *f, unsigned first, unsigned count);
/* Valid range of a partly written block, false if none. */
HIDDEN bool folio_block_valid(struct pc_mapping *m, struct pc_folio *f, unsigned blk,
			      uint32_t *start, uint32_t *end);
/* After merging device data around the valid range: uptodate, range gone. */
HIDDEN void folio_block_merged(struct pc_mapping *m, struct pc_folio *f, unsigned blk);
HIDDEN size_t folio_dirty_bytes(struct pc_mapping *m, struct pc_folio *f);
HIDDEN bool folio_has_partial(struct pc_folio *f);
/* Mark every block uptodate (whole folio read or zeroed). */
HIDDEN void folio_mark_all_uptodate(struct pc_mapping *m, struct pc_folio *f);

/* radix.c: a 64-way radix tree of page index -> item, with tags.  Not
 * locked: callers hold mapping->tree_lock (read for lookups, write for
 * changes, tags included), except rt_lookup_lockless. */
HIDDEN void rt_init(struct rt_root *r, struct rt_pool *pool);
HIDDEN void rt_destroy(struct rt_root *r);
HIDDEN void rt_pool_init(struct rt_pool *p);
HIDDEN void rt_pool_destroy(struct rt_pool *p);
HIDDEN void *rt_lookup(struct rt_root *r, uint64_t index);
/* The tree's change count to pass to rt_lookup_lockless and
 * rt_unchanged_since; odd while a change is in progress. */
static inline uint32_t rt_read_begin(struct rt_root *r)
{
	return atomic_load_explicit(&r->seq, memory_order_acquire);
}
/* Whether the tree's shape is what it was at rt_read_begin's `seq`: the
 * loads made since then (of the tree and of what it points at) saw a tree
 * no writer had begun to change. */
static inline bool rt_unchanged_since(struct rt_root *r, uint32_t seq)
{
#if PC_TSAN
	/* ThreadSanitizer does not model fences; an RMW orders the same. */
	return atomic_fetch_add_explicit(&r->seq, 0, memory_order_acq_rel) == seq;
#else
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&r->seq, memory_order_relaxed) == seq;
#endif
}
static inline unsigned rt_offset(uint64_t index, unsigned shift)
{
	return (unsigned)(index >> shift) & RT_MASK;
}
/* Largest index below a node of `shift`. */
static inline uint64_t rt_maxindex(unsigned shift)
{
	return shift + RT_SHIFT >= 64 ? UINT64_MAX : (((uint64_t)1 << (shift + RT_SHIFT)) - 1);
}
/* Lookup without the lock (r->pool must be set): the item at `index`, NULL,
 * or RT_RETRY when a writer changed the tree meanwhile.  `seq` comes from
 * rt_read_begin.  The item may be removed (and, unless the caller pins it
 * in its own way, reused) at any time after; see radix.c, "Lockless
 * lookups" (inline for the cache hit, read_hit.h). */
#define RT_RETRY ((void *)1)
static inline void *rt_lookup_lockless(struct rt_root *r, uint64_t index, uint32_t seq)
{
	if (seq & 1)
		return RT_RETRY;
	struct rt_node *n = __atomic_load_n(&r->node, __ATOMIC_RELAXED);
	/* Whatever was loaded since the last check may be stale: check
	 * before it is followed (or returned). */
	if (!rt_unchanged_since(r, seq))
		return RT_RETRY;
	if (!n)
		return NULL;
	unsigned shift = __atomic_load_n(&n->shift, __ATOMIC_RELAXED);
	if (index > rt_maxindex(shift))
		return rt_unchanged_since(r, seq) ? NULL : RT_RETRY;
	/* Only the root's shift is read: a node followed while the count
	 * stayed unchanged is the child it was in the tree then, whose shift
	 * is its parent's less RT_SHIFT.  So each level costs one load (the
	 * slot) where it cost two dependent ones (the node's first line for
	 * the shift, then the slot's line), which a hit on a cold leaf paid
	 * in cache misses. */
	for (;;) {
		void *p = __atomic_load_n(&n->slots[rt_offset(index, shift)], __ATOMIC_RELAXED);
		if (!rt_unchanged_since(r, seq))
			return RT_RETRY;
		if (shift == 0 || !p)
			return p;
		n = p;
		shift -= RT_SHIFT;
	}
}
/* Put `item` in slots [index, index+nr); -EEXIST if any is used. */
HIDDEN int rt_insert(struct rt_root *r, uint64_t index, uint64_t nr, void *item);
HIDDEN void rt_remove(struct rt_root *r, uint64_t index, uint64_t nr);
HIDDEN bool rt_range_empty(struct rt_root *r, uint64_t index, uint64_t nr);
HIDDEN void rt_tag_set(struct rt_root *r, uint64_t index, int tag);
HIDDEN void rt_tag_clear(struct rt_root *r, uint64_t index, int tag);
HIDDEN bool rt_tag_get(struct rt_root *r, uint64_t index, int tag);
/* First used slot >= *index whose tag is set (tag < 0: any used slot);
 * returns the item and sets *index, or NULL. */
HIDDEN void *rt_find_next(struct rt_root *r, uint64_t *index, int tag);

/* Count n bytes read from the cache without waiting: in this thread's
 * counter slots, so that hits of different threads share no cache line. */
static inline __attribute__((always_inline)) void count_hit_bytes(struct pc_mapping *m, size_t n)
{
	/* counter_add twice, with this thread's slot looked up once (a hit
	 * does little else, see read_hit.h). */
	int s = pc_counter_slot_plus1 - 1;
	if (__builtin_expect(s < 0, 0)) {
		counter_add(&m->hits, n);
		counter_add(&m->c->hits, n);
		return;
	}
	_Atomic uint64_t *a = &m->hits.slot[s].v, *b = &m->c->hits.slot[s].v;
	atomic_store_explicit(a, atomic_load_explicit(a, memory_order_relaxed) + n, memory_order_relaxed);
	atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + n, memory_order_relaxed);
}
/* read_hit.h: read_hit, a read served from one cached folio without a
 * lock (inline, for api.c). */

/* mapping.c: the per-file folio index */

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
#define ERR_FOLIO(e) ((struct pc_folio *)(intptr_t)(e))
#define IS_ERR_FOLIO(p) ((uintptr_t)(p) >= (uintptr_t)-4095)
#define FOLIO_ERR(p) ((int)(intptr_t)(p))
/* Remove a locked folio from the index (truncate, drop-behind, eviction);
 * the index's reference is dropped.  Accounting of dirty data is the
 * caller's. */
HIDDEN void mapping_remove_folio(struct pc_mapping *m, struct pc_folio *f);
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

/* edges.c: edge folios of uncached writes, kept within edge_budget_bytes */
HIDDEN void edges_init(struct pc_cache *c);
HIDDEN void edges_destroy(struct pc_cache *c);
/* The bytes of edges the cache keeps before it drops the oldest. */
HIDDEN size_t edge_budget(const struct pc_cache *c);
/* Keep the locked folio f, which an uncached write covers only partly,
 * for the neighbouring write (PF_EDGE), as the newest edge. */
HIDDEN void edge_keep(struct pc_mapping *m, struct pc_folio *f);
/* Do the clean edges hold more than the budget? */
HIDDEN bool edges_over_budget(struct pc_cache *c);
/* While the clean edges hold more than the budget, let the oldest clean
 * ones go (a dirty edge stays: it counts as dirty data).  Takes
 * folio locks by trylock only; call it holding none of the cache's locks
 * but, at most, folio locks and inval_lock. */
HIDDEN void edges_trim(struct pc_cache *c);
/* A write completed an edge of m (counted, and when: see below). */
HIDDEN void edge_completed(struct pc_mapping *m);
/* A write of m that left edges, with the clean edges over the budget:
 * wait (bounded, no locks held) while other writers complete m's edges. */
HIDDEN void edges_wait_for_neighbours(struct pc_mapping *m);
/* Let every edge of m go (fsync, close): no neighbour is coming. */
HIDDEN void drop_edges(struct pc_mapping *m);

/* reclaim.c */
HIDDEN void lru_add(struct pc_cache *c, struct pc_folio *f);
HIDDEN void lru_del(struct pc_cache *c, struct pc_folio *f);
/* Free at least `pages` pages by evicting clean folios; returns pages freed. */
HIDDEN uint64_t reclaim_pages(struct pc_cache *c, uint64_t pages);
/* Allocate a folio of `order` pages (falling back to lower orders down to
 * `min_order`), evicting and waiting for writeback as needed.  Returns the
 * folio (refcount 1, no mapping) or NULL with -EAGAIN (nowait) / -ENOMEM. */
HIDDEN struct pc_folio *folio_alloc(struct pc_cache *c, unsigned order, unsigned min_order,
				    bool nowait, int *err);
/* Drop a clean, unused drop-behind folio now if possible (trylock unless
 * `locked`: the caller holds the folio lock);
 * returns true if it was removed.  Never sleeps. */
HIDDEN bool folio_try_drop(struct pc_cache *c, struct pc_folio *f, bool locked);
/* A reader is done with drop-behind folio f: drop it now, or (busy) mark
 * it so that its last user drops it. */
HIDDEN void folio_drop_behind(struct pc_cache *c, struct pc_folio *f);

/* backend.c: device I/O */
HIDDEN int ioq_create(struct pc_cache *c, unsigned depth, bool use_uring, struct pc_ioq **out);
HIDDEN void ioq_destroy(struct pc_ioq *q);
/* Free a child's copy of a queue inherited through fork(): the ring is
 * the parent's, nothing of it is touched. */
HIDDEN void ioq_forget(struct pc_ioq *q);
HIDDEN bool ioq_is_uring(const struct pc_ioq *q);
/* Submit; waits only while `depth` I/Os are in flight.  With no io_uring the
 * I/O runs synchronously and done() is called before this returns. */
HIDDEN void ioq_submit(struct pc_ioq *q, struct pc_ioreq *req);
/* Synchronous I/O on the caller's thread; retries EINTR and partial
 * transfers (a read stops at EOF).  Returns bytes or negative errno. */
HIDDEN ssize_t backend_preadv(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off);
HIDDEN ssize_t backend_pwritev(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off,
			       int rw_flags);
/* The same, written through alias_fd, another open file description of
 * fd's file: counted and fault-checked as fd's. */
HIDDEN ssize_t backend_pwritev_alias(struct pc_cache *c, int fd, int alias_fd, const struct iovec *iov, int iovcnt,
				     off_t off, int rw_flags);
/* fsync/fdatasync of a backing file, through the fault hooks (PC_FAULT_SYNC). */
HIDDEN int backend_fsync(struct pc_cache *c, int fd, bool datasync);
/* The first part of an injected short transfer of `len` bytes on fd: about
 * half, rounded down to the direct-I/O alignment of an O_DIRECT fd; 0 when
 * the I/O cannot be cut (too small). */
HIDDEN size_t backend_short_len(int fd, size_t len);
/* fault.c: the rules of pc_fault_inject, asked by the backend before every
 * device I/O and by writeback before allocating a request.  Returns 0, or a
 * negative errno when a PC_FAULT_FAIL rule fires; sleeps when a
 * PC_FAULT_DELAY rule fires.  op_mask: PC_FAULT_* of this I/O.  Only one
 * relaxed atomic load when no rule is installed. */
HIDDEN int fault_check(struct pc_cache *c, unsigned op_mask, int fd, off_t off, size_t len);
/* fault_check for a device read or write that may be cut short: *cut gets
 * 0 or the bytes the device moves first (a PC_FAULT_SHORT rule fired);
 * cut NULL: SHORT rules do not apply. */
HIDDEN int fault_check_io(struct pc_cache *c, unsigned op_mask, int fd, off_t off, size_t len, size_t *cut);
/* Remove every rule (their files' references go) and free the rule state
 * (pc_cache_destroy, once no I/O is in flight, before the files are freed). */
HIDDEN void fault_destroy(struct pc_cache *c);
/* Block size and memory alignment for direct I/O on fd (statx DIOALIGN). */
HIDDEN int backend_dio_align(int fd, unsigned *offset_align, unsigned *mem_align);
/* Is [off, off+len) of the backing file a hole (no data)?  Uses SEEK_DATA. */
HIDDEN bool backend_is_hole(int fd, off_t off, size_t len);

/* writeback.c */
HIDDEN int domain_get(struct pc_cache *c, dev_t dev, struct pc_domain **out);
/* Stop the flusher threads (their queues stay usable). */
HIDDEN void domains_stop(struct pc_cache *c);
/* Stop flushers, wait for in-flight I/O and free the queues. */
HIDDEN void domains_drain(struct pc_cache *c);
/* domains_drain, then free the domains. */
HIDDEN void domains_destroy(struct pc_cache *c);
/* Account `bytes` newly dirty (negative: cleaned) in folio f. */
HIDDEN void account_dirty(struct pc_mapping *m, struct pc_folio *f, int64_t bytes);
/* A folio's uncached (drop-behind) dirty share changed by `bytes`. */
HIDDEN void account_uncached(struct pc_mapping *m, int64_t bytes);
/* Take a gone file (unlinked) off its domain's dirty list now, so that
 * its last reference, and descriptor, can go at once. */
HIDDEN void mapping_forget_dirty(struct pc_mapping *m);
/* Called after a folio went clean->dirty: tag it, queue the mapping. */
HIDDEN void mapping_dirtied(struct pc_mapping *m, struct pc_folio *f);
/* Whether m has anything for the flusher (dirty or uncached data, edges). */
HIDDEN bool flusher_has_work_in(struct pc_mapping *m);
/* Take m off domain d's dirty list (d->lock held). */
HIDDEN void dirty_list_unlink(struct pc_domain *d, struct pc_mapping *m);
enum {
	WB_ALL = 0,
	WB_UNCACHED = 1 << 0,    /* only drop-behind data (and complete edges) */
	WB_SYNC = 1 << 1,        /* lock and wait; count others' writeback */
	WB_DSYNC = 1 << 2,       /* RWF_DSYNC device writes */
	WB_NOWAIT_LOCK = 1 << 3, /* skip locked folios (the flusher) */
	WB_LET_PARTIAL_WAIT = 1 << 4, /* skip young deferred partial blocks */
	WB_HOLD_SHORT_RUNS = 1 << 5,  /* skip short runs of young dirty data */
};
/* Start writeback of dirty data in [start, end) of m (WB_UNCACHED: only
 * drop-behind folios).  With a waiter, every write started is counted in it;
 * WB_SYNC locks and waits for folios already under writeback, and counts
 * them too.  Returns the bytes submitted, or a negative errno. */
HIDDEN int64_t writeback_range(struct pc_mapping *m, uint64_t start, uint64_t end, int mode,
			       struct pc_wb_waiter *w);
/* writeback_range, stopping once `budget` bytes are submitted (0: all). */
HIDDEN int64_t writeback_some(struct pc_mapping *m, uint64_t start, uint64_t end, int mode, struct pc_wb_waiter *w,
			      int64_t budget);
/* Write back [start, end), wait for it, and return the first error. */
HIDDEN int writeback_and_wait(struct pc_mapping *m, uint64_t start, uint64_t end, int mode);
/* Wait until no folio of [start, end) is under writeback. */
HIDDEN void writeback_wait_range(struct pc_mapping *m, uint64_t start, uint64_t end);
HIDDEN void waiter_init(struct pc_wb_waiter *w);
HIDDEN int waiter_wait(struct pc_wb_waiter *w);
HIDDEN void waiter_destroy(struct pc_wb_waiter *w);
HIDDEN void flusher_kick(struct pc_domain *d);
/* Have the flusher write m's dirty data soon (within about 0.1 s): what
 * pc_flush without wait leaves to it. */
HIDDEN void flusher_write_soon(struct pc_mapping *m);
/* A file this small, closed, goes to the backing file in one write through
 * the kernel (writeback.c), and pc_flush without wait leaves it to the
 * flusher rather than writing its blocks directly. */
#define PC_SMALL_FILE_BYTES (64u << 10)
/* How long a short run of young dirty data waits for its neighbours
 * (WB_HOLD_SHORT_RUNS; writeback.c). */
#define SHORT_RUN_PATIENCE_MS 200u

/* throttle.c */
/* Writers call this after dirtying: kicks the flusher past the background
 * or uncached thresholds; sleeps while dirty+writeback > dirty_limit, let
 * through in order of bytes their thread dirtied. */
HIDDEN int balance_dirty(struct pc_mapping *m, bool uncached, bool nowait);
/* The calling thread dirtied `bytes` (its place in the throttle queue,
 * and the dirtying rate pacing measures). */
HIDDEN void throttle_account(struct pc_cache *c, size_t bytes);
HIDDEN bool dirty_over_limit(struct pc_cache *c);
/* Writeback of m failed with err: new writes fail up front. */
HIDDEN void mapping_set_failing(struct pc_mapping *m, int err);
/* The caller retries (fsync), truncates or punches: writes may go again. */
HIDDEN void mapping_clear_failing(struct pc_mapping *m);
/* Is m's write-back failing (its negative errno, or 0)? */
static inline int mapping_failing(struct pc_mapping *m)
{
	return atomic_load_explicit(&m->wb_failing, memory_order_relaxed);
}
/* The error new writes to m get now (its own, or its device's), or 0. */
static inline int mapping_write_error(struct pc_mapping *m)
{
	int err = mapping_failing(m);
	return err ? err : atomic_load_explicit(&m->dom->nospace, memory_order_relaxed);
}
/* Write-back of m failed with err (a write, or the read merging a partial
 * block before it): recorded for fsync, counted, the file failing. */
HIDDEN void writeback_failed(struct pc_mapping *m, int err);
/* A write of a failing file went through: it may be well again. */
HIDDEN void writeback_recovered(struct pc_mapping *m);
/* Record a write error in the mapping's errseq. */
HIDDEN void errseq_set(pc_errseq_t *e, int err);
HIDDEN uint64_t errseq_sample(pc_errseq_t *e);
/* The sample a new handle starts from: before an error nobody reported. */
HIDDEN uint64_t errseq_open_sample(pc_errseq_t *e);
/* Is there an error no handle has reported? */
HIDDEN bool errseq_unseen(pc_errseq_t *e);
/* Report an error newer than *since once; 0 or negative errno. */
HIDDEN int errseq_check_and_advance(pc_errseq_t *e, uint64_t *since);
/* Write back all dirty data of a writable file, wait, and set the backing
 * file's exact size (fsync, close, cache destroy); the first error. */
HIDDEN int mapping_flush(struct pc_mapping *m);

/* pace.c: writers paced by the write-back bandwidth below the limit */
#define PACE_ONE 1024
#define PACE_MIN_POS (PACE_ONE / 4)
/* pos (PACE_ONE = 1): 2 at or below freerun (the background threshold),
 * 1 at the setpoint (half way to the limit), falling to PACE_MIN_POS
 * just under the limit, 0 at the limit and past. */
HIDDEN uint64_t pace_position(uint64_t used, uint64_t background, uint64_t limit);
/* The time `bytes` take at ratelimit * pos bytes per second (at most the
 * longest pause). */
HIDDEN uint64_t pace_period_ns(uint64_t bytes, uint64_t ratelimit, uint64_t pos);
/* The next per-writer ratelimit, from what writers were let do (ratelimit
 * at pos), the bandwidth and the dirtying rate measured (bytes/s). */
HIDDEN uint64_t pace_balanced_ratelimit(uint64_t ratelimit, uint64_t pos, uint64_t bw, uint64_t dirty_rate);
/* Count bytes dirtied by any writer (the dirtying rate). */
HIDDEN void pace_account(struct pc_cache *c, size_t bytes);
/* After a write of `bytes` under the limit: sleep what they owe. */
HIDDEN void pace_writer(struct pc_cache *c, size_t bytes);

/* backing.c: the backing file's size and allocation */
/* Reserve space for a write of [off, end) that extends the file (fallocate
 * KEEP_SIZE): -ENOSPC / -EDQUOT when the file system has none. */
HIDDEN int backing_reserve(struct pc_mapping *m, uint64_t off, uint64_t end);
/* Give back what was reserved past the file's end (last close). */
HIDDEN void backing_release_reserve(struct pc_mapping *m);
/* Write bytes [off, off+len) of a closed file, its end among them,
 * through the kernel's page cache, so that the backing file ends at i_size
 * with no truncate (see there); 0 or a negative errno. */
HIDDEN int backing_write_tail(struct pc_mapping *m, const void *buf, uint64_t off, size_t len);

/* fs_sync.c: data that went through the kernel's page cache, synced at
 * pc_cache_destroy (see there). */
/* The mount point of dev's file system, opened (a descriptor for syncfs
 * that sees every error met after now), or -1. */
HIDDEN int fs_sync_open(dev_t dev);
/* m's data went through the kernel's page cache. */
HIDDEN void fs_sync_note_kernel_write(struct pc_mapping *m);
/* fdatasync of m when its domain has no file system descriptor and data
 * of m went through the kernel; 0 or a negative errno. */
HIDDEN int fs_sync_mapping(struct pc_mapping *m);
/* syncfs of every domain data went to through the kernel; the first
 * error (negative errno) or 0. */
HIDDEN int fs_sync_domains(struct pc_cache *c);
/* Allocate the backing file ahead of writeback, up to i_size. */
HIDDEN void backing_extend(struct pc_mapping *m);
/* ftruncate the backing file to size, safely against our own direct
 * writes of the block the file system zeroes; caller holds inval_lock
 * exclusively. */
HIDDEN int backing_set_size(struct pc_mapping *m, uint64_t size);
/* Make the backing file's size equal i_size (ftruncate) if it differs. */
HIDDEN int mapping_sync_size(struct pc_mapping *m);

/* read.c */
HIDDEN ssize_t pc_read_iter(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len,
			    int flags);

/* read_io.c: bringing a range into the cache */
enum {
	RF_DONTCACHE = 1 << 0, /* created folios are dropped behind their reader */
	RF_SYNC = 1 << 1,      /* the first run read in the caller's thread */
	RF_NOWAIT = 1 << 2,    /* never sleep for memory (the range may stay short) */
};
/* Create the missing folios of [start, end) and read them (they stay
 * locked until read; asynchronously, except the first run with RF_SYNC).  Error only if not
 * even the first could be created.  With `first`, the folio holding
 * `start` (created or found) is returned with a reference. */
HIDDEN int cache_read_range(struct pc_mapping *m, uint64_t start, uint64_t end, unsigned rf,
			    struct pc_folio **first);

/* readahead.c: streams followed through the cache */
enum { PC_RA_NORMAL, PC_RA_SEQUENTIAL, PC_RA_RANDOM };
/* Whether a read of [off, off+len) through h starts where one of the
 * handle's recent reads that came to the read path ended (a hint; it also
 * records this one), or at 0. *continues: the first, alone. */
HIDDEN bool readahead_hinted(struct pc_file *h, uint64_t off, size_t len, bool *continues);
/* A read through h reached folio f, which carries a read-ahead mark: take
 * the mark and issue the stream's next window, without waiting for it.
 * Whether the read continues a stream (false: h does no read-ahead, and
 * the mark stays). */
HIDDEN bool readahead_reached(struct pc_file *h, struct pc_folio *f, unsigned rf);
/* A read through h missed at pos (wanting up to end): read what it needs,
 * with a window ahead if it is part of a stream (*stream in: the hint
 * says so; out: whether it is).  *f: the folio at pos, referenced (NULL:
 * look again); *read_to: how far the caller's own read was issued. */
HIDDEN int readahead_miss(struct pc_file *h, uint64_t pos, uint64_t end, unsigned rf, bool *stream,
			  struct pc_folio **f, uint64_t *read_to);
/* Make [foff, foff+n) of f readable (nowait: -EAGAIN rather than wait
 * for its lock or a read); *waited is set when I/O or a wait was needed. */
HIDDEN int folio_make_readable(struct pc_mapping *m, struct pc_folio *f, size_t foff, size_t n, bool nowait,
			       bool *waited);

/* fill.c: synchronous filling of a locked folio's blocks */
/* Bring blocks overlapping [off, off+len) of a locked folio uptodate,
 * merging device data around deferred partial writes. */
HIDDEN int folio_fill_range(struct pc_mapping *m, struct pc_folio *f, size_t off, size_t len);
/* Read block-aligned [off, off+len) of the file into buf (aligned for
 * direct I/O) with one device read; past the written data: zeros, no I/O. */
HIDDEN int read_blocks(struct pc_mapping *m, uint8_t *buf, uint64_t off, size_t len);
/* Merge device data into the folio's partly written blocks only (the
 * flusher, before writing them back). */
HIDDEN int folio_merge_partials(struct pc_mapping *m, struct pc_folio *f);

/* written.c: where our device writes may have put data past the size the
 * file had at open (the rest there is holes). */
HIDDEN void written_init(struct pc_written *w, uint64_t base_end);
HIDDEN void written_destroy(struct pc_written *w);
HIDDEN void written_reset(struct pc_written *w, uint64_t base_end);
HIDDEN void written_add(struct pc_written *w, uint64_t start, uint64_t end);
HIDDEN void written_truncate(struct pc_written *w, uint64_t size);
HIDDEN bool written_known_hole(struct pc_written *w, uint64_t start, uint64_t end);

/* write.c */
HIDDEN ssize_t pc_write_iter(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len,
			     int flags);
/* A buffered write of [off, end) of m with PC_* flags, its data in iov
 * (NULL for a write span, whose caller copies the data itself). */
struct write_ctx {
	struct pc_mapping *m;
	const struct iovec *iov;
	int iovcnt;
	uint64_t off, end;
	int flags;
};
/* The part of a write that falls in one folio, between its steps. */
struct write_folio {
	struct pc_folio *f;  /* locked, stable, referenced */
	size_t foff, n;      /* the part: [foff, foff + n) of f */
	bool created;        /* this write created f */
	bool head_full, tail_full; /* its partly covered first / last block is
				    * valid around it (zeroed or read), else
				    * deferred: see folio_write_end */
};
/* Before a write dirties anything: a file whose writeback keeps failing
 * takes no new data (mapping_set_failing), space for a write that extends
 * the file is reserved (a full file system fails the write here, as the
 * kernel's buffered write does, not at fsync), and PC_NOWAIT meets the
 * dirty throttle (-EAGAIN past the limit). */
HIDDEN int write_admit(struct pc_mapping *m, uint64_t off, uint64_t end, int flags);
/* Step 1, caller holding inval_lock shared: the folio holding pos, locked
 * and stable, its partly covered blocks prepared (zeroed, read or
 * deferred) and marked for the write's mode, as much of [pos, w->end) as
 * it holds in *wf.  0 or a negative errno (nothing held then). */
HIDDEN int write_folio_begin(const struct write_ctx *w, uint64_t pos, struct write_folio *wf);
/* Step 2, after the data is in [foff, foff + n): uptodate and dirty, the
 * size raised, the folio unlocked and released. */
HIDDEN void write_folio_commit(const struct write_ctx *w, const struct write_folio *wf);
/* Instead of step 2 when nothing was written: unlocked and released, and
 * removed when this write created it (it holds nothing). */
HIDDEN void write_folio_abandon(const struct write_ctx *w, const struct write_folio *wf);
/*
 * Between the steps, when only `copied` < wf->n bytes came: what the
 * write had prepared past them must not become file data.  Dirty bytes
 * there are the caller's to put back first (they exist nowhere else);
 * clean uptodate blocks there are forgotten (read again when needed);
 * blocks not uptodate stay so; the block holding the new end is prepared
 * again for it, keeping the bytes written before it.  Sets wf->n to
 * copied.  A negative errno when that block had to be read and could not
 * be: then end the write with copied 0 (write_folio_shorten(.., 0) cannot
 * fail) and write_folio_abandon.
 */
HIDDEN int write_folio_shorten(const struct write_ctx *w, struct write_folio *wf, size_t copied);
/* After n bytes at pos went in (inval_lock released): PC_DSYNC makes them
 * durable (an error: they are not), other writes meet the dirty throttle
 * (an error: the file's write error, the bytes are written). */
HIDDEN int write_finish(struct pc_mapping *m, uint64_t pos, uint64_t n, int flags);
/* Write zeros through the cache (partial blocks of punch/zero range); the
 * caller holds inval_lock (either way). */
HIDDEN int write_zeroes(struct pc_mapping *m, uint64_t off, uint64_t len);

/* span.c: zero-copy spans, called by api.c once the arguments passed its
 * checks (off below the size limit for writes, flags without PC_DIRECT).
 * struct pc_span's priv.state is one of these: a magic number per kind,
 * so that a span ended twice, or one whose begin failed, is told from an
 * open one (a copy of an open span is not). */
enum { SPAN_ENDED = 0, SPAN_EMPTY = 0x70637330, SPAN_READ = 0x70637372, SPAN_WRITE = 0x70637377 };
HIDDEN ssize_t span_read_begin(struct pc_file *h, uint64_t off, size_t len, int flags, struct pc_span *s);
HIDDEN void span_read_end(struct pc_span *s);
HIDDEN ssize_t span_write_begin(struct pc_file *h, uint64_t off, size_t len, int flags, struct pc_span *s);
HIDDEN int span_write_end(struct pc_span *s, size_t copied);

/* truncate.c */
HIDDEN int truncate_mapping(struct pc_mapping *m, uint64_t size);
HIDDEN int punch_range(struct pc_mapping *m, uint64_t off, uint64_t len, int mode);
/* Remove cached data of [start, end) (block aligned), waiting for
 * writeback.  Folios wholly inside are removed; blocks of folios partly
 * inside are zeroed and kept uptodate (INVAL_ZERO: truncate, punch) or
 * marked not uptodate (INVAL_STALE: the device changed under them).
 * Dirty data is discarded with INVAL_ZERO; with INVAL_STALE a folio still
 * dirty is left alone (the caller wrote it back first). */
enum { INVAL_ZERO, INVAL_STALE };
HIDDEN void invalidate_range(struct pc_mapping *m, uint64_t start, uint64_t end, int how);
/* Drop clean folios of the range, start writeback of dirty ones (DONTNEED). */
HIDDEN void fadvise_dontneed(struct pc_mapping *m, uint64_t start, uint64_t end);

/* direct.c */
HIDDEN ssize_t direct_read(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len);
HIDDEN ssize_t direct_write(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len,
			    int flags);

/* iov helpers (api.c) */
/* Copy between an iovec array, starting `skip` bytes in, and a buffer. */
HIDDEN void iov_copy_from(const struct iovec *iov, int iovcnt, size_t skip, void *dst, size_t len);
HIDDEN void iov_copy_to(const struct iovec *iov, int iovcnt, size_t skip, const void *src, size_t len);

/* file.c */
/* Open (or share) the mapping of path; a handle's reference is taken. */
HIDDEN int file_open(struct pc_cache *c, int dirfd, const char *path, int flags, mode_t mode,
		     struct pc_mapping **out);
/* The mapping of (dev, ino), or NULL; files_lock held, no reference taken. */
HIDDEN struct pc_mapping *files_hash_find(struct pc_cache *c, dev_t dev, ino_t ino);
/* Drop a handle's reference (after its writeback). */
HIDDEN void file_release(struct pc_mapping *m);
/* pc_cache_destroy: write back every mapping (first error), then, once no
 * I/O is in flight, free them all. */
HIDDEN int files_writeback_all(struct pc_cache *c);
/* Dirty bytes of files whose writeback keeps failing (0 when none). */
HIDDEN int64_t files_failing_dirty(struct pc_cache *c);
HIDDEN void files_free_all(struct pc_cache *c);

/* Take m out of the index (files_lock held); the index's reference is
 * the caller's to drop. */
HIDDEN void files_hash_remove(struct pc_cache *c, struct pc_mapping *m);
/* Remove every folio, dirty or not (the file is gone, or the caller wrote
 * back what it could); waits for write-back in flight. */
HIDDEN void mapping_discard_all(struct pc_mapping *m);
/* Remember the file's size and times as this cache now has it (the file
 * is left alone: a reopen compares them to notice changes by others). */
HIDDEN void mapping_save_attrs(struct pc_mapping *m, const struct stat *st);
/* Are st's size and times those saved (nobody changed the file since)? */
HIDDEN bool mapping_attrs_unchanged(const struct pc_mapping *m, const struct stat *st);
/* F_OFD_SETLK on the whole file: 0, -EBUSY (held elsewhere) or -errno. */
HIDDEN int ofd_lock(int fd, short type);

/* closed.c: files after their last close (see there) */
/* The last handle went (files_lock held); true: the caller settles it now
 * (it is clean already), outside files_lock. */
HIDDEN bool closed_add(struct pc_cache *c, struct pc_mapping *m);
/* A handle opens it again (files_lock held). */
HIDDEN void closed_reopened(struct pc_cache *c, struct pc_mapping *m);
/* Do closed files still to be written hold many descriptors (the flusher
 * then writes them first)? */
HIDDEN bool closed_fd_pressure(const struct pc_cache *c);
/* Must pc_close write back and wait (close-to-open, or too many closed
 * files are still to be written)? */
HIDDEN bool closed_must_wait(struct pc_cache *c);
/* A closed file's data is written: exact size, attributes saved, lock
 * released, descriptor kept for a reopen. */
HIDDEN void closed_settle(struct pc_mapping *m);
/* Out of descriptors: every settled closed file gives its up. */
HIDDEN void closed_release_fds(struct pc_cache *c);
/* The flusher: settle the closed files whose write-back ended. */
HIDDEN void closed_settle_written(struct pc_cache *c);
/* The flusher, at most once a second: drop closed files that were
 * unlinked, or gave their descriptor up and lost all their data. */
HIDDEN void closed_sweep(struct pc_cache *c);

/* api.c: free every handle (pc_cache_destroy). */
HIDDEN void handles_free_all(struct pc_cache *c);

/* process.c: a cache belongs to the process that created it */
/* Record that the calling process owns c (pc_cache_new). */
HIDDEN void process_claim(struct pc_cache *c);
/* Is c a copy inherited through fork() (this process does not own it)? */
HIDDEN bool cache_inherited(const struct pc_cache *c);
/* Free a child's copy of an inherited cache: no lock, no I/O, no wait. */
HIDDEN void cache_free_inherited(struct pc_cache *c);
/* PC_CFG_FLUSH_AT_EXIT: write c back at exit(3) (0 or -ENOMEM); and no
 * more (pc_cache_destroy). */
HIDDEN int process_flush_at_exit(struct pc_cache *c);
HIDDEN void process_forget_at_exit(struct pc_cache *c);

/* cache.c */
HIDDEN void cache_update_peak_dirty(struct pc_cache *c);
HIDDEN void mapping_put(struct pc_mapping *m);

#endif
