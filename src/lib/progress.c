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

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * The count is a futex word: a waiter sleeps while it still holds what it
 * read, a signaller adds one and wakes every sleeper.  No lock: a count
 * that moved between the waiter's read and its sleep makes FUTEX_WAIT
 * return at once (the kernel compares the word under its own lock), so
 * no wakeup is lost, and a word alone works in memory that processes
 * share (docs/shared.md, section 3) as well as between threads.
 */
void progress_init(struct pc_progress *p)
{
	atomic_init(&p->count, 0);
	atomic_init(&p->waiters, 0);
	p->futex_private = FUTEX_PRIVATE_FLAG;
}

void progress_share(struct pc_progress *p)
{
	p->futex_private = 0;
}

void progress_destroy(struct pc_progress *p)
{
	(void)p;
}

void progress_signal(struct pc_progress *p)
{
	atomic_thread_fence(memory_order_seq_cst); /* the state change before the load */
	if (!atomic_load_explicit(&p->waiters, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&p->count, 1, memory_order_seq_cst);
	syscall(SYS_futex, (uint32_t *)&p->count, FUTEX_WAKE | p->futex_private, INT32_MAX, NULL, NULL, 0);
}

uint32_t progress_begin(struct pc_progress *p)
{
	atomic_fetch_add_explicit(&p->waiters, 1, memory_order_seq_cst);
	/* The waiter's check of the state, after this, may be a relaxed load:
	 * the fence orders it after the registration, as the signaller's
	 * fence orders its state change before its look at the waiters. */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&p->count, memory_order_seq_cst);
}

void progress_wait(struct pc_progress *p, uint32_t seen, unsigned timeout_ms)
{
	struct timespec until;

	lock_check_may_wait(LOCK_TREE);
	deadline_after_ms(&until, timeout_ms);
	/* FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC deadline, which a
	 * signal or a wakeup for an older count does not push back. */
	while (atomic_load_explicit(&p->count, memory_order_acquire) == seen)
		if (syscall(SYS_futex, (uint32_t *)&p->count, FUTEX_WAIT_BITSET | p->futex_private, seen, &until, NULL,
			    FUTEX_BITSET_MATCH_ANY) != 0 &&
		    errno == ETIMEDOUT)
			break;
}

void progress_end(struct pc_progress *p)
{
	atomic_fetch_sub_explicit(&p->waiters, 1, memory_order_relaxed);
}
