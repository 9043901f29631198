/*
 * forkgen.h - which process this is: a generation that the child of every
 * fork() bumps (process.c's atfork handler calls forkgen_child).  A
 * handle and a span record the generation they were made in, so a child
 * can tell a copy it inherited from one it made (handle_inherited,
 * span_inherited in api/) with one load.
 */
#ifndef PC_FORKGEN_H
#define PC_FORKGEN_H

#include "lib/util.h"

#include <stdatomic.h>

HIDDEN extern _Atomic unsigned process_generation;

/* The generation of the calling process. */
static inline unsigned forkgen_now(void)
{
	return atomic_load_explicit(&process_generation, memory_order_relaxed);
}

/* In the child of a fork: a new generation. */
HIDDEN void forkgen_child(void);

#endif
