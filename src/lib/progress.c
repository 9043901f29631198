/*
 * progress.c - a count of events that other threads wait for, so that the
 * code that makes progress (a device write completing, a folio freed) only
 * signals, low in the layering, and the code that waits for it (the dirty
 * throttle, an allocation waiting for memory) stays above it: completions
 * never call up into the throttle or the allocator.
 *
 * A waiter registers (progress_begin), reads the count, checks whatever it
 * waits for, and sleeps until the count moves past what it read or a
 * timeout passes (progress_wait); progress_end unregisters.  The signaller
 * changes the state first and then counts (progress_signal).  Registering
 * before checking and counting after changing, both with sequentially
 * consistent operations, means that either the waiter's check sees the new
 * state or the signaller sees the waiter and moves the count: no wakeup is
 * lost.  Signals with nobody registered cost one load.
 */
#include "lib/progress.h"

#include "lib/check.h"
#include "lib/util.h"

#include <time.h>

void progress_init(struct pc_progress *p)
{
	atomic_init(&p->count, 0);
	atomic_init(&p->waiters, 0);
	pthread_mutex_init(&p->lock, NULL);
	cond_init_monotonic(&p->cv);
}

void progress_destroy(struct pc_progress *p)
{
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cv);
}

void progress_signal(struct pc_progress *p)
{
	atomic_thread_fence(memory_order_seq_cst); /* the state change before the load */
	if (!atomic_load_explicit(&p->waiters, memory_order_relaxed))
		return;
	pthread_mutex_lock(&p->lock);
	atomic_fetch_add_explicit(&p->count, 1, memory_order_relaxed);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->lock);
}

uint64_t progress_begin(struct pc_progress *p)
{
	atomic_fetch_add_explicit(&p->waiters, 1, memory_order_seq_cst);
	/* The waiter's check of the state, after this, may be a relaxed load:
	 * the fence orders it after the registration, as the signaller's
	 * fence orders its state change before its look at the waiters. */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&p->count, memory_order_seq_cst);
}

void progress_wait(struct pc_progress *p, uint64_t seen, unsigned timeout_ms)
{
	struct timespec until;

	lock_check_may_wait(LOCK_TREE);
	deadline_after_ms(&until, timeout_ms);
	pthread_mutex_lock(&p->lock);
	while (atomic_load_explicit(&p->count, memory_order_relaxed) == seen)
		if (pthread_cond_timedwait(&p->cv, &p->lock, &until) != 0)
			break; /* timed out */
	pthread_mutex_unlock(&p->lock);
}

void progress_end(struct pc_progress *p)
{
	atomic_fetch_sub_explicit(&p->waiters, 1, memory_order_relaxed);
}
