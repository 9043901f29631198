/*
 * cache.c - the cache instance: configuration, creation and destruction,
 * and the counters reported by pc_cache_stats / pc_file_stats.
 */
#include "api/cache.h"
#include "mem/cache_mem.h"
#include "mem/file_slots.h"

#include "mem/arena.h"
#include "io/backend.h"
#include "lib/counter.h"
#include "wb/edges.h"
#include "api/fault_rules.h"
#include "io/fault.h"
#include "api/fdtable.h"
#include "api/closed.h"
#include "api/file.h"
#include "mem/segment.h"
#include "api/files.h"
#include "wb/flusher.h"
#include "mem/folio.h"
#include "api/handle.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "api/process.h"
#include "api/shared.h"
#include "lib/progress.h"
#include "lib/radix.h"
#include "lib/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB (1024u * 1024u)

void pc_config_init(struct pc_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->memory_limit = 256 * (size_t)MIB;
	cfg->max_folio_size = 256 * 1024;
	cfg->block_size = 0;
	/* 0: 10 % and 20 % of whatever memory_limit the caller sets. */
	cfg->dirty_background_bytes = 0;
	cfg->dirty_limit_bytes = 0;
	cfg->dirty_expire_ms = 3000;
	cfg->writeback_threads = 1;
	cfg->queue_depth = 64;
	cfg->max_io_bytes = MIB;
	cfg->readahead_max_bytes = 8 * MIB;
	cfg->uncached_kick_bytes = 8 * MIB;
	cfg->edge_expire_ms = 5000;
	cfg->max_closed_files = 0; /* from RLIMIT_NOFILE at pc_cache_new */
	cfg->flags = 0;
}

static bool is_pow2(size_t x)
{
	return x && !(x & (x - 1));
}

/* A quarter of the process's descriptor limit (the soft RLIMIT_NOFILE),
 * at most 65536: the kernel keeps every closed file's inode cached, so a
 * reopen should find as many as it can without open(2); closed files
 * with data still to write hold up to as many more (closed.c). */
static unsigned default_max_closed_files(void)
{
	struct rlimit rl;
	uint64_t n = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 4 < n)
		n = rl.rlim_cur / 4;
	return n ? (unsigned)n : 1;
}

/* Check a user config and fill zero fields with defaults. */
static int config_validate(struct pc_config *cfg)
{
	const unsigned known = PC_CFG_ALLOW_BUFFERED_BACKEND | PC_CFG_NO_IO_URING | PC_CFG_NO_DEFERRED_RMW |
			       PC_CFG_NO_EDGE_KEEP | PC_CFG_LAZY_MEMORY | PC_CFG_CLOSE_TO_OPEN | PC_CFG_FLUSH_AT_EXIT |
			       PC_CFG_EAGER_MEMORY;
	if (cfg->flags & ~known)
		return -EINVAL;
	if ((cfg->flags & PC_CFG_LAZY_MEMORY) && (cfg->flags & PC_CFG_EAGER_MEMORY))
		return -EINVAL; /* no thread, or a thread that faults in all of it */
	if (!cfg->max_folio_size)
		cfg->max_folio_size = 256 * 1024;
	if (!is_pow2(cfg->max_folio_size) || cfg->max_folio_size < PC_PAGE_SIZE ||
	    cfg->max_folio_size > ((size_t)PC_PAGE_SIZE << PC_MAX_ORDER))
		return -EINVAL;
	if (!cfg->memory_limit)
		cfg->memory_limit = 256 * (size_t)MIB;
	cfg->memory_limit = round_down(cfg->memory_limit, PC_PAGE_SIZE);
	if (cfg->memory_limit < MIB || cfg->memory_limit < 16 * cfg->max_folio_size ||
	    (cfg->memory_limit >> PC_PAGE_SHIFT) >= PC_NONE)
		return -EINVAL;
	if (cfg->block_size && (!is_pow2(cfg->block_size) || cfg->block_size < 512 || cfg->block_size > 65536 ||
				cfg->block_size > cfg->max_folio_size))
		return -EINVAL;
	if (!cfg->dirty_limit_bytes)
		cfg->dirty_limit_bytes = cfg->memory_limit / 5;
	if (!cfg->dirty_background_bytes)
		cfg->dirty_background_bytes = cfg->dirty_limit_bytes / 2;
	if (cfg->dirty_limit_bytes > cfg->memory_limit / 2 || cfg->dirty_background_bytes > cfg->dirty_limit_bytes)
		return -EINVAL;
	if (!cfg->dirty_expire_ms)
		cfg->dirty_expire_ms = 3000;
	if (!cfg->writeback_threads)
		cfg->writeback_threads = 1;
	if (cfg->writeback_threads > 64)
		return -EINVAL;
	if (!cfg->queue_depth)
		cfg->queue_depth = 64;
	if (cfg->queue_depth > 4096)
		return -EINVAL;
	if (!cfg->max_io_bytes)
		cfg->max_io_bytes = MIB;
	if (cfg->max_io_bytes < PC_PAGE_SIZE || cfg->max_io_bytes > 64 * (size_t)MIB ||
	    cfg->max_io_bytes % PC_PAGE_SIZE)
		return -EINVAL;
	if (cfg->readahead_max_bytes > cfg->memory_limit / 4)
		cfg->readahead_max_bytes = cfg->memory_limit / 4;
	if (!cfg->uncached_kick_bytes)
		cfg->uncached_kick_bytes = 8 * MIB;
	/* A small cache must not let uncached data pile up to the dirty limit. */
	if (cfg->uncached_kick_bytes > cfg->dirty_background_bytes / 2)
		cfg->uncached_kick_bytes = cfg->dirty_background_bytes / 2;
	if (!cfg->edge_expire_ms)
		cfg->edge_expire_ms = 5000;
	/* A quarter: 32 PC_DSYNC writers of 6000 B records drifting hundreds
	 * of records apart on a loaded machine (pcbench interleaved, 1 GiB)
	 * kept more than the eighth that was the default, whose oldest edges
	 * their laggards then read back (docs/results.md, "Figures the code's
	 * comments used to carry", Edge budget); edges are clean and
	 * reclaim takes them like any clean folio when memory is short, so
	 * the budget only bounds how much of the cache they may hold while
	 * it is not. */
	if (!cfg->edge_budget_bytes)
		cfg->edge_budget_bytes = cfg->memory_limit / 4;
	if (cfg->edge_budget_bytes > cfg->memory_limit / 2)
		return -EINVAL;
	if (!cfg->max_closed_files)
		cfg->max_closed_files = default_max_closed_files();
	if (cfg->max_closed_files > (1u << 20))
		return -EINVAL;
	if (cfg->shared_name && segment_name_check(cfg->shared_name) != 0)
		return -EINVAL;
	return 0;
}

/*
 * The cache lives in a segment (mem/segment.h): struct pc_cache is the
 * segment's fixed area, the process's part (struct pc_proc) its private
 * window right below it (cache_proc), and everything else of the cache
 * comes from the segment's heap: the folio table, the arena and the
 * structures of cache_mem.c.  The heap is sized for the largest the
 * arena and table can be, rounded up to powers of two as the heap's
 * buddy blocks are, plus as much as the arena again (128 MiB at least)
 * for the rest: mappings (a 2 KiB block each), index nodes and written
 * ranges, about 2.6 KiB a file held, so 50,000 files at once in the
 * smallest heap, 100,000 in a 256 MiB cache's.  Only address space:
 * memory is committed as it is touched (MAP_NORESERVE, or a shared
 * memory object's holes); but RLIMIT_AS and RLIMIT_DATA count it, which
 * is why it is not larger.
 */
static size_t cache_heap_bytes(const struct pc_config *cfg)
{
	size_t arena = roundup_pow2((size_t)cfg->memory_limit);
	size_t table = roundup_pow2((size_t)(cfg->memory_limit >> PC_PAGE_SHIFT) * sizeof(struct pc_folio));
	size_t rest = arena > 128 * (size_t)MIB ? arena : 128 * (size_t)MIB;
	return arena + table + rest;
}

/* The cache's segment: a private one, or the named one of a shared
 * cache, made by this call (*created) or attached to (the creator's
 * configuration, checked against the caller's: shared.c).  user: what
 * the caller passed (its explicit settings), cfg: that, validated. */
static int cache_memory_new(const struct pc_config *cfg, const struct pc_config *user, struct pc_cache **out,
			    bool *created)
{
	struct seg_params p = {
		.heap_bytes = cache_heap_bytes(cfg),
		.private_bytes = CACHE_PROC_BYTES,
		.fixed_bytes = sizeof(struct pc_cache),
	};
	struct pc_segment *seg;
	int err;
	if (cfg->shared_name) {
		struct pc_config stored = *cfg;
		stored.shared_name = NULL; /* an address of this process's */
		struct shared_config_ask ask = { .user = user, .mine = cfg };
		p.config = &stored;
		p.config_len = sizeof(stored);
		p.config_check = shared_config_check;
		p.config_arg = &ask;
		err = segment_open(cfg->shared_name, &p, &seg);
	} else {
		err = segment_new_private(&p, &seg);
	}
	if (err)
		return err;
	struct pc_cache *c = segment_fixed(seg);
	PC_ASSERT((void *)cache_proc(c) == segment_private(seg));
	cache_proc(c)->seg = seg;
	cache_proc(c)->lockcx = *segment_lock_ctx(seg);
	*created = segment_created(seg) || !cfg->shared_name;
	*out = c;
	return 0;
}

/* The last process's end of the cache (a private cache's only one). */
static void cache_memory_free(struct pc_cache *c)
{
	struct pc_segment *seg = cache_proc(c)->seg;
	if (segment_detach(seg) == 1)
		segment_destroy(seg, false);
}

/* A child of fork()'s copy: the segment is not mapped here, but for the
 * process part (the window), which says whose the cache is. */
static void cache_memory_forget_inherited(struct pc_cache *c)
{
	segment_detach(cache_proc(c)->seg); /* frees the copy's record */
	segment_window_forget(cache_proc(c), CACHE_PROC_BYTES);
}

/* This process's part of the cache (struct pc_proc, in its window): the
 * layers' hooks, its domains (none started), its descriptor server in a
 * shared cache, at-exit write-back.  0 or a negative errno. */
static int cache_proc_start(struct pc_cache *c, unsigned max_closed_files)
{
	struct pc_proc *p = cache_proc(c);
	pthread_mutex_init(&p->fd_lock, NULL);
	pthread_rwlock_init(&p->round_lock, NULL);
	p->max_closed_files = max_closed_files;
	domains_proc_init(c);
#ifdef PC_NO_URING
	p->use_uring = false;
#else
	p->use_uring = !(c->cfg.flags & PC_CFG_NO_IO_URING);
#endif
	/* Before the cache has threads of its own (fdtable.c): room for the
	 * descriptors of the closed files it keeps, twice over (those with
	 * data to write may hold as many more), and some open ones. */
	fdtable_reserve(2 * max_closed_files + 64);
	flusher_layer_init(c);
	file_layer_init(c);
	closed_layer_init(c);
	process_setup();
	int err = cache_shared(c) ? shared_proc_start(c) : 0;
	if (!err && (c->cfg.flags & PC_CFG_FLUSH_AT_EXIT))
		err = process_flush_at_exit(c);
	return err;
}

/* A shared cache's creator: what processes share must say so before any
 * other process can see it (counters whose slots two processes' threads
 * may both own, futex words other processes wait on). */
static void cache_make_shared(struct pc_cache *c)
{
	c->shared = true;
	arena_budget_share(c);
	snprintf(c->name, sizeof(c->name), "%s", c->cfg.shared_name);
	c->cfg.shared_name = c->name; /* one address in every process */
	counter_make_atomic(&c->hits);
	progress_share(&c->mem_progress);
	progress_share(&c->frontier_progress);
	progress_share(&c->wb_progress);
	shmutex_init(&c->members_lock);
}

/* The creator makes the cache in its segment (a private cache's maker is
 * its creator).  Attachers wait for `ready`. */
static int cache_make(struct pc_cache *c, const struct pc_config *cfg)
{
	c->cfg = *cfg;
	c->max_order = (unsigned)__builtin_ctzll(c->cfg.max_folio_size >> PC_PAGE_SHIFT);
	int err = arena_init(c);
	if (err)
		return err;
	c->file_hash_size = 256;
	c->file_hash = cache_zalloc(c, c->file_hash_size * sizeof(*c->file_hash));
	if (!c->file_hash) {
		arena_destroy(c);
		return -ENOMEM;
	}
	shmutex_init(&c->arena_lock);
	shmutex_init(&c->lru_lock);
	progress_init(&c->mem_progress);
	progress_init(&c->frontier_progress);
	progress_init(&c->wb_progress);
	shmutex_init(&c->throttle_lock);
	shmutex_init(&c->pace_lock);
	atomic_store(&c->throttle_head_vtime, UINT64_MAX);
	shmutex_init(&c->files_lock);
	edges_init(c);
	rt_pool_init(&c->node_pool, cache_lockcx(c));
	c->small_head = c->small_tail = c->main_head = c->main_tail = PC_NONE;
	c->start_ms = now_ms();
	if (cfg->shared_name)
		cache_make_shared(c);
	return 0;
}

/* A shared cache's memory is the shared memory file system's (/dev/shm,
 * a tmpfs: 64 MiB in a default container), and a page touched past its
 * room is a SIGBUS, not an error: the room for the folios and their table
 * (and a little of the heap) is asked for at creation (-ENOMEM).  What
 * other programs take there later can still run it short. */
static int shm_room_check(struct pc_cache *c, const struct pc_config *cfg)
{
	uint64_t need = cfg->memory_limit + (cfg->memory_limit >> PC_PAGE_SHIFT) * sizeof(struct pc_folio) + 16 * MIB;
	uint64_t room = segment_backing_room(cache_proc(c)->seg);
	if (room >= need)
		return 0;
	fprintf(stderr, "pagecache: shared cache %s: %llu MiB free where its memory lives (/dev/shm), %llu MiB needed\n",
		cfg->shared_name, (unsigned long long)(room >> 20), (unsigned long long)(need >> 20));
	return -ENOMEM;
}

/* The cache is made: attachers may join (shared.c, shared_join). */
static void cache_ready(struct pc_cache *c)
{
	atomic_store_explicit(&c->ready, 1, memory_order_release);
	shfutex_wake(&c->ready, INT_MAX);
}

/* An attacher that could not join gives its attachment up; the last one
 * out of a cache that its last member tore down removes the name. */
static void cache_memory_leave(struct pc_cache *c)
{
	struct pc_segment *seg = cache_proc(c)->seg;
	file_procs_free(cache_proc(c));
	if (segment_detach(seg) == 1)
		segment_destroy(seg, false);
}

/* Attach to a shared cache that another process made: 0,
 * SHARED_CLOSING (its last member is leaving: start again), or a negative
 * errno. */
static int cache_join(struct pc_cache *c, const struct pc_config *cfg, uint64_t deadline)
{
	uint64_t now = now_ms();
	int err = shared_join(c, deadline > now ? (unsigned)(deadline - now) : 1);
	if (err)
		return err;
	err = cache_proc_start(c, cfg->max_closed_files);
	if (err) {
		if (c->cfg.flags & PC_CFG_FLUSH_AT_EXIT)
			process_forget_at_exit(c);
		domains_proc_free(c);
		shared_proc_stop(c);
	} else {
		arena_attach(c);
		shared_member_add(c);
	}
	cache_unlock(c, &c->members_lock);
	return err;
}

struct pc_cache *pc_cache_new(const struct pc_config *user_cfg)
{
	struct pc_config cfg, dflt;
	pc_config_init(&dflt);
	cfg = user_cfg ? *user_cfg : dflt;
	int err = config_validate(&cfg);
	if (err) {
		errno = -err;
		return NULL;
	}
	/* A second attachment would be mapped where the first is: one cache
	 * per name and process (its threads share it); a fork child destroys
	 * its inherited copy before it attaches. */
	if (cfg.shared_name && segment_attached_here(cfg.shared_name)) {
		errno = EBUSY;
		return NULL;
	}
	uint64_t deadline = now_ms() + SEG_WAIT_MS;
	for (;;) {
		struct pc_cache *c;
		bool created;
		err = cache_memory_new(&cfg, user_cfg ? user_cfg : &dflt, &c, &created);
		if (err)
			break;
		if (!created) {
			err = cache_join(c, &cfg, deadline);
			if (!err)
				return c;
			cache_memory_leave(c);
			if (err == SHARED_CLOSING && now_ms() < deadline) {
				usleep(10 * 1000); /* until the leaver has removed the name */
				continue;
			}
			if (err == SHARED_CLOSING)
				err = -ETIMEDOUT;
			break;
		}
		err = shm_room_check(c, &cfg);
		if (!err)
			err = cache_make(c, &cfg);
		if (err) {
			cache_memory_free(c);
			break;
		}
		err = cache_proc_start(c, cfg.max_closed_files);
		if (err) {
			pc_cache_destroy(c);
			break;
		}
		/* Last: a step of it holds mmap_lock, which the allocations
		 * above may need (malloc's brk or mmap would wait for the step). */
		arena_populate_start(c);
		if (cache_shared(c)) {
			shared_member_add(c);
			cache_ready(c);
		}
		return c;
	}
	errno = -err;
	return NULL;
}

int pc_cache_destroy(struct pc_cache *c)
{
	if (!c) {
		errno = EINVAL;
		return -1;
	}
	if (cache_inherited(c)) {
		/* A shared cache's memory is not mapped in a child at all:
		 * only the record of it is left to free. */
		struct pc_segment *named = segment_inherited_named_at(c);
		if (named) {
			segment_detach(named);
			return 0;
		}
		cache_free_inherited(c);
		file_procs_free(cache_proc(c));
		cache_memory_forget_inherited(c);
		return 0;
	}
	if (c->cfg.flags & PC_CFG_FLUSH_AT_EXIT)
		process_forget_at_exit(c);
	/* Faulting in memory nobody will use again only slows the final
	 * write-back down. */
	arena_populate_stop(c);
	int err = 0;
	if (cache_shared(c)) {
		err = handles_close_all(c);
		int werr = 0;
		bool last = shared_leave(c, &werr) == 1;
		shared_proc_stop(c);
		if (!last) {
			fault_rules_destroy(c);
			handles_free_all(c);
			cache_memory_leave(c);
			err = err ? err : werr;
			if (err) {
				errno = -err;
				return -1;
			}
			return 0;
		}
	}
	domains_stop(c);
	int werr = files_writeback_all(c);
	err = err ? err : werr;
	domains_drain(c);
	/* No I/O from here on; the rules' file references go before the files. */
	fault_rules_destroy(c);
	handles_free_all(c);
	files_free_all(c);
	domains_destroy(c);
	cache_free(c, c->file_hash);
	arena_destroy(c);
	progress_destroy(&c->mem_progress);
	progress_destroy(&c->frontier_progress);
	progress_destroy(&c->wb_progress);
	edges_destroy(c);
	rt_pool_destroy(&c->node_pool); /* after every tree is gone */
	cache_nodes_free(c);
	file_procs_free(cache_proc(c));
	cache_memory_free(c);
	if (err) {
		errno = -err;
		return -1;
	}
	return 0;
}

static uint64_t ld(_Atomic uint64_t *x)
{
	return atomic_load_explicit(x, memory_order_relaxed);
}

static uint64_t ld_pos(_Atomic int64_t *x)
{
	int64_t v = atomic_load_explicit(x, memory_order_relaxed);
	return v > 0 ? (uint64_t)v : 0;
}

int pc_cache_config(struct pc_cache *c, struct pc_config *cfg)
{
	if (!c || !cfg) {
		errno = EINVAL;
		return -1;
	}
	if (cache_inherited(c)) {
		errno = EPERM;
		return -1;
	}
	*cfg = c->cfg;
	cfg->max_closed_files = cache_proc(c)->max_closed_files; /* the process's */
	return 0;
}

void pc_cache_stats(struct pc_cache *c, struct pc_stats *s)
{
	if (!s)
		return;
	memset(s, 0, sizeof(*s));
	if (!c || cache_inherited(c))
		return;
	s->dev_read_ios = ld(&c->st_read_ios);
	s->dev_read_bytes = ld(&c->st_read_bytes);
	s->dev_write_ios = ld(&c->st_write_ios);
	s->dev_write_bytes = ld(&c->st_write_bytes);
	s->cached_bytes = ld(&c->st_cached);
	s->dirty_bytes = ld_pos(&c->dirty);
	s->dirty_uncached_bytes = ld_pos(&c->uncached);
	s->peak_dirty_bytes = ld_pos(&c->peak_dirty);
	s->writeback_bytes = ld_pos(&c->writeback);
	s->folios = ld(&c->st_folios);
	s->evictions = ld(&c->st_evictions);
	s->dropbehind_drops = ld(&c->st_drops);
	s->edge_kept = ld(&c->st_edge_kept);
	s->edge_completed = ld(&c->st_edge_completed);
	s->edge_expired = ld(&c->st_edge_expired);
	s->edge_evicted_budget = ld(&c->st_edge_evicted);
	s->edge_waits = ld(&c->st_edge_waits);
	s->deferred_rmw = ld(&c->st_deferred);
	s->rmw_reads = ld(&c->st_rmw_reads);
	s->hit_bytes = counter_sum(&c->hits);
	s->miss_bytes = ld(&c->st_miss);
	s->throttle_waits = ld(&c->st_throttle_waits);
	s->reserve_inline = ld(&c->st_reserve_inline);
	s->throttle_pauses = ld(&c->st_throttle_pauses);
	s->flusher_kicks = ld(&c->st_kicks);
	s->write_errors = ld(&c->st_write_errors);
	s->ra_sync_windows = ld(&c->st_ra_sync);
	s->ra_async_windows = ld(&c->st_ra_async);
	s->ra_window_bytes = ld(&c->st_ra_bytes);
	s->ra_random_reads = ld(&c->st_ra_random);
	s->prefault_pending_bytes = arena_prefault_pending(c);
	s->meta_bytes = arena_meta_bytes(c);
	s->io_uring = cache_proc(c)->use_uring;
}

void pc_file_stats(struct pc_file *h, struct pc_stats *s)
{
	if (!s)
		return;
	memset(s, 0, sizeof(*s));
	if (!h || h->magic != PC_FILE_MAGIC || handle_inherited(h))
		return;
	struct pc_mapping *m = h->m;
	s->dev_read_ios = ld(&m->st_read_ios);
	s->dev_read_bytes = ld(&m->st_read_bytes);
	s->dev_write_ios = ld(&m->st_write_ios);
	s->dev_write_bytes = ld(&m->st_write_bytes);
	s->cached_bytes = ld_pos(&m->st_cached);
	s->dirty_bytes = ld_pos(&m->nr_dirty);
	s->dirty_uncached_bytes = ld_pos(&m->nr_uncached);
	s->hit_bytes = counter_sum(&m->hits);
	s->miss_bytes = ld(&m->st_miss);
	s->deferred_rmw = ld(&m->st_deferred);
	s->rmw_reads = ld(&m->st_rmw_reads);
	s->ra_sync_windows = ld(&m->st_ra_sync);
	s->ra_async_windows = ld(&m->st_ra_async);
	s->ra_window_bytes = ld(&m->st_ra_bytes);
	s->ra_random_reads = ld(&m->st_ra_random);
	s->io_uring = ioq_is_uring(dproc(m->dom)->ioq);
	s->block_size = m->block_size;
	s->peak_dirty_bytes = ld_pos(&m->c->peak_dirty);
}
