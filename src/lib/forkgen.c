/*
 * forkgen.c - the process generation (forkgen.h): one counter, bumped in
 * the child of every fork.  It lives in the lowest layer because every
 * layer's entry points ask it (a call of an inherited cache fails with
 * EPERM wherever it enters, pc_lseek and pc_fault_inject included).
 */
#include "lib/forkgen.h"

HIDDEN _Atomic unsigned process_generation;

void forkgen_child(void)
{
	atomic_fetch_add_explicit(&process_generation, 1, memory_order_relaxed);
}
