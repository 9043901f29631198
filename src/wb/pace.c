/*
 * pace.c - writers paced by the rate at which write-back completes, so
 * that they slow down smoothly before the dirty limit instead of running
 * into it and stopping (the idea of the kernel's balance_dirty_pages).
 *
 * Without pacing, a writer faster than its device copies at memory speed
 * until dirty + writeback reach the limit, then waits there for whole
 * device writes to end: most writes take a memcpy, some take a device
 * write or several, and the tail latency is the stall.  With pacing, past
 * the "freerun" point (the background threshold; the kernel's is half way
 * from there to the limit, but a device that stalls for a moment should
 * not bring writers to the limit) every write is followed by a short
 * sleep sized so that the writer's rate is
 *
 *     rate = ratelimit * pos
 *
 * where pos falls linearly from 2 at freerun through 1 at the setpoint
 * (half way from freerun to the limit) to 1/2 three quarters of the way,
 * and stays there up to the limit (0 at the limit and past it, where the
 * throttle waits instead), and ratelimit
 * is each writer's share of the write-back bandwidth: it is corrected
 * every PACE_SAMPLE_MS (more often while it is first learnt) by how the
 * paced writers' total dirtying rate compares with the bandwidth
 * measured (N writers at ratelimit * pos dirty N times that, pos being
 * the mean of their writes' positions over the window; ratelimit moves
 * towards bandwidth / N).  Writes that ran free
 * or waited at the limit were not let go at that rate and are not
 * counted.  The bandwidth is the bytes written back over the time the
 * device had a request in flight, and a window with freerun in it can
 * only raise it (pace_next_bandwidth).  While the first figures are learnt
 * they are over all the write-back so far, and writers go no slower than
 * their share (learn_bandwidth, pace_learning_position).  The dirty data then
 * settles near the setpoint, every write waits about as long, and none
 * waits for the limit.  Past the limit the throttle (throttle.c) still
 * makes writers wait, in fair order.
 *
 * A sleep is owed per thread: what each write owes (its bytes at the
 * rate) less the time the thread spent since its last write (copying,
 * its own work).  Debts under PACE_MIN_SLEEP_NS are carried to the next
 * write instead of sleeping a few microseconds at a time; one sleep is at
 * most PACE_MAX_SLEEP_NS.
 */
#include "wb/pace.h"

#include "api/cache.h"
#include "lib/check.h"

#include <errno.h>
#include <time.h>

#define PACE_SAMPLE_MS 50
/* The first PACE_LEARN_SAMPLES samples are taken as soon as write-back
 * has completed something for PACE_FIRST_SAMPLE_MS: a writer at memory
 * speed crosses from freerun to the limit in a few milliseconds, and until
 * the first sample only the limit stops it (a stall of a whole device
 * write).  A first figure taken while write-back is starting is often
 * far below the device's; at one sample per PACE_SAMPLE_MS it held the
 * writers that slow for 50 ms (writes of several times their usual time:
 * docs/results.md, "Figures the code's comments used to carry", Pacing),
 * short windows correct it within a few milliseconds. */
#define PACE_FIRST_SAMPLE_MS 2
/* A bandwidth sample needs the device busy this long in its window: a
 * single request's time says little of the device's rate. */
#define PACE_MIN_BUSY_NS 1000000ull      /* 1 ms */
#define PACE_MIN_SLEEP_NS 200000ull      /* 0.2 ms */
#define PACE_MAX_SLEEP_NS 50000000ull    /* 50 ms */
#define NS_PER_S 1000000000ull

static _Thread_local uint64_t thread_last_ns;  /* when this thread last left pacing */
static _Thread_local uint64_t thread_debt_ns;  /* sleep owed, not yet slept */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t pace_position(uint64_t used, uint64_t background, uint64_t limit)
{
	/* Freerun ends at the background threshold, where the flusher is
	 * writing anyway: the setpoint half way to the limit leaves room for
	 * the device to stall a while before writers meet the limit. */
	uint64_t freerun = background;
	if (used <= freerun)
		return 2 * PACE_ONE;
	if (used >= limit || limit <= freerun)
		return 0;
	uint64_t pos = 2 * PACE_ONE * (limit - used) / (limit - freerun);
	/* Never slower than half the share just under the limit: a write's
	 * pause stays within twice the usual one (the tail latency: a quarter
	 * made the writes that met a device's stall take four times as long
	 * as the others), and the limit itself stops the rest. */
	return pos > PACE_MIN_POS ? pos : PACE_MIN_POS;
}

uint64_t pace_period_ns(uint64_t bytes, uint64_t ratelimit, uint64_t pos)
{
	if (!bytes)
		return 0;
	uint64_t rate = ratelimit * pos / PACE_ONE; /* bytes per second */
	if (rate == 0)
		return PACE_MAX_SLEEP_NS;
	long double ns = (long double)bytes * NS_PER_S / rate;
	return ns > PACE_MAX_SLEEP_NS ? PACE_MAX_SLEEP_NS : (uint64_t)ns;
}

uint64_t pace_balanced_ratelimit(uint64_t ratelimit, uint64_t pos, uint64_t bw, uint64_t dirty_rate)
{
	if (!dirty_rate || !bw)
		return ratelimit ? ratelimit : bw;
	uint64_t task = ratelimit * pos / PACE_ONE; /* what each writer was let do */
	long double balanced = (long double)task * bw / dirty_rate;
	/* Move half way, within [bw / 1024, bw]: one writer may use it all. */
	long double next = ((long double)ratelimit + balanced) / 2;
	long double lo = bw / 1024.0L + 1;
	if (next < lo)
		next = lo;
	if (next > bw)
		next = bw;
	return (uint64_t)next;
}

uint64_t pace_next_bandwidth(uint64_t bw, uint64_t bw_now, bool freerun)
{
	if (!bw)
		return bw_now;
	/* Under the background threshold the flusher had little to write,
	 * fewer requests in flight than the device takes at once, so a
	 * window with freerun in it can only tell that the device is at
	 * least that fast.  Taken as it stands, a low figure would pace
	 * writers slowly, which keeps them under the threshold, which keeps
	 * the figure low: stop-and-go for good. */
	if (freerun)
		return bw_now > bw ? bw_now : bw;
	return (bw + bw_now) / 2;
}

bool pace_sample_due(uint64_t dt_ns, unsigned samples, bool completed)
{
	if (dt_ns >= PACE_SAMPLE_MS * 1000000ull)
		return true;
	return samples < PACE_LEARN_SAMPLES && completed && dt_ns >= PACE_FIRST_SAMPLE_MS * 1000000ull;
}

static uint64_t dirty_used(struct pc_cache *c)
{
	int64_t used = atomic_load(&c->dirty) + atomic_load(&c->writeback);
	return used > 0 ? (uint64_t)used : 0;
}

/*
 * The bandwidth is the bytes written back over the time the device was
 * busy with them (some request in flight), not over the window: in a
 * window where writers dirtied little, the flusher had little to write and
 * idled, and bytes over wall time measured the writers, not the device.
 * Paced by such a figure the writers dirty little again, and a low first
 * figure (write-back still starting: often far below the device's) held
 * them slow for hundreds of writes.
 */
void pace_io_begin(struct pc_cache *c)
{
	if (atomic_fetch_add_explicit(&c->wb_ios, 1, memory_order_acq_rel) == 0)
		atomic_store_explicit(&c->wb_busy_since, now_ns(), memory_order_release);
}

void pace_io_end(struct pc_cache *c, size_t bytes)
{
	atomic_fetch_add_explicit(&c->wb_done_bytes, bytes, memory_order_relaxed);
	/* Read before the count drops: a request submitted right after it
	 * reached 0 starts a new spell, not a part of this one. */
	uint64_t since = atomic_load_explicit(&c->wb_busy_since, memory_order_acquire);
	if (atomic_fetch_sub_explicit(&c->wb_ios, 1, memory_order_acq_rel) == 1) {
		uint64_t now = now_ns();
		if (now > since)
			atomic_fetch_add_explicit(&c->wb_busy_ns, now - since, memory_order_relaxed);
	}
}

/* The device's busy time up to now, the current spell included. */
static uint64_t busy_time(struct pc_cache *c, uint64_t now)
{
	uint64_t busy = atomic_load_explicit(&c->wb_busy_ns, memory_order_acquire);
	if (atomic_load_explicit(&c->wb_ios, memory_order_acquire) > 0) {
		uint64_t since = atomic_load_explicit(&c->wb_busy_since, memory_order_acquire);
		if (now > since)
			busy += now - since;
	}
	return busy;
}

/* A new window of measurement from now (under pace_lock). */
static void window_start(struct pc_cache *c, uint64_t now, uint64_t done, uint64_t dirtied, uint64_t busy)
{
	assert_held(&c->pace_lock);
	c->pace_stamp_ns = now;
	c->pace_done = done;
	c->pace_busy = busy;
	c->pace_dirtied = dirtied;
	atomic_store_explicit(&c->pace_pos_sum, 0, memory_order_relaxed);
	atomic_store_explicit(&c->pace_pos_n, 0, memory_order_relaxed);
}

/*
 * The position the writers were paced at over the window: the mean of
 * their writes' positions (`pos`, the sampling writer's, if none was
 * counted).  The writers dirtied at ratelimit times that mean, not times
 * the position of the moment: one taken near the limit, after a window
 * spent near freerun, would make the writers look several times faster
 * (freerun's position over the floor's, PACE_MIN_POS) than they were let
 * go, and cut the ratelimit by as much.
 */
static uint64_t window_position(struct pc_cache *c, uint64_t pos)
{
	uint64_t n = atomic_load_explicit(&c->pace_pos_n, memory_order_relaxed);
	uint64_t sum = atomic_load_explicit(&c->pace_pos_sum, memory_order_relaxed);
	return n ? sum / n : pos;
}

void pace_note_position(struct pc_cache *c, uint64_t pos, size_t bytes)
{
	atomic_fetch_add_explicit(&c->dirtied_bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->pace_pos_sum, pos, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->pace_pos_n, 1, memory_order_relaxed);
}

/*
 * While the bandwidth is learnt (the first PACE_LEARN_SAMPLES, every few
 * milliseconds), each figure is over everything write-back did since the
 * first window began, not over the last window: the device works on the
 * first requests together and ends them in bunches, so a short window
 * holds a bunch or none and its figure was as often far below the
 * device's as above it (a low one made the first paced writes sleep
 * several times as long as the others: docs/results.md, "Figures the
 * code's comments used to carry", Pacing).  A window with freerun in it
 * can only raise the figure, as pace_next_bandwidth says why.  Under
 * pace_lock.
 */
static uint64_t learn_bandwidth(struct pc_cache *c, uint64_t done, uint64_t busy, uint64_t last, bool freerun)
{
	assert_held(&c->pace_lock);
	uint64_t bw = (uint64_t)((long double)(done - c->pace_learn_done) * NS_PER_S / (busy - c->pace_learn_busy));
	return freerun && bw < last ? last : bw;
}

/*
 * The first figure waits for a write-back window's worth of bytes to have
 * ended (the flusher keeps about an eighth of the dirty limit in flight,
 * writeback.c): the device ends the first requests together, and a figure
 * taken after the first of them ended was a small part of the device's
 * (one request's bytes over the whole bunch's time), which paced the
 * first writes at several times the others' pause (docs/results.md,
 * "Figures the code's comments used to carry", Pacing).
 */
static bool learnt_enough(const struct pc_cache *c, uint64_t done)
{
	return done - c->pace_learn_done >= c->cfg.dirty_limit_bytes / 8;
}

/*
 * Every PACE_SAMPLE_MS (one thread at a time, the others go on with the
 * last figures): the write-back bandwidth and the paced writers' dirtying
 * rate since the last sample, and the ratelimit corrected by them.  Called
 * by paced writes only (over freerun, where the flusher is at work); a
 * window in which the device was busy under PACE_MIN_BUSY_NS goes on.
 */
void pace_sample(struct pc_cache *c, uint64_t now, uint64_t pos)
{
	if (!cache_trylock(c, &c->pace_lock, LOCK_LEAF))
		return;
	uint64_t done = atomic_load_explicit(&c->wb_done_bytes, memory_order_relaxed);
	uint64_t busy = busy_time(c, now);
	uint64_t dirtied = atomic_load_explicit(&c->dirtied_bytes, memory_order_relaxed);
	uint64_t dt = now - c->pace_stamp_ns;
	unsigned samples = atomic_load_explicit(&c->pace_samples, memory_order_relaxed);
	bool learning = samples < PACE_LEARN_SAMPLES;
	if (!c->pace_stamp_ns || dt > 20 * PACE_SAMPLE_MS * 1000000ull) {
		/* First sample, or the last is stale (idle since): restart. */
		atomic_store_explicit(&c->pace_freerun_seen, false, memory_order_relaxed);
		if (!c->pace_stamp_ns) {
			c->pace_learn_done = done;
			c->pace_learn_busy = busy;
		}
		window_start(c, now, done, dirtied, busy);
	} else if (pace_sample_due(dt, samples, done > c->pace_done) && busy - c->pace_busy >= PACE_MIN_BUSY_NS &&
		   (!learning || learnt_enough(c, done))) {
		uint64_t bw_now = (uint64_t)((long double)(done - c->pace_done) * NS_PER_S / (busy - c->pace_busy));
		uint64_t dirty_rate = (uint64_t)((long double)(dirtied - c->pace_dirtied) * NS_PER_S / dt);
		bool freerun = atomic_exchange_explicit(&c->pace_freerun_seen, false, memory_order_relaxed);
		uint64_t last = atomic_load_explicit(&c->pace_bw, memory_order_relaxed);
		uint64_t bw = learning ? learn_bandwidth(c, done, busy, last, freerun)
				       : pace_next_bandwidth(last, bw_now, freerun);
		/* The first ratelimit is the whole bandwidth (one writer's); a
		 * start from nothing would take many samples to grow. */
		uint64_t rl = atomic_load_explicit(&c->pace_ratelimit, memory_order_relaxed);
		rl = rl ? pace_balanced_ratelimit(rl, window_position(c, pos), bw, dirty_rate) : bw;
		atomic_store_explicit(&c->pace_bw, bw, memory_order_relaxed);
		atomic_store_explicit(&c->pace_ratelimit, rl, memory_order_relaxed);
		window_start(c, now, done, dirtied, busy);
		if (learning)
			atomic_store_explicit(&c->pace_samples, samples + 1, memory_order_relaxed);
	}
	cache_unlock(c, &c->pace_lock);
}

void pace_note_freerun(struct pc_cache *c)
{
	/* Read first: writers in freerun would otherwise all write the
	 * flag's cache line on every write. */
	if (!atomic_load_explicit(&c->pace_freerun_seen, memory_order_relaxed))
		atomic_store_explicit(&c->pace_freerun_seen, true, memory_order_relaxed);
}

/*
 * While the bandwidth is being learnt (the first PACE_LEARN_SAMPLES), its
 * figure is often low: write-back is starting, and the device works on the
 * first requests together, so few have ended when the first windows close.
 * Writers are then paced at their share, never slower: the slowing past the
 * setpoint (pos under 1) times a figure below the device's made the
 * first paced writes of a new cache take several times as long as the
 * others (docs/results.md, "Figures the code's comments used to carry",
 * Pacing).  The limit still stops a writer that goes past it.
 */
uint64_t pace_learning_position(struct pc_cache *c, uint64_t pos)
{
	bool learning = atomic_load_explicit(&c->pace_samples, memory_order_relaxed) < PACE_LEARN_SAMPLES;
	return learning && pos < PACE_ONE ? PACE_ONE : pos;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Only writes of at least a quarter of max_io_bytes are paced.  Small
 * writes come from many writers filling one file together (interleaved
 * records), whose write-back the flusher holds back on purpose (short runs
 * and edges wait for their neighbours): the completion rate then measures
 * that patience, not the device, and pacing by it slowed such writers to
 * a third.  They meet the limit alone, as before.
 */
static bool pace_applies(const struct pc_cache *c, size_t bytes)
{
	return bytes >= c->cfg.max_io_bytes / 4;
}

void pace_writer(struct pc_cache *c, size_t bytes)
{
	if (!pace_applies(c, bytes))
		return;
	uint64_t now = now_ns();
	uint64_t since = thread_last_ns ? now - thread_last_ns : UINT64_MAX;
	thread_last_ns = now;
	uint64_t pos = pace_position(dirty_used(c), c->cfg.dirty_background_bytes, c->cfg.dirty_limit_bytes);
	if (pos >= 2 * PACE_ONE || pos == 0) {
		/* Freerun: nothing owed, nothing saved up.  At the limit: the
		 * throttle's wait is the pause. */
		thread_debt_ns = 0;
		if (pos) /* not at the limit: free */
			pace_note_freerun(c);
		return;
	}
	pos = pace_learning_position(c, pos);
	pace_note_position(c, pos, bytes);
	pace_sample(c, now, pos);
	uint64_t rl = atomic_load_explicit(&c->pace_ratelimit, memory_order_relaxed);
	if (!rl)
		return; /* no bandwidth measured yet: the limit alone throttles */
	uint64_t owed = thread_debt_ns + pace_period_ns(bytes, rl, pos);
	thread_debt_ns = owed > since ? owed - since : 0;
	if (thread_debt_ns < PACE_MIN_SLEEP_NS)
		return;
	uint64_t ns = thread_debt_ns < PACE_MAX_SLEEP_NS ? thread_debt_ns : PACE_MAX_SLEEP_NS;
	sleep_ns(ns);
	thread_debt_ns = 0;
	atomic_fetch_add_explicit(&c->st_throttle_pauses, 1, memory_order_relaxed);
	thread_last_ns = now_ns();
}
