/*
 * fault.c - test-only fault injection: which of the rules of
 * pc_fault_inject() (api/fault_rules.c) fires for a device I/O.  The backend asks before every device
 * read, write and flush (fault_check_io, from io_account) and before every
 * io_uring submission (PC_FAULT_SUBMIT); writeback asks before allocating a
 * request (PC_FAULT_ALLOC).  What a firing rule does to the I/O (fail it,
 * cut it short, delay it) is the backend's business; here is only which
 * rule fires.
 *
 * Matching.  Rules are tried in the order they were added; the first one
 * that fires decides the I/O, and the rules after it do not see that I/O
 * (their skip and count do not move).  A rule sees an I/O when its ops
 * mask has the I/O's kind, its file (if any) is the I/O's descriptor (the
 * mapping's current or previous backing descriptor), and the I/O overlaps
 * [start, end) (a flush covers the whole file; an I/O of 0 bytes is the
 * byte at its offset).  A SHORT rule sees only reads and writes that can be
 * cut (probe_short_len).  Of the I/Os a rule sees, the first `skip` pass;
 * after that each fires (with one_in > 1: with probability 1/one_in, from
 * the rule's own seeded generator, so a run is reproducible given the same
 * order of I/Os), until `count` have fired (0: no limit).
 *
 * State.  The rules live in a struct fault_set (fault_set.h, made and
 * changed by api/fault_rules.c), guarded by one mutex: the check runs on
 * caller, flusher and completion threads at once.  the process's fault_nrules says
 * whether any rule is installed, so that the I/O path costs one relaxed
 * atomic load when none is.
 */
#include "io/fault.h"

#include "io/probe.h"
#include "io/fault_set.h"
#include "api/cache.h"
#include "mem/mapping.h"

#include <errno.h>
#include <time.h>

/* What the first firing rule decided. */
struct fault_verdict {
	int action;            /* PC_FAULT_*, or -1: nothing fired */
	int error;
	unsigned delay_ms;
	size_t cut;
};

/* ---------------------------------------------------------- matching */

/* splitmix64: any state works, 0 included. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int load_fd(const int *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Do the rule's op, file and range filters let this I/O through? */
static bool rule_sees(const struct fault_rule *fr, unsigned op_mask, int fd, off_t off, size_t len)
{
	if (fr->id < 0 || !(fr->r.ops & op_mask))
		return false;
	if (fr->m && (fd < 0 || (fd != load_fd(&mproc(fr->m)->fd) && fd != load_fd(&mproc(fr->m)->old_fd))))
		return false;
	if (op_mask & PC_FAULT_SYNC)
		return true; /* a flush covers the whole file */
	off_t end = off + (off_t)(len ? len : 1);
	return end > fr->r.start && (fr->r.end == 0 || off < fr->r.end);
}

/* The rule saw an I/O: does it fire?  Moves its skip/count/random state. */
static bool rule_fires(struct fault_rule *fr)
{
	if (fr->r.count && fr->fired >= fr->r.count)
		return false; /* spent: waits to be removed */
	if (fr->seen++ < fr->r.skip)
		return false;
	if (fr->r.one_in > 1 && rng_next(&fr->rng) % fr->r.one_in != 0)
		return false;
	fr->fired++;
	return true;
}

/* Try the rules in order; the first that fires decides (under s->lock).
 * cut: SHORT rules apply (reads and writes). */
static struct fault_verdict rules_decide(struct fault_set *s, unsigned op_mask, int fd, off_t off, size_t len,
					 bool cut)
{
	struct fault_verdict v = { .action = -1 };
	size_t cut_len = SIZE_MAX; /* not asked yet */
	for (int i = 0; i < FAULT_MAX_RULES; i++) {
		struct fault_rule *fr = &s->rule[i];
		if (!rule_sees(fr, op_mask, fd, off, len))
			continue;
		if (fr->r.action == PC_FAULT_SHORT) {
			if (!cut)
				continue;
			if (cut_len == SIZE_MAX)
				cut_len = probe_short_len(fd, len);
			if (!cut_len)
				continue; /* too small to cut: not seen */
		}
		if (!rule_fires(fr))
			continue;
		s->fired_total++;
		v.action = fr->r.action;
		v.error = fr->r.error;
		v.delay_ms = fr->r.delay_ms;
		v.cut = fr->r.action == PC_FAULT_SHORT ? cut_len : 0;
		break;
	}
	return v;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int fault_check_io(struct pc_cache *c, unsigned op_mask, int fd, off_t off, size_t len, size_t *cut)
{
	if (cut)
		*cut = 0;
	if (!c || atomic_load_explicit(&cache_proc(c)->fault_nrules, memory_order_relaxed) == 0)
		return 0;
	struct fault_set *s = atomic_load_explicit(&cache_proc(c)->faults, memory_order_acquire);
	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	struct fault_verdict v = rules_decide(s, op_mask, fd, off, len, cut != NULL);
	pthread_mutex_unlock(&s->lock);
	switch (v.action) {
	case PC_FAULT_FAIL:
		return -v.error;
	case PC_FAULT_SHORT:
		*cut = v.cut;
		return 0;
	case PC_FAULT_DELAY:
		sleep_ms(v.delay_ms);
		return 0;
	default:
		return 0;
	}
}

int fault_check(struct pc_cache *c, unsigned op_mask, int fd, off_t off, size_t len)
{
	return fault_check_io(c, op_mask, fd, off, len, NULL);
}
