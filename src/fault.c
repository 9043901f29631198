/*
 * fault.c - test-only fault injection: the rules of pc_fault_inject() and
 * their matching against device I/O.  The backend asks before every device
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
 * cut (backend_short_len).  Of the I/Os a rule sees, the first `skip` pass;
 * after that each fires (with one_in > 1: with probability 1/one_in, from
 * the rule's own seeded generator, so a run is reproducible given the same
 * order of I/Os), until `count` have fired (0: no limit).
 *
 * State.  The rules live in a struct fault_set created on first use (a
 * cache that is never given a rule allocates nothing), guarded by one
 * mutex: the check runs on caller, flusher and completion threads at once.
 * c->fault_nrules says whether any rule is installed, so that the I/O path
 * costs one relaxed atomic load when none is.  A rule with a file holds a
 * reference on the file's mapping, so that its descriptors stay open (and
 * are not reused by another file) while the rule exists.
 */
#include "fault.h"

#include "backend.h"
#include "cache.h"
#include "file.h"
#include "handle.h"
#include "mapping.h"
#include "pagecache.h"
#include "process.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#define FAULT_MAX_RULES 16
#define FAULT_OPS (PC_FAULT_READ | PC_FAULT_WRITE | PC_FAULT_SYNC | PC_FAULT_SUBMIT | PC_FAULT_ALLOC)
#define FAULT_MAX_DELAY_MS 60000u
#define FAULT_DEFAULT_SEED 0x5eed5eed5eed5eedull

struct fault_rule {
	struct pc_fault r;     /* as given (r.file is not used after inject) */
	struct pc_mapping *m;  /* r.file's mapping, referenced; NULL: any */
	int id;                /* -1: free slot */
	uint64_t seen;         /* I/Os this rule saw */
	uint64_t fired;        /* faults it injected */
	uint64_t rng;          /* one_in generator state */
};

struct fault_set {
	pthread_mutex_t lock;
	struct fault_rule rule[FAULT_MAX_RULES];
	int next_id;
	uint64_t fired_total;  /* removed rules included */
};

/* What the first firing rule decided. */
struct fault_verdict {
	int action;            /* PC_FAULT_*, or -1: nothing fired */
	int error;
	unsigned delay_ms;
	size_t cut;
};

/* ------------------------------------------------------------ the set */

static struct fault_set *set_new(void)
{
	struct fault_set *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (pthread_mutex_init(&s->lock, NULL) != 0) {
		free(s);
		return NULL;
	}
	for (int i = 0; i < FAULT_MAX_RULES; i++)
		s->rule[i].id = -1;
	return s;
}

static void set_free(struct fault_set *s)
{
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* The cache's rule set, created on first use; NULL: no memory. */
static struct fault_set *set_get(struct pc_cache *c)
{
	struct fault_set *s = atomic_load_explicit(&c->faults, memory_order_acquire);
	if (s)
		return s;
	struct fault_set *fresh = set_new();
	if (!fresh)
		return NULL;
	if (atomic_compare_exchange_strong(&c->faults, &s, fresh))
		return fresh;
	set_free(fresh); /* another thread was first: s is its set */
	return s;
}

/* Free the rule's slot; returns its mapping reference for the caller to
 * drop outside the lock (NULL if none). */
static struct pc_mapping *rule_clear(struct pc_cache *c, struct fault_rule *fr)
{
	struct pc_mapping *m = fr->m;
	fr->m = NULL;
	fr->id = -1;
	atomic_fetch_sub_explicit(&c->fault_nrules, 1, memory_order_relaxed);
	return m;
}

/* -------------------------------------------------------- validation */

static bool range_ok(const struct pc_fault *r)
{
	return r->start >= 0 && r->end >= 0 && (r->end == 0 || r->end > r->start);
}

static bool action_ok(const struct pc_fault *r)
{
	switch (r->action) {
	case PC_FAULT_FAIL:
		return r->error > 0 && r->error < 4096;
	case PC_FAULT_SHORT:
		/* only a transfer can be short */
		return !(r->ops & ~(PC_FAULT_READ | PC_FAULT_WRITE));
	case PC_FAULT_DELAY:
		return r->delay_ms > 0 && r->delay_ms <= FAULT_MAX_DELAY_MS;
	default:
		return false;
	}
}

static bool file_ok(struct pc_cache *c, const struct pc_file *h)
{
	return !h || (h->magic == PC_FILE_MAGIC && h->c == c);
}

static bool rule_ok(struct pc_cache *c, const struct pc_fault *r)
{
	return r->ops && !(r->ops & ~FAULT_OPS) && action_ok(r) && range_ok(r) && file_ok(c, r->file);
}

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
	if (fr->m && (fd < 0 || (fd != load_fd(&fr->m->fd) && fd != load_fd(&fr->m->old_fd))))
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
				cut_len = backend_short_len(fd, len);
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
	if (!c || atomic_load_explicit(&c->fault_nrules, memory_order_relaxed) == 0)
		return 0;
	struct fault_set *s = atomic_load_explicit(&c->faults, memory_order_acquire);
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

void fault_destroy(struct pc_cache *c)
{
	struct fault_set *s = atomic_exchange(&c->faults, NULL);
	if (!s)
		return;
	for (int i = 0; i < FAULT_MAX_RULES; i++)
		if (s->rule[i].id >= 0) {
			struct pc_mapping *m = rule_clear(c, &s->rule[i]);
			if (m)
				mapping_put(m);
		}
	set_free(s);
}

/* -------------------------------------------------------- public API */

int pc_fault_inject(struct pc_cache *c, const struct pc_fault *rule)
{
	if (c && cache_inherited(c)) {
		errno = EPERM;
		return -1;
	}
	if (!c || !rule || !rule_ok(c, rule)) {
		errno = EINVAL;
		return -1;
	}
	struct fault_set *s = set_get(c);
	if (!s) {
		errno = ENOMEM;
		return -1;
	}
	pthread_mutex_lock(&s->lock);
	struct fault_rule *fr = NULL;
	for (int i = 0; i < FAULT_MAX_RULES && !fr; i++)
		if (s->rule[i].id < 0)
			fr = &s->rule[i];
	if (!fr) {
		pthread_mutex_unlock(&s->lock);
		errno = ENOSPC;
		return -1;
	}
	fr->r = *rule;
	fr->r.file = NULL;
	fr->m = rule->file ? rule->file->m : NULL;
	if (fr->m)
		atomic_fetch_add(&fr->m->refs, 1);
	fr->seen = 0;
	fr->fired = 0;
	fr->rng = rule->seed ? rule->seed : FAULT_DEFAULT_SEED;
	fr->id = s->next_id++;
	atomic_fetch_add_explicit(&c->fault_nrules, 1, memory_order_relaxed);
	int id = fr->id;
	pthread_mutex_unlock(&s->lock);
	return id;
}

int pc_fault_remove(struct pc_cache *c, int id)
{
	if (c && cache_inherited(c)) {
		errno = EPERM;
		return -1;
	}
	struct fault_set *s = c ? atomic_load_explicit(&c->faults, memory_order_acquire) : NULL;
	if (!c || id < -1 || (!s && id != -1)) {
		errno = EINVAL;
		return -1;
	}
	if (!s)
		return 0; /* id -1: no rule was ever added */
	struct pc_mapping *put[FAULT_MAX_RULES];
	int nput = 0;
	bool found = false;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < FAULT_MAX_RULES; i++) {
		struct fault_rule *fr = &s->rule[i];
		if (fr->id < 0 || (id != -1 && fr->id != id))
			continue;
		found = true;
		struct pc_mapping *m = rule_clear(c, fr);
		if (m)
			put[nput++] = m;
	}
	pthread_mutex_unlock(&s->lock);
	/* No check sees these rules any more: their files may go. */
	for (int i = 0; i < nput; i++)
		mapping_put(put[i]);
	if (!found && id != -1) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

uint64_t pc_fault_count(struct pc_cache *c, int id)
{
	struct fault_set *s = c && !cache_inherited(c) ? atomic_load_explicit(&c->faults, memory_order_acquire) : NULL;
	if (!s)
		return 0;
	uint64_t n = 0;
	pthread_mutex_lock(&s->lock);
	if (id == -1) {
		n = s->fired_total;
	} else {
		for (int i = 0; i < FAULT_MAX_RULES; i++)
			if (s->rule[i].id >= 0 && s->rule[i].id == id)
				n = s->rule[i].fired;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}
