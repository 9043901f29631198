/*
 * flusher.c - writeback domains and their flusher threads: when to write
 * what (oldest dirty data first, uncached data as soon as a little of it
 * is dirty, buffered data past the background threshold or its age), and
 * the kick that writers and closes give the flusher.  Writers are only
 * throttled (made to sleep) past the dirty limit (throttle.c): they never
 * write back inline.
 */
#include "wb/flusher.h"

#include "io/backend.h"
#include "wb/backing.h"
#include "api/cache.h"
#include "wb/dirty.h"
#include "io/fs_sync.h"
#include "mem/cache_mem.h"
#include "mem/mapping.h"
#include "wb/throttle.h"
#include "lib/util.h"
#include "wb/writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLUSHER_TICK_MS 100

/* --------------------------------------------------------------- kicks */

/* Already kicked: the flusher has not started the round that answers it
 * (it clears the flag as a round starts), so nothing more is needed.
 * Closing thousands of small files kicks once a round, not once a file. */
void flusher_kick(struct pc_domain *d)
{
	if (atomic_load(&d->kicked))
		return;
	cache_lock(d->c, &d->lock, LOCK_LEAF);
	atomic_store(&d->kicked, true);
	atomic_fetch_add_explicit(&d->kick_seq, 1, memory_order_relaxed);
	cache_unlock(d->c, &d->lock);
	/* In a shared cache each process's flushers write the files their
	 * process holds: all of them are woken, not one that may hold none
	 * of the files that need it. */
	shfutex_wake(&d->kick_seq, cache_shared(d->c) ? INT_MAX : 1);
}

/* This process's flushers of d end (their round done). */
static void flushers_stop(struct pc_domain *d)
{
	cache_lock(d->c, &d->lock, LOCK_LEAF);
	dproc(d)->stop = true;
	atomic_fetch_add_explicit(&d->kick_seq, 1, memory_order_relaxed);
	cache_unlock(d->c, &d->lock);
	shfutex_wake(&d->kick_seq, INT_MAX);
}

/* Memory is short (reclaim.c, through the process's want_free): every domain's
 * flusher writes what it can, the patient passes skipped. */
static void flushers_want_free(struct pc_cache *c)
{
	for (struct pc_domain *d = c->domains; d; d = d->next) {
		atomic_store(&d->want_free, true);
		flusher_kick(d);
	}
}

void flusher_layer_init(struct pc_cache *c)
{
	cache_proc(c)->want_free = flushers_want_free;
}

/* How soon after pc_flush without wait the flusher writes what it left:
 * a tick or so, long enough for the close that usually follows (a FUSE
 * FLUSH comes just before its RELEASE), so that a closed file is written
 * as closed files are (its end exactly, a small one in one write). */
#define FLUSH_SOON_MS 100u

/* The dirtied_when_ms that makes a file's data expire `ms` from now
 * (never 0, which means clean). */
static uint64_t dirtied_to_expire_in(const struct pc_cache *c, uint64_t now, uint64_t ms)
{
	uint64_t expire = c->cfg.dirty_expire_ms;
	return now + ms > expire ? now + ms - expire : 1;
}

void flusher_write_soon(struct pc_mapping *m)
{
	if (atomic_load(&m->nr_dirty) <= 0)
		return;
	uint64_t when = dirtied_to_expire_in(m->c, now_ms(), FLUSH_SOON_MS);
	uint64_t cur = atomic_load(&m->dirtied_when_ms);
	while ((cur == 0 || cur > when) && !atomic_compare_exchange_weak(&m->dirtied_when_ms, &cur, when))
		;
}

/* ------------------------------------------------------------- flusher */

static int by_dirty_age(const void *a, const void *b)
{
	const struct pc_mapping *x = *(struct pc_mapping *const *)a, *y = *(struct pc_mapping *const *)b;
	uint64_t wx = x->dirtied_when_ms ? x->dirtied_when_ms : UINT64_MAX;
	uint64_t wy = y->dirtied_when_ms ? y->dirtied_when_ms : UINT64_MAX;
	return wx < wy ? -1 : wx > wy;
}

/*
 * The files on the domain's dirty list, with references, oldest dirty
 * first; those with nothing left to do are taken off it (their list
 * references go with the caller's, in flush_round).
 */
static unsigned domain_mappings(struct pc_domain *d, struct pc_mapping ***out)
{
	unsigned n = 0, cap = 0;
	struct pc_mapping **v = NULL;
	cache_lock(d->c, &d->lock, LOCK_LEAF);
	for (struct pc_mapping *m = d->dirty_head, *next; m; m = next) {
		next = m->dirty_next;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			struct pc_mapping **nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		if (!dirty_has_work(m)) {
			atomic_store(&m->on_dirty_list, false);
			if (!dirty_has_work(m)) {
				dirty_list_unlink(d, m);
				v[n++] = m; /* the list's reference, dropped by the caller */
				continue;
			}
			atomic_store(&m->on_dirty_list, true);
		}
		atomic_fetch_add(&m->refs, 1);
		v[n++] = m;
	}
	cache_unlock(d->c, &d->lock);
	if (n > 1)
		qsort(v, n, sizeof(*v), by_dirty_age);
	*out = v;
	return n;
}

static bool flusher_backing_off(struct pc_mapping *m, uint64_t now)
{
	uint64_t e = atomic_load(&m->last_error_ms);
	return e && now - e < 1000;
}

/* A shared cache's file is written back by the processes that hold its
 * descriptor (api/file.c, "Shared caches"): another process's flushers
 * leave it to them. */
static bool flusher_may_write(struct pc_mapping *m)
{
	return !cache_shared(m->c) || mproc(m)->fd >= 0;
}

/* One pass over the domain's files; returns the bytes submitted. */
static int64_t flush_pass(struct pc_domain *d, struct pc_mapping **v, unsigned n, bool kicked, bool want_free,
			  int patience)
{
	struct pc_cache *c = d->c;
	uint64_t now = now_ms();
	int64_t submitted = 0;
	for (unsigned i = 0; i < n; i++) {
		struct pc_mapping *m = v[i];
		if (flusher_backing_off(m, now) || !flusher_may_write(m))
			continue;
		/* Uncached dirty data first: its memory is meant to go now.
		 * While uncached writers are active (they kicked), the newest
		 * half-threshold of it is left for the next round: in file order
		 * that is where neighbouring writes are still filling gaps, and
		 * waiting a moment turns many small device writes into few large
		 * ones.  With no kick (a tick), everything goes. */
		int64_t unc = atomic_load(&m->nr_uncached);
		int64_t keep = kicked ? (int64_t)c->cfg.uncached_kick_bytes : 0;
		if (unc > keep)
			submitted += i64_max(0, writeback_some(m, 0, UINT64_MAX, WB_UNCACHED | WB_NOWAIT_LOCK | patience,
								 NULL, keep ? unc - keep : 0));
	}
	for (unsigned i = 0; i < n; i++) {
		struct pc_mapping *m = v[i];
		if (!flusher_may_write(m))
			continue;
		if (flusher_backing_off(m, now) || atomic_load(&m->nr_dirty) <= 0) {
			if (atomic_load(&m->nr_dirty) <= 0)
				m->dirtied_when_ms = 0;
			continue;
		}
		uint64_t zero = 0; /* dirtied while we cleared it: start its clock */
		atomic_compare_exchange_strong(&m->dirtied_when_ms, &zero, now);
		bool expired = now - m->dirtied_when_ms >= c->cfg.dirty_expire_ms;
		bool background = atomic_load(&c->dirty) > (int64_t)c->cfg.dirty_background_bytes;
		/* Closed files hold descriptors until written: when many do,
		 * they go first, all of their data (nothing will join it). */
		bool closed = atomic_load(&m->closed_dirty) && cache_proc(c)->closed_fd_pressure(c);
		if (expired || background || want_free || closed) {
			m->dirtied_when_ms = now;
			int mode = WB_NOWAIT_LOCK | (closed ? 0 : patience);
			submitted += i64_max(0, writeback_range(m, 0, UINT64_MAX, mode, NULL));
			/* Expired data held back as a short young run (just
			 * written after the rest) comes back once it is old
			 * enough, not a whole expiry later. */
			if (expired && (mode & WB_HOLD_SHORT_RUNS) && atomic_load(&m->nr_dirty) > 0)
				m->dirtied_when_ms = dirtied_to_expire_in(c, now, SHORT_RUN_PATIENCE_MS);
		}
	}
	return submitted;
}

/*
 * One round of the flusher.  Short runs of young data wait for the data
 * around them, and deferred partial blocks and dirty edges for their
 * neighbours (a read or a second write saved), unless memory is short.  Over the
 * dirty limit with nothing else to write, first the short runs go, then
 * the rest.
 */
static int64_t flush_round(struct pc_domain *d)
{
	struct pc_cache *c = d->c;
	struct pc_mapping **v;
	unsigned n = domain_mappings(d, &v);
	bool kicked = atomic_exchange(&d->kicked, false);
	bool want_free = atomic_exchange(&d->want_free, false);
	static const int patience[] = { WB_LET_PARTIAL_WAIT | WB_HOLD_SHORT_RUNS, WB_LET_PARTIAL_WAIT, 0 };
	int64_t submitted = 0;
	/* Space reserved ahead of writers extending their files, so that
	 * they do not stall on the fallocate (backing_reserve_soon). */
	for (unsigned i = 0; i < n; i++)
		backing_reserve_background(v[i]);
	for (unsigned t = want_free ? 2 : 0; t < 3 && !submitted; t++) {
		/* Less patient passes only for writers that wait (for room
		 * under the limit for their next write: the limit may not be
		 * reached yet). */
		if (t && !want_free && !throttle_over_limit(c) && !throttle_has_waiters(c))
			break;
		submitted = flush_pass(d, v, n, kicked, want_free, patience[t]);
	}
	/* Edges are never dropped for their age, and the budget is kept by
	 * the writers that add edges (edges.c), not here. */
	for (unsigned i = 0; i < n; i++)
		mapping_put(v[i]);
	free(v);
	return submitted;
}

/* A round, then the closed files' work (which may let go of descriptors
 * this process holds idle: not while a round of its own runs). */
static int64_t flush_round_and_settle(struct pc_domain *d)
{
	struct pc_proc *p = cache_proc(d->c);
	pthread_rwlock_rdlock(&p->round_lock);
	int64_t submitted = flush_round(d);
	pthread_rwlock_unlock(&p->round_lock);
	p->closed_after_round(d->c);
	return submitted;
}

static bool flusher_has_work(struct pc_domain *d)
{
	struct pc_cache *c = d->c;
	return atomic_load(&d->kicked) || atomic_load(&d->want_free) ||
	       atomic_load(&c->dirty) > (int64_t)c->cfg.dirty_background_bytes;
}

static void *flusher_main(void *arg)
{
	struct pc_domain *d = arg;
	struct pc_cache *c = d->c;
	cache_lock(c, &d->lock, LOCK_LEAF);
	bool idle = true;
	while (!dproc(d)->stop) {
		/* A round that found nothing it may write waits for a kick or
		 * the tick, even above the background threshold; but not when
		 * a kick came during that round (kicks that find the flag set
		 * do not wake, so it would wait out the tick).  The count is
		 * read under the lock that kicks bump it under: a kick after
		 * this read makes the wait return at once. */
		if ((idle && !atomic_load(&d->kicked)) || !flusher_has_work(d)) {
			uint32_t seen = atomic_load_explicit(&d->kick_seq, memory_order_relaxed);
			cache_unlock(c, &d->lock);
			shfutex_wait_ms(&d->kick_seq, seen, FLUSHER_TICK_MS);
			cache_lock(c, &d->lock, LOCK_LEAF);
		}
		if (dproc(d)->stop)
			break;
		cache_unlock(c, &d->lock);
		idle = flush_round_and_settle(d) == 0;
		cache_lock(c, &d->lock, LOCK_LEAF);
	}
	cache_unlock(c, &d->lock);
	return NULL;
}

/* -------------------------------------------------------------- domains */

/* This process's part of new domain d: its I/O queue, file system
 * descriptor and flusher threads.  0 or a negative errno (nothing left
 * made). */
static int domain_proc_start(struct pc_domain *d)
{
	struct pc_cache *c = d->c;
	struct pc_domain_proc *dp = dproc(d);
	*dp = (struct pc_domain_proc){ .fs_fd = fs_sync_open(d->dev) };
	int err = ioq_create(c, c->cfg.queue_depth, cache_proc(c)->use_uring, &dp->ioq);
	if (err)
		goto fail;
	dp->threads = calloc(c->cfg.writeback_threads, sizeof(pthread_t));
	if (!dp->threads) {
		err = -ENOMEM;
		goto fail_ioq;
	}
	/* A thread that cannot be made leaves the domain with fewer
	 * flushers, not none: the ones running stay (joining them here,
	 * under files_lock, could wait for ever for a round that wants
	 * files_lock). */
	for (unsigned i = 0; i < c->cfg.writeback_threads; i++) {
		err = -pthread_create(&dp->threads[i], NULL, flusher_main, d);
		if (err)
			break;
		dp->nthreads = i + 1;
	}
	if (dp->nthreads)
		return 0;
	free(dp->threads);
fail_ioq:
	ioq_destroy(dp->ioq);
fail:
	if (dp->fs_fd >= 0)
		close(dp->fs_fd);
	*dp = (struct pc_domain_proc){ .fs_fd = -1 };
	return err;
}

int domain_get(struct pc_cache *c, dev_t dev, struct pc_domain **out)
{
	assert_held(&c->files_lock);
	unsigned n = 0;
	for (struct pc_domain *d = c->domains; d; d = d->next, n++)
		if (d->dev == dev) {
			/* Made by another process of a shared cache: this
			 * process's part of it starts with its first file there. */
			int err = dproc(d)->ioq ? 0 : domain_proc_start(d);
			if (!err)
				*out = d;
			return err;
		}
	if (n == PC_MAX_DOMAINS)
		return -ENFILE;
	struct pc_domain *d = cache_zalloc(c, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->c = c;
	d->dev = dev;
	d->index = n; /* domains are only added, so n is free */
	d->procs = cache_proc(c)->domains;
	shmutex_init(&d->lock);
	/* A dirty limit's worth of latency is too much: an eighth of it, but
	 * room for a few of the largest writes. */
	d->inflight_cap = (int64_t)u64_max(c->cfg.dirty_limit_bytes / 8, 4 * c->cfg.max_io_bytes);
	int err = domain_proc_start(d);
	if (err) {
		cache_free(c, d);
		return err;
	}
	d->next = c->domains;
	c->domains = d;
	*out = d;
	return 0;
}

void domains_stop(struct pc_cache *c)
{
	for (struct pc_domain *d = c->domains; d; d = d->next) {
		struct pc_domain_proc *dp = dproc(d);
		flushers_stop(d);
		for (unsigned i = 0; i < dp->nthreads; i++)
			pthread_join(dp->threads[i], NULL);
		dp->nthreads = 0;
	}
}

void domains_drain(struct pc_cache *c)
{
	domains_stop(c);
	for (struct pc_domain *d = c->domains; d; d = d->next) {
		struct pc_domain_proc *dp = dproc(d);
		if (dp->ioq)
			ioq_destroy(dp->ioq); /* waits for completions */
		dp->ioq = NULL;
	}
}

void domains_proc_free(struct pc_cache *c)
{
	domains_drain(c);
	for (struct pc_domain *d = c->domains; d; d = d->next) {
		struct pc_domain_proc *dp = dproc(d);
		if (dp->fs_fd >= 0)
			close(dp->fs_fd);
		free(dp->threads);
		*dp = (struct pc_domain_proc){ .fs_fd = -1 };
	}
}

void domains_proc_init(struct pc_cache *c)
{
	for (unsigned i = 0; i < PC_MAX_DOMAINS; i++)
		cache_proc(c)->domains[i] = (struct pc_domain_proc){ .fs_fd = -1 };
}

void domains_destroy(struct pc_cache *c)
{
	domains_drain(c);
	while (c->domains) {
		struct pc_domain *d = c->domains;
		struct pc_domain_proc *dp = dproc(d);
		c->domains = d->next;
		if (dp->fs_fd >= 0)
			close(dp->fs_fd);
		free(dp->threads);
		*dp = (struct pc_domain_proc){ .fs_fd = -1 };
		cache_free(c, d);
	}
}
