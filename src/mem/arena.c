/*
 * arena.c - folio memory: one anonymous mapping of memory_limit bytes carved
 * by a buddy allocator into naturally aligned power-of-two blocks of pages.
 *
 * Why a buddy allocator: every folio is then aligned to its own size (so it
 * can be read and written with O_DIRECT in place, no bounce buffer), the
 * cache's memory use is exact by construction, and freeing merges neighbours
 * back into large blocks so large folios stay available.  Free blocks are
 * linked through the descriptors of their first page (lru_prev/lru_next),
 * marked PF_BUDDY with their order.
 *
 * Creating a cache costs nothing per byte of it.  pc_cache_new faults in
 * neither the arena nor the descriptor table (a background thread does,
 * below), and the free lists start empty and are seeded lazily from a
 * frontier, fresh_pfn, that moves up from page 0 one largest block at a time
 * when no listed block is large enough.  So blocks that were handed out
 * before are reused first (their memory is faulted in), and fresh memory is
 * handed out in ascending address order.
 *
 * A background thread faults the arena in, one 2 MiB step at a time, in that
 * same ascending order (MADV_POPULATE_WRITE), so that the allocator hands out
 * memory the thread has faulted in already and the page faults, and the
 * kernel's zeroing, stay off the callers' time.  It keeps a lead (a
 * sixteenth of the arena, 2 to 32 MiB) ahead of the memory handed out and
 * then sleeps until the allocator hands out more (and while it is handing
 * out fresh memory, see POPULATE_QUIET_MS): a cache whose working
 * set stays small (an uncached writer's is the dirty limit and its edges)
 * takes only that much memory, and the thread does not spend a CPU its
 * first writers want (seconds a GiB on a virtual machine whose host backs
 * memory on first touch) on memory that will not be used.  Writers faster
 * than the thread fault their folios themselves, as with
 * PC_CFG_LAZY_MEMORY; the thread then walks their pages cheaply (populating
 * pages already present costs little, in huge pages far less than in 4 KiB
 * ones: docs/results.md, "Figures the code's comments used to carry",
 * Fault-in) and works on just ahead of them.  It faults in the
 * descriptor table too, each part just before the memory it describes
 * (populate_table).  It never skips memory, and ends once it has faulted in
 * the whole arena, which it does when all of the arena has been handed out
 * (with PC_CFG_EAGER_MEMORY its lead is the whole arena: it faults all of
 * it in at once).  Why 2 MiB: it is one
 * transparent huge page; and a step holds mmap_lock for reading (the
 * huge-page advice before a run of steps takes it for writing, briefly), so what
 * changes the address space in other threads (mmap, munmap, malloc's brk,
 * fork) waits for at most one step, as does pc_cache_destroy to stop the
 * thread: briefly where the kernel zeroes memory at memory speed, far
 * longer on a virtual machine whose host backs memory on first touch
 * (docs/results.md, "Figures the code's comments used to carry",
 * Fault-in).  (pc_cache_new starts it last, after its own allocations.)  It
 * runs at normal priority: its work is what the first writes would
 * otherwise do on their own time.  The arena is MADV_DONTFORK and a child
 * of fork() has no copy of the thread: the child never joins it
 * (process.c frees its copy without arena_destroy).
 *
 * The machine must be able to back the cache: pc_cache_new fails with
 * ENOMEM when memory_limit plus the descriptor table is more than what
 * sysmem_available() says, less what this process's other caches have yet
 * to take (their memory not yet handed out nor faulted in, which that
 * figure does not show yet).  The rule is documented with memory_limit in
 * pagecache.h.
 */
#include "mem/arena.h"

#include "api/cache.h"
#include "lib/check.h"
#include "mem/folio.h"
#include "mem/segment.h"
#include "pagecache.h"
#include "lib/sysmem.h"
#include "lib/util.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* One step of the background fault-in: one transparent huge page. */
#define POPULATE_STEP ((size_t)2 << 20)

/* ------------------------------------------------ the machine's memory */

/* Arena bytes the live caches of this process have yet to take from the
 * machine (neither handed out nor faulted in).  Changed only by atomic
 * read-modify-writes, so creating caches in several threads at once
 * cannot promise the same memory twice, and a fork() holds no lock of it. */
static _Atomic uint64_t untaken_total;

static size_t table_bytes(const struct pc_cache *c)
{
	return (size_t)c->npages * sizeof(struct pc_folio);
}

/* Count the new cache's arena as still to take, if the machine can back
 * it and the descriptor table on top of what other caches still take. */
static int budget_claim(struct pc_cache *c)
{
	uint64_t avail = sysmem_available();
	uint64_t need = c->arena_bytes + table_bytes(c);
	uint64_t untaken = atomic_load(&untaken_total);
	do {
		if (avail != UINT64_MAX && (need > avail || untaken > avail - need))
			return -ENOMEM;
	} while (!atomic_compare_exchange_weak(&untaken_total, &untaken, untaken + c->arena_bytes));
	return 0;
}

/* [0, end) of the arena is taken now (handed out or faulted in). */
static void budget_note_taken(struct pc_cache *c, size_t end)
{
	size_t old = atomic_load(&c->taken_bytes);
	while (end > old && !atomic_compare_exchange_weak(&c->taken_bytes, &old, end))
		;
	if (end > old)
		atomic_fetch_sub(&untaken_total, end - old);
}

/* The cache goes: what it never took is no longer to take. */
static void budget_release(struct pc_cache *c)
{
	budget_note_taken(c, c->arena_bytes);
}

void arena_budget_share(struct pc_cache *c)
{
	budget_release(c);
}

/* The parent's caches take the parent's memory, which the child sees in
 * MemAvailable as they take it; the child's own count starts at zero. */
void arena_forget_parent_caches(void)
{
	atomic_store(&untaken_total, 0);
}

/* ------------------------------------------------ background fault-in */

/* The next step of a region (the arena, or the descriptor table) ends at
 * a 2 MiB boundary of the address space (where a huge page ends), not of
 * the region, which need not be aligned to it. */
static size_t populate_step_len(const void *base, size_t bytes, size_t done)
{
	uintptr_t addr = (uintptr_t)base + done;
	size_t len = POPULATE_STEP - (addr & (POPULATE_STEP - 1));
	return (size_t)u64_min(len, bytes - done);
}

/*
 * Fault in the descriptors of the arena's first `pages` pages, from
 * *done on, before the thread faults in those pages: the allocator writes
 * a block's descriptors when it hands the block out, and the first write
 * to a huge page of the table zeroes 2 MiB, which made a cache's first
 * write many times slower than the next ones on a virtual machine whose
 * host backs memory on first touch (docs/results.md, "Figures the code's
 * comments used to carry", Fault-in).  An error leaves the rest of the
 * table to first use.
 */
static void populate_table(struct pc_cache *c, size_t *done, uint64_t pages)
{
	size_t bytes = table_bytes(c);
	size_t need = (size_t)u64_min(pages * sizeof(struct pc_folio), bytes);
	while (*done < need) {
		size_t len = populate_step_len(c->folios, bytes, *done);
		if (madvise((char *)c->folios + *done, len, MADV_POPULATE_WRITE) != 0) {
			*done = bytes;
			return;
		}
		*done += len;
	}
}

/*
 * How far ahead of the memory handed out the thread keeps memory faulted
 * in: a sixteenth of the arena, from 2 MiB to 32 MiB.  Enough that a
 * program that comes back to a settled cache finds its next folios ready;
 * small enough that a cache whose working set stays small (an uncached
 * writer's is the dirty limit and the edges) never pays, on a CPU its
 * writers want, for memory it will not use.
 */
static size_t populate_lead_of(const struct pc_cache *c)
{
	if (c->cfg.flags & PC_CFG_EAGER_MEMORY)
		return c->arena_bytes;
	size_t lead = c->arena_bytes / 16;
	return (size_t)u64_min(u64_max(lead, POPULATE_STEP), (uint64_t)32 << 20);
}

/* Where the thread's work ends for now: populate_lead past the memory
 * handed out so far, or the arena's end. */
static size_t populate_goal(struct pc_cache *c)
{
	size_t handed_out = (size_t)arena_used_pages(c) << PC_PAGE_SHIFT;
	return (size_t)u64_min((uint64_t)handed_out + c->populate_lead, c->arena_bytes);
}

static bool populate_stopping(struct pc_cache *c)
{
	return atomic_load_explicit(&c->populate_stop, memory_order_relaxed);
}

/* Sleep until the allocator hands out fresh memory that moves the goal
 * past `done`, or the thread is told to stop.  (The timeout is only a
 * backstop: progress.h loses no wakeup.) */
static void populate_wait_for_demand(struct pc_cache *c, size_t done)
{
	uint32_t seen = progress_begin(&c->frontier_progress);
	if (populate_goal(c) <= done && !populate_stopping(c))
		progress_wait(&c->frontier_progress, seen, 10000);
	progress_end(&c->frontier_progress);
}

/*
 * Huge pages for [from, to) of the arena (to rounded up to a step).  Only
 * the thread asks for them as it goes (arena_init does not, but with
 * PC_CFG_LAZY_MEMORY or without a thread): a huge page takes a free 2 MiB
 * block of the machine's, and those are the blocks a hypervisor with free
 * page reporting has taken back, so the first touch of one costs
 * milliseconds on such a virtual machine.  That is the thread's time.
 * Where transparent huge pages are only given on advice (the usual
 * "madvise" setting), a writer that outruns the thread faults small pages
 * instead, which come from memory the kernel freed recently (the blocks it
 * does not report) and cost what they cost the kernel's page cache.  The
 * advice takes mmap_lock for writing (it changes the mapping; the new part
 * joins the huge-page part before it), so it is given once a wake, up to
 * the goal, not once a step.
 */
static void advise_huge(struct pc_cache *c, size_t from, size_t to)
{
	uintptr_t end = round_up((uintptr_t)c->arena + to, POPULATE_STEP);
	size_t upto = (size_t)u64_min(end - (uintptr_t)c->arena, c->arena_bytes);
	if (upto > from)
		madvise(c->arena + from, upto - from, MADV_HUGEPAGE);
}

/*
 * While callers are handing out fresh memory, the thread stays off the
 * CPU: they fault their own small pages, cheaply (see advise_huge), and a
 * thread faulting huge pages from reported memory beside them would take
 * a CPU they want.  It fills its lead once the allocator has
 * handed out nothing fresh for POPULATE_QUIET_MS.  Not with
 * PC_CFG_EAGER_MEMORY, whose program wants all memory ready soonest.
 */
#define POPULATE_QUIET_MS 20

static void populate_wait_for_quiet(struct pc_cache *c)
{
	uint32_t seen;
	do {
		seen = arena_used_pages(c);
		usleep(POPULATE_QUIET_MS * 1000);
	} while (!populate_stopping(c) && arena_used_pages(c) != seen);
}

static void *populate_main(void *arg)
{
	struct pc_cache *c = arg;
	size_t done = 0, table_done = 0, advised = 0;
	bool eager = c->cfg.flags & PC_CFG_EAGER_MEMORY;
	uint32_t frontier = 0; /* arena_used_pages at the last step */
	while (done < c->arena_bytes && !populate_stopping(c)) {
		size_t goal = populate_goal(c);
		if (done >= goal) {
			populate_wait_for_demand(c, done);
			continue;
		}
		if (!eager && arena_used_pages(c) != frontier) {
			populate_wait_for_quiet(c);
			frontier = arena_used_pages(c);
			continue;
		}
		if (advised < goal) {
			advise_huge(c, advised, goal);
			advised = goal;
		}
		populate_table(c, &table_done, (goal + PC_PAGE_SIZE - 1) >> PC_PAGE_SHIFT);
		size_t len = populate_step_len(c->arena, c->arena_bytes, done);
		/* An error (EINVAL before Linux 5.14, ENOMEM, EINTR for a
		 * dying process) ends it: the rest is faulted in by first use,
		 * in huge pages as without a thread. */
		if (madvise(c->arena + done, len, MADV_POPULATE_WRITE) != 0) {
			advise_huge(c, advised, c->arena_bytes);
			break;
		}
		done += len;
		atomic_store_explicit(&c->populated_bytes, done, memory_order_relaxed);
		budget_note_taken(c, done);
	}
	atomic_store_explicit(&c->populate_ended, true, memory_order_release);
	return NULL;
}

/* Without a thread (pthread_create failed) the memory is faulted in by
 * first use, as with PC_CFG_LAZY_MEMORY: slower first writes, nothing else. */
void arena_populate_start(struct pc_cache *c)
{
	if (c->cfg.flags & PC_CFG_LAZY_MEMORY) {
		atomic_store(&c->populate_ended, true);
		return;
	}
	c->populate_lead = populate_lead_of(c);
	sigset_t all, old;
	sigfillset(&all);
	/* The thread inherits the mask: the program's signals are never
	 * delivered to it. */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	cache_proc(c)->populate_running = pthread_create(&cache_proc(c)->populate_thread, NULL, populate_main, c) == 0;
	if (!cache_proc(c)->populate_running) {
		advise_huge(c, 0, c->arena_bytes);
		atomic_store(&c->populate_ended, true);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void arena_attach(struct pc_cache *c)
{
	madvise(c->arena, c->arena_bytes, MADV_HUGEPAGE);
	madvise(c->folios, table_bytes(c), MADV_HUGEPAGE);
}

void arena_populate_stop(struct pc_cache *c)
{
	if (!cache_proc(c)->populate_running)
		return;
	atomic_store_explicit(&c->populate_stop, true, memory_order_relaxed);
	progress_signal(&c->frontier_progress);
	pthread_join(cache_proc(c)->populate_thread, NULL);
	cache_proc(c)->populate_running = false;
}

size_t arena_populated_bytes(struct pc_cache *c)
{
	return atomic_load_explicit(&c->populated_bytes, memory_order_relaxed);
}

size_t arena_prefault_pending(struct pc_cache *c)
{
	if (atomic_load_explicit(&c->populate_ended, memory_order_acquire))
		return 0;
	size_t goal = populate_goal(c), done = arena_populated_bytes(c);
	return goal > done ? goal - done : 0;
}

/* ------------------------------------------------------ setup, teardown */

/* The descriptor table: page-aligned (from the cache's segment), so that
 * each 64-byte descriptor is exactly one cache line (a cache hit reads
 * one line of it, not two), and its zeros stay unmapped
 * until touched (the segment's fresh memory, never handed out before).
 * All-zero is a valid unused descriptor (no flags, no references, no
 * mapping). */
static struct pc_folio *arena_folio_table_new(struct pc_cache *c)
{
	_Static_assert(sizeof(struct pc_folio) == 64, "a descriptor is one cache line");
	void *p;
	/* Aligned for huge pages only when it holds one: a heap block is as
	 * large as its alignment. */
	size_t align = table_bytes(c) >= SEG_ALIGN_MAX ? SEG_ALIGN_MAX : PC_PAGE_SIZE;
	if (seg_alloc(cache_proc(c)->seg, table_bytes(c), align, &p) != 0)
		return NULL;
	/* Huge pages, like the arena: a hit reads the descriptor of a folio
	 * picked at random, and the descriptors of large folios lie a page or
	 * more apart (a 64-page folio's head is 4 KiB from the next one's), so
	 * with 4 KiB pages nearly every hit also missed the TLB. */
	madvise(p, table_bytes(c), MADV_HUGEPAGE);
	return p;
}

void arena_free_table(struct pc_cache *c)
{
	if (c->folios)
		seg_free(cache_proc(c)->seg, c->folios);
	c->folios = NULL;
}

int arena_init(struct pc_cache *c)
{
	c->npages = (uint32_t)(c->cfg.memory_limit >> PC_PAGE_SHIFT);
	c->arena_bytes = (size_t)c->npages << PC_PAGE_SHIFT;
	int err = budget_claim(c);
	if (err)
		return err;
	/* A descriptor is written when its page is first handed out. */
	c->folios = arena_folio_table_new(c);
	/* The segment's memory is committed as it is faulted in
	 * (MAP_NORESERVE); 2 MiB aligned for huge pages. */
	void *p = NULL;
	uint64_t used = seg_used(cache_proc(c)->seg);
	if (!c->folios || seg_alloc(cache_proc(c)->seg, c->arena_bytes, SEG_ALIGN_MAX, &p) != 0) {
		arena_free_table(c);
		budget_release(c);
		return -ENOMEM;
	}
	/* Huge pages: asked for as it goes by the thread that faults the
	 * arena in (advise_huge), or here for all of it when there is no
	 * such thread. */
	if (c->cfg.flags & PC_CFG_LAZY_MEMORY)
		madvise(p, c->arena_bytes, MADV_HUGEPAGE);
	/* A child of fork() may not use the cache (process.c): it gets no
	 * copy of the folios, and a fork copies no page tables of them (the
	 * segment is MADV_DONTFORK). */
	c->arena = p;
	/* The heap's block for it (a power of two): what arena_meta_bytes
	 * leaves out of the heap's use. */
	c->arena_heap_bytes = seg_used(cache_proc(c)->seg) - used;
	for (unsigned o = 0; o <= PC_MAX_ORDER; o++)
		c->free_head[o] = PC_NONE;
	return 0;
}

uint64_t arena_meta_bytes(struct pc_cache *c)
{
	return seg_used(cache_proc(c)->seg) - c->arena_heap_bytes;
}

void arena_destroy(struct pc_cache *c)
{
	arena_populate_stop(c);
	if (c->arena) {
		seg_free(cache_proc(c)->seg, c->arena);
		budget_release(c);
	}
	arena_free_table(c);
	c->arena = NULL;
}

/* ------------------------------------------------------------ allocator */

static void free_list_push(struct pc_cache *c, uint32_t pfn, unsigned order)
{
	struct pc_folio *f = &c->folios[pfn];
	f->order = (uint8_t)order;
	folio_reset_flags(f, PF_BUDDY);
	f->lru_prev = PC_NONE;
	f->lru_next = c->free_head[order];
	if (f->lru_next != PC_NONE)
		c->folios[f->lru_next].lru_prev = pfn;
	c->free_head[order] = pfn;
}

static void free_list_del(struct pc_cache *c, uint32_t pfn, unsigned order)
{
	struct pc_folio *f = &c->folios[pfn];
	if (f->lru_prev != PC_NONE)
		c->folios[f->lru_prev].lru_next = f->lru_next;
	else
		c->free_head[order] = f->lru_next;
	if (f->lru_next != PC_NONE)
		c->folios[f->lru_next].lru_prev = f->lru_prev;
	f->lru_prev = f->lru_next = PC_NONE;
	folio_reset_flags(f, 0);
}

uint32_t arena_used_pages(struct pc_cache *c)
{
	return atomic_load_explicit(&c->fresh_pfn, memory_order_relaxed);
}

/* The largest naturally aligned block at pfn that fits in the arena (at
 * most max_order): the blocks the free lists would have been seeded with. */
static unsigned largest_block_at(const struct pc_cache *c, uint32_t pfn)
{
	unsigned order = c->max_order;
	while (order && ((pfn & ((1u << order) - 1)) || pfn + (1u << order) > c->npages))
		order--;
	return order;
}

/* Put the next never-used block on its free list (arena_lock held); false
 * when the whole arena has been handed out once.  A buddy of it in the
 * fresh part has a zero descriptor (not PF_BUDDY), so nothing merges with
 * memory that is not listed. */
static bool carve_fresh_block(struct pc_cache *c)
{
	assert_held(&c->arena_lock);
	uint32_t pfn = atomic_load_explicit(&c->fresh_pfn, memory_order_relaxed);
	if (pfn >= c->npages)
		return false;
	unsigned order = largest_block_at(c, pfn);
	free_list_push(c, pfn, order);
	uint32_t end = pfn + (1u << order);
	atomic_store_explicit(&c->fresh_pfn, end, memory_order_relaxed);
	budget_note_taken(c, (size_t)end << PC_PAGE_SHIFT);
	return true;
}

/* The lowest order >= `order` with a free block, or max_order + 1. */
static unsigned lowest_free_order(const struct pc_cache *c, unsigned order)
{
	unsigned o = order;
	while (o <= c->max_order && c->free_head[o] == PC_NONE)
		o++;
	return o;
}

uint32_t arena_alloc(struct pc_cache *c, unsigned order)
{
	bool carved = false;
	cache_lock(c, &c->arena_lock, LOCK_LEAF);
	unsigned o = lowest_free_order(c, order);
	while (o > c->max_order && carve_fresh_block(c)) {
		carved = true;
		o = lowest_free_order(c, order);
	}
	if (o > c->max_order) {
		cache_unlock(c, &c->arena_lock);
		return PC_NONE;
	}
	uint32_t pfn = c->free_head[o];
	free_list_del(c, pfn, o);
	/* Split: the upper halves go back to the free lists. */
	while (o > order) {
		o--;
		free_list_push(c, pfn + (1u << o), o);
	}
	cache_unlock(c, &c->arena_lock);
	/* Fresh memory moves the background thread's goal; it may be waiting
	 * for that (one load when it is not).  After the unlock: a wakeup
	 * under arena_lock would hold up every other allocation. */
	if (carved)
		progress_signal(&c->frontier_progress);
	return pfn;
}

void arena_free(struct pc_cache *c, uint32_t pfn, unsigned order)
{
	cache_lock(c, &c->arena_lock, LOCK_LEAF);
	while (order < c->max_order) {
		uint32_t buddy = pfn ^ (1u << order);
		if (buddy + (1u << order) > c->npages)
			break;
		struct pc_folio *b = &c->folios[buddy];
		if (!(atomic_load_explicit(&b->flags, memory_order_relaxed) & PF_BUDDY) ||
		    b->order != order)
			break;
		free_list_del(c, buddy, order);
		pfn &= ~(1u << order);
		order++;
	}
	free_list_push(c, pfn, order);
	cache_unlock(c, &c->arena_lock);
}
