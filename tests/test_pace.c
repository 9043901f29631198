/*
 * test_pace.c - writers paced below the dirty limit by the write-back
 * bandwidth (src/wb/pace.c), the mechanism, not its timings:
 *
 *   - the position: 2 up to freerun (the background threshold), 1 at the
 *     setpoint (half way to the limit), at least a half under the limit,
 *     0 at the limit and past it, never rising with more dirty data;
 *   - the pause: proportional to the bytes, inversely to ratelimit * pos,
 *     bounded;
 *   - the ratelimit: from any start, N writers dirtying at ratelimit * pos
 *     bring it to bandwidth / N (each writer its share), and one writer to
 *     the whole bandwidth;
 *   - sampling: every 50 ms; the first 8, while the bandwidth is learnt,
 *     every 2 ms once write-back completed something (a writer at memory
 *     speed reaches the limit in a few milliseconds);
 *   - the bandwidth: the first window's figure, then the mean with each
 *     window's; a window with freerun in it (the flusher may have idled)
 *     only raises it, so a low first figure does not stay;
 *   - a window's ratelimit: writers paced at pos ~2 who dirtied at the
 *     bandwidth keep the ratelimit, although the sampling write is near
 *     the limit (the window's mean position counts, not the moment's);
 *     bytes that ran free do not count as dirtied at the ratelimit; the
 *     bandwidth is over the device's busy time, not the window's;
 *   - the busy time: from a request's submission while none was in flight
 *     to the completion that leaves none; idle time not counted;
 *   - learning (the first 8 samples): each figure is over all the
 *     write-back since the first window, not the mean of windows (a short
 *     window holds a bunch of completions or none), the first only once a
 *     write-back window's worth has ended, and a window with freerun in it
 *     does not lower it; writers are paced no slower than their share
 *     meanwhile; then the bandwidth and the ratelimit as above;
 *   - a writer faster than its device (write-back slowed by a fault rule)
 *     is paced: it sleeps below the limit, peak dirty stays within the
 *     limit (waiting for room for its next write, it never passes it even
 *     by one write), and every byte reaches the device.
 */
#include "testutil.h"

#include "api/internal.h"

#define MiB (1024ull * 1024ull)

TEST_SCRATCH_DIR("pace")

TEST_CASE(position_falls_from_freerun_to_limit)
{
	uint64_t bg = 10 * MiB, limit = 20 * MiB, freerun = bg, setpoint = 15 * MiB;
	CHECK(pace_position(0, bg, limit) == 2 * PACE_ONE);
	CHECK(pace_position(freerun, bg, limit) == 2 * PACE_ONE);
	CHECK(pace_position(setpoint, bg, limit) == PACE_ONE);
	CHECK(pace_position(limit, bg, limit) == 0);
	CHECK(pace_position(limit + MiB, bg, limit) == 0);
	CHECK(pace_position(limit - 1, bg, limit) == PACE_MIN_POS);
	CHECK(PACE_MIN_POS == PACE_ONE / 2);
	uint64_t prev = 2 * PACE_ONE;
	for (uint64_t used = 0; used <= limit + MiB; used += 64 * 1024) {
		uint64_t p = pace_position(used, bg, limit);
		CHECK(p <= prev);
		prev = p;
	}
}

TEST_CASE(pause_proportional_to_bytes_and_bounded)
{
	uint64_t rl = 100 * MiB; /* bytes per second */
	uint64_t one = pace_period_ns(MiB, rl, PACE_ONE);
	CHECK(one > 9000000 && one < 11000000); /* 1 MiB at 100 MiB/s: 10 ms */
	CHECK(pace_period_ns(MiB / 2, rl, PACE_ONE) * 2 <= one + 2 && pace_period_ns(MiB / 2, rl, PACE_ONE) * 2 >= one - 2);
	CHECK(pace_period_ns(MiB, rl, 2 * PACE_ONE) * 2 <= one + 2); /* twice the rate at freerun */
	CHECK(pace_period_ns(MiB, rl, PACE_ONE / 2) >= 2 * one - 2);
	CHECK(pace_period_ns(0, rl, PACE_ONE) == 0);
	/* Bounded: at the limit (pos 0), or for a huge write, at most the
	 * longest pause (50 ms), never a stall. */
	CHECK(pace_period_ns(MiB, rl, 0) <= 50000000ull);
	CHECK(pace_period_ns(1ull << 40, rl, PACE_ONE) <= 50000000ull);
}

/* N writers, each let do ratelimit * pos: the dirtying rate is N times
 * that.  Iterate the correction and see where it settles. */
static uint64_t settle(uint64_t start, unsigned n, uint64_t bw, uint64_t pos)
{
	uint64_t rl = start;
	for (int i = 0; i < 60; i++) {
		uint64_t dirty_rate = (uint64_t)n * (rl * pos / PACE_ONE);
		rl = pace_balanced_ratelimit(rl, pos, bw, dirty_rate);
	}
	return rl;
}

TEST_CASE(ratelimit_settles_at_each_writers_share)
{
	uint64_t bw = 400 * MiB;
	for (unsigned n = 1; n <= 32; n *= 2) {
		for (uint64_t start = bw / 500; start <= bw; start *= 4) {
			uint64_t rl = settle(start, n, bw, PACE_ONE);
			uint64_t want = bw / n;
			if (!(rl > want - want / 50 && rl < want + want / 50))
				printf("   %u writers from %llu: %llu, want %llu\n", n, (unsigned long long)start,
				       (unsigned long long)rl, (unsigned long long)want);
			CHECK(rl > want - want / 50 && rl < want + want / 50);
		}
	}
	/* No bandwidth measured, or nothing dirtied: keep what there is. */
	CHECK(pace_balanced_ratelimit(123, PACE_ONE, 0, 0) == 123);
	CHECK(pace_balanced_ratelimit(0, PACE_ONE, bw, 0) == bw);
	/* Never above the bandwidth, never zero. */
	CHECK(pace_balanced_ratelimit(bw, 2 * PACE_ONE, bw, 1) == bw);
	CHECK(pace_balanced_ratelimit(1, PACE_ONE / 1024, bw, bw * 1000) >= 1);
}

TEST_CASE(sampled_every_window_and_often_while_learning)
{
	const uint64_t ms = 1000000ull;
	CHECK(pace_sample_due(50 * ms, 8, true));
	CHECK(pace_sample_due(50 * ms, 8, false));
	CHECK(pace_sample_due(50 * ms, 0, false));
	CHECK(!pace_sample_due(49 * ms, 8, true));
	/* While the bandwidth is being learnt (the first 8 samples), every
	 * 2 ms once something completed: a low first figure is corrected in
	 * milliseconds, not after a 50 ms window of slow writes. */
	CHECK(pace_sample_due(2 * ms, 0, true));
	CHECK(pace_sample_due(2 * ms, 7, true));
	CHECK(!pace_sample_due(2 * ms, 8, true));
	CHECK(!pace_sample_due(49 * ms, 8, true));
	CHECK(!pace_sample_due(1 * ms, 0, true));
	CHECK(!pace_sample_due(20 * ms, 0, false)); /* nothing completed: no bandwidth to see */
}

TEST_CASE(bandwidth_is_mean_of_windows_freerun_only_raises)
{
	uint64_t bw = 400 * MiB;
	CHECK(pace_next_bandwidth(0, bw, false) == bw);
	CHECK(pace_next_bandwidth(0, bw, true) == bw);
	CHECK(pace_next_bandwidth(bw, 200 * MiB, false) == 300 * MiB);
	CHECK(pace_next_bandwidth(bw, 600 * MiB, false) == 500 * MiB);
	CHECK(pace_next_bandwidth(bw, 40 * MiB, true) == bw);        /* idle flusher: no news */
	CHECK(pace_next_bandwidth(40 * MiB, bw, true) == bw);        /* at least that fast */
}

/* A cache of 64 MiB with no file: its pacing state is the test's own. */
static struct pc_cache *new_idle_cache(void)
{
	return tu_cache_of(64 * MiB);
}

/* One PACE_SAMPLE_MS window on cache c: `paced` bytes dirtied by writes
 * paced at pos_paced (in writes of 1 MiB), `free_bytes` by writes that ran
 * free, `done` written back; sampled by a write at pos_now.  Returns the
 * ratelimit after it. */
static uint64_t run_window_busy(struct pc_cache *c, uint64_t *t, uint64_t pos_paced, uint64_t paced,
				uint64_t free_bytes, uint64_t done, uint64_t pos_now, uint64_t busy_ns)
{
	const uint64_t window_ns = 50 * 1000000ull;
	for (uint64_t b = 0; b < paced; b += MiB)
		pace_note_position(c, pos_paced, MiB);
	if (free_bytes) {
		/* What balance_dirty does after a write with nothing dirty:
		 * the write runs free. */
		REQUIRE(atomic_load(&c->dirty) + atomic_load(&c->writeback) == 0);
		throttle_account(free_bytes);
		pace_writer(c, free_bytes);
	}
	/* As pace_io_begin/pace_io_end account it, the device busy for
	 * busy_ns of the window. */
	atomic_fetch_add(&c->wb_done_bytes, done);
	atomic_fetch_add(&c->wb_busy_ns, busy_ns);
	*t += window_ns;
	pace_sample(c, *t, pos_now);
	return atomic_load(&c->pace_ratelimit);
}

/* A window with the device busy all of it. */
static uint64_t run_window(struct pc_cache *c, uint64_t *t, uint64_t pos_paced, uint64_t paced, uint64_t free_bytes,
			   uint64_t done, uint64_t pos_now)
{
	return run_window_busy(c, t, pos_paced, paced, free_bytes, done, pos_now, 50 * 1000000ull);
}

TEST_CASE(window_ratelimit_uses_mean_position_and_busy_time)
{
	struct pc_cache *c = new_idle_cache();
	/* Learnt: learning_counts_all_writeback_since_first_window checks
	 * the samples before. */
	atomic_store(&c->pace_samples, PACE_LEARN_SAMPLES);
	const uint64_t bw = 400 * MiB; /* 20 MiB per 50 ms window */
	uint64_t t = 1000000000ull;
	pace_sample(c, t, PACE_ONE); /* opens the first window */
	/* First sample: the bandwidth, and a ratelimit of all of it. */
	uint64_t rl = run_window(c, &t, PACE_ONE, 20 * MiB, 0, 20 * MiB, PACE_ONE);
	CHECK(atomic_load(&c->pace_bw) == bw);
	CHECK(rl == bw);
	/* Paced near freerun all window, dirtying at the bandwidth, sampled
	 * near the limit: the writers were let do 2 * rl and did less, so
	 * the ratelimit stays (taken at the moment's pos it would fall to
	 * (bw + bw / 8) / 2). */
	rl = run_window(c, &t, 2 * PACE_ONE - 8, 20 * MiB, 0, 20 * MiB, PACE_MIN_POS);
	printf("   sampled near the limit after a window near freerun: ratelimit %llu MiB/s\n",
	       (unsigned long long)(rl / MiB));
	CHECK(rl == bw);
	/* A window with 100 MiB dirtied free (memory speed) and 20 MiB paced
	 * at pos 1: the paced writers went at rl; the free bytes were not
	 * let go at rl and do not cut it. */
	rl = run_window(c, &t, PACE_ONE, 20 * MiB, 100 * MiB, 20 * MiB, PACE_ONE);
	printf("   a window with freerun in it: ratelimit %llu MiB/s\n", (unsigned long long)(rl / MiB));
	CHECK(rl == bw);
	/* Then the flusher idled half the window (freerun): the bandwidth
	 * does not fall. */
	run_window(c, &t, PACE_ONE, 10 * MiB, 10 * MiB, 10 * MiB, PACE_ONE);
	CHECK(atomic_load(&c->pace_bw) == bw);
	/* All paced, but little to write: the device was busy a tenth of
	 * the window, at its rate.  Bytes over the window would say a tenth
	 * of it; over the busy time, the rate. */
	run_window_busy(c, &t, PACE_ONE, 2 * MiB, 0, 2 * MiB, PACE_ONE, 5 * 1000000ull);
	printf("   device busy a tenth of the window: bandwidth %llu MiB/s\n",
	       (unsigned long long)(atomic_load(&c->pace_bw) / MiB));
	CHECK(atomic_load(&c->pace_bw) == bw);
	/* Busy under a millisecond: no sample (the window goes on). */
	uint64_t stamp = c->pace_stamp_ns;
	run_window_busy(c, &t, PACE_ONE, 1 * MiB, 0, 1 * MiB, PACE_ONE, 500000ull);
	CHECK(c->pace_stamp_ns == stamp);
	CHECK(pc_cache_destroy(c) == 0);
}

TEST_CASE(learning_counts_all_writeback_since_first_window)
{
	struct pc_cache *c = new_idle_cache();
	uint64_t t = 1000000000ull;
	/* Near the limit: pace_writer's position is the share while the
	 * bandwidth is learnt, the position itself once it is. */
	CHECK(pace_learning_position(c, PACE_MIN_POS) == PACE_ONE);
	CHECK(pace_learning_position(c, 2 * PACE_ONE) == 2 * PACE_ONE);
	pace_sample(c, t, PACE_ONE); /* opens the first window */
	/* Less than a write-back window's worth ended (an eighth of the dirty
	 * limit, 1.6 MiB here): the first request of a bunch, no figure yet. */
	run_window_busy(c, &t, PACE_ONE, 1 * MiB, 0, 1 * MiB, PACE_ONE, 5 * 1000000ull);
	CHECK(atomic_load(&c->pace_bw) == 0 && atomic_load(&c->pace_samples) == 0);
	/* The rest of the bunch: the figure counts all of it, 10 MiB over
	 * 10 ms. */
	run_window_busy(c, &t, PACE_ONE, 9 * MiB, 0, 9 * MiB, PACE_ONE, 5 * 1000000ull);
	CHECK(atomic_load(&c->pace_bw) == 1000 * MiB);
	CHECK(pc_cache_destroy(c) == 0);
	c = new_idle_cache();
	t = 1000000000ull;
	pace_sample(c, t, PACE_ONE);
	/* 10 MiB in 10 ms of busy device, then 10 MiB in 40 ms: 20 MiB in
	 * 50 ms, 400 MiB/s (the mean of the two windows' figures, 1000 and
	 * 250, would be 625). */
	run_window_busy(c, &t, PACE_ONE, 10 * MiB, 0, 10 * MiB, PACE_ONE, 10 * 1000000ull);
	CHECK(atomic_load(&c->pace_bw) == 1000 * MiB);
	run_window_busy(c, &t, PACE_ONE, 10 * MiB, 0, 10 * MiB, PACE_ONE, 40 * 1000000ull);
	printf("   after windows of 1000 and 250 MiB/s: %llu MiB/s\n",
	       (unsigned long long)(atomic_load(&c->pace_bw) / MiB));
	CHECK(atomic_load(&c->pace_bw) == 400 * MiB);
	CHECK(atomic_load(&c->pace_samples) == 2);
	/* A window with freerun in it (the flusher may have idled) would
	 * bring the figure down to 333 MiB/s: it stays at 400. */
	run_window_busy(c, &t, PACE_ONE, 10 * MiB, 10 * MiB, 10 * MiB, PACE_ONE, 40 * 1000000ull);
	CHECK(atomic_load(&c->pace_bw) == 400 * MiB);
	while (atomic_load(&c->pace_samples) < PACE_LEARN_SAMPLES)
		run_window_busy(c, &t, PACE_ONE, 20 * MiB, 0, 20 * MiB, PACE_ONE, 50 * 1000000ull);
	/* Learnt: the position is the writer's, and the next figure is the
	 * mean of the last and the window's. */
	CHECK(pace_learning_position(c, PACE_MIN_POS) == PACE_MIN_POS);
	uint64_t bw = atomic_load(&c->pace_bw);
	run_window_busy(c, &t, PACE_ONE, 10 * MiB, 0, 10 * MiB, PACE_ONE, 10 * 1000000ull);
	CHECK(atomic_load(&c->pace_bw) == (bw + 1000 * MiB) / 2);
	CHECK(pc_cache_destroy(c) == 0);
}

/* CLOCK_MONOTONIC in ns: the clock the busy time is counted in. */
static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };
	nanosleep(&ts, NULL);
}

TEST_CASE(busy_time_counts_only_requests_in_flight)
{
	struct pc_cache *c = new_idle_cache();
	uint64_t busy0 = atomic_load(&c->wb_busy_ns), done0 = atomic_load(&c->wb_done_bytes);
	/* Two requests overlapping: one spell, from the first's start to the
	 * second's end. */
	pace_io_begin(c);
	sleep_ms(3);
	pace_io_begin(c);
	sleep_ms(3);
	pace_io_end(c, MiB);
	CHECK(atomic_load(&c->wb_busy_ns) == busy0); /* one still in flight */
	sleep_ms(3);
	pace_io_end(c, MiB);
	uint64_t spell = atomic_load(&c->wb_busy_ns) - busy0;
	CHECK(spell >= 9000000ull);
	CHECK(atomic_load(&c->wb_done_bytes) - done0 == 2 * MiB);
	/* Idle time does not count: the spell is no longer than the time
	 * from just before its begin to just after its end (the 10 ms idle
	 * before it would make it longer, however slow the machine). */
	sleep_ms(10);
	uint64_t b0 = mono_ns();
	pace_io_begin(c);
	sleep_ms(2);
	pace_io_end(c, MiB);
	uint64_t in_call = mono_ns() - b0;
	uint64_t two = atomic_load(&c->wb_busy_ns) - busy0 - spell;
	printf("   spell of two overlapping requests %.1f ms, then one %.1f ms after 10 ms idle\n", spell / 1e6,
	       two / 1e6);
	CHECK(two >= 2000000ull && two <= in_call);
	CHECK(pc_cache_destroy(c) == 0);
}

TEST_CASE(writer_faster_than_device_paced_below_limit)
{
	struct pc_config cfg = tu_config(64 * MiB); /* dirty limit 12.8 MiB */
	cfg.max_io_bytes = 256 * 1024;
	struct pc_cache *c = tu_cache_new(&cfg);
	char path[4200];
	test_path(path, sizeof(path), dir, "paced");
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	/* Every device write 2 ms late: about 100 MiB/s at most, far below
	 * what memcpy fills the cache with. */
	struct pc_fault rule = { .ops = PC_FAULT_WRITE, .action = PC_FAULT_DELAY, .delay_ms = 2 };
	int id = pc_fault_inject(c, &rule);
	REQUIRE(id >= 0);
	size_t n = MiB;
	uint8_t *buf = malloc(n);
	REQUIRE(buf);
	const unsigned writes = 96;
	for (unsigned i = 0; i < writes; i++) {
		tu_fill_pattern(buf, n, 11, (uint64_t)i * n);
		CHECK(pc_pwrite(h, buf, n, (off_t)i * (off_t)n, PC_DONTCACHE) == (ssize_t)n);
	}
	struct pc_stats s = tu_stats(c);
	printf("   %u writes: %llu paced sleeps, %llu limit waits, peak dirty %llu (limit %zu)\n", writes,
	       (unsigned long long)s.throttle_pauses, (unsigned long long)s.throttle_waits,
	       (unsigned long long)s.peak_dirty_bytes, cfg.memory_limit / 5);
	CHECK(s.throttle_pauses > 0);
	/* One writer waits for room for its next write before the limit, so
	 * it never takes dirty data past it (not even by one write). */
	CHECK(s.peak_dirty_bytes <= cfg.memory_limit / 5);
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(pc_fsync(h) == 0);
	CHECK(pc_close(h) == 0);
	int fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	bool same = true;
	uint8_t *want = malloc(n);
	REQUIRE(want);
	for (unsigned i = 0; i < writes && same; i++) {
		tu_fill_pattern(want, n, 11, (uint64_t)i * n);
		same = pread(fd, buf, n, (off_t)i * (off_t)n) == (ssize_t)n && memcmp(buf, want, n) == 0;
	}
	CHECK(same);
	close(fd);
	unlink(path);
	free(want);
	free(buf);
	CHECK(pc_cache_destroy(c) == 0);
}
