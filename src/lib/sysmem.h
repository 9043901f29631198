/*
 * sysmem.h - the memory the machine can give this process (sysmem.c),
 * which pc_cache_new checks memory_limit against (arena.c), so that a
 * cache the machine cannot back fails with ENOMEM instead of inviting the
 * OOM killer later.
 */
#ifndef PC_SYSMEM_H
#define PC_SYSMEM_H

#include "lib/util.h"

/* Bytes the machine can give this process now (MemAvailable, and the
 * room under its memory cgroup's limits); UINT64_MAX: unknown. */
HIDDEN uint64_t sysmem_available(void);

#endif
