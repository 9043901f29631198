/*
 * process.h - a cache belongs to the process that created it (process.c):
 * a child of fork() may not use an inherited cache (every call fails with
 * EPERM, freeing frees only its copy), and PC_CFG_FLUSH_AT_EXIT.
 */
#ifndef PC_PROCESS_H
#define PC_PROCESS_H

#include "cache.h"
#include "util.h"

/* Record that the calling process owns c (pc_cache_new). */
HIDDEN void process_claim(struct pc_cache *c);
/* Which process this is: changed in the child at every fork (process.c). */
HIDDEN extern _Atomic unsigned pc_process_generation;
/* Is c a copy inherited through fork() (this process does not own it)?
 * Inline: every cache hit asks (api.c, pc_pread). */
static inline bool cache_inherited(const struct pc_cache *c)
{
	return c->owner_generation != atomic_load_explicit(&pc_process_generation, memory_order_relaxed);
}
/* Free a child's copy of an inherited cache: no lock, no I/O, no wait. */
HIDDEN void cache_free_inherited(struct pc_cache *c);
/* PC_CFG_FLUSH_AT_EXIT: write c back at exit(3) (0 or -ENOMEM); and no
 * more (pc_cache_destroy). */
HIDDEN int process_flush_at_exit(struct pc_cache *c);
HIDDEN void process_forget_at_exit(struct pc_cache *c);

#endif
