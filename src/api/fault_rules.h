/*
 * fault_rules.h - the rules of test-only fault injection (fault_rules.c):
 * the public pc_fault_* calls are in pagecache.h; this is their end with
 * the cache.
 */
#ifndef PC_FAULT_RULES_H
#define PC_FAULT_RULES_H

#include "lib/util.h"

struct pc_cache;

/* Remove every rule (their files' references go) and free the rule state
 * (pc_cache_destroy, once no I/O is in flight, before the files are freed). */
HIDDEN void fault_rules_destroy(struct pc_cache *c);

#endif
