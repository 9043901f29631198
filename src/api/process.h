/*
 * process.h - a cache belongs to the process that created it (process.c):
 * a child of fork() may not use an inherited cache (every call fails with
 * EPERM, freeing frees only its copy), and PC_CFG_FLUSH_AT_EXIT.
 */
#ifndef PC_PROCESS_H
#define PC_PROCESS_H

#include "api/cache.h"
#include "lib/util.h"

/* The process's fork handling and counters, set up before its first cache
 * is used (pc_cache_new); whose a cache is, the list of segments says
 * (cache_inherited). */
HIDDEN void process_setup(void);
/* Free a child's copy of an inherited cache: no lock, no I/O, no wait. */
HIDDEN void cache_free_inherited(struct pc_cache *c);
/* PC_CFG_FLUSH_AT_EXIT: write c back at exit(3) (0 or -ENOMEM); and no
 * more (pc_cache_destroy). */
HIDDEN int process_flush_at_exit(struct pc_cache *c);
HIDDEN void process_forget_at_exit(struct pc_cache *c);

#endif
