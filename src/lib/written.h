/*
 * written.h - where our device writes may have put data past the size the
 * backing file had at open (written.c): there the rest is holes, so a
 * partly written block is zeroed, not read, and the file system is not
 * asked (SEEK_DATA takes the inode lock that allocating direct writes
 * hold).
 */
#ifndef PC_WRITTEN_H
#define PC_WRITTEN_H

#include "lib/util.h"

struct pc_range {
	uint64_t start, end;
};
struct pc_written {
	pthread_mutex_t lock;
	uint64_t base_end;  /* before it: unknown, ask the file system */
	struct pc_range *r; /* sorted, disjoint, not touching */
	size_t n, cap;
};

HIDDEN void written_init(struct pc_written *w, uint64_t base_end);
HIDDEN void written_destroy(struct pc_written *w);
HIDDEN void written_reset(struct pc_written *w, uint64_t base_end);
HIDDEN void written_add(struct pc_written *w, uint64_t start, uint64_t end);
HIDDEN void written_truncate(struct pc_written *w, uint64_t size);
HIDDEN bool written_known_hole(struct pc_written *w, uint64_t start, uint64_t end);

#endif
