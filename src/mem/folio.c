/*
 * folio.c - folio lock, waiting on flags, and reference counting.
 *
 * The lock and every waitable state live in one 32-bit flags word, and
 * sleepers wait on that word with futex(2): no per-folio mutex or condition
 * variable (that would cost 88 bytes a folio), no system call when nobody
 * waits.  A sleeper sets PF_WAITERS first; whoever clears a waited-on bit
 * and sees PF_WAITERS wakes all sleepers of the word, who re-check.
 */
#include "mem/folio.h"

#include "mem/arena.h"
#include "mem/block_state.h"
#include "api/cache.h"
#include "lib/progress.h"
#include "mem/reclaim.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Shared futexes (no FUTEX_PRIVATE_FLAG): the descriptors are in the
 * cache's segment, which the processes of a shared cache map at one
 * address (docs/shared.md, section 3); the kernel keys a shared futex by
 * the page, so a sleeper in one process is woken by another.  They cost
 * a private cache nothing until somebody sleeps: only a sleeper and the
 * unlock that finds PF_WAITERS make the call. */
static void futex_wait_word(_Atomic uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Sleep once while every bit of `mask` we wait on is still set in *word. */
static void wait_on_bits(struct pc_folio *f, uint32_t mask)
{
	uint32_t v = atomic_load_explicit(&f->flags, memory_order_acquire);
	while (v & mask) {
		if (!(v & PF_WAITERS)) {
			if (!atomic_compare_exchange_weak_explicit(&f->flags, &v, v | PF_WAITERS,
								   memory_order_acq_rel,
								   memory_order_acquire))
				continue;
			v |= PF_WAITERS;
		}
		futex_wait_word(&f->flags, v);
		return;
	}
}

bool folio_trylock(struct pc_folio *f)
{
	return !(atomic_fetch_or_explicit(&f->flags, PF_LOCKED, memory_order_acquire) & PF_LOCKED);
}

void folio_lock(struct pc_folio *f)
{
	lock_check_may_wait(LOCK_FOLIO);
	while (!folio_trylock(f))
		wait_on_bits(f, PF_LOCKED);
}

void folio_clear_and_wake(struct pc_folio *f, uint32_t flag)
{
	uint32_t old = atomic_fetch_and_explicit(&f->flags, ~(flag | PF_WAITERS), memory_order_release);
	if (old & PF_WAITERS)
		futex_wake_all(&f->flags);
}

void folio_unlock(struct pc_folio *f)
{
	folio_clear_and_wake(f, PF_LOCKED);
}

void folio_wait_clear(struct pc_folio *f, uint32_t flag)
{
	lock_check_may_wait(LOCK_TREE);
	while (folio_test(f, flag))
		wait_on_bits(f, flag);
}

void folio_put(struct pc_cache *c, struct pc_folio *f)
{
	int old = atomic_fetch_sub_explicit(&f->refcount, 1, memory_order_acq_rel);
	PC_ASSERT(old > 0);
	if (old != 1)
		return;
	/* Last reference: the folio is out of the index and off the LRU. */
	PC_ASSERT(!folio_test(f, PF_INDEXED | PF_LOCKED | PF_DIRTY | PF_WRITEBACK));
	bs_free(c, f);
	f->mapping = NULL;
	/* Before the memory can be reused: see PF_GEN_SHIFT.  The count of
	 * frees first: a hit that sees the new generation (an acquire load)
	 * then sees the count that includes this free (read_hit.h). */
	atomic_fetch_add_explicit(&c->folio_frees, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&f->flags, PF_GEN_ONE, memory_order_release);
	atomic_fetch_sub_explicit(&c->st_folios, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&c->st_cached, folio_size(f), memory_order_relaxed);
	arena_free(c, arena_pfn(c, f), f->order);
	progress_signal(&c->mem_progress);
}

uint32_t folio_clock_ms(const struct pc_cache *c)
{
	return (uint32_t)(now_ms() - c->start_ms);
}

/*
 * The 32-bit clock wraps after 49.7 days of the cache's life: the age is
 * the difference modulo 2^32, right across a wrap.  A stamp set just after
 * we read the clock looks a little in the future: half the range and more
 * means that, age 0.  (Stamps order waits of milliseconds to seconds.)
 */
uint64_t folio_age_ms(const struct pc_cache *c, const struct pc_folio *f)
{
	uint32_t age = folio_clock_ms(c) - atomic_load(&((struct pc_folio *)f)->stamp);
	return age <= INT32_MAX ? age : 0;
}
