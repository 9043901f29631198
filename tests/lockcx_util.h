/*
 * lockcx_util.h - a locker (lib/shlock.h) for the tests of lib's
 * structures alone (radix pools, written ranges), which lock with the
 * cache's shared locks: a slot table of the test process's own, with
 * the process in one slot.  A cache's locker is its segment's
 * (api/cache.h, cache_lockcx).
 */
#ifndef PC_LOCKCX_UTIL_H
#define PC_LOCKCX_UTIL_H

#include "testutil.h"

#include "lib/shlock.h"
#include "lib/slots.h"

/* The process's locker, made on first use (call it before starting
 * threads). */
static inline const struct pc_shlock_ctx *test_lockcx(void)
{
	static struct pc_slots slots;
	static struct pc_slot_peers peers;
	static struct pc_shlock_ctx cx;
	static bool made;
	if (!made) {
		slots_init(&slots);
		slots_peers_init(&peers);
		int self = slots_claim(&slots);
		REQUIRE(self >= 0);
		cx = (struct pc_shlock_ctx){ .slots = &slots, .peers = &peers, .self = (unsigned)self };
		made = true;
	}
	return &cx;
}

#endif
