/*
 * fault_rules.c - the rules of test-only fault injection: pc_fault_inject,
 * pc_fault_remove, pc_fault_count, and their end with the cache
 * (fault_rules_destroy).  Which rule fires for a device I/O is io/fault.c's.
 *
 * The rules live in a struct fault_set (io/fault_set.h) created on first
 * use: a cache that is never given a rule allocates nothing.  A rule with
 * a file holds a reference on the file's mapping, so that its descriptors
 * stay open (and are not reused by another file) while the rule exists.
 */
#include "api/fault_rules.h"

#include "api/cache.h"
#include "api/handle.h"
#include "io/fault_set.h"
#include "mem/mapping.h"
#include "pagecache.h"

#include <errno.h>
#include <stdlib.h>

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
	struct fault_set *s = atomic_load_explicit(&cache_proc(c)->faults, memory_order_acquire);
	if (s)
		return s;
	struct fault_set *fresh = set_new();
	if (!fresh)
		return NULL;
	if (atomic_compare_exchange_strong(&cache_proc(c)->faults, &s, fresh))
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
	atomic_fetch_sub_explicit(&cache_proc(c)->fault_nrules, 1, memory_order_relaxed);
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

void fault_rules_destroy(struct pc_cache *c)
{
	struct fault_set *s = atomic_exchange(&cache_proc(c)->faults, NULL);
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
	atomic_fetch_add_explicit(&cache_proc(c)->fault_nrules, 1, memory_order_relaxed);
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
	struct fault_set *s = c ? atomic_load_explicit(&cache_proc(c)->faults, memory_order_acquire) : NULL;
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
	struct fault_set *s = c && !cache_inherited(c) ? atomic_load_explicit(&cache_proc(c)->faults, memory_order_acquire) : NULL;
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
