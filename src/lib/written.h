/*
 * written.h - where our device writes may have put data past the size the
 * backing file had at open (written.c): there the rest is holes, so a
 * partly written block is zeroed, not read, and the file system is not
 * asked (SEEK_DATA takes the inode lock that allocating direct writes
 * hold).
 */
#ifndef PC_WRITTEN_H
#define PC_WRITTEN_H

#include "lib/shlock.h"
#include "lib/util.h"

struct pc_range {
	uint64_t start, end;
};
struct pc_written {
	struct pc_shmutex lock;
	const struct pc_shlock_ctx *cx; /* the locker, as rt_pool's (radix.h) */
	uint64_t base_end;  /* before it: unknown, ask the file system */
	struct pc_range *r; /* sorted, disjoint, not touching */
	size_t n, cap;
};

/* Past this many disjoint ranges, stop tracking (written_add). */
#define WRITTEN_MAX_RANGES 65536u

/*
 * The array of ranges is the caller's memory (written.c allocates none:
 * a shared cache's mappings live in memory that every process maps, and
 * the array with them, mem/mapping.c's mapping_written_add):
 *
 *	while ((cap = written_add(w, start, end)) != 0) {
 *		r = <cap zeroed ranges>;
 *		if (!r) { written_give_up(w, end); break; }
 *		<free> written_grow(w, r, cap);
 *	}
 */
HIDDEN void written_init(struct pc_written *w, uint64_t base_end, const struct pc_shlock_ctx *cx);
/* The array to free (NULL: none). */
HIDDEN struct pc_range *written_destroy(struct pc_written *w);
HIDDEN void written_reset(struct pc_written *w, uint64_t base_end);
/* Record [start, end): 0, or the array is full and the range needs a slot
 * of its own: the capacity (in ranges) to hand in with written_grow before
 * calling again.  At WRITTEN_MAX_RANGES it gives up tracking itself (0). */
HIDDEN size_t written_add(struct pc_written *w, uint64_t start, uint64_t end);
/* Hand in `r`, `cap` ranges (what written_add asked for): returns the
 * array to free, the old one or `r` itself when another caller's grew it
 * as far meanwhile. */
HIDDEN struct pc_range *written_grow(struct pc_written *w, struct pc_range *r, size_t cap);
/* No memory to record a range ending at `end`: below it, ask the file
 * system (always correct, only slower). */
HIDDEN void written_give_up(struct pc_written *w, uint64_t end);
HIDDEN void written_truncate(struct pc_written *w, uint64_t size);
HIDDEN bool written_known_hole(struct pc_written *w, uint64_t start, uint64_t end);

#endif
