/*
 * counter.h - statistics counters that threads add to without sharing a
 * cache line (counter.c says why: cache hits are counted per file and per
 * cache, and one atomic each would be written by every hit of every
 * thread).
 */
#ifndef PC_COUNTER_H
#define PC_COUNTER_H

#include "lib/util.h"

/*
 * Each of the first PC_COUNTER_SLOTS threads that count gets a slot of its
 * own, which only it writes (plain loads and stores, no locked
 * instruction); further threads add to `shared` atomically.  The value is
 * the sum.  Slots are 64 bytes apart (and the block padded at both ends),
 * so no two slots, and no slot and a neighbouring field, share a cache
 * line whatever the block's alignment.
 */
#define PC_COUNTER_SLOTS 8
struct pc_counter {
	char pad_before[56];
	struct {
		_Atomic uint64_t v;
		/* Set before the counter is used (counter_make_atomic),
		 * read-only after: this slot is added to atomically.  For a
		 * counter in memory that processes share (a shared cache,
		 * docs/shared.md, section 3): slot numbers are handed out per
		 * process, so threads of two processes may own the same slot.
		 * In the slot's own line, which the add writes anyway: the
		 * check costs nothing more. */
		bool atomic_adds;
		char pad[55];
	} slot[PC_COUNTER_SLOTS];
	_Atomic uint64_t shared;
	char pad_after[56];
};
/* Before the counter is used: every add to it is atomic from now on. */
HIDDEN void counter_make_atomic(struct pc_counter *c);
/* This thread's slot (0..PC_COUNTER_SLOTS-1), or -1 when all are taken. */
HIDDEN int counter_thread_slot(void);
HIDDEN uint64_t counter_sum(struct pc_counter *c);
/* fork() child: the slot table as this (only) thread has it. */
HIDDEN void counter_fork_child(void);
/* Once per process, before any fork (pc_cache_new): the thread-exit key. */
HIDDEN void counter_init(void);
/* This thread's slot + 1, cached so that counting costs no call: 0 not
 * assigned yet, -1 none free (the thread adds to `shared`).  Initial-exec
 * TLS: in the shared library the default model reaches it through a call
 * to __tls_get_addr on every cache hit.  It puts the library's whole TLS
 * block (64 bytes) in the static TLS surplus that glibc keeps for
 * libraries, also for one loaded with dlopen (checked). */
#define PC_TLS_IE __attribute__((tls_model("initial-exec")))
HIDDEN extern __thread int counter_slot_plus1 PC_TLS_IE;
static inline void counter_add(struct pc_counter *c, uint64_t n)
{
	int s = counter_slot_plus1 - 1;
	if (__builtin_expect(s == -1, 0))
		s = counter_thread_slot();
	if (s >= 0 && !__builtin_expect(c->slot[s].atomic_adds, 0)) {
		_Atomic uint64_t *v = &c->slot[s].v;
		atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n, memory_order_relaxed);
	} else if (s >= 0) {
		atomic_fetch_add_explicit(&c->slot[s].v, n, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&c->shared, n, memory_order_relaxed);
	}
}

#endif
