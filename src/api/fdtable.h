/*
 * fdtable.h - the process's descriptor table (fdtable.c): grown once, up
 * front, to hold the descriptors a cache keeps.
 */
#ifndef PC_FDTABLE_H
#define PC_FDTABLE_H

#include "lib/util.h"

/* Make the process's descriptor table hold at least `n` descriptors (at
 * most the soft RLIMIT_NOFILE) now, instead of growing step by step as
 * descriptors are kept.  Best effort: a failure changes nothing. */
HIDDEN void fdtable_reserve(unsigned n);

#endif
