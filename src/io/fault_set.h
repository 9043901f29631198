/*
 * fault_set.h - the rules of fault injection as the two sides see them:
 * api/fault_rules.c adds and removes them (pc_fault_inject and its
 * kin), io/fault.c matches them against device I/O.  Test-only.
 */
#ifndef PC_FAULT_SET_H
#define PC_FAULT_SET_H

#include "pagecache.h"

#include <pthread.h>
#include <stdint.h>

struct pc_mapping;

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

#endif
