/*
 * throttle.c - the dirty throttle: writers past the dirty limit wait for
 * writeback to make room, and are let through in fair order.
 *
 * Writers are never made to write back themselves (that is the flusher's
 * job); they only wait.  Who goes first when room appears matters: let
 * through whoever happens to run first and, on a machine with fewer cores
 * than writers, the threads the scheduler favours race ahead through the
 * file while the others lag.  When many threads fill one file together
 * (interleaved records), the ranges the laggards have yet to write are
 * holes between the leaders' data, so the flusher can only write short
 * runs, and the dirty limit fills with fragments.  So waiters queue in
 * order of how many bytes their thread has dirtied, fewest first: a fair
 * share of the limit per writer, as the kernel's per-task dirty rate limit
 * gives, which keeps interleaved writers in step and gives a buffered and
 * an uncached writer the same bandwidth.
 *
 * Below the limit, writers are paced (pace.c): each sleeps a little after
 * its writes, as the write-back bandwidth allows, so that the limit is
 * seldom reached at all.
 *
 * A writer waits until there is room under the limit for another write as
 * large as the one it just made, not merely until it is under the limit:
 * so the next write does not take dirty + writeback past the limit (a
 * writer of 1 MiB at a 51 MiB limit otherwise peaked up to 1 MiB over it).
 *
 * A thread's count is its "virtual time".  A thread that has been idle (or
 * is new) is moved up to within THROTTLE_CREDIT of the last writer let
 * through, so it cannot claim the room for a long burst on its past.
 */
#include "wb/throttle.h"

#include "api/cache.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "wb/dirty.h"
#include "wb/flusher.h"
#include "mem/cache_mem.h"
#include "mem/mapping.h"
#include "wb/pace.h"
#include "lib/progress.h"
#include "lib/util.h"

#include <errno.h>
#include <time.h>

/* Bytes a thread may be behind the others and still go first. */
#define THROTTLE_CREDIT (1u << 20)

struct throttle_waiter {
	struct throttle_waiter *next;
	uint64_t vtime;
	uint64_t room; /* bytes it waits to have room for under the limit */
	/* A futex word (shlock.h's shfutex_*, which work in shared memory):
	 * bumped under throttle_lock to wake the waiter. */
	_Atomic uint32_t wake;
};

static _Thread_local uint64_t thread_dirtied;
static _Thread_local uint64_t thread_paced; /* thread_dirtied when last paced */

void throttle_account(size_t bytes)
{
	thread_dirtied += bytes;
}

/* The bytes this thread dirtied since it was last paced (pace.c). */
static uint64_t take_unpaced(void)
{
	uint64_t bytes = thread_dirtied > thread_paced ? thread_dirtied - thread_paced : 0;
	thread_paced = thread_dirtied;
	return bytes;
}

/*
 * Dirty data of files whose writeback keeps failing does not count: it
 * cannot be cleaned until the fault clears, and waiting on it would stall
 * writers of every other file and device for ever.  It is bounded anyway:
 * those files take no new writes meanwhile (failing_set).
 */
static bool over_limit_with(struct pc_cache *c, uint64_t room)
{
	int64_t used = atomic_load(&c->dirty) + atomic_load(&c->writeback) + (int64_t)room;
	if (used <= (int64_t)c->cfg.dirty_limit_bytes)
		return false;
	if (atomic_load_explicit(&c->nr_failing, memory_order_relaxed))
		used -= dirty_failing_bytes(c);
	return used > (int64_t)c->cfg.dirty_limit_bytes;
}

bool throttle_over_limit(struct pc_cache *c)
{
	return over_limit_with(c, 0);
}

bool throttle_has_waiters(struct pc_cache *c)
{
	return atomic_load_explicit(&c->throttle_head_vtime, memory_order_relaxed) != UINT64_MAX;
}

/* The first waiter changed (under throttle_lock): publish its time. */
static void head_changed(struct pc_cache *c)
{
	assert_held(&c->throttle_lock);
	atomic_store(&c->throttle_head_vtime, c->throttle_head ? c->throttle_head->vtime : UINT64_MAX);
}

/* Queue w by virtual time, after waiters with the same one. */
static void queue_waiter(struct pc_cache *c, struct throttle_waiter *w)
{
	struct throttle_waiter **p = &c->throttle_head;
	while (*p && (*p)->vtime <= w->vtime)
		p = &(*p)->next;
	w->next = *p;
	*p = w;
	head_changed(c);
}

/*
 * Others are waiting for room and this thread has dirtied more than a
 * credit beyond the first of them: it takes its place in the queue even
 * under the limit.  Otherwise the threads the CPU scheduler favours would
 * take every bit of room the moment it appears, and those that waited
 * would wait on.
 */
static bool far_ahead_of_waiters(struct pc_cache *c)
{
	uint64_t head = atomic_load_explicit(&c->throttle_head_vtime, memory_order_relaxed);
	return head != UINT64_MAX && thread_dirtied > head + THROTTLE_CREDIT;
}

/* The first waiter, if any, may go now: wake it.  Under throttle_lock. */
static void wake_first(struct pc_cache *c)
{
	assert_held(&c->throttle_lock);
	if (c->throttle_head) {
		atomic_fetch_add_explicit(&c->throttle_head->wake, 1, memory_order_release);
		shfutex_wake(&c->throttle_head->wake, 1);
	}
}

static void kick_flusher_past_thresholds(struct pc_mapping *m, bool uncached)
{
	struct pc_cache *c = m->c;
	struct pc_domain *d = m->dom;
	if (uncached && atomic_load(&d->uncached) >= (int64_t)c->cfg.uncached_kick_bytes &&
	    !atomic_load(&d->kicked)) {
		atomic_fetch_add(&c->st_kicks, 1);
		flusher_kick(d);
	}
	if (atomic_load(&c->dirty) > (int64_t)c->cfg.dirty_background_bytes && !atomic_load(&d->kicked))
		flusher_kick(d);
}

unsigned throttle_queue_length(struct pc_cache *c)
{
	unsigned n = 0;
	cache_lock(c, &c->throttle_lock, LOCK_THROTTLE);
	for (struct throttle_waiter *w = c->throttle_head; w; w = w->next)
		n++;
	cache_unlock(c, &c->throttle_lock);
	return n;
}

/* Take w out of the queue, wherever it is (under throttle_lock). */
static void dequeue_waiter(struct pc_cache *c, struct throttle_waiter *w)
{
	assert_held(&c->throttle_lock);
	struct throttle_waiter **p = &c->throttle_head;
	while (*p && *p != w)
		p = &(*p)->next;
	if (*p)
		*p = w->next;
	head_changed(c);
}

/*
 * Wait in the queue until this writer is first and there is room, or its
 * own file's writeback fails (0 or that error).  Under throttle_lock.
 */
static int wait_in_queue(struct pc_mapping *m, struct throttle_waiter *w, bool *waited)
{
	assert_held(&m->c->throttle_lock);
	struct pc_cache *c = m->c;
	int err = 0;
	while (c->throttle_head != w || over_limit_with(c, w->room)) {
		err = failing_write_error(m);
		if (err)
			break;
		*waited = true;
		if (c->throttle_head != w) {
			/* Behind others: the one ahead wakes us when it goes. */
			uint32_t seen = atomic_load_explicit(&w->wake, memory_order_relaxed);
			cache_unlock(c, &c->throttle_lock);
			shfutex_wait_ms(&w->wake, seen, 20);
			cache_lock(c, &c->throttle_lock, LOCK_THROTTLE);
			if (atomic_load_explicit(&w->wake, memory_order_relaxed) != seen)
				atomic_fetch_add_explicit(&c->st_throttle_woken, 1, memory_order_relaxed);
			continue;
		}
		/* First: wait for writeback to end somewhere (progress.c), not
		 * for a call from the completion into the throttle. */
		uint32_t seen = progress_begin(&c->wb_progress);
		if (over_limit_with(c, w->room)) {
			flusher_kick(m->dom);
			cache_unlock(c, &c->throttle_lock);
			progress_wait(&c->wb_progress, seen, 20);
			cache_lock(c, &c->throttle_lock, LOCK_THROTTLE);
		}
		progress_end(&c->wb_progress);
	}
	return err;
}

/*
 * The queue is in the cache's memory, which in a shared cache other
 * processes walk and wake: a waiter's record cannot be on its stack (an
 * address of this process only).  It comes from the cache's heap there;
 * a private cache keeps one per thread.
 */
static _Thread_local struct throttle_waiter thread_waiter;

static struct throttle_waiter *waiter_new(struct pc_cache *c)
{
	if (!cache_shared(c)) {
		thread_waiter = (struct throttle_waiter){ .wake = 0 };
		return &thread_waiter;
	}
	return cache_zalloc(c, sizeof(struct throttle_waiter));
}

static void waiter_free(struct pc_cache *c, struct throttle_waiter *w)
{
	if (w != &thread_waiter)
		cache_free(c, w);
}

/* No record for the queue (the shared cache's heap is full): wait for
 * room outside it, as the first waiter does, without its fairness. */
static int wait_unqueued(struct pc_mapping *m, uint64_t room, uint64_t unpaced)
{
	struct pc_cache *c = m->c;
	int err;
	while (!(err = failing_write_error(m)) && over_limit_with(c, room)) {
		uint32_t seen = progress_begin(&c->wb_progress);
		flusher_kick(m->dom);
		if (over_limit_with(c, room))
			progress_wait(&c->wb_progress, seen, 20);
		progress_end(&c->wb_progress);
	}
	if (!err)
		pace_writer(c, unpaced);
	return err;
}

/*
 * A writer of a file whose writeback keeps failing gets the error instead
 * of waiting (with PC_NOWAIT too, rather than EAGAIN for ever): its data
 * stays dirty, and the room it waits for may never come.
 */
int balance_dirty(struct pc_mapping *m, uint64_t room, bool uncached, bool nowait)
{
	struct pc_cache *c = m->c;
	/* A write as large as the limit (a small cache: write pieces are at
	 * least max_io_bytes) would never find room: at most an eighth of
	 * the limit is waited for, the piece size of larger writes. */
	if (!nowait)
		lock_check_may_wait(LOCK_TREE);
	room = u64_min(room, c->cfg.dirty_limit_bytes / 8);
	kick_flusher_past_thresholds(m, uncached);
	int err = failing_write_error(m);
	if (err)
		return err;
	uint64_t unpaced = nowait ? 0 : take_unpaced();
	if (!over_limit_with(c, nowait ? 0 : room) && !far_ahead_of_waiters(c)) {
		if (!nowait)
			pace_writer(c, unpaced);
		return 0;
	}
	if (nowait)
		return throttle_over_limit(c) ? -EAGAIN : 0;
	struct throttle_waiter *w = waiter_new(c);
	if (!w)
		return wait_unqueued(m, room, unpaced);
	cache_lock(c, &c->throttle_lock, LOCK_THROTTLE);
	if (thread_dirtied + THROTTLE_CREDIT < c->throttle_vclock)
		thread_dirtied = c->throttle_vclock - THROTTLE_CREDIT;
	w->vtime = thread_dirtied;
	w->room = room;
	queue_waiter(c, w);
	if (c->throttle_head != w && !over_limit_with(c, c->throttle_head->room))
		wake_first(c); /* queued behind others under the limit: they may go */
	bool waited = false;
	err = wait_in_queue(m, w, &waited);
	dequeue_waiter(c, w);
	if (!err && w->vtime > c->throttle_vclock)
		c->throttle_vclock = w->vtime;
	/* There may be room for the next one too: it checks for itself. */
	wake_first(c);
	cache_unlock(c, &c->throttle_lock);
	waiter_free(c, w);
	thread_paced = thread_dirtied; /* moved up to the queue's clock: not dirtied */
	if (waited)
		atomic_fetch_add(&c->st_throttle_waits, 1);
	/* Paced after the wait too (what the wait took counts as slept): a
	 * writer that reached the limit before the bandwidth was known is
	 * slowed below it from then on, instead of meeting it every write. */
	if (!err)
		pace_writer(c, unpaced);
	return err;
}
