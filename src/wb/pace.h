/*
 * pace.h - writers paced by the write-back bandwidth below the dirty limit
 * (pace.c; the idea of the kernel's balance_dirty_pages pause), so that
 * they slow down smoothly before the limit instead of running into it and
 * stopping.  throttle.c calls pace_writer; the pure
 * functions of the model are here for tests/test_pace.c.
 */
#ifndef PC_PACE_H
#define PC_PACE_H

#include "lib/util.h"

struct pc_cache;

#define PACE_ONE 1024
/* Samples taken while the bandwidth is being learnt (pace.c). */
#define PACE_LEARN_SAMPLES 8
#define PACE_MIN_POS (PACE_ONE / 2)
/* While the bandwidth is learnt, pos as pace_writer takes it: at least 1
 * (pace.c explains). */
HIDDEN uint64_t pace_learning_position(struct pc_cache *c, uint64_t pos);
/* pos (PACE_ONE = 1): 2 at or below freerun (the background threshold),
 * 1 at the setpoint (half way to the limit), falling to PACE_MIN_POS
 * three quarters of the way and staying there up to the limit, 0 at the
 * limit and past. */
HIDDEN uint64_t pace_position(uint64_t used, uint64_t background, uint64_t limit);
/* The time `bytes` take at ratelimit * pos bytes per second (at most the
 * longest pause). */
HIDDEN uint64_t pace_period_ns(uint64_t bytes, uint64_t ratelimit, uint64_t pos);
/* The next per-writer ratelimit, from what writers were let do (ratelimit
 * at pos), the bandwidth and the dirtying rate measured (bytes/s). */
HIDDEN uint64_t pace_balanced_ratelimit(uint64_t ratelimit, uint64_t pos, uint64_t bw, uint64_t dirty_rate);
/* The bandwidth estimate after a window that measured bw_now (bytes/s;
 * bw 0: none yet); `freerun`: a write of the window ran free, so the
 * flusher had little to write and bw_now is only a lower bound. */
HIDDEN uint64_t pace_next_bandwidth(uint64_t bw, uint64_t bw_now, bool freerun);
/* Is a new sample of bandwidth and dirtying rate due, dt_ns after the
 * last, `samples` taken before?  Every PACE_SAMPLE_MS; the first
 * PACE_LEARN_SAMPLES (the bandwidth still being learnt) as soon as
 * write-back completed something over PACE_FIRST_SAMPLE_MS. */
HIDDEN bool pace_sample_due(uint64_t dt_ns, unsigned samples, bool completed);
/* A write ran free (under the background threshold): the window's
 * bandwidth is only a lower bound (pace_next_bandwidth). */
HIDDEN void pace_note_freerun(struct pc_cache *c);
/* A paced write of `bytes` at position pos: the window's dirtying rate
 * and mean position count it (writes that ran free or waited at the
 * limit were not let go at ratelimit * pos, and do not). */
HIDDEN void pace_note_position(struct pc_cache *c, uint64_t pos, size_t bytes);
/* Take a sample at `now` if one is due (pos: the writer's position), or
 * start a new window; pace_writer's, open for tests/test_pace.c. */
HIDDEN void pace_sample(struct pc_cache *c, uint64_t now, uint64_t pos);
/* A write-back request goes to the device / came back with `bytes`
 * written: the bandwidth is measured over the time some were in flight. */
HIDDEN void pace_io_begin(struct pc_cache *c);
HIDDEN void pace_io_end(struct pc_cache *c, size_t bytes);
/* After a write of `bytes` under the limit: sleep what they owe. */
HIDDEN void pace_writer(struct pc_cache *c, size_t bytes);

#endif
