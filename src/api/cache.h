/*
 * cache.h - the cache instance (struct pc_cache): its configuration and
 * the state of every layer that is per cache rather than per file (arena,
 * reclaim queues, throttle, files, closed files, handles, counters).
 * cache.c creates and destroys it; it has no internal calls of its own.
 *
 * Fields come in groups by the layer that owns them, most with a comment
 * naming its file.  Their order stays as it is: it decides which fields
 * share a cache line, which the hot paths' speed depends on.
 */
#ifndef PC_CACHE_H
#define PC_CACHE_H

#include "lib/counter.h"
#include "mem/folio.h"
#include "lib/progress.h"
#include "lib/radix.h"
#include "lib/shlock.h"
#include "mem/segment.h"
#include "mem/mapping.h"
#include "wb/flusher.h"
#include "lib/util.h"

#include "pagecache.h"

struct fault_set;       /* io/fault_set.h */
struct node_chunk;      /* mem/cache_mem.c */
struct pc_domain;       /* flusher.h */
struct pc_edge_ref;     /* edges.h */
struct pc_file;         /* handle.h */
struct pc_mapping;      /* mapping.h */
struct pc_segment;      /* mem/segment.h */
struct throttle_waiter; /* throttle.c */

/*
 * What one process keeps of a cache: its handles, its threads, its
 * hooks.  None of it may be shared: descriptors, threads and function
 * addresses mean something in one process only (ASLR puts the library
 * elsewhere in each).  It lives CACHE_PROC_BYTES below the cache, in
 * memory of the process's own (cache_proc): a shared cache is at one
 * address in every process (docs/shared.md, 2.4), so each process finds
 * its own part at one address too, from any pointer to the cache, with
 * no lookup, and structures in the cache may point to "this process's
 * part" as they point to the cache.
 */
struct pc_fdpass_server;

struct pc_proc {
	/* The segment the cache lives in (cache.c): this process's
	 * attachment, its heap (cache_mem.c), its locker. */
	struct pc_segment *seg;
	/* The segment's locker (lib/shlock.h): this process's slot in the
	 * cache.  Structures in the cache that lock for themselves (the
	 * radix pool, written ranges) point here: the same address, each
	 * process's own slot. */
	struct pc_shlock_ctx lockcx;
	bool use_uring;
	/* arena.c: the background fault-in's thread */
	pthread_t populate_thread;
	bool populate_running; /* started and not yet joined */
	/* This process's descriptors of the cache's files, by file slot
	 * (mem/file_slots.c; mproc in mapping.h). */
	struct pc_file_procs files;
	/* Held while an entry's descriptors are closed, and by the fdpass
	 * server while it duplicates one (file_fd_dup): a leaf. */
	pthread_mutex_t fd_lock;
	/* A shared cache: this process's bit in a mapping's holders (by its
	 * slot in the segment), and the server that hands its descriptors
	 * to the other processes (lib/fdpass.h; api/shared.c). */
	uint64_t self_bit;
	struct pc_fdpass_server *fdpass;
	/* Settled closed files whose descriptors this process keeps
	 * (closed.c): its own pc_config.max_closed_files, since descriptors
	 * are each process's and so is RLIMIT_NOFILE. */
	unsigned max_closed_files;
	/* The last sweep of closed files (closed.c), each process's: in a
	 * shared cache each process lets go of what it holds idle. */
	uint64_t last_sweep_ms;
	/* Held shared by each flusher round of this process, which may use
	 * this process's descriptors of files it holds; the sweep lets go of
	 * an idle hold (closes a descriptor) only with it held exclusively,
	 * never waiting for it. */
	pthread_rwlock_t round_lock;
	/* This process's flusher threads, I/O queues and file system
	 * descriptors, by domain index (wb/flusher.c; dproc). */
	struct pc_domain_proc domains[PC_MAX_DOMAINS];
	/* handles (api.c): the open ones, and the quarantine of closed ones */
	struct pc_file *open_head;
	struct pc_file *closed_head, *closed_tail;
	unsigned nr_closed;
	/* tests: fail device I/O; returns 0 or a negative errno */
	int (*fault_hook)(void *arg, int op, int fd, off_t off, size_t len);
	/* mapping_put's last reference: the file layer's part of the
	 * teardown (file_layer_init), so that the memory layer does not
	 * call up into it */
	void (*mapping_teardown)(struct pc_mapping *m);
	/* The flusher's work for closed files (closed.c, installed by
	 * closed_layer_init), so that write-back does not call up into the
	 * layer that keeps them: do closed files still to be written hold
	 * many descriptors (they go first then), and after each round,
	 * settle those written and sweep the dead ones. */
	bool (*closed_fd_pressure)(const struct pc_cache *c);
	void (*closed_after_round)(struct pc_cache *c);
	/* Memory is short: reclaim asks write-back to clean what it can
	 * (flusher_layer_init installs it). */
	void (*want_free)(struct pc_cache *c);
	void *fault_arg;
	/* pc_fault_inject rules (api/fault_rules.c): created on first use; the count
	 * is the fast path's only load when there are none */
	struct fault_set *_Atomic faults;
	_Atomic unsigned fault_nrules;
};

/*
 * The cache as every process sees it: everything that describes cached
 * data.  It holds no descriptor, thread or function address (struct
 * pc_proc has those).
 */
struct pc_cache {
	struct pc_config cfg;
	/* arena */
	uint8_t *arena;
	size_t arena_bytes;
	uint32_t npages;
	struct pc_folio *folios;
	struct pc_shmutex arena_lock;
	uint32_t free_head[PC_MAX_ORDER + 1];
	unsigned max_order;
	/* Pages from here on were never handed out: in no free list, their
	 * descriptors still calloc's zeros (arena.c).  Changed under
	 * arena_lock; atomic for the readers that take no lock. */
	_Atomic uint32_t fresh_pfn;
	_Atomic bool populate_stop;
	/* Background fault-in of the arena (arena.c; its thread: struct
	 * pc_proc). */
	_Atomic size_t populated_bytes; /* [0, this) of the arena faulted in */
	_Atomic bool populate_ended;   /* the thread is done (or never ran) */
	size_t populate_lead;          /* how far ahead of fresh_pfn it keeps */
	/* fresh_pfn moved (or the thread is told to stop): what the thread
	 * waits for once it is populate_lead ahead. */
	struct pc_progress frontier_progress;
	/* Bytes from the arena's start that are handed out or faulted in:
	 * the rest is what this cache has yet to take from the machine. */
	_Atomic size_t taken_bytes;
	/* The heap block the arena took (arena_meta_bytes). */
	uint64_t arena_heap_bytes;
	/* reclaim: S3-FIFO-like small + main queues, see reclaim.c */
	struct pc_shmutex lru_lock;
	struct rt_pool node_pool; /* spare index nodes of every file (radix.c) */
	uint32_t small_head, small_tail, main_head, main_tail;
	uint64_t small_pages, main_pages;
	/* Memory freed, or made freeable (writeback ended): what allocations
	 * waiting for memory wait for (reclaim.c). */
	struct pc_progress mem_progress;
	/* Device writes ended (dirty room): what the throttle waits for. */
	struct pc_progress wb_progress;
	/* dirty throttle (throttle.c) */
	struct pc_shmutex throttle_lock;
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
	struct pc_shmutex files_lock;
	struct pc_mapping **file_hash;
	unsigned file_hash_size;
	unsigned nr_mappings;
	/* closed files (closed.c): dirty ones waiting for write-back, and
	 * clean ones keeping their descriptor, oldest first */
	struct pc_mapping *closed_dirty_head, *closed_dirty_tail;
	unsigned nr_closed_dirty; /* changed under files_lock, read with __atomic loads */
	struct pc_mapping *closed_files_head, *closed_files_tail;
	unsigned nr_closed_fds;
	uint64_t last_sweep_ms;
	/* writeback domains, one per device (flusher.c) */
	struct pc_domain *domains;
	uint64_t start_ms;
	/* counters */
	_Atomic uint64_t st_read_ios, st_read_bytes, st_write_ios, st_write_bytes;
	_Atomic uint64_t st_cached, st_folios, st_evictions, st_drops;
	_Atomic uint64_t st_edge_kept, st_edge_completed, st_edge_expired, st_edge_evicted, st_edge_waits;
	/* edges.c: the kept edges' bytes, and their FIFO, oldest first */
	_Atomic int64_t edge_bytes;
	_Atomic bool edge_trimming;
	struct pc_shmutex edge_lock;
	struct pc_edge_ref *edge_fifo;
	uint32_t edge_cap, edge_head, edge_count;
	_Atomic uint64_t st_deferred, st_rmw_reads, st_miss;
	_Atomic uint64_t st_ra_sync, st_ra_async, st_ra_bytes, st_ra_random; /* readahead.c */
	struct pc_counter hits; /* bytes read without waiting (count_hit_bytes) */
	/* Folios freed so far (folio_put), with 56 bytes on either side so
	 * that no other field shares its cache line (the structure comes
	 * from calloc, 16-byte aligned): only frees write it, and every
	 * cache hit reads it twice, to tell that too few frees happened
	 * during its copy for a folio's 15-bit generation to have come round
	 * again (read_hit.h). */
	char folio_frees_pad_before[56];
	_Atomic uint64_t folio_frees;
	char folio_frees_pad_after[56];
	_Atomic uint64_t st_throttle_waits, st_throttle_pauses, st_kicks, st_write_errors;
	/* throttle.c: waits in the queue that ended by the wake of the
	 * waiter ahead, not the timeout (for tests: a lost wake-up costs
	 * only time, so it shows here) */
	_Atomic uint64_t st_throttle_woken;
	_Atomic uint64_t st_reserve_inline;
	/* pace.c: write-back completed and bytes dirtied (all writers), the
	 * last sample of both, and the estimates made from them (bytes/s) */
	_Atomic uint64_t wb_done_bytes, dirtied_bytes;
	/* pace.c: write-back requests in flight, the time the device had some
	 * (busy_ns: up to busy_since, when the current busy spell began) */
	_Atomic int64_t wb_ios;
	_Atomic uint64_t wb_busy_ns, wb_busy_since;
	struct pc_shmutex pace_lock;
	uint64_t pace_stamp_ns, pace_done, pace_dirtied, pace_busy;
	/* Bandwidth samples taken (pace_sample_due): changed under pace_lock,
	 * read without it by every paced write (pace_learning_position). */
	_Atomic unsigned pace_samples;
	uint64_t pace_learn_done, pace_learn_busy; /* at the first window (learn_bandwidth) */
	_Atomic uint64_t pace_bw, pace_ratelimit;
	atomic_bool pace_freerun_seen; /* a write ran free since the last sample */
	_Atomic uint64_t pace_pos_sum, pace_pos_n; /* positions of the paced writes since */
	_Atomic int64_t peak_dirty;
	/* cache_mem.c: the heap blocks node_pool's nodes come from */
	struct node_chunk *_Atomic node_chunks;
	/* mem/file_slots.c: which file slots are taken (mapping.h, mproc),
	 * and the word the last claim found room in.  Last: 128 KiB, whose
	 * pages are touched only as files are opened. */
	_Atomic uint32_t file_slot_hint;
	_Atomic uint32_t file_gen; /* the last mapping's gen (file_slots.c) */
	/* A shared cache (api/shared.c): its name (cfg.shared_name points
	 * here, one address in every process), the futex word attachers wait
	 * on until the creator has made the cache, and members_lock, which
	 * serialises attaching and leaving (taken before every other lock):
	 * a leaver decides under it what it must write back, and the last
	 * one sets `closing`, which sends late attachers away. */
	bool shared;
	char name[SEG_NAME_MAX + 1];
	_Atomic uint32_t ready;
	struct pc_shmutex members_lock;
	bool closing;
	uint64_t members; /* slots of the members (members_lock) */
	_Atomic uint64_t file_slot_bits[FILE_SLOTS / 64];
};

/* The process's part of c: one page-rounded struct pc_proc, right below
 * c in the memory cache.c maps for the two. */
#define CACHE_PROC_BYTES (((sizeof(struct pc_proc) + PC_PAGE_SIZE - 1) / PC_PAGE_SIZE) * PC_PAGE_SIZE)

static inline struct pc_proc *cache_proc(const struct pc_cache *c)
{
	return (struct pc_proc *)((uintptr_t)c - CACHE_PROC_BYTES);
}

/*
 * The cache's locks (lib/shlock.h: in the segment, owned by process
 * slots) at their levels of the lock order (lib/check.h), recorded in
 * the checking builds.  A lock call that finds its owner dead fails a
 * check until the recovery exists (shlock_owner_lives).
 */
static inline const struct pc_shlock_ctx *cache_lockcx(const struct pc_cache *c)
{
	return &cache_proc(c)->lockcx;
}

static inline void cache_lock_at(const struct pc_cache *c, struct pc_shmutex *mu, enum pc_lock_level level,
				 const char *file, int line)
{
	shlock_owner_lives(noted_shmutex_lock_at(mu, cache_lockcx(c), level, false, file, line));
}

static inline bool cache_trylock_at(const struct pc_cache *c, struct pc_shmutex *mu, enum pc_lock_level level,
				    const char *file, int line)
{
	return shlock_owner_lives(noted_shmutex_trylock_at(mu, cache_lockcx(c), level, file, line)) == 0;
}

static inline void cache_unlock_at(const struct pc_cache *c, struct pc_shmutex *mu, const char *file, int line)
{
	noted_shmutex_unlock_at(mu, cache_lockcx(c), file, line);
}

#define cache_lock(c, mu, level) cache_lock_at((c), (mu), (level), __FILE__, __LINE__)
#define cache_trylock(c, mu, level) cache_trylock_at((c), (mu), (level), __FILE__, __LINE__)
#define cache_unlock(c, mu) cache_unlock_at((c), (mu), __FILE__, __LINE__)
/* cache->files_lock: an open revalidates (and may discard) a file's folios
 * under it, so it comes before the folio lock. */
#define files_lock(c) cache_lock((c), &(c)->files_lock, LOCK_FILES)
#define files_unlock(c) cache_unlock((c), &(c)->files_lock)

/* Is c a copy inherited through fork()?  Asked of the process's list of
 * segments, not of the cache: a child has no shared cache's memory
 * mapped, not even the window (docs/shared.md, 2.7).  For the calls on
 * the cache itself; handle and span calls ask the handle or span
 * (handle_inherited, span_inherited), which costs one load. */
static inline bool cache_inherited(const struct pc_cache *c)
{
	return segment_inherited_at(c);
}

static inline bool cache_shared(const struct pc_cache *c)
{
	return c->shared;
}

#endif
